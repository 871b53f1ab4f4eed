// The decisions of one lookup, without I/O or a clock: when each query goes to which
// server, and what the A and AAAA answers mean together.
#pragma once

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "wg/base/ip.hpp"

namespace netstack::dns {

using Clock = std::chrono::steady_clock;

// Send i goes to server i % servers at this offset from the start; the gap doubles
// after each round of servers, as glibc's. nullopt at or past `total`.
std::optional<Clock::duration> send_at(size_t i, size_t servers, Clock::duration first_retry,
                                       Clock::duration total);

// The wait for the other family once one answered: for a slow server, not a lost query.
inline constexpr auto kOtherFamilyWait = std::chrono::milliseconds(250);
// Also the most for an answer whose other family failed. The SOA minimum is not read.
inline constexpr auto kNegativeTtl = std::chrono::seconds(10);
inline constexpr auto kMaxTtl = std::chrono::hours(1);

// pending counts as timed_out once the lookup is over.
enum class Outcome { pending, addresses, no_data, nx_domain, server_failure, timed_out };

struct FamilyResult {
  Outcome outcome = Outcome::pending;
  std::vector<wg::IpAddress> addresses;
  uint32_t ttl = 0;  // smallest, seconds
};

struct Resolution {
  boost::system::error_code ec;
  std::vector<wg::IpAddress> addresses;  // A, then AAAA
  Clock::duration cache_for{};           // zero: not cached
};

// First that applies to either family:
//   addresses: success, cached min(TTL, kMaxTtl), at most kNegativeTtl if the other failed;
//   NXDOMAIN: host_not_found, cached kNegativeTtl;
//   timeout: timed_out, not cached (the lost query may have held the records);
//   server failure: host_not_found_try_again, not cached;
//   else no_data, cached kNegativeTtl.
Resolution combine(const FamilyResult& a, const FamilyResult& aaaa);

}  // namespace netstack::dns

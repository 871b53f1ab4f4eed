// The decisions of one lookup of a name, without I/O or a clock (resolve.cpp does the
// I/O): when its queries go out and to which server, and what the answers of the two
// families (A and AAAA, asked at once) mean together.
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

// Send i of a lookup (0: the first, at the start) goes to server i % servers, at
// send_at(i) after the start. The gap after a send is `first_retry`, doubled after each
// round through the servers: with one server 0, 1, 3 s, with two 0, 1, 2, 4 s (glibc's
// res_send rotates through the nameservers per attempt and lets the wait grow per
// round). nullopt when that time is at or past `total`, the bound of the whole lookup.
std::optional<Clock::duration> send_at(size_t i, size_t servers, Clock::duration first_retry,
                                       Clock::duration total);

// Once one family has answered with addresses (or NXDOMAIN, which combine() puts before
// anything but addresses), how much longer the other is waited for.
// Both queries leave together, so a server that has both answers sends them within a
// round trip of each other; this covers a recursive server that needs longer for the
// second, not a lost query (that would cost the retry and the name's dial a second or
// more, for addresses Happy Eyeballs can do without). RFC 8305 §3 uses 50 ms.
inline constexpr auto kOtherFamilyWait = std::chrono::milliseconds(250);
// How long a negative result (NXDOMAIN, no records of either family) is cached, and the
// most an answer whose other family failed is: short, so a name that appears, or a
// family that was lost, is asked for again soon. The SOA minimum is not read.
inline constexpr auto kNegativeTtl = std::chrono::seconds(10);
// The longest a positive answer is cached, whatever its TTL.
inline constexpr auto kMaxTtl = std::chrono::hours(1);

// How one family's query ended; pending counts as timed_out once the lookup is over.
enum class Outcome { pending, addresses, no_data, nx_domain, server_failure, timed_out };

struct FamilyResult {
  Outcome outcome = Outcome::pending;
  std::vector<wg::IpAddress> addresses;
  uint32_t ttl = 0;  // of the addresses (the smallest), seconds
};

struct Resolution {
  boost::system::error_code ec;
  std::vector<wg::IpAddress> addresses;  // the A family's, then the AAAA family's
  Clock::duration cache_for{};           // zero: not to be cached
};

// The lookup's result from its two families':
//   addresses from either: success, cached for their smallest TTL (at most kMaxTtl), and
//     at most kNegativeTtl when the other family failed (timed out or server failure);
//   else NXDOMAIN from either: host_not_found, cached kNegativeTtl;
//   else a timeout of either: timed_out, a temporary failure even when the other family
//     had no records (its records may be the ones lost), not cached;
//   else a server failure of either: host_not_found_try_again, not cached;
//   else no records of either: no_data, cached kNegativeTtl.
Resolution combine(const FamilyResult& a, const FamilyResult& aaaa);

}  // namespace netstack::dns

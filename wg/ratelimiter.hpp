// RateLimiter: per-source token buckets that cap handshake initiations (20/s, burst 5)
// before any expensive crypto is spent on them, as the kernel's ratelimiter.c does.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "wg/base/ip.hpp"

namespace wg {

class RateLimiter {
public:
  static constexpr int kPacketsPerSecond = 20;
  static constexpr int kPacketsBurstable = 5;
  // Tokens are nanoseconds of credit: one packet costs 1 s / 20, a full bucket is 5 packets.
  static constexpr std::chrono::nanoseconds kPacketCost =
      std::chrono::nanoseconds(std::chrono::seconds(1)) / kPacketsPerSecond;
  static_assert(kPacketCost == std::chrono::milliseconds(50));
  static constexpr std::chrono::nanoseconds kTokenMax = kPacketCost * kPacketsBurstable;
  // Sources quiet for longer than this are dropped from the table.
  static constexpr std::chrono::nanoseconds kIdleTimeout = std::chrono::seconds(1);
  static constexpr size_t kDefaultMaxEntries = 8192;

  explicit RateLimiter(size_t max_entries = kDefaultMaxEntries);

  // True when a handshake initiation from `src` may be processed at `now`. IPv4 sources
  // are keyed by the full address, IPv6 by their /64 (one host controls a /64). A source
  // not yet in the table is denied when the table holds max_entries; an address that is
  // neither IPv4 nor IPv6 is denied. Idle entries are swept here, at most once per
  // second of `now`. `now` should not go backwards; if it does, no tokens accrue.
  // Thread-safe.
  bool allow(const IpAddress& src, std::chrono::steady_clock::time_point now);

  // Sources currently tracked. Thread-safe.
  size_t size() const;
  // Forgets every source: each gets a full bucket again (the receive fuzzer starts every
  // input afresh with it). Thread-safe.
  void clear();

private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Family, then the first 4 (IPv4) or 8 (IPv6) address bytes, zero-padded.
  using Key = std::array<uint8_t, 9>;
  // SipHash-2-4 under a random per-limiter key, so remote senders cannot pick sources
  // that all land in one bucket chain.
  struct KeyHash {
    std::array<uint8_t, 16> secret{};
    static KeyHash random();
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    TimePoint last;                  // time of the last packet, allowed or not
    std::chrono::nanoseconds tokens; // credit, at most kTokenMax
  };

  static Key key_of(const IpAddress& a);
  void sweep(TimePoint now);  // mu_ held

  const size_t max_entries_;  // never changes

  mutable std::mutex mu_;
  // Guarded by mu_. Reserved up front; a new source still allocates its node, which is
  // bounded by max_entries_ and happens on the handshake path, not the data path.
  std::unordered_map<Key, Entry, KeyHash> table_;
  TimePoint next_sweep_ = TimePoint::min();  // guarded by mu_
};

}  // namespace wg

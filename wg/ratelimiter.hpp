// Per-source token buckets for handshakes, as the kernel's. Thread-safe.
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
  static constexpr std::chrono::nanoseconds kPacketCost =
      std::chrono::nanoseconds(std::chrono::seconds(1)) / kPacketsPerSecond;
  static_assert(kPacketCost == std::chrono::milliseconds(50));
  static constexpr std::chrono::nanoseconds kTokenMax = kPacketCost * kPacketsBurstable;
  static constexpr std::chrono::nanoseconds kIdleTimeout = std::chrono::seconds(1);
  static constexpr size_t kDefaultMaxEntries = 8192;

  explicit RateLimiter(size_t max_entries = kDefaultMaxEntries);

  // Per IPv4 address or IPv6 /64. Denies other families, and new sources while full.
  bool allow(const IpAddress& src, std::chrono::steady_clock::time_point now);

  size_t size() const;
  void clear();

private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Family, then 4 (IPv4) or 8 (IPv6) address bytes, zero-padded.
  using Key = std::array<uint8_t, 9>;
  // Keyed, so senders cannot aim at one hash chain.
  struct KeyHash {
    std::array<uint8_t, 16> secret{};
    static KeyHash random();
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    TimePoint last;
    std::chrono::nanoseconds tokens;
  };

  static Key key_of(const IpAddress& a);
  void sweep(TimePoint now);  // mu_ held

  const size_t max_entries_;

  mutable std::mutex mu_;
  // Guarded by mu_.
  std::unordered_map<Key, Entry, KeyHash> table_;
  TimePoint next_sweep_ = TimePoint::min();  // guarded by mu_
};

}  // namespace wg

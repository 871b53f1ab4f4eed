// Handshake initiation rate limiter (ratelimiter.hpp).
#include "wg/ratelimiter.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace wg {

RateLimiter::Key RateLimiter::key_of(const IpAddress& a) {
  Key k{};
  k[0] = a.family;
  std::memcpy(k.data() + 1, a.bytes.data(), a.is_v4() ? 4 : 8);
  return k;
}

RateLimiter::KeyHash RateLimiter::KeyHash::random() {
  if (sodium_init() < 0) std::abort();  // no safe fallback without randomness
  KeyHash h;
  crypto_shorthash_keygen(h.secret.data());
  return h;
}

size_t RateLimiter::KeyHash::operator()(const Key& k) const {
  static_assert(crypto_shorthash_BYTES == sizeof(uint64_t) && crypto_shorthash_KEYBYTES == 16);
  uint64_t h;
  crypto_shorthash(reinterpret_cast<unsigned char*>(&h), k.data(), k.size(), secret.data());
  return static_cast<size_t>(h);
}

RateLimiter::RateLimiter(size_t max_entries)
    : max_entries_(max_entries), table_(max_entries, KeyHash::random()) {}

bool RateLimiter::allow(const IpAddress& src, TimePoint now) {
  if (!src.is_v4() && !src.is_v6()) return false;
  const Key key = key_of(src);

  std::lock_guard lock(mu_);
  if (now >= next_sweep_) sweep(now);

  if (auto it = table_.find(key); it != table_.end()) {
    // Refill by elapsed time up to the burst, then pay if the credit covers it.
    Entry& e = it->second;
    const auto elapsed = std::max(now - e.last, TimePoint::duration::zero());
    const auto tokens = std::min<std::chrono::nanoseconds>(kTokenMax, e.tokens + elapsed);
    e.last = std::max(e.last, now);
    const bool ok = tokens >= kPacketCost;
    e.tokens = ok ? tokens - kPacketCost : tokens;
    return ok;
  }

  if (table_.size() >= max_entries_) return false;
  // A full bucket, minus this packet.
  table_.emplace(key, Entry{now, kTokenMax - kPacketCost});
  return true;
}

// Dropping an entry idle kIdleTimeout loses nothing: kIdleTimeout > kTokenMax, so its
// bucket was full, as a new entry's is.
void RateLimiter::sweep(TimePoint now) {
  static_assert(kIdleTimeout >= kTokenMax);
  std::erase_if(table_, [&](const auto& kv) { return now - kv.second.last > kIdleTimeout; });
  next_sweep_ = now + kIdleTimeout;
}

size_t RateLimiter::size() const {
  std::lock_guard lock(mu_);
  return table_.size();
}

void RateLimiter::clear() {
  std::lock_guard lock(mu_);
  table_.clear();
}

}  // namespace wg

// Which handshake messages get a Diffie-Hellman (paper §5.3). Decisions only, no I/O.
// Thread-safe, but under_load() and admit() are for the handshake thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "wg/cookie.hpp"
#include "wg/handshake_load.hpp"
#include "wg/messages.hpp"
#include "wg/ratelimiter.hpp"

namespace wg {

class HandshakeAdmission {
public:
  enum class Verdict { drop, cookie_reply, consume };

  explicit HandshakeAdmission(size_t queue_limit) : queue_limit_(queue_limit), load_(queue_limit) {}

  void set_identity(const PublicKey& local_public) { cookies_.init(local_public); }

  // Known endpoints' initiations may skip the cookie round trip under load. Bytes are
  // conn::Endpoint::destination_bytes.
  void endpoint_moved(std::optional<std::span<const uint8_t>> before, std::optional<std::span<const uint8_t>> after);
  bool known(std::span<const uint8_t> source) const;

  // Past the bound, only a valid mac2 or a known endpoint's initiation; past an eighth
  // more, nothing.
  bool may_queue(std::span<const uint8_t> msg, MessageType type, std::span<const uint8_t> source, size_t queued,
                 TimePoint now);

  bool under_load(size_t queued, TimePoint now);

  // Bad mac1: drop. Under load without a valid mac2: cookie_reply, unless a known
  // endpoint's initiation within budget; with one: consume unless rate-limited.
  Verdict admit(std::span<const uint8_t> msg, MessageType type, std::span<const uint8_t> source,
                const std::optional<IpAddress>& ip, bool under_load, TimePoint now);

  MessageCookieReply cookie_reply(std::span<const uint8_t> msg, uint32_t sender, std::span<const uint8_t> source,
                                  TimePoint now) {
    return cookies_.create_reply(msg, sender, source, now);
  }

  void clear_rate_limiter() { limiter_.clear(); }

private:
  const size_t queue_limit_;
  CookieChecker cookies_;
  RateLimiter limiter_;
  HandshakeLoad load_;  // handshake thread only
  mutable std::mutex known_mu_;
  std::unordered_map<std::string, uint32_t> known_;  // under known_mu_
};

}  // namespace wg

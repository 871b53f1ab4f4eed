// Which handshake messages get a Diffie-Hellman (WireGuard paper, section 5.3): the
// bounded queue's door, mac1, and under load mac2, the rate limiter and the budget for
// peers' known endpoints. Decisions only: the caller sends the cookie reply and runs the
// handshake. Sans-I/O: `now` is passed in. Thread-safe, but under_load() and admit() are
// for one thread (the handshake thread).
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

  // queue_limit: the handshake queue's bound (DeviceOptions::handshake_queue).
  explicit HandshakeAdmission(size_t queue_limit) : queue_limit_(queue_limit), load_(queue_limit) {}

  // mac1 and cookies are keyed by our public key.
  void set_identity(const PublicKey& local_public) { cookies_.init(local_public); }

  // A peer's endpoint went from `before` to `after` (either may be absent): the endpoints
  // of peers, counted, whose initiations may skip the cookie round trip under load.
  // `source` bytes are conn::Endpoint::destination_bytes.
  void endpoint_moved(std::optional<std::span<const uint8_t>> before, std::optional<std::span<const uint8_t>> after);
  bool known(std::span<const uint8_t> source) const;

  // On a receiving thread, before a handshake message of `type` joins a queue holding
  // `queued`: below the bound, yes; past it, only with a valid mac2 or as an initiation
  // from a known endpoint; past the bound and an eighth, never.
  bool may_queue(std::span<const uint8_t> msg, MessageType type, std::span<const uint8_t> source, size_t queued,
                 TimePoint now);

  // On the handshake thread, for each message taken off the queue with `queued` left.
  bool under_load(size_t queued, TimePoint now);

  // On the handshake thread: an initiation or response `msg` from `source` (`ip`: its
  // address, if it has one). Bad mac1: drop. Not under load: consume. Under load, without
  // a valid mac2: consume an initiation from a known endpoint while that budget lasts,
  // else cookie_reply; with one: consume unless the rate limiter refuses `ip`.
  Verdict admit(std::span<const uint8_t> msg, MessageType type, std::span<const uint8_t> source,
                const std::optional<IpAddress>& ip, bool under_load, TimePoint now);

  // The cookie reply to `msg`, whose sender index is `sender`.
  MessageCookieReply cookie_reply(std::span<const uint8_t> msg, uint32_t sender, std::span<const uint8_t> source,
                                  TimePoint now) {
    return cookies_.create_reply(msg, sender, source, now);
  }

  // Forgets the rate limiter's sources (the receive fuzzer starts each input afresh).
  void clear_rate_limiter() { limiter_.clear(); }

private:
  const size_t queue_limit_;
  CookieChecker cookies_;
  RateLimiter limiter_;
  HandshakeLoad load_;  // the handshake thread's only
  mutable std::mutex known_mu_;
  std::unordered_map<std::string, uint32_t> known_;  // under known_mu_
};

}  // namespace wg

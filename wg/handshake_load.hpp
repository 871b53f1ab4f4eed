// When the handshake thread is "under load": then an initiation or response must first
// prove its source address with a cookie (mac2) before any Diffie-Hellman is spent on
// it, and the proven sources are rate-limited (WireGuard paper, section 5.3). Sans-I/O:
// the caller passes the queue's length and `now`.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "wg/messages.hpp"

namespace wg {

class HandshakeLoad {
public:
  // How long the load lasts after the queue was last seen at its mark. Without a hold,
  // a flood between the rate of Diffie-Hellman and the rate of cookie replies makes the
  // queue oscillate around the mark: cheap cookie replies drain it below, then every
  // message costs a Diffie-Hellman until it is back (in the netns pair at 20,000 spoofed
  // initiations/s, 85 % got the Diffie-Hellman and the daemon a whole core).
  static constexpr std::chrono::seconds kHold{1};

  // Under load, initiations without a cookie from a peer's known endpoint that may still
  // get a Diffie-Hellman: per second, and at once. A flood that spoofs peers' endpoints
  // costs at most this (50 x ~50 us = 0.25 % of a core), then gets cookies.
  static constexpr int kKnownPerSecond = 50;
  static constexpr int kKnownBurst = 10;

  // queue_limit: the handshake queue's bound; an eighth of it queued is the mark.
  explicit HandshakeLoad(size_t queue_limit) : mark_(std::max<size_t>(queue_limit / 8, 1)) {}

  // For each message taken off the queue, with `queued` messages still behind it.
  bool under_load(size_t queued, TimePoint now) {
    if (queued >= mark_) until_ = now + kHold;
    return now < until_;
  }

  // Whether the known-endpoint budget has one left at `now` (and spends it).
  bool spend_known(TimePoint now) {
    constexpr auto cost = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1)) / kKnownPerSecond;
    if (known_last_ == TimePoint{}) known_credit_ = cost * kKnownBurst;
    else if (now > known_last_) known_credit_ = std::min(known_credit_ + (now - known_last_), cost * kKnownBurst);
    known_last_ = now;
    if (known_credit_ < cost) return false;
    known_credit_ -= cost;
    return true;
  }

private:
  size_t mark_;
  TimePoint until_{};
  TimePoint known_last_{};
  Clock::duration known_credit_{};
};

}  // namespace wg

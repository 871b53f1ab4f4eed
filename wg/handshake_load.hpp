// Whether the handshake thread is under load: then handshake messages need a valid
// cookie (mac2) before any Diffie-Hellman, and sources are rate-limited (the paper's 5.3).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "wg/messages.hpp"

namespace wg {

class HandshakeLoad {
public:
  // Load lasts this long after the queue was at its mark, so a flood that cookie
  // replies drained does not reach Diffie-Hellman again.
  static constexpr std::chrono::seconds kHold{1};

  // Under load, cookieless initiations from a peer's known endpoint that still get a
  // Diffie-Hellman: rate and burst. Beyond them, they get cookies.
  static constexpr int kKnownPerSecond = 50;
  static constexpr int kKnownBurst = 10;

  // The mark is an eighth of the handshake queue's bound.
  explicit HandshakeLoad(size_t queue_limit) : mark_(std::max<size_t>(queue_limit / 8, 1)) {}

  // Call per message dequeued; `queued` are still waiting.
  bool under_load(size_t queued, TimePoint now) {
    if (queued >= mark_) until_ = now + kHold;
    return now < until_;
  }

  // Spends one of the known-endpoint budget, if any is left.
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

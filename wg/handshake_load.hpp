// Whether the handshake thread is under load, so messages need a cookie (paper §5.3).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "wg/messages.hpp"

namespace wg {

class HandshakeLoad {
public:
  // Load outlasts the queue's mark, so a drained flood does not reach DH again.
  static constexpr std::chrono::seconds kHold{1};

  // Under load, known endpoints' cookieless initiations allowed a DH.
  static constexpr int kKnownPerSecond = 50;
  static constexpr int kKnownBurst = 10;

  explicit HandshakeLoad(size_t queue_limit) : mark_(std::max<size_t>(queue_limit / 8, 1)) {}

  // Per message dequeued.
  bool under_load(size_t queued, TimePoint now) {
    if (queued >= mark_) until_ = now + kHold;
    return now < until_;
  }

  // False once the known-endpoint budget is spent.
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

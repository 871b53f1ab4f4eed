// The timer thread's schedule: the peers whose timers may be armed and the sleep until
// the earliest deadline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "wg/peer.hpp"

namespace wg {

class TimerList {
public:
  // After p's timers were armed.
  void poke(Peer& p);
  // Wakes the thread only if `deadline` is before its next wake-up.
  void poke_before(Peer& p, std::optional<TimePoint> deadline);
  void poke();

  // Every deadline is armed with a poke (poke, poke_before): the sleep is capped only so
  // that each_round runs this often (the buffer pool's trim).
  static constexpr Clock::duration kMaxSleep = std::chrono::seconds(10);

  // Until close(): passes due timers to act() without mu_, then sleeps until the next
  // deadline (at most kMaxSleep) or a poke.
  void run(const std::function<TimePoint()>& now, const std::function<void(Peer&, const TimerActions&)>& act,
           const std::function<void(TimePoint)>& each_round = {});

  // Waits for a round that read the clock after this call. False once closed.
  bool round();

  void close();

  // When the thread wakes next, by now(); none while it scans.
  std::optional<TimePoint> wake_at() const {
    const Clock::rep at = wake_at_.load();
    if (at == std::numeric_limits<Clock::rep>::max()) return std::nullopt;
    return TimePoint(Clock::duration(at));
  }

  // Unlists removed peers now, for a caller that must see them freed.
  std::vector<PeerPtr> take_removed();

private:
  void list(Peer& p);  // mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable round_cv_;
  // --- guarded by mu_ ---
  bool poked_ = false;
  bool closed_ = false;
  std::vector<PeerPtr> peers_;
  uint64_t round_begun_ = 0, round_done_ = 0;
  // The maximum while scanning, so any deadline armed meanwhile pokes.
  std::atomic<Clock::rep> wake_at_{std::numeric_limits<Clock::rep>::max()};
};

}  // namespace wg

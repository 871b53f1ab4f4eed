// The timer thread's schedule: the peers whose timers may be armed, the thread's sleep
// until the earliest deadline among them, and its rounds (for clocks moved by tests).
// What a due timer asks for is carried out by the caller's `act`.
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
  // After p's timers were armed: lists p and wakes the thread.
  void poke(Peer& p);
  // The same, waking the thread only if `deadline` is earlier than its next wake-up:
  // the data path arms timers per packet.
  void poke_before(Peer& p, std::optional<TimePoint> deadline);
  // Wakes the thread for a new round.
  void poke();

  // The timer thread, until close(): each round runs every listed peer's due timers at
  // now() and hands what they ask for to act(peer, actions), without the list's lock;
  // then calls each_round(now) and sleeps until the earliest deadline (at most a second)
  // or a poke.
  void run(const std::function<TimePoint()>& now, const std::function<void(Peer&, const TimerActions&)>& act,
           const std::function<void(TimePoint)>& each_round = {});

  // Returns once a round that read the clock after this call is done. False once closed.
  bool round();

  // Stops run() and round().
  void close();

  // Takes removed peers off the list now (the thread drops them at its next round),
  // once the thread is not scanning or after a second: for a caller that must see them
  // freed (the receive fuzzer's leak checks).
  std::vector<PeerPtr> take_removed();

private:
  void list(Peer& p);  // mu_ held

  std::mutex mu_;
  std::condition_variable cv_;        // the thread's sleep
  std::condition_variable round_cv_;  // round()'s wait
  // --- guarded by mu_ ---
  bool poked_ = false;
  bool closed_ = false;
  // Peers whose timers may be armed (Peer::list_for_timers); unarmed ones are dropped.
  std::vector<PeerPtr> peers_;
  uint64_t round_begun_ = 0, round_done_ = 0;
  // The thread's next wake-up; the maximum while it scans, so every deadline armed
  // meanwhile pokes it.
  std::atomic<Clock::rep> wake_at_{std::numeric_limits<Clock::rep>::max()};
};

}  // namespace wg

#include "wg/timer_list.hpp"

#include <algorithm>
#include <iterator>
#include <thread>

namespace wg {

using namespace std::chrono_literals;

void TimerList::poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  cv_.notify_one();
}

void TimerList::list(Peer& p) {
  if (p.list_for_timers(PeerAccess{})) peers_.push_back(p.shared_from_this());
}

void TimerList::poke(Peer& p) {
  {
    std::lock_guard lock(mu_);
    list(p);
    poked_ = true;
  }
  cv_.notify_one();
}

void TimerList::poke_before(Peer& p, std::optional<TimePoint> deadline) {
  if (!p.listed_for_timers(PeerAccess{})) {
    std::lock_guard lock(mu_);
    list(p);
  }
  if (deadline && deadline->time_since_epoch().count() < wake_at_.load()) poke();
}

void TimerList::run(const std::function<TimePoint()>& now_fn,
                    const std::function<void(Peer&, const TimerActions&)>& act,
                    const std::function<void(TimePoint)>& each_round) {
  std::unique_lock lock(mu_);
  while (!closed_) {
    poked_ = false;  // the round about to run covers every poke made before it
    wake_at_.store(std::numeric_limits<Clock::rep>::max());
    const uint64_t round = ++round_begun_;
    const TimePoint now = now_fn();
    TimePoint wake = now + kMaxSleep;
    // Peers listed while we scan wait in peers_.
    std::vector<PeerPtr> scan, keep;
    scan.swap(peers_);
    lock.unlock();
    keep.reserve(scan.size());
    for (auto& p : scan) {
      const auto [a, next] = p->run_timers(PeerAccess{}, now);
      if (next) {
        wake = std::min(wake, *next);
        keep.push_back(p);
      }
      if (a.any() && !p->removed()) act(*p, a);
    }
    // What was scanned and not kept (removed peers among them) is released here, before
    // the sleep and without the lock.
    scan.clear();
    if (each_round) each_round(now);
    lock.lock();
    peers_.insert(peers_.end(), std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
    keep.clear();
    wake_at_.store(wake.time_since_epoch().count());
    round_done_ = round;
    round_cv_.notify_all();
    // By the real clock, for what now_fn says is left (the same span when it is the
    // real one).
    cv_.wait_for(lock, wake - now_fn(), [&] { return poked_ || closed_; });
  }
}

bool TimerList::round() {
  std::unique_lock lock(mu_);
  const uint64_t want = round_begun_ + 1;  // a round that reads the clock after this
  poked_ = true;
  cv_.notify_one();
  round_cv_.wait(lock, [&] { return round_done_ >= want || closed_; });
  return !closed_;
}

void TimerList::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
  round_cv_.notify_all();
}

std::vector<PeerPtr> TimerList::take_removed() {
  std::vector<PeerPtr> gone;
  const auto until = std::chrono::steady_clock::now() + 1s;
  std::unique_lock lock(mu_);
  // The wake-up time is the maximum while the thread scans (a peer it holds then is in
  // its own copy of the list); poked but not yet running, it finds the list as we leave it.
  while (wake_at_.load() == std::numeric_limits<Clock::rep>::max() && std::chrono::steady_clock::now() < until) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  auto removed = std::partition(peers_.begin(), peers_.end(), [](const PeerPtr& p) { return !p->removed(); });
  for (auto it = removed; it != peers_.end(); ++it) gone.push_back(std::move(*it));
  peers_.erase(removed, peers_.end());
  // Its storage too: the thread, poked but not yet running, would free it later.
  if (peers_.empty()) std::vector<PeerPtr>().swap(peers_);
  return gone;
}

}  // namespace wg

// The timer thread: it scans the peers with armed timers and carries out what their
// deadlines ask for (handshake retries, keepalives, zeroing).
#include <algorithm>
#include <iterator>
#include <limits>

#include "wg/base/log.hpp"
#include "wg/device.hpp"

namespace wg {

using namespace std::chrono_literals;

void Device::poke_timers() {
  {
    std::lock_guard lock(timer_mu_);
    timer_poked_ = true;
  }
  timer_cv_.notify_one();
}

void Device::list_for_timers(Peer& p) {
  if (!p.timer_listed_.exchange(true)) timer_peers_.push_back(p.shared_from_this());
}

void Device::poke_timers(Peer& p) {
  {
    std::lock_guard lock(timer_mu_);
    list_for_timers(p);
    timer_poked_ = true;
  }
  timer_cv_.notify_one();
}

void Device::poke_timers_before(Peer& p, std::optional<TimePoint> deadline) {
  if (!p.timer_listed_.load()) {
    std::lock_guard lock(timer_mu_);
    list_for_timers(p);
  }
  if (deadline && deadline->time_since_epoch().count() < timer_wake_at_.load()) poke_timers();
}

void Device::timer_loop() {
  std::unique_lock lock(timer_mu_);
  while (!closing_) {
    timer_wake_at_.store(std::numeric_limits<Clock::rep>::max());
    const uint64_t round = ++timer_round_begun_;
    // Sleep until the earliest deadline of any peer (at most a second, so new
    // deadlines armed without a poke are never late by more than that).
    auto now = this->now();
    TimePoint wake = now + 1s;
    // Only peers with armed timers; peers listed while we scan wait in timer_peers_.
    std::vector<PeerPtr> scan, keep;
    scan.swap(timer_peers_);
    lock.unlock();
    keep.reserve(scan.size());
    for (auto& p : scan) {
      TimerActions a;
      {
        std::lock_guard tl(p->timers_mu_);
        a = p->timers_.tick(now);
        auto d = p->timers_.next_deadline();
        if (d && !p->removed_) {
          wake = std::min(wake, *d);
          keep.push_back(p);
        } else {
          p->timer_listed_ = false;  // whoever arms next lists it again
        }
      }
      if (!a.any() || p->removed_ || !up_) continue;
      if (a.clear_source) {
        std::lock_guard el(p->endpoint_mu_);
        if (p->endpoint_) p->endpoint_->clear_source();
      }
      if (a.give_up) {
        log::event("{}: no handshake after {} attempts, giving up until new traffic", *p,
                   kMaxTimerHandshakes + 2);
        p->clear_staged();
      }
      if (a.zero_keys) p->zero_keys();
      if (a.send_initiation) send_initiation(*p, a.retry);
      if (a.send_keepalive) send_keepalive(*p);
    }
    // What was scanned and not kept (removed peers among them) is released here, before
    // the sleep and without the lock.
    scan.clear();
    lock.lock();
    timer_peers_.insert(timer_peers_.end(), std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
    keep.clear();
    timer_wake_at_.store(wake.time_since_epoch().count());
    timer_round_done_ = round;
    timer_round_cv_.notify_all();
    // By the real clock, for what the device's clock says is left (the same span when the
    // device's clock is the real one).
    timer_cv_.wait_for(lock, wake - this->now(), [&] { return timer_poked_ || closing_.load(); });
    timer_poked_ = false;
  }
}

bool Device::clock_moved() {
  std::unique_lock lock(timer_mu_);
  const uint64_t want = timer_round_begun_ + 1;  // a round that reads the clock after this
  timer_poked_ = true;
  timer_cv_.notify_one();
  timer_round_cv_.wait(lock, [&] { return timer_round_done_ >= want || closing_.load(); });
  return !closing_;
}

}  // namespace wg

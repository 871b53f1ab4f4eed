// The timer thread: TimerList schedules it; here is what due timers ask the device to do
// (handshake retries, keepalives, zeroing).
#include <thread>

#include "wg/base/log.hpp"
#include "wg/device.hpp"

namespace wg {

void Device::run_timers(Peer& p, const TimerActions& a) {
  if (!up_) return;
  if (a.clear_source) p.clear_endpoint_source(PeerAccess{});
  if (a.give_up) {
    log::event("{}: no handshake after {} attempts, giving up until new traffic", p, kMaxTimerHandshakes + 2);
    p.clear_staged(PeerAccess{});
  }
  if (a.zero_keys) p.zero_keys(PeerAccess{});
  if (a.send_initiation) send_initiation(p, a.retry);
  if (a.send_keepalive) send_keepalive(p);
}

bool Device::clock_moved() {
  if (!timer_list_.round()) return false;
  const uint64_t queued = messages_queued_.load();
  while (messages_sent_.load() < queued && !closing_) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return !closing_;
}

}  // namespace wg

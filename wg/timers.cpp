// Timer rules of the WireGuard paper, section 6.
#include "wg/timers.hpp"

#include "wg/crypto.hpp"

namespace wg {
namespace {

bool expired(std::optional<TimePoint>& t, TimePoint now) {
  if (!t || now < *t) return false;
  t.reset();
  return true;
}

}  // namespace

Timers::Timers(std::function<Clock::duration()> jitter) : jitter_(std::move(jitter)) {}

Clock::duration Timers::jitter() {
  if (jitter_) return jitter_();
  uint32_t r;
  random_bytes(&r, sizeof r);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(
      r % static_cast<uint32_t>(std::chrono::microseconds(kRekeyTimeoutJitterMax).count())));
}

// Data sent and no reply yet: if nothing authenticated comes back within
// KEEPALIVE + REKEY_TIMEOUT, start a new handshake.
void Timers::data_sent(TimePoint now) {
  if (!new_handshake_) new_handshake_ = now + kKeepaliveTimeout + kRekeyTimeout + jitter();
}

// Data received: if we send nothing within KEEPALIVE, send a keepalive.
void Timers::data_received(TimePoint now) {
  if (!send_keepalive_) send_keepalive_ = now + kKeepaliveTimeout;
  else need_another_keepalive = true;
}

void Timers::any_authenticated_packet_sent(TimePoint) { send_keepalive_.reset(); }

void Timers::any_authenticated_packet_received(TimePoint) { new_handshake_.reset(); }

void Timers::any_authenticated_packet_traversal(TimePoint now) {
  if (persistent_interval_.count() > 0) persistent_keepalive_ = now + persistent_interval_;
}

void Timers::handshake_initiated(TimePoint now) {
  retransmit_handshake_ = now + kRekeyTimeout + jitter();
}

void Timers::handshake_complete(TimePoint) {
  retransmit_handshake_.reset();
  attempts_ = 0;
  sent_lastminute_handshake = false;
}

void Timers::session_derived(TimePoint now) { zero_key_material_ = now + 3 * kRejectAfterTime; }

TimerActions Timers::tick(TimePoint now) {
  TimerActions a;
  if (expired(retransmit_handshake_, now)) {
    if (attempts_ > kMaxTimerHandshakes) {
      // Give up: stop keepalives, drop what waits for a session, and wipe keys later.
      send_keepalive_.reset();
      a.give_up = true;
      if (!zero_key_material_) zero_key_material_ = now + 3 * kRejectAfterTime;
    } else {
      ++attempts_;
      a.send_initiation = true;
      a.retry = true;
      a.clear_source = true;
    }
  }
  if (expired(send_keepalive_, now)) {
    a.send_keepalive = true;
    if (need_another_keepalive) {
      need_another_keepalive = false;
      send_keepalive_ = now + kKeepaliveTimeout;
    }
  }
  if (expired(new_handshake_, now)) {
    a.send_initiation = true;
    a.clear_source = true;
  }
  if (expired(zero_key_material_, now)) a.zero_keys = true;
  if (expired(persistent_keepalive_, now)) a.send_keepalive = true;
  return a;
}

std::optional<TimePoint> Timers::next_deadline() const {
  std::optional<TimePoint> best;
  for (auto& t : {retransmit_handshake_, send_keepalive_, new_handshake_, zero_key_material_,
                  persistent_keepalive_})
    if (t && (!best || *t < *best)) best = t;
  return best;
}

void Timers::stop() {
  retransmit_handshake_.reset();
  send_keepalive_.reset();
  new_handshake_.reset();
  zero_key_material_.reset();
  persistent_keepalive_.reset();
  attempts_ = 0;
  need_another_keepalive = false;
  sent_lastminute_handshake = false;
}

}  // namespace wg

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

// Jitter guards no secret: a per-thread SplitMix64 seeded once, cheap enough for the
// data path.
uint64_t jitter_random() {
  thread_local uint64_t state = [] {
    uint64_t seed;
    random_bytes(&seed, sizeof seed);
    return seed;
  }();
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Timers::Timers(std::function<Clock::duration()> jitter) : jitter_(std::move(jitter)) {}

Clock::duration Timers::jitter() {
  if (jitter_) return jitter_();
  const auto range = static_cast<uint64_t>(std::chrono::microseconds(kRekeyTimeoutJitterMax).count());
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::microseconds(static_cast<int64_t>(jitter_random() % range)));
}

// Rekeys if nothing authenticated arrives within KEEPALIVE + REKEY_TIMEOUT.
void Timers::data_sent(TimePoint now) {
  if (!new_handshake_) new_handshake_ = now + kKeepaliveTimeout + kRekeyTimeout + jitter();
}

// Sends a keepalive if nothing is sent within KEEPALIVE.
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
  early_retransmit_ = false;
}

void Timers::handshake_complete(TimePoint) {
  retransmit_handshake_.reset();
  attempts_ = 0;
  sent_lastminute_handshake = false;
  refused_gap_ = {};
  refused_sent_.reset();
  early_retransmit_ = false;
}

std::optional<Clock::duration> Timers::initiation_refused(TimePoint sent) {
  if (!retransmit_handshake_ || refused_sent_ == sent) return std::nullopt;
  refused_sent_ = sent;
  refused_gap_ = refused_gap_ == Clock::duration::zero()
                     ? Clock::duration(kRefusedRetry)
                     : std::min<Clock::duration>(2 * refused_gap_, kRekeyTimeout);
  // At REKEY_TIMEOUT the retry is the paper's own, counted towards giving up.
  if (refused_gap_ < kRekeyTimeout && sent + refused_gap_ < *retransmit_handshake_) {
    retransmit_handshake_ = sent + refused_gap_;
    early_retransmit_ = true;
  }
  return refused_gap_;
}

void Timers::session_derived(TimePoint now) { zero_key_material_ = now + 3 * kRejectAfterTime; }

TimerActions Timers::tick(TimePoint now) {
  TimerActions a;
  if (expired(retransmit_handshake_, now)) {
    if (attempts_ > kMaxTimerHandshakes) {
      // Give up: no keepalives, drop staged packets, wipe keys later.
      send_keepalive_.reset();
      a.give_up = true;
      if (!zero_key_material_) zero_key_material_ = now + 3 * kRejectAfterTime;
    } else {
      if (!early_retransmit_) ++attempts_;
      early_retransmit_ = false;
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
  refused_gap_ = {};
  refused_sent_.reset();
  early_retransmit_ = false;
}

}  // namespace wg

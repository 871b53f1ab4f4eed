// The per-peer timers of the paper's section 6, sans-I/O; hooks are named by their event,
// as in the kernel. Callers hold the peer's timers_mu_.
//   handshake_initiated: retransmit in 5 s + jitter, up to 18 tries (sooner when refused)
//   data_sent: new handshake in 15 s + jitter unless a packet arrives
//   data_received: keepalive in 10 s unless a packet is sent
//   session_derived: zero keys in 540 s
//   any_authenticated_packet_traversal: persistent keepalive, if set
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "wg/messages.hpp"

namespace wg {

struct TimerActions {
  bool send_initiation = false;
  bool retry = false;               // keeps the attempt count
  bool send_keepalive = false;
  bool clear_source = false;        // forget the sticky source address first
  bool give_up = false;             // attempts exhausted: drop staged packets
  bool zero_keys = false;
  bool any() const { return send_initiation || send_keepalive || give_up || zero_keys; }
};

class Timers {
public:
  // jitter() returns [0, kRekeyTimeoutJitterMax); tests pass a fixed one.
  explicit Timers(std::function<Clock::duration()> jitter = {});

  // 0 turns it off, including a keepalive already armed.
  void set_persistent_keepalive(std::chrono::seconds interval) {
    persistent_interval_ = interval;
    if (interval.count() == 0) persistent_keepalive_.reset();
  }
  std::chrono::seconds persistent_keepalive() const { return persistent_interval_; }

  // --- event hooks ---
  void data_sent(TimePoint now);
  void data_received(TimePoint now);
  void any_authenticated_packet_sent(TimePoint now);
  void any_authenticated_packet_received(TimePoint now);
  void any_authenticated_packet_traversal(TimePoint now);
  void handshake_initiated(TimePoint now);
  void handshake_complete(TimePoint now);
  // The initiation sent at `sent` was refused (ICMP unreachable: nobody listens there
  // yet): its retransmission moves to `sent` + a gap starting at kRefusedRetry and
  // doubling per refused initiation up to REKEY_TIMEOUT, until a handshake completes.
  // Such an early retry is not counted against the attempt limit. Returns the gap; none
  // when no retransmission is armed or this initiation was reported already.
  std::optional<Clock::duration> initiation_refused(TimePoint sent);
  void session_derived(TimePoint now);

  // Runs every expired timer.
  TimerActions tick(TimePoint now);
  std::optional<TimePoint> next_deadline() const;
  // Disarms everything.
  void stop();

  int handshake_attempts() const { return attempts_; }
  // On a fresh (not retried) initiation.
  void reset_attempts() { attempts_ = 0; }
  bool sent_lastminute_handshake = false;
  // A keepalive was sent for data received while one was pending.
  bool need_another_keepalive = false;

private:
  Clock::duration jitter();

  std::function<Clock::duration()> jitter_;
  std::chrono::seconds persistent_interval_{0};
  int attempts_ = 0;
  std::optional<TimePoint> retransmit_handshake_;
  std::optional<TimePoint> send_keepalive_;
  std::optional<TimePoint> new_handshake_;
  std::optional<TimePoint> zero_key_material_;
  std::optional<TimePoint> persistent_keepalive_;
  Clock::duration refused_gap_{};           // zero: no refusal since the last handshake
  std::optional<TimePoint> refused_sent_;   // the initiation refused last
  bool early_retransmit_ = false;           // retransmit_handshake_ was moved by a refusal
};

}  // namespace wg

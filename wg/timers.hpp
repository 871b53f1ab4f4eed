// The per-peer timers of the paper's section 6. Callers hold the peer's timers_mu_.
//   handshake_initiated: retransmit in 5 s + jitter, up to 18 tries
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
  bool retry = false;
  bool send_keepalive = false;
  bool clear_source = false;        // first
  bool give_up = false;             // drop staged packets
  bool zero_keys = false;
  bool any() const { return send_initiation || send_keepalive || give_up || zero_keys; }
};

class Timers {
public:
  // jitter() returns [0, kRekeyTimeoutJitterMax).
  explicit Timers(std::function<Clock::duration()> jitter = {});

  // 0 disarms it.
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
  // ICMP refused it: retransmit after a gap from kRefusedRetry doubling to
  // REKEY_TIMEOUT, not counted as an attempt. None if nothing is armed or it was
  // reported already.
  std::optional<Clock::duration> initiation_refused(TimePoint sent);
  void session_derived(TimePoint now);

  TimerActions tick(TimePoint now);
  std::optional<TimePoint> next_deadline() const;
  void stop();

  int handshake_attempts() const { return attempts_; }
  void reset_attempts() { attempts_ = 0; }
  bool sent_lastminute_handshake = false;
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
  Clock::duration refused_gap_{};           // zero: none since the last handshake
  std::optional<TimePoint> refused_sent_;
  bool early_retransmit_ = false;
};

}  // namespace wg

// The per-peer timers of the WireGuard paper (section 6), sans-I/O. Hooks are named by the
// event that calls them, as in the kernel module; tick(now) reports which timers expired
// and what the peer must do. The device calls everything under the peer's timer mutex.
//
//   handshake_initiated ──► retransmit_handshake (5 s + jitter) ──► resend, up to 18 tries
//   data_sent           ──► new_handshake (15 s + jitter) unless any packet received
//   data_received       ──► send_keepalive (10 s) unless any packet sent
//   session_derived     ──► zero_key_material (540 s)
//   any_packet_traversal──► persistent_keepalive (interval, if set)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "wg/messages.hpp"

namespace wg {

struct TimerActions {
  bool send_initiation = false;     // (re)send a handshake initiation
  bool retry = false;               // ...as a retransmission (keeps the attempt count)
  bool send_keepalive = false;      // send an empty transport packet
  bool clear_source = false;        // forget the sticky source address before sending
  bool give_up = false;             // 18 attempts failed: drop staged packets
  bool zero_keys = false;           // wipe keypairs and handshake
  bool any() const { return send_initiation || send_keepalive || give_up || zero_keys; }
};

class Timers {
public:
  // jitter() returns a value in [0, kRekeyTimeoutJitterMax); tests pass a fixed one.
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
  void session_derived(TimePoint now);

  // Runs every expired timer and says what to do.
  TimerActions tick(TimePoint now);
  // Earliest armed deadline, for the device's timer thread.
  std::optional<TimePoint> next_deadline() const;
  // Disarms everything (peer removed or device down).
  void stop();

  int handshake_attempts() const { return attempts_; }
  // A fresh (non-retry) initiation starts counting attempts again.
  void reset_attempts() { attempts_ = 0; }
  bool sent_lastminute_handshake = false;
  // Set when a keepalive was sent because of data received while one was pending.
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
};

}  // namespace wg

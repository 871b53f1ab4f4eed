// Timers against a fake clock: every deadline is probed one clock tick before it
// (nothing happens) and exactly at it (the rule fires).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "wg/messages.hpp"
#include "wg/timers.hpp"

namespace {

using namespace std::chrono_literals;
using wg::Clock;
using wg::TimePoint;
using wg::TimerActions;
using wg::Timers;

// The smallest step of the clock: "just before" a deadline is deadline - kTick.
constexpr Clock::duration kTick{1};
constexpr auto kJitter = 100ms;

// A fake clock: a time point the test moves by hand, far from the epoch.
struct FakeClock {
  TimePoint now = TimePoint{} + 1000h;
  TimePoint advance(Clock::duration d) { return now += d; }
};

Timers fixed_jitter(Clock::duration j = kJitter) {
  return Timers([j] { return j; });
}

bool nothing(const TimerActions& a) {
  return !a.any() && !a.retry && !a.clear_source;
}

}  // namespace

// --- retransmit_handshake -----------------------------------------------------------------

TEST_CASE("timers: a handshake is retransmitted at REKEY_TIMEOUT + jitter", "[timers]") {
  for (Clock::duration jitter : {Clock::duration(0ms), Clock::duration(kJitter)}) {
    CAPTURE(jitter.count());
    FakeClock clock;
    Timers t = fixed_jitter(jitter);
    const TimePoint t0 = clock.now;
    t.handshake_initiated(t0);
    const TimePoint deadline = t0 + wg::kRekeyTimeout + jitter;
    REQUIRE(t.next_deadline() == deadline);

    CHECK(nothing(t.tick(deadline - kTick)));
    CHECK(t.handshake_attempts() == 0);

    TimerActions a = t.tick(deadline);
    CHECK(a.send_initiation);
    CHECK(a.retry);
    CHECK(a.clear_source);
    CHECK_FALSE(a.give_up);
    CHECK(t.handshake_attempts() == 1);
    // Fired once: the timer stays off until the retransmission is sent.
    CHECK_FALSE(t.next_deadline());
    CHECK(nothing(t.tick(deadline + 1h)));
  }
}

TEST_CASE("timers: the default jitter stays below kRekeyTimeoutJitterMax", "[timers]") {
  std::set<Clock::rep> seen;
  for (int i = 0; i < 200; ++i) {
    Timers t;
    const TimePoint t0 = TimePoint{} + 1h;
    t.handshake_initiated(t0);
    REQUIRE(t.next_deadline());
    const auto jitter = *t.next_deadline() - t0 - wg::kRekeyTimeout;
    CHECK(jitter >= Clock::duration::zero());
    CHECK(jitter < wg::kRekeyTimeoutJitterMax);
    seen.insert(jitter.count());
  }
  CHECK(seen.size() > 190);  // random, not one fixed value (µs resolution over 334 ms)
}

// The attempt counter starts at 0 with the first initiation and counts retransmissions.
// As in the kernel (timers.c, wg_expired_retransmit_handshake), the expiry that finds
// attempts > MAX_TIMER_HANDSHAKES gives up: 1 initiation + 19 retries = 20 sent, the
// "after 20 attempts" of the kernel's log line.
TEST_CASE("timers: retransmissions count up and give up once attempts exceed 18", "[timers]") {
  REQUIRE(wg::kMaxTimerHandshakes == 18);
  FakeClock clock;
  Timers t = fixed_jitter();
  t.handshake_initiated(clock.now);
  t.data_received(clock.now);  // a pending keepalive, which giving up must cancel

  int sent = 1;
  for (int retry = 1; retry <= wg::kMaxTimerHandshakes + 1; ++retry) {
    CAPTURE(retry);
    const TimePoint deadline = clock.now + wg::kRekeyTimeout + kJitter;
    TimerActions before = t.tick(deadline - kTick);
    CHECK_FALSE(before.send_initiation);
    CHECK_FALSE(before.give_up);
    clock.now = deadline;
    TimerActions a = t.tick(clock.now);
    REQUIRE(a.send_initiation);
    CHECK(a.retry);
    CHECK_FALSE(a.give_up);
    CHECK(t.handshake_attempts() == retry);
    t.any_authenticated_packet_sent(clock.now);  // sending the initiation
    t.handshake_initiated(clock.now);
    ++sent;
  }
  CHECK(sent == wg::kMaxTimerHandshakes + 2);
  CHECK(t.handshake_attempts() == wg::kMaxTimerHandshakes + 1);

  t.data_received(clock.now);  // re-arm the keepalive to see it cancelled
  const TimePoint last = clock.now + wg::kRekeyTimeout + kJitter;
  CHECK(nothing(t.tick(last - kTick)));
  clock.now = last;
  TimerActions a = t.tick(clock.now);
  CHECK(a.give_up);
  CHECK_FALSE(a.send_initiation);
  CHECK_FALSE(a.send_keepalive);

  // Giving up cancels the keepalive and arms zero_key_material at 3 * REJECT_AFTER_TIME.
  const TimePoint zero_at = last + 3 * wg::kRejectAfterTime;
  REQUIRE(t.next_deadline() == zero_at);
  CHECK(nothing(t.tick(zero_at - kTick)));
  a = t.tick(zero_at);
  CHECK(a.zero_keys);
  CHECK_FALSE(a.send_keepalive);
  CHECK_FALSE(t.next_deadline());
}

// Refused initiations (nobody listens there): retries after 100, 200, ... ms, uncounted,
// until the gap reaches REKEY_TIMEOUT; from then on each retry counts, and a peer that
// keeps refusing is given up as one that never answers.
TEST_CASE("timers: refused initiations retry early, uncounted, then count up to giving up", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  t.handshake_initiated(clock.now);
  std::vector<Clock::duration> gaps;
  bool gave_up = false;
  for (int i = 0; i < 200 && !gave_up; ++i) {
    const TimePoint sent = clock.now;
    auto gap = t.initiation_refused(sent);
    REQUIRE(gap);
    CHECK_FALSE(t.initiation_refused(sent));  // one refusal per initiation
    const TimePoint due = *t.next_deadline();
    CHECK(nothing(t.tick(due - kTick)));
    clock.now = due;
    TimerActions a = t.tick(clock.now);
    gaps.push_back(due - sent);
    if (a.give_up) {
      gave_up = true;
      break;
    }
    REQUIRE(a.send_initiation);
    t.handshake_initiated(clock.now);
  }
  REQUIRE(gave_up);
  REQUIRE(gaps.size() > 6);
  CHECK(gaps[0] == 100ms);
  CHECK(gaps[1] == 200ms);
  CHECK(gaps[2] == 400ms);
  CHECK(gaps[5] == 3200ms);
  CHECK(gaps[6] == wg::kRekeyTimeout + kJitter);  // the paper's own retry from here on
  // The six early retries were not counted: then 19 counted ones, as without refusals,
  // and the give-up.
  CHECK(gaps.size() == size_t(6 + (wg::kMaxTimerHandshakes + 1) + 1));
}

TEST_CASE("timers: giving up keeps an already armed zero_key_material deadline", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter(0ms);
  const TimePoint derived = clock.now;
  t.session_derived(derived);
  t.handshake_initiated(derived);
  for (int i = 0; i <= wg::kMaxTimerHandshakes; ++i) {
    clock.advance(wg::kRekeyTimeout);
    REQUIRE(t.tick(clock.now).send_initiation);
    t.handshake_initiated(clock.now);
  }
  clock.advance(wg::kRekeyTimeout);
  REQUIRE(t.tick(clock.now).give_up);
  CHECK(t.next_deadline() == derived + 3 * wg::kRejectAfterTime);
}

// The kernel resets the attempt counter whenever a handshake is started afresh rather than
// retried (send.c, wg_packet_send_queued_handshake_initiation: `if (!is_retry)
// peer->timer_handshake_attempts = 0;`). Here the caller does it with reset_attempts()
// before handshake_initiated() when TimerActions::retry is false; without it, a peer that
// gave up once would give up again at the first expiry of every later handshake.
TEST_CASE("timers: a fresh handshake after giving up is retransmitted again", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter(0ms);
  t.handshake_initiated(clock.now);
  for (int i = 0; i <= wg::kMaxTimerHandshakes; ++i) {
    clock.advance(wg::kRekeyTimeout);
    REQUIRE(t.tick(clock.now).send_initiation);
    t.handshake_initiated(clock.now);
  }
  clock.advance(wg::kRekeyTimeout);
  REQUIRE(t.tick(clock.now).give_up);
  REQUIRE(t.handshake_attempts() == wg::kMaxTimerHandshakes + 1);

  // Later the user sends data; with no session the device starts a new handshake.
  clock.advance(1min);
  t.data_sent(clock.now);
  t.reset_attempts();
  t.handshake_initiated(clock.now);
  CHECK(t.handshake_attempts() == 0);
  for (int retry = 1; retry <= wg::kMaxTimerHandshakes + 1; ++retry) {
    clock.advance(wg::kRekeyTimeout);
    TimerActions a = t.tick(clock.now);
    CAPTURE(retry);
    REQUIRE(a.send_initiation);
    CHECK_FALSE(a.give_up);
    CHECK(t.handshake_attempts() == retry);
    t.handshake_initiated(clock.now);
  }
  clock.advance(wg::kRekeyTimeout);
  CHECK(t.tick(clock.now).give_up);
}

TEST_CASE("timers: without reset_attempts a handshake keeps the old count", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter(0ms);
  t.handshake_initiated(clock.now);
  for (int i = 0; i < 3; ++i) {
    clock.advance(wg::kRekeyTimeout);
    REQUIRE(t.tick(clock.now).send_initiation);
    t.handshake_initiated(clock.now);  // a retry: the count stays
  }
  CHECK(t.handshake_attempts() == 3);
  t.reset_attempts();
  CHECK(t.handshake_attempts() == 0);
  // reset_attempts touches only the count, not the armed retransmission.
  CHECK(t.next_deadline() == clock.now + wg::kRekeyTimeout);
}

TEST_CASE("timers: handshake_complete disarms the retransmission and resets attempts",
          "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  t.handshake_initiated(clock.now);
  for (int i = 0; i < 3; ++i) {
    clock.advance(wg::kRekeyTimeout + kJitter);
    REQUIRE(t.tick(clock.now).send_initiation);
    t.handshake_initiated(clock.now);
  }
  REQUIRE(t.handshake_attempts() == 3);
  t.sent_lastminute_handshake = true;

  clock.advance(1s);
  t.handshake_complete(clock.now);
  CHECK(t.handshake_attempts() == 0);
  CHECK_FALSE(t.sent_lastminute_handshake);
  CHECK_FALSE(t.next_deadline());
  CHECK(nothing(t.tick(clock.now + wg::kRekeyTimeout + kJitter)));
  CHECK(nothing(t.tick(clock.now + 1h)));
}

// --- new_handshake ---------------------------------------------------------------------------

TEST_CASE("timers: data sent without reply starts a handshake at 15 s + jitter", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  t.data_sent(t0);
  const TimePoint deadline = t0 + wg::kKeepaliveTimeout + wg::kRekeyTimeout + kJitter;
  REQUIRE(deadline == t0 + 15s + kJitter);
  REQUIRE(t.next_deadline() == deadline);

  SECTION("fires at the deadline, not before") {
    CHECK(nothing(t.tick(deadline - kTick)));
    TimerActions a = t.tick(deadline);
    CHECK(a.send_initiation);
    CHECK_FALSE(a.retry);  // a new handshake, not a retransmission
    CHECK(a.clear_source);
    CHECK(t.handshake_attempts() == 0);
    CHECK_FALSE(t.next_deadline());
  }
  SECTION("more data does not push the deadline back") {
    t.data_sent(t0 + 10s);
    CHECK(t.next_deadline() == deadline);
    CHECK(t.tick(deadline).send_initiation);
  }
  SECTION("any authenticated packet received cancels it") {
    t.any_authenticated_packet_received(deadline - kTick);
    CHECK_FALSE(t.next_deadline());
    CHECK(nothing(t.tick(deadline)));
    CHECK(nothing(t.tick(deadline + 1h)));
  }
  SECTION("sending more data after a reply re-arms from that moment") {
    t.any_authenticated_packet_received(t0 + 1s);
    t.data_sent(t0 + 2s);
    CHECK(t.next_deadline() == t0 + 2s + 15s + kJitter);
  }
}

// --- send_keepalive --------------------------------------------------------------------------

TEST_CASE("timers: data received is answered by a keepalive at 10 s", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  t.data_received(t0);
  const TimePoint deadline = t0 + wg::kKeepaliveTimeout;
  REQUIRE(t.next_deadline() == deadline);

  SECTION("fires at the deadline, not before; no jitter") {
    CHECK(nothing(t.tick(deadline - kTick)));
    TimerActions a = t.tick(deadline);
    CHECK(a.send_keepalive);
    CHECK_FALSE(a.send_initiation);
    CHECK_FALSE(t.next_deadline());
  }
  SECTION("any authenticated packet sent cancels it") {
    t.any_authenticated_packet_sent(deadline - kTick);
    CHECK_FALSE(t.next_deadline());
    CHECK(nothing(t.tick(deadline)));
  }
  SECTION("data received while one is pending asks for another keepalive") {
    t.data_received(t0 + 3s);
    CHECK(t.need_another_keepalive);
    CHECK(t.next_deadline() == deadline);  // not pushed back

    TimerActions a = t.tick(deadline);
    CHECK(a.send_keepalive);
    CHECK_FALSE(t.need_another_keepalive);
    // Re-armed for another KEEPALIVE_TIMEOUT from the expiry.
    const TimePoint again = deadline + wg::kKeepaliveTimeout;
    REQUIRE(t.next_deadline() == again);
    CHECK(nothing(t.tick(again - kTick)));
    CHECK(t.tick(again).send_keepalive);
    CHECK_FALSE(t.next_deadline());
  }
}

// --- zero_key_material -----------------------------------------------------------------------

TEST_CASE("timers: keys are zeroed 540 s after a session is derived", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  t.session_derived(t0);
  const TimePoint deadline = t0 + 540s;
  REQUIRE(3 * wg::kRejectAfterTime == 540s);
  REQUIRE(t.next_deadline() == deadline);

  CHECK(nothing(t.tick(t0 + 539999ms)));
  CHECK(nothing(t.tick(deadline - kTick)));
  TimerActions a = t.tick(deadline);
  CHECK(a.zero_keys);
  CHECK_FALSE(a.send_initiation);
  CHECK_FALSE(a.send_keepalive);
  CHECK_FALSE(t.next_deadline());

  SECTION("a newer session pushes the deadline out") {
    Timers u = fixed_jitter();
    u.session_derived(t0);
    u.session_derived(t0 + 100s);
    CHECK(nothing(u.tick(deadline)));
    CHECK(u.tick(t0 + 100s + 540s).zero_keys);
  }
}

// --- persistent_keepalive --------------------------------------------------------------------

TEST_CASE("timers: persistent keepalive fires its interval after any traversal", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  t.set_persistent_keepalive(25s);
  CHECK(t.persistent_keepalive() == 25s);
  const TimePoint t0 = clock.now;
  t.any_authenticated_packet_traversal(t0);
  REQUIRE(t.next_deadline() == t0 + 25s);

  SECTION("fires at the interval, not before") {
    CHECK(nothing(t.tick(t0 + 25s - kTick)));
    TimerActions a = t.tick(t0 + 25s);
    CHECK(a.send_keepalive);
    CHECK_FALSE(a.send_initiation);
    CHECK_FALSE(t.next_deadline());
  }
  SECTION("each traversal restarts the interval") {
    t.any_authenticated_packet_traversal(t0 + 20s);
    CHECK(nothing(t.tick(t0 + 25s)));
    CHECK(nothing(t.tick(t0 + 45s - kTick)));
    CHECK(t.tick(t0 + 45s).send_keepalive);
  }
}

TEST_CASE("timers: persistent keepalive is off when the interval is 0", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  CHECK(t.persistent_keepalive() == 0s);
  t.any_authenticated_packet_traversal(clock.now);
  CHECK_FALSE(t.next_deadline());
  CHECK(nothing(t.tick(clock.now + 1h)));

  t.set_persistent_keepalive(0s);
  t.any_authenticated_packet_traversal(clock.now);
  CHECK_FALSE(t.next_deadline());
}

// Turning persistent keepalive off (uapi persistent_keepalive_interval=0) while its timer
// is armed: the kernel checks the interval when the timer expires (timers.c,
// wg_expired_send_persistent_keepalive: `if (likely(peer->persistent_keepalive_interval))`),
// so nothing is sent. Timers::tick() fires the stale deadline regardless.
TEST_CASE("timers: setting the interval to 0 silences an armed persistent keepalive",
          "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  t.set_persistent_keepalive(25s);
  t.any_authenticated_packet_traversal(clock.now);
  t.set_persistent_keepalive(0s);
  CHECK_FALSE(t.tick(clock.now + 25s).send_keepalive);
}

// --- next_deadline and stop ------------------------------------------------------------------

TEST_CASE("timers: next_deadline is the earliest armed timer", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  CHECK_FALSE(t.next_deadline());

  t.set_persistent_keepalive(7s);
  t.session_derived(t0);                // 540 s
  CHECK(t.next_deadline() == t0 + 540s);
  t.data_sent(t0);                      // 15.1 s
  CHECK(t.next_deadline() == t0 + 15s + kJitter);
  t.data_received(t0);                  // 10 s
  CHECK(t.next_deadline() == t0 + 10s);
  t.any_authenticated_packet_traversal(t0);  // 7 s
  CHECK(t.next_deadline() == t0 + 7s);
  t.handshake_initiated(t0);            // 5.1 s
  CHECK(t.next_deadline() == t0 + 5s + kJitter);

  // Walking the clock through them, each expiry reveals the next one.
  TimerActions a = t.tick(t0 + 5s + kJitter);
  CHECK(a.send_initiation);
  CHECK(t.next_deadline() == t0 + 7s);
  a = t.tick(t0 + 7s);
  CHECK(a.send_keepalive);
  CHECK(t.next_deadline() == t0 + 10s);
  a = t.tick(t0 + 10s);
  CHECK(a.send_keepalive);
  CHECK(t.next_deadline() == t0 + 15s + kJitter);
  a = t.tick(t0 + 15s + kJitter);
  CHECK(a.send_initiation);
  CHECK(t.next_deadline() == t0 + 540s);
  CHECK(t.tick(t0 + 540s).zero_keys);
  CHECK_FALSE(t.next_deadline());
}

TEST_CASE("timers: one tick runs every expired timer together", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  t.set_persistent_keepalive(1s);
  t.handshake_initiated(t0);
  t.data_received(t0);
  t.session_derived(t0);
  t.any_authenticated_packet_traversal(t0);
  TimerActions a = t.tick(t0 + 1h);
  CHECK(a.send_initiation);
  CHECK(a.send_keepalive);
  CHECK(a.zero_keys);
  CHECK(t.handshake_attempts() == 1);
  CHECK_FALSE(t.next_deadline());
}

TEST_CASE("timers: stop disarms everything", "[timers]") {
  FakeClock clock;
  Timers t = fixed_jitter();
  const TimePoint t0 = clock.now;
  t.set_persistent_keepalive(25s);
  t.handshake_initiated(t0);
  REQUIRE(t.tick(t0 + 5s + kJitter).send_initiation);
  t.handshake_initiated(t0 + 5s + kJitter);
  t.data_sent(t0);
  t.data_received(t0);
  t.data_received(t0);  // need_another_keepalive
  t.session_derived(t0);
  t.any_authenticated_packet_traversal(t0);
  t.sent_lastminute_handshake = true;
  REQUIRE(t.next_deadline());

  t.stop();
  CHECK_FALSE(t.next_deadline());
  CHECK(t.handshake_attempts() == 0);
  CHECK_FALSE(t.need_another_keepalive);
  CHECK_FALSE(t.sent_lastminute_handshake);
  CHECK(nothing(t.tick(t0 + 24h)));
  // The configured interval survives: it is configuration, not a timer.
  CHECK(t.persistent_keepalive() == 25s);
}

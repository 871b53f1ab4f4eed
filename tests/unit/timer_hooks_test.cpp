// The data path's decisions (wg/timer_hooks.hpp) on a fake clock: which timers each event
// arms or clears, and what the pipeline is told to do, probed one tick before and at
// each deadline.
#include <catch2/catch.hpp>

#include <chrono>

#include "wg/timer_hooks.hpp"

namespace {

using namespace std::chrono_literals;
using namespace wg;

constexpr Clock::duration kTick{1};
constexpr auto kJitter = 100ms;
const TimePoint kStart = TimePoint{} + 1000h;

Timers fixed_jitter() {
  return Timers([] { return std::chrono::duration_cast<Clock::duration>(kJitter); });
}

KeypairPtr session(bool initiator, TimePoint created) {
  auto kp = std::make_shared<Keypair>();
  kp->initiator = initiator;
  kp->created = created;
  return kp;
}

bool quiet(Timers& t, TimePoint at) {
  return !t.tick(at).any();
}

}  // namespace

TEST_CASE("timer hooks: an unauthenticated batch decides nothing and arms nothing", "[timer_hooks]") {
  auto t = fixed_jitter();
  auto kp = session(true, kStart - 170s);  // old enough to re-key, were it authenticated
  auto a = on_transport_received(t, *kp, {.authenticated = false, .data = true}, kStart);
  CHECK_FALSE(a.roam);
  CHECK_FALSE(a.rekey);
  CHECK_FALSE(a.send_staged);
  CHECK_FALSE(t.next_deadline());
}

TEST_CASE("timer hooks: authenticated data roams and owes a keepalive after 10 s", "[timer_hooks]") {
  auto t = fixed_jitter();
  auto kp = session(false, kStart);
  auto a = on_transport_received(t, *kp, {.authenticated = true, .data = true}, kStart);
  CHECK(a.roam);
  CHECK_FALSE(a.send_staged);
  CHECK_FALSE(a.rekey);
  CHECK(quiet(t, kStart + kKeepaliveTimeout - kTick));
  CHECK(t.tick(kStart + kKeepaliveTimeout).send_keepalive);
}

TEST_CASE("timer hooks: a keepalive received roams but owes no keepalive", "[timer_hooks]") {
  auto t = fixed_jitter();
  auto kp = session(false, kStart);
  auto a = on_transport_received(t, *kp, {.authenticated = true, .data = false}, kStart);
  CHECK(a.roam);
  CHECK_FALSE(t.next_deadline());
}

TEST_CASE("timer hooks: data sent then answered: no new handshake, unanswered: one after 15 s", "[timer_hooks]") {
  SECTION("answered") {
    auto t = fixed_jitter();
    auto kp = session(true, kStart);
    on_transport_sent(t, true, kStart);
    on_transport_received(t, *kp, {.authenticated = true, .data = false}, kStart + 1s);
    CHECK(quiet(t, kStart + 60s));
  }
  SECTION("unanswered") {
    auto t = fixed_jitter();
    on_transport_sent(t, true, kStart);
    const auto due = kStart + kKeepaliveTimeout + kRekeyTimeout + kJitter;
    CHECK(quiet(t, due - kTick));
    auto a = t.tick(due);
    CHECK(a.send_initiation);
    CHECK(a.clear_source);
    CHECK_FALSE(a.retry);
  }
  SECTION("a keepalive sent arms nothing") {
    auto t = fixed_jitter();
    on_transport_sent(t, false, kStart);
    CHECK_FALSE(t.next_deadline());
  }
}

TEST_CASE("timer hooks: sending cancels the keepalive that received data owed", "[timer_hooks]") {
  auto t = fixed_jitter();
  auto kp = session(false, kStart);
  on_transport_received(t, *kp, {.authenticated = true, .data = true}, kStart);
  on_transport_sent(t, false, kStart + 1s);
  CHECK(quiet(t, kStart + 30s));
}

TEST_CASE("timer hooks: the initiator re-keys once, shortly before the responder would reject", "[timer_hooks]") {
  const auto threshold = kRejectAfterTime - kKeepaliveTimeout - kRekeyTimeout;  // 165 s
  SECTION("initiator") {
    auto t = fixed_jitter();
    auto kp = session(true, kStart);
    CHECK_FALSE(on_transport_received(t, *kp, {.authenticated = true}, kStart + threshold).rekey);
    CHECK(on_transport_received(t, *kp, {.authenticated = true}, kStart + threshold + kTick).rekey);
    CHECK_FALSE(on_transport_received(t, *kp, {.authenticated = true}, kStart + threshold + 1s).rekey);
    // A completed handshake allows the next session its own last-minute re-key.
    on_response_consumed(t, kStart + threshold + 2s);
    auto next = session(true, kStart + threshold + 2s);
    CHECK(on_transport_received(t, *next, {.authenticated = true}, kStart + 2 * threshold + 3s).rekey);
  }
  SECTION("responder never re-keys on receive") {
    auto t = fixed_jitter();
    auto kp = session(false, kStart);
    CHECK_FALSE(on_transport_received(t, *kp, {.authenticated = true}, kStart + threshold + 1s).rekey);
  }
}

TEST_CASE("timer hooks: an initiation sent retries after 5 s + jitter, a confirmed session stops it", "[timer_hooks]") {
  SECTION("unanswered") {
    auto t = fixed_jitter();
    on_initiation_sent(t, false, kStart);
    CHECK(quiet(t, kStart + kRekeyTimeout + kJitter - kTick));
    auto a = t.tick(kStart + kRekeyTimeout + kJitter);
    CHECK(a.send_initiation);
    CHECK(a.retry);
    CHECK(t.handshake_attempts() == 1);
    on_initiation_sent(t, true, kStart + kRekeyTimeout + kJitter);  // a retry keeps the count
    CHECK(t.handshake_attempts() == 1);
    on_initiation_sent(t, false, kStart + 20s);  // a new initiation starts it again
    CHECK(t.handshake_attempts() == 0);
  }
  SECTION("answered with the responder's confirmation") {
    auto t = fixed_jitter();
    on_initiation_sent(t, false, kStart);
    auto kp = session(false, kStart);
    auto a = on_transport_received(t, *kp, {.authenticated = true, .data = false, .confirmed_session = true},
                                   kStart + 1s);
    CHECK(a.send_staged);
    CHECK(quiet(t, kStart + 60s));
  }
  SECTION("answered with a response") {
    auto t = fixed_jitter();
    on_initiation_sent(t, false, kStart);
    on_response_consumed(t, kStart + 1s);
    CHECK(quiet(t, kStart + 60s));
  }
}

TEST_CASE("timer hooks: a derived session is zeroed 540 s later, on either side", "[timer_hooks]") {
  SECTION("responder") {
    auto t = fixed_jitter();
    on_initiation_consumed(t, kStart);
    CHECK(quiet(t, kStart + 3 * kRejectAfterTime - kTick));
    CHECK(t.tick(kStart + 3 * kRejectAfterTime).zero_keys);
  }
  SECTION("initiator") {
    auto t = fixed_jitter();
    on_initiation_sent(t, false, kStart);
    on_response_consumed(t, kStart);
    CHECK(quiet(t, kStart + 3 * kRejectAfterTime - kTick));
    CHECK(t.tick(kStart + 3 * kRejectAfterTime).zero_keys);
  }
  SECTION("the response counts as sent: it cancels a keepalive owed") {
    auto t = fixed_jitter();
    auto kp = session(false, kStart);
    on_transport_received(t, *kp, {.authenticated = true, .data = true}, kStart);
    on_initiation_consumed(t, kStart + 1s);
    CHECK(quiet(t, kStart + 3 * kRejectAfterTime - kTick));
  }
}

TEST_CASE("timer hooks: persistent keepalive is re-armed by every authenticated packet, either way", "[timer_hooks]") {
  auto t = fixed_jitter();
  t.set_persistent_keepalive(25s);
  auto kp = session(false, kStart);
  on_transport_received(t, *kp, {.authenticated = true}, kStart);
  on_transport_sent(t, false, kStart + 20s);
  CHECK(quiet(t, kStart + 45s - kTick));
  CHECK(t.tick(kStart + 45s).send_keepalive);
}

TEST_CASE("timer hooks: may_send needs a session, its age under 180 s and nonces left", "[timer_hooks]") {
  auto kp = session(true, kStart);
  CHECK_FALSE(may_send(nullptr, 0, kStart));
  CHECK(may_send(kp.get(), 0, kStart));
  CHECK(may_send(kp.get(), kRejectAfterMessages - 1, kStart));
  CHECK_FALSE(may_send(kp.get(), kRejectAfterMessages, kStart));
  CHECK(may_send(kp.get(), 0, kStart + kRejectAfterTime - kTick));
  CHECK_FALSE(may_send(kp.get(), 0, kStart + kRejectAfterTime));
}

// The keypair age and counter rules (wg/keypair.hpp) at their limits: every deadline is
// probed one clock tick before it and exactly at it, every counter limit at itself and
// one below.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>

#include "wg/keypair.hpp"
#include "wg/messages.hpp"

namespace {

using namespace std::chrono_literals;
using wg::Clock;
using wg::TimePoint;

// The smallest step of the clock: "just before" a deadline is deadline - kTick.
constexpr Clock::duration kTick{1};
const TimePoint kCreated = TimePoint{} + 1000h;

}  // namespace

TEST_CASE("keypair: rekey_due_on_send after REKEY_AFTER_TIME, initiator only", "[timers]") {
  wg::Keypair initiator;
  initiator.initiator = true;
  initiator.created = kCreated;
  wg::Keypair responder;
  responder.initiator = false;
  responder.created = kCreated;

  CHECK_FALSE(wg::rekey_due_on_send(initiator, 1, kCreated));
  CHECK_FALSE(wg::rekey_due_on_send(initiator, 1, kCreated + 120s - kTick));
  CHECK(wg::rekey_due_on_send(initiator, 1, kCreated + 120s + kTick));
  CHECK(wg::rekey_due_on_send(initiator, 1, kCreated + 179s));

  CHECK_FALSE(wg::rekey_due_on_send(responder, 1, kCreated + 120s + kTick));
  CHECK_FALSE(wg::rekey_due_on_send(responder, 1, kCreated + 179s));
}

TEST_CASE("keypair: rekey_due_on_send after REKEY_AFTER_MESSAGES, either side", "[timers]") {
  REQUIRE(wg::kRekeyAfterMessages == uint64_t{1} << 60);
  for (bool initiator : {true, false}) {
    CAPTURE(initiator);
    wg::Keypair kp;
    kp.initiator = initiator;
    kp.created = kCreated;
    CHECK_FALSE(wg::rekey_due_on_send(kp, wg::kRekeyAfterMessages - 1, kCreated));
    CHECK_FALSE(wg::rekey_due_on_send(kp, wg::kRekeyAfterMessages, kCreated));
    CHECK(wg::rekey_due_on_send(kp, wg::kRekeyAfterMessages + 1, kCreated));
    CHECK(wg::rekey_due_on_send(kp, wg::kRejectAfterMessages, kCreated));
  }
}

TEST_CASE("keypair: rekey_due_on_receive after 165 s, initiator only", "[timers]") {
  REQUIRE(wg::kRejectAfterTime - wg::kKeepaliveTimeout - wg::kRekeyTimeout == 165s);
  wg::Keypair initiator;
  initiator.initiator = true;
  initiator.created = kCreated;
  wg::Keypair responder;
  responder.created = kCreated;

  CHECK_FALSE(wg::rekey_due_on_receive(initiator, kCreated));
  CHECK_FALSE(wg::rekey_due_on_receive(initiator, kCreated + 165s));
  CHECK(wg::rekey_due_on_receive(initiator, kCreated + 165s + kTick));
  CHECK(wg::rekey_due_on_receive(initiator, kCreated + 179s));

  CHECK_FALSE(wg::rekey_due_on_receive(responder, kCreated + 165s + kTick));
  CHECK_FALSE(wg::rekey_due_on_receive(responder, kCreated + 179s));
}

TEST_CASE("keypair: keypair_can_send until REJECT_AFTER_TIME and REJECT_AFTER_MESSAGES",
          "[timers]") {
  REQUIRE(wg::kRejectAfterMessages == ~uint64_t{0} - (uint64_t{1} << 13));
  for (bool initiator : {true, false}) {
    CAPTURE(initiator);
    wg::Keypair kp;
    kp.initiator = initiator;
    kp.created = kCreated;
    CHECK(wg::keypair_can_send(kp, 0, kCreated));
    CHECK(wg::keypair_can_send(kp, 0, kCreated + 180s - kTick));
    CHECK_FALSE(wg::keypair_can_send(kp, 0, kCreated + 180s));
    CHECK_FALSE(wg::keypair_can_send(kp, 0, kCreated + 1h));

    CHECK(wg::keypair_can_send(kp, wg::kRejectAfterMessages - 1, kCreated));
    CHECK_FALSE(wg::keypair_can_send(kp, wg::kRejectAfterMessages, kCreated));
    CHECK_FALSE(wg::keypair_can_send(kp, ~uint64_t{0}, kCreated));
  }
}

TEST_CASE("keypair: keypair_can_receive until REJECT_AFTER_TIME", "[timers]") {
  for (bool initiator : {true, false}) {
    CAPTURE(initiator);
    wg::Keypair kp;
    kp.initiator = initiator;
    kp.created = kCreated;
    CHECK(wg::keypair_can_receive(kp, kCreated));
    CHECK(wg::keypair_can_receive(kp, kCreated + 180s - kTick));
    CHECK_FALSE(wg::keypair_can_receive(kp, kCreated + 180s));
    CHECK_FALSE(wg::keypair_can_receive(kp, kCreated + 1h));
  }
}

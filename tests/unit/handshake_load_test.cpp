// The handshake thread's "under load" decision: the mark, and the hold after it.
#include <catch2/catch.hpp>

#include "wg/handshake_load.hpp"

using namespace wg;
using namespace std::chrono_literals;

TEST_CASE("handshake load: an eighth of the queue starts it, it holds for a second", "[handshake][load]") {
  HandshakeLoad load(1024);
  const TimePoint t0 = TimePoint{} + 1000s;
  CHECK_FALSE(load.under_load(0, t0));
  CHECK_FALSE(load.under_load(127, t0));
  CHECK(load.under_load(128, t0));
  // The queue drained at once (cookie replies are cheap): still under load for the hold,
  // or a flood would get a Diffie-Hellman for every message until the queue refilled.
  CHECK(load.under_load(0, t0 + 1ms));
  CHECK(load.under_load(0, t0 + 999ms));
  CHECK_FALSE(load.under_load(0, t0 + 1s));
  // Seen at the mark again: the hold starts over from there.
  CHECK(load.under_load(200, t0 + 2s));
  CHECK(load.under_load(5, t0 + 2s + 500ms));
  CHECK(load.under_load(128, t0 + 2s + 900ms));
  CHECK(load.under_load(0, t0 + 3s + 800ms));
  CHECK_FALSE(load.under_load(0, t0 + 3s + 900ms));
}

TEST_CASE("handshake load: a tiny queue still has a mark of one", "[handshake][load]") {
  HandshakeLoad load(4);
  const TimePoint t0 = TimePoint{} + 10s;
  CHECK_FALSE(load.under_load(0, t0));
  CHECK(load.under_load(1, t0));
}

TEST_CASE("handshake load: the known-endpoint budget: a burst, then 50 a second", "[handshake][load]") {
  HandshakeLoad load(1024);
  const TimePoint t0 = TimePoint{} + 1000s;
  for (int i = 0; i < HandshakeLoad::kKnownBurst; ++i) CHECK(load.spend_known(t0));
  CHECK_FALSE(load.spend_known(t0));
  // 20 ms is one initiation's worth of credit at 50 a second.
  CHECK_FALSE(load.spend_known(t0 + 19ms));
  CHECK(load.spend_known(t0 + 21ms));
  CHECK_FALSE(load.spend_known(t0 + 22ms));
  // A second of quiet refills the burst, no more.
  int allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += load.spend_known(t0 + 2s);
  CHECK(allowed == HandshakeLoad::kKnownBurst);
  // A flood through it gets 50 a second over a long run.
  allowed = 0;
  for (int ms = 0; ms < 10000; ++ms) allowed += load.spend_known(t0 + 3s + std::chrono::milliseconds(ms));
  CHECK(allowed >= 500);
  CHECK(allowed <= 500 + HandshakeLoad::kKnownBurst);
}

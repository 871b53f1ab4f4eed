// CookieChecker and CookieGenerator with a fake clock: mac1 under the receiver's key, mac2
// from a cookie reply, the 115 s cookie lifetime and the 120 s secret rotation.
//
//   sender: CookieGenerator(receiver pub)        receiver: CookieChecker(own pub)
//   add_macs(msg) ─────── msg (mac1, mac2=0) ───► check_mac1 ok, under load: no mac2
//   consume_reply ◄────── cookie reply ────────── create_reply(msg, src)
//   add_macs(msg2) ────── msg2 (mac1, mac2) ────► check_mac2(msg2, src) ok
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "wg/cookie.hpp"
#include "wg/crypto.hpp"
#include "wg/messages.hpp"

namespace {

using namespace std::chrono_literals;
using wg::Clock;
using wg::CookieChecker;
using wg::CookieGenerator;
using wg::TimePoint;
using Bytes = std::vector<uint8_t>;

constexpr Clock::duration kTick{1};
const TimePoint kT0 = TimePoint{} + 1000h;

// Source addresses as the device would pass them (IPv4 address and port).
constexpr std::array<uint8_t, 6> kSrc{192, 0, 2, 1, 0xca, 0x6c};
constexpr std::array<uint8_t, 6> kOtherSrc{192, 0, 2, 2, 0xca, 0x6c};
constexpr std::array<uint8_t, 6> kOtherPort{192, 0, 2, 1, 0xca, 0x6d};

// A handshake message of the given size with random contents and its type set; the MACs
// do not care what the rest holds.
Bytes message(size_t size) {
  Bytes m(size);
  wg::random_bytes(m.data(), m.size());
  m[0] = size == wg::kInitiationSize ? 1 : 2;
  m[1] = m[2] = m[3] = 0;
  return m;
}

std::span<const uint8_t> mac1_of(const Bytes& m) {
  return std::span<const uint8_t>(m).subspan(m.size() - 2 * wg::kMacLen, wg::kMacLen);
}
std::span<const uint8_t> mac2_of(const Bytes& m) {
  return std::span<const uint8_t>(m).subspan(m.size() - wg::kMacLen, wg::kMacLen);
}
bool is_zero(std::span<const uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t c) { return c == 0; });
}

// The receiver (checker) and a sender stamping messages for it (generator).
struct Setup {
  wg::PublicKey receiver = wg::crypto::public_key(wg::crypto::generate_private_key());
  CookieChecker checker;
  CookieGenerator generator;
  Setup() {
    checker.init(receiver);
    generator.init(receiver);
  }
  // Stamps msg, has the checker answer it with a cookie reply for src, consumes it.
  void get_cookie(Bytes& msg, std::span<const uint8_t> src, TimePoint now) {
    generator.add_macs(msg, now);
    auto reply = checker.create_reply(msg, 0x12345678, src, now);
    REQUIRE(generator.consume_reply(reply, now));
  }
};

}  // namespace

TEST_CASE("cookie: mac1 verifies under the receiver's key only", "[cookie]") {
  for (size_t size : {wg::kInitiationSize, wg::kResponseSize}) {
    CAPTURE(size);
    Setup s;
    Bytes m = message(size);
    s.generator.add_macs(m, kT0);
    CHECK(s.checker.check_mac1(m));

    // Another receiver's key.
    CookieChecker other;
    other.init(wg::crypto::public_key(wg::crypto::generate_private_key()));
    CHECK_FALSE(other.check_mac1(m));

    // mac1 covers every byte before it, and itself.
    for (size_t i = 0; i < size - wg::kMacLen; ++i) {
      Bytes t = m;
      t[i] ^= 0x01;
      CAPTURE(i);
      CHECK_FALSE(s.checker.check_mac1(t));
    }
    // mac2 is not covered by mac1.
    Bytes t = m;
    t[size - 1] ^= 0x01;
    CHECK(s.checker.check_mac1(t));
  }
}

TEST_CASE("cookie: mac1 of a message too short to hold the MACs fails", "[cookie]") {
  Setup s;
  Bytes m(2 * wg::kMacLen - 1);
  CHECK_FALSE(s.checker.check_mac1(m));
  CHECK_FALSE(s.checker.check_mac2(m, kSrc, kT0));
}

TEST_CASE("cookie: mac2 is zero without a cookie", "[cookie]") {
  Setup s;
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0);
  CHECK(is_zero(mac2_of(m)));
  CHECK_FALSE(is_zero(mac1_of(m)));
  // The checker has no secret yet, so no mac2 can verify.
  CHECK_FALSE(s.checker.check_mac2(m, kSrc, kT0));
}

TEST_CASE("cookie: after a cookie reply, mac2 verifies for the same source only", "[cookie]") {
  for (size_t size : {wg::kInitiationSize, wg::kResponseSize}) {
    CAPTURE(size);
    Setup s;
    Bytes first = message(size);
    s.get_cookie(first, kSrc, kT0);

    Bytes m = message(size);
    s.generator.add_macs(m, kT0 + 1s);
    CHECK_FALSE(is_zero(mac2_of(m)));
    CHECK(s.checker.check_mac1(m));
    CHECK(s.checker.check_mac2(m, kSrc, kT0 + 1s));
    CHECK_FALSE(s.checker.check_mac2(m, kOtherSrc, kT0 + 1s));
    CHECK_FALSE(s.checker.check_mac2(m, kOtherPort, kT0 + 1s));

    // mac2 covers every byte before it, mac1 included.
    for (size_t i = 0; i < size; ++i) {
      Bytes t = m;
      t[i] ^= 0x01;
      CAPTURE(i);
      CHECK_FALSE(s.checker.check_mac2(t, kSrc, kT0 + 1s));
    }
  }
}

TEST_CASE("cookie: a cookie reply is bound to the mac1 it answers", "[cookie]") {
  Setup s;
  Bytes a = message(wg::kInitiationSize);
  Bytes b = message(wg::kInitiationSize);
  s.generator.add_macs(a, kT0);

  SECTION("a reply to another message (wrong AD) is refused") {
    s.generator.add_macs(b, kT0);  // the generator now expects b's mac1
    auto reply = s.checker.create_reply(a, 1, kSrc, kT0);
    CHECK_FALSE(s.generator.consume_reply(reply, kT0));
  }
  SECTION("a reply to a message we never stamped is refused") {
    // b was never stamped: its mac1 field is random, not what the generator sent.
    auto reply = s.checker.create_reply(b, 1, kSrc, kT0);
    CHECK_FALSE(s.generator.consume_reply(reply, kT0));
  }
  SECTION("a reply before we stamped anything is refused") {
    CookieGenerator fresh;
    fresh.init(s.receiver);
    auto reply = s.checker.create_reply(a, 1, kSrc, kT0);
    CHECK_FALSE(fresh.consume_reply(reply, kT0));
  }
  SECTION("a reply encrypted for another receiver's key is refused") {
    CookieChecker other;
    other.init(wg::crypto::public_key(wg::crypto::generate_private_key()));
    auto reply = other.create_reply(a, 1, kSrc, kT0);
    CHECK_FALSE(s.generator.consume_reply(reply, kT0));
  }
  SECTION("a tampered reply is refused") {
    auto genuine = s.checker.create_reply(a, 1, kSrc, kT0);
    for (size_t i = offsetof(wg::MessageCookieReply, nonce); i < sizeof genuine; ++i) {
      auto reply = genuine;
      reinterpret_cast<uint8_t*>(&reply)[i] ^= 0x01;
      CAPTURE(i);
      CHECK_FALSE(s.generator.consume_reply(reply, kT0));
    }
    CHECK(s.generator.consume_reply(genuine, kT0));
  }
}

// As the kernel's have_sent_mac1: a reply is consumed once. A replayed reply (the cookie
// expired, or a newer one taken since) must not set a cookie again.
TEST_CASE("cookie: a cookie reply is consumed once, its replay refused", "[cookie]") {
  Setup s;
  Bytes a = message(wg::kInitiationSize);
  s.generator.add_macs(a, kT0);
  auto reply = s.checker.create_reply(a, 1, kSrc, kT0);
  REQUIRE(s.generator.consume_reply(reply, kT0));
  CHECK_FALSE(s.generator.consume_reply(reply, kT0 + 130s));
  // The cookie taken at kT0 has expired (120 s): mac2 is zero, not refreshed by the replay.
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0 + 130s);
  CHECK(is_zero(mac2_of(m)));
  // A message sent after it may take a reply again.
  auto second = s.checker.create_reply(m, 1, kSrc, kT0 + 130s);
  CHECK(s.generator.consume_reply(second, kT0 + 130s));
}

TEST_CASE("cookie: a refused reply leaves no cookie behind", "[cookie]") {
  Setup s;
  Bytes a = message(wg::kInitiationSize);
  Bytes b = message(wg::kInitiationSize);
  s.generator.add_macs(a, kT0);
  s.generator.add_macs(b, kT0);
  auto reply = s.checker.create_reply(a, 1, kSrc, kT0);
  REQUIRE_FALSE(s.generator.consume_reply(reply, kT0));
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0);
  CHECK(is_zero(mac2_of(m)));
}

TEST_CASE("cookie: the reply carries the receiver index and the cookie-reply type", "[cookie]") {
  Setup s;
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0);
  auto reply = s.checker.create_reply(m, 0xdeadbeef, kSrc, kT0);
  CHECK(reply.type == 3);
  CHECK(reply.receiver == 0xdeadbeef);
  const auto* p = reinterpret_cast<const uint8_t*>(&reply);
  CHECK(wg::classify_message(p, sizeof reply) == wg::MessageType::cookie_reply);
  // Fresh random nonces: two replies to the same message differ.
  auto again = s.checker.create_reply(m, 0xdeadbeef, kSrc, kT0);
  CHECK_FALSE(std::equal(reply.nonce, reply.nonce + sizeof reply.nonce, again.nonce));
}

TEST_CASE("cookie: a cookie is used for 115 s after it arrives", "[cookie]") {
  REQUIRE(wg::kCookieValidity == 115s);
  Setup s;
  Bytes first = message(wg::kInitiationSize);
  s.get_cookie(first, kSrc, kT0);

  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0 + 114900ms);
  CHECK_FALSE(is_zero(mac2_of(m)));
  CHECK(s.checker.check_mac2(m, kSrc, kT0 + 114900ms));

  s.generator.add_macs(m, kT0 + 115s - kTick);
  CHECK_FALSE(is_zero(mac2_of(m)));
  CHECK(s.checker.check_mac2(m, kSrc, kT0 + 115s - kTick));

  s.generator.add_macs(m, kT0 + 115s);
  CHECK(is_zero(mac2_of(m)));
  CHECK_FALSE(s.checker.check_mac2(m, kSrc, kT0 + 115s));

  SECTION("a new reply renews it") {
    s.get_cookie(m, kSrc, kT0 + 116s);
    s.generator.add_macs(m, kT0 + 116s + 114s);
    CHECK_FALSE(is_zero(mac2_of(m)));
    s.generator.add_macs(m, kT0 + 116s + 115s);
    CHECK(is_zero(mac2_of(m)));
  }
}

TEST_CASE("cookie: the checker's secret rotates after 120 s and old cookies fail", "[cookie]") {
  REQUIRE(wg::kCookieSecretMaxAge == 120s);
  Setup s;
  Bytes first = message(wg::kInitiationSize);
  s.get_cookie(first, kSrc, kT0);  // the checker's secret is born at kT0

  // A message stamped while the cookie is fresh.
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0 + 1s);
  REQUIRE_FALSE(is_zero(mac2_of(m)));

  CHECK(s.checker.check_mac2(m, kSrc, kT0 + 60s));
  CHECK(s.checker.check_mac2(m, kSrc, kT0 + 120s - kTick));
  CHECK_FALSE(s.checker.check_mac2(m, kSrc, kT0 + 120s));

  // Handing out a new cookie makes a new secret; the old mac2 still fails under it.
  Bytes second = message(wg::kInitiationSize);
  s.get_cookie(second, kSrc, kT0 + 121s);
  CHECK_FALSE(s.checker.check_mac2(m, kSrc, kT0 + 121s));
  Bytes fresh = message(wg::kInitiationSize);
  s.generator.add_macs(fresh, kT0 + 121s);
  CHECK(s.checker.check_mac2(fresh, kSrc, kT0 + 121s));
}

TEST_CASE("cookie: the secret does not rotate within 120 s", "[cookie]") {
  Setup s;
  Bytes m1 = message(wg::kInitiationSize);
  s.get_cookie(m1, kSrc, kT0);
  Bytes a = message(wg::kInitiationSize);
  s.generator.add_macs(a, kT0 + 1s);

  // A second cookie handed out before the rotation comes from the same secret, so the
  // first mac2 keeps verifying.
  Bytes m2 = message(wg::kInitiationSize);
  s.get_cookie(m2, kSrc, kT0 + 100s);
  CHECK(s.checker.check_mac2(a, kSrc, kT0 + 100s));
  Bytes b = message(wg::kInitiationSize);
  s.generator.add_macs(b, kT0 + 100s);
  CHECK(s.checker.check_mac2(b, kSrc, kT0 + 100s));
}

TEST_CASE("cookie: init resets the generator's cookie", "[cookie]") {
  Setup s;
  Bytes first = message(wg::kInitiationSize);
  s.get_cookie(first, kSrc, kT0);
  s.generator.init(s.receiver);
  Bytes m = message(wg::kInitiationSize);
  s.generator.add_macs(m, kT0 + 1s);
  CHECK(is_zero(mac2_of(m)));
}

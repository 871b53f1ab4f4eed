// Noise_IKpsk2 handshakes between two in-memory identities: session keys, the replay and
// flood rules, tampering, low-order points, and a frozen golden transcript
// (tests/vectors/golden_handshake.txt, cross-checked by golden_handshake_check.py).
//
//   initiator (Alice)                                  responder (Bob)
//   create_initiation ──── MessageInitiation ────► consume_initiation
//                                                  accept_initiation
//   consume_response  ◄─── MessageResponse ─────── create_response
//   derive_session                                 derive_session
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "wg/cookie.hpp"
#include "wg/crypto.hpp"
#include "wg/messages.hpp"
#include "wg/noise.hpp"

namespace {

using namespace std::chrono_literals;
using wg::Clock;
using wg::MessageInitiation;
using wg::MessageResponse;
using wg::PresharedKey;
using wg::PrivateKey;
using wg::PublicKey;
using wg::TimePoint;
using wg::noise::AcceptResult;
using wg::noise::Handshake;
using wg::noise::Identity;
using wg::noise::SessionKeys;
using wg::noise::State;
using wg::noise::Tai64n;
using Bytes = std::vector<uint8_t>;

constexpr Clock::duration kTick{1};

// --- hex, written out here so expected values do not pass through the code under test ---

std::string hex(std::span<const uint8_t> b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

template <class T>
std::string hex_of(const T& v) {
  return hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), sizeof v));
}

template <class K>
std::string key_hex(const K& k) {
  return hex(k.span());
}

Bytes unhex(const std::string& s) {
  auto nibble = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::runtime_error("bad hex: " + s);
  };
  if (s.size() % 2) throw std::runtime_error("odd-length hex: " + s);
  Bytes out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return out;
}

template <class K>
K key_from(const Bytes& b) {
  if (b.size() != wg::kKeyLen) throw std::runtime_error("key is not 32 bytes");
  return K(std::span<const uint8_t, wg::kKeyLen>(b.data(), wg::kKeyLen));
}

template <class K>
K key_filled(uint8_t first) {
  std::array<uint8_t, wg::kKeyLen> b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(first + i);
  return K(std::span<const uint8_t, wg::kKeyLen>(b));
}

// 8 bytes big-endian seconds, 4 bytes big-endian nanoseconds.
Tai64n timestamp(uint64_t secs, uint32_t nanos = 0) {
  Tai64n t;
  for (int i = 0; i < 8; ++i) t[i] = static_cast<uint8_t>(secs >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) t[8 + i] = static_cast<uint8_t>(nanos >> (24 - 8 * i));
  return t;
}

template <class M>
std::span<uint8_t> as_bytes(M& m) {
  return {reinterpret_cast<uint8_t*>(&m), sizeof m};
}

// Curve25519 points of small order (tests/vectors/x25519.txt, [LOW]): X25519 with any
// scalar gives all zeros, so a handshake with them must fail.
const char* const kLowOrderPoints[] = {
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
};

// Alice (initiator) and Bob (responder), each with its handshake state for the other.
struct Pair {
  Identity alice = Identity::from_private(wg::crypto::generate_private_key());
  Identity bob = Identity::from_private(wg::crypto::generate_private_key());
  Handshake a;  // Alice's state for Bob
  Handshake b;  // Bob's state for Alice
  TimePoint now = TimePoint{} + 1000h;

  explicit Pair(const PresharedKey& a_psk = {}, const PresharedKey& b_psk = {}) {
    a.remote_static = bob.public_key;
    a.preshared_key = a_psk;
    a.set_keys(alice);
    b.remote_static = alice.public_key;
    b.preshared_key = b_psk;
    b.set_keys(bob);
  }
};

uint64_t g_next_second = 0x400000006553f100;

// A strictly increasing timestamp for each initiation a test makes.
Tai64n next_timestamp() { return timestamp(++g_next_second); }

MessageInitiation initiate(Pair& p, uint32_t index = 0x11111111) {
  MessageInitiation init;
  REQUIRE(wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(),
                                       next_timestamp(), index, init));
  return init;
}

// Bob consumes, accepts and answers; the response is returned.
MessageResponse respond(Pair& p, const MessageInitiation& init, uint32_t index = 0x22222222) {
  auto in = wg::noise::consume_initiation(init, p.bob);
  REQUIRE(in);
  REQUIRE(wg::noise::accept_initiation(p.b, *in, p.now) == AcceptResult::accepted);
  MessageResponse resp;
  REQUIRE(wg::noise::create_response(p.b, wg::crypto::generate_private_key(), index, resp));
  return resp;
}

// The parts of a Handshake that a rejected message must leave alone.
struct Snapshot {
  State state;
  std::string hash, chaining_key, local_ephemeral, remote_ephemeral;
  uint32_t local_index, remote_index;
  explicit Snapshot(const Handshake& hs)
      : state(hs.state),
        hash(hex(std::span<const uint8_t>(hs.hash, wg::kHashLen))),
        chaining_key(key_hex(hs.chaining_key)),
        local_ephemeral(key_hex(hs.local_ephemeral)),
        remote_ephemeral(key_hex(hs.remote_ephemeral)),
        local_index(hs.local_index),
        remote_index(hs.remote_index) {}
  bool operator==(const Snapshot&) const = default;
};

}  // namespace

// --- complete handshakes ---------------------------------------------------------------------

TEST_CASE("noise: a handshake in memory yields crosswise session keys", "[noise]") {
  PresharedKey psk;
  SECTION("without a preshared key") {}
  SECTION("with a preshared key") { wg::random_bytes(psk.data(), psk.size()); }
  Pair p(psk, psk);

  MessageInitiation init;
  REQUIRE(wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(),
                                       next_timestamp(), 0xa1a1a1a1, init));
  CHECK(init.type == 1);
  CHECK(init.sender == 0xa1a1a1a1);
  CHECK(p.a.state == State::initiation_created);
  CHECK(p.a.local_index == 0xa1a1a1a1);

  auto in = wg::noise::consume_initiation(init, p.bob);
  REQUIRE(in);
  CHECK(in->remote_static == p.alice.public_key);
  CHECK(in->remote_index == 0xa1a1a1a1);
  REQUIRE(wg::noise::accept_initiation(p.b, *in, p.now) == AcceptResult::accepted);
  CHECK(p.b.state == State::initiation_consumed);
  CHECK(p.b.remote_index == 0xa1a1a1a1);

  MessageResponse resp;
  REQUIRE(wg::noise::create_response(p.b, wg::crypto::generate_private_key(), 0xb2b2b2b2, resp));
  CHECK(resp.type == 2);
  CHECK(resp.sender == 0xb2b2b2b2);
  CHECK(resp.receiver == 0xa1a1a1a1);
  CHECK(p.b.state == State::response_created);

  REQUIRE(wg::noise::consume_response(p.a, p.alice, resp));
  CHECK(p.a.state == State::response_consumed);
  CHECK(p.a.remote_index == 0xb2b2b2b2);

  auto ik = wg::noise::derive_session(p.a);
  auto rk = wg::noise::derive_session(p.b);
  REQUIRE(ik);
  REQUIRE(rk);
  CHECK(ik->initiator);
  CHECK_FALSE(rk->initiator);
  CHECK(ik->send == rk->receive);
  CHECK(ik->receive == rk->send);
  CHECK_FALSE(ik->send == ik->receive);
  CHECK_FALSE(ik->send.is_zero());
  CHECK_FALSE(ik->receive.is_zero());
  CHECK(ik->local_index == 0xa1a1a1a1);
  CHECK(ik->remote_index == 0xb2b2b2b2);
  CHECK(rk->local_index == 0xb2b2b2b2);
  CHECK(rk->remote_index == 0xa1a1a1a1);

  // derive_session forgets the ephemeral state; a second call has nothing to derive.
  CHECK(p.a.state == State::zeroed);
  CHECK(p.b.state == State::zeroed);
  CHECK(p.a.local_ephemeral.is_zero());
  CHECK(p.b.local_ephemeral.is_zero());
  CHECK_FALSE(wg::noise::derive_session(p.a));
  CHECK_FALSE(wg::noise::derive_session(p.b));
  // The static keys and the replay timestamp survive.
  CHECK(p.a.remote_static == p.bob.public_key);
  CHECK(p.b.latest_timestamp == in->timestamp);
}

TEST_CASE("noise: two handshakes give different session keys", "[noise]") {
  Pair p;
  MessageInitiation init = initiate(p);
  MessageResponse resp = respond(p, init);
  REQUIRE(wg::noise::consume_response(p.a, p.alice, resp));
  auto k1 = wg::noise::derive_session(p.a);
  REQUIRE(wg::noise::derive_session(p.b));

  p.now += 1s;
  init = initiate(p);
  resp = respond(p, init);
  REQUIRE(wg::noise::consume_response(p.a, p.alice, resp));
  auto k2 = wg::noise::derive_session(p.a);
  REQUIRE(k1);
  REQUIRE(k2);
  CHECK_FALSE(k1->send == k2->send);
  CHECK_FALSE(k1->receive == k2->receive);
}

TEST_CASE("noise: transport data sealed with one side's send key opens with the other's "
          "receive key",
          "[noise]") {
  Pair p;
  MessageInitiation init = initiate(p);
  MessageResponse resp = respond(p, init);
  REQUIRE(wg::noise::consume_response(p.a, p.alice, resp));
  auto ik = wg::noise::derive_session(p.a);
  auto rk = wg::noise::derive_session(p.b);
  REQUIRE(ik);
  REQUIRE(rk);

  const std::string text = "an IP packet, padded to 16 bytes";
  const std::span<const uint8_t> plain(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  Bytes sealed(plain.size() + wg::kAeadTagLen);
  Bytes opened(plain.size());

  for (uint64_t counter : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40}) {
    CAPTURE(counter);
    // Alice -> Bob
    wg::crypto::aead_seal(sealed.data(), ik->send.data(), counter, plain, {});
    CHECK(wg::crypto::aead_open(opened.data(), rk->receive.data(), counter, sealed, {}));
    CHECK(Bytes(plain.begin(), plain.end()) == opened);
    CHECK_FALSE(wg::crypto::aead_open(opened.data(), rk->send.data(), counter, sealed, {}));
    CHECK_FALSE(wg::crypto::aead_open(opened.data(), ik->receive.data(), counter, sealed, {}));
    CHECK_FALSE(wg::crypto::aead_open(opened.data(), rk->receive.data(), counter + 1, sealed, {}));
    // Bob -> Alice
    wg::crypto::aead_seal(sealed.data(), rk->send.data(), counter, plain, {});
    CHECK(wg::crypto::aead_open(opened.data(), ik->receive.data(), counter, sealed, {}));
    CHECK(Bytes(plain.begin(), plain.end()) == opened);
    CHECK_FALSE(wg::crypto::aead_open(opened.data(), ik->send.data(), counter, sealed, {}));
  }
}

TEST_CASE("noise: mismatched preshared keys fail at consume_response", "[noise]") {
  PresharedKey pa, pb;
  wg::random_bytes(pa.data(), pa.size());
  SECTION("both set, different") { wg::random_bytes(pb.data(), pb.size()); }
  SECTION("only the initiator has one") {}
  SECTION("only the responder has one") { std::swap(pa, pb); }
  Pair p(pa, pb);

  MessageInitiation init = initiate(p);
  // The initiation does not depend on the preshared key: Bob accepts it and answers.
  MessageResponse resp = respond(p, init);
  const Snapshot before(p.a);
  CHECK_FALSE(wg::noise::consume_response(p.a, p.alice, resp));
  CHECK(Snapshot(p.a) == before);
  CHECK(p.a.state == State::initiation_created);
  CHECK_FALSE(wg::noise::derive_session(p.a));
}

TEST_CASE("noise: only the addressed responder can consume an initiation", "[noise]") {
  Pair p;
  MessageInitiation init = initiate(p);
  const Identity carol = Identity::from_private(wg::crypto::generate_private_key());
  CHECK_FALSE(wg::noise::consume_initiation(init, carol));
  CHECK(wg::noise::consume_initiation(init, p.bob));
}

// --- replay and flood ------------------------------------------------------------------------

TEST_CASE("noise: accept_initiation rejects replayed and older timestamps", "[noise]") {
  Pair p;
  const uint64_t s = 0x4000000070000000;
  auto make = [&](const Tai64n& ts) {
    MessageInitiation init;
    REQUIRE(wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(), ts,
                                         7, init));
    auto in = wg::noise::consume_initiation(init, p.bob);
    REQUIRE(in);
    return *in;
  };
  auto first = make(timestamp(s, 0x10000000));
  REQUIRE(wg::noise::accept_initiation(p.b, first, p.now) == AcceptResult::accepted);
  const Snapshot accepted(p.b);

  p.now += 1s;  // well past the flood window
  SECTION("the same message again") {
    CHECK(wg::noise::accept_initiation(p.b, first, p.now) == AcceptResult::replayed);
  }
  SECTION("a new message with the same timestamp") {
    CHECK(wg::noise::accept_initiation(p.b, make(timestamp(s, 0x10000000)), p.now) ==
          AcceptResult::replayed);
  }
  SECTION("an older timestamp, by a nanosecond field") {
    CHECK(wg::noise::accept_initiation(p.b, make(timestamp(s, 0x0f000000)), p.now) ==
          AcceptResult::replayed);
  }
  SECTION("an older timestamp, by a second") {
    CHECK(wg::noise::accept_initiation(p.b, make(timestamp(s - 1, 0xff000000)), p.now) ==
          AcceptResult::replayed);
  }
  // A rejected initiation leaves the accepted one in place.
  CHECK(Snapshot(p.b) == accepted);
  CHECK(p.b.latest_timestamp == first.timestamp);

  SECTION("a newer timestamp is accepted") {
    auto newer = make(timestamp(s, 0x11000000));
    CHECK(wg::noise::accept_initiation(p.b, newer, p.now) == AcceptResult::accepted);
    CHECK(p.b.latest_timestamp == newer.timestamp);
  }
}

TEST_CASE("noise: a newer initiation within 20 ms of the last is a flood", "[noise]") {
  Pair p;
  const TimePoint t0 = p.now;
  auto first = wg::noise::consume_initiation(initiate(p), p.bob);
  auto second = wg::noise::consume_initiation(initiate(p), p.bob);
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(wg::noise::accept_initiation(p.b, *first, t0) == AcceptResult::accepted);
  const Snapshot accepted(p.b);

  CHECK(wg::noise::accept_initiation(p.b, *second, t0) == AcceptResult::flood);
  CHECK(wg::noise::accept_initiation(p.b, *second, t0 + 10ms) == AcceptResult::flood);
  CHECK(wg::noise::accept_initiation(p.b, *second, t0 + 20ms - kTick) == AcceptResult::flood);
  CHECK(Snapshot(p.b) == accepted);
  CHECK(p.b.latest_timestamp == first->timestamp);
  // A flood verdict does not move the window: it still runs from the accepted one.
  CHECK(wg::noise::accept_initiation(p.b, *second, t0 + 20ms + kTick) == AcceptResult::accepted);
  CHECK(p.b.latest_timestamp == second->timestamp);
  CHECK(p.b.last_initiation_consumption == t0 + 20ms + kTick);

  // A replay is reported as such even inside the window.
  CHECK(wg::noise::accept_initiation(p.b, *first, t0 + 20ms + 2 * kTick) ==
        AcceptResult::replayed);
}

// The kernel (noise.c: flood_attack = last_initiation_consumption + NSEC_PER_SEC /
// INITIATIONS_PER_SECOND > now) and wireguard-go (noise-protocol.go:
// lastInitiationConsumption.Add(HandshakeInitationRate).After(time.Now())) call it a flood
// only while now < last + 20 ms; at exactly 20 ms the initiation is accepted.
// wg/noise.cpp uses `now - last <= kHandshakeInitiationRate` and rejects it.
TEST_CASE("noise: an initiation exactly 20 ms after the last is not a flood", "[noise]") {
  Pair p;
  const TimePoint t0 = p.now;
  auto first = wg::noise::consume_initiation(initiate(p), p.bob);
  auto second = wg::noise::consume_initiation(initiate(p), p.bob);
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(wg::noise::accept_initiation(p.b, *first, t0) == AcceptResult::accepted);
  CHECK(wg::noise::accept_initiation(p.b, *second, t0 + wg::kHandshakeInitiationRate) ==
        AcceptResult::accepted);
}

// --- tampering -------------------------------------------------------------------------------

// Every byte before mac2 is covered: the AEADs and the hash chain cover type, ephemeral,
// encrypted_static and encrypted_timestamp; mac1 covers the sender index (and itself).
// consume_initiation does not look at mac1 (the device checks it first), so a message is
// rejected when either check fails. mac2 is only checked under load, with a cookie.
TEST_CASE("noise: a tampered initiation is rejected", "[noise]") {
  Pair p;
  MessageInitiation genuine = initiate(p);
  wg::CookieGenerator gen;
  gen.init(p.bob.public_key);
  gen.add_macs(as_bytes(genuine), p.now);
  wg::CookieChecker checker;
  checker.init(p.bob.public_key);
  REQUIRE(checker.check_mac1(as_bytes(genuine)));
  REQUIRE(wg::noise::consume_initiation(genuine, p.bob));

  const size_t kSender = offsetof(MessageInitiation, sender);
  const size_t kEphemeral = offsetof(MessageInitiation, ephemeral);
  const size_t kMac1 = offsetof(MessageInitiation, mac1);
  const size_t kMac2 = offsetof(MessageInitiation, mac2);
  for (size_t i = 0; i < kMac2; ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
      CAPTURE(i, int(flip));
      MessageInitiation m = genuine;
      as_bytes(m)[i] ^= flip;
      const bool mac1_ok = checker.check_mac1(as_bytes(m));
      const bool consumed = wg::noise::consume_initiation(m, p.bob).has_value();
      CHECK_FALSE((mac1_ok && consumed));
      CHECK_FALSE(mac1_ok);
      // Everything but the sender index and mac1 is the handshake's own business.
      const bool unauthenticated = (i >= kSender && i < kEphemeral) || i >= kMac1;
      if (!unauthenticated) CHECK_FALSE(consumed);
    }
  }
  // Bit 255 of the ephemeral is ignored by X25519 but still hashed into the transcript.
  MessageInitiation m = genuine;
  m.ephemeral[31] ^= 0x80;
  CHECK_FALSE(wg::noise::consume_initiation(m, p.bob));
}

TEST_CASE("noise: a tampered response is rejected and leaves the handshake unchanged",
          "[noise]") {
  Pair p;
  MessageInitiation init = initiate(p, 0x01020304);
  MessageResponse genuine = respond(p, init);
  wg::CookieGenerator gen;
  gen.init(p.alice.public_key);
  gen.add_macs(as_bytes(genuine), p.now);
  wg::CookieChecker checker;
  checker.init(p.alice.public_key);
  REQUIRE(checker.check_mac1(as_bytes(genuine)));
  const Snapshot before(p.a);

  const size_t kSender = offsetof(MessageResponse, sender);
  const size_t kReceiver = offsetof(MessageResponse, receiver);
  const size_t kMac1 = offsetof(MessageResponse, mac1);
  const size_t kMac2 = offsetof(MessageResponse, mac2);
  for (size_t i = 0; i < kMac2; ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
      CAPTURE(i, int(flip));
      MessageResponse m = genuine;
      as_bytes(m)[i] ^= flip;
      Handshake hs = p.a;
      const bool mac1_ok = checker.check_mac1(as_bytes(m));
      const bool consumed = wg::noise::consume_response(hs, p.alice, m);
      CHECK_FALSE(mac1_ok);
      const bool unauthenticated = (i >= kSender && i < kReceiver) || i >= kMac1;
      if (!unauthenticated) {
        CHECK_FALSE(consumed);
        CHECK(Snapshot(hs) == before);
      }
    }
  }
  // After all that, the genuine response still completes the handshake.
  CHECK(Snapshot(p.a) == before);
  REQUIRE(wg::noise::consume_response(p.a, p.alice, genuine));
  auto ik = wg::noise::derive_session(p.a);
  auto rk = wg::noise::derive_session(p.b);
  REQUIRE(ik);
  REQUIRE(rk);
  CHECK(ik->send == rk->receive);
}

TEST_CASE("noise: a response for another receiver index is rejected", "[noise]") {
  Pair p;
  MessageInitiation init = initiate(p, 0x0a0b0c0d);
  MessageResponse resp = respond(p, init);
  REQUIRE(resp.receiver == 0x0a0b0c0d);
  const Snapshot before(p.a);

  for (uint32_t wrong : {0u, 0x0a0b0c0cu, 0x0a0b0c0eu, 0xd0c0b0a0u, 0xffffffffu}) {
    CAPTURE(wrong);
    MessageResponse m = resp;
    m.receiver = wrong;
    CHECK_FALSE(wg::noise::consume_response(p.a, p.alice, m));
    CHECK(Snapshot(p.a) == before);
  }
  CHECK(wg::noise::consume_response(p.a, p.alice, resp));
}

TEST_CASE("noise: messages out of order are refused", "[noise]") {
  Pair p;
  MessageResponse resp{};
  SECTION("create_response before any initiation") {
    CHECK_FALSE(wg::noise::create_response(p.b, wg::crypto::generate_private_key(), 1, resp));
    CHECK_FALSE(wg::noise::derive_session(p.b));
  }
  SECTION("consume_response without an initiation in flight") {
    MessageInitiation init = initiate(p, 5);
    resp = respond(p, init);
    Handshake fresh = p.a;
    fresh.clear();
    fresh.local_index = 5;
    CHECK_FALSE(wg::noise::consume_response(fresh, p.alice, resp));
    // ...and a response consumed once cannot be consumed again.
    REQUIRE(wg::noise::consume_response(p.a, p.alice, resp));
    CHECK_FALSE(wg::noise::consume_response(p.a, p.alice, resp));
  }
  SECTION("a response is not an initiation and vice versa") {
    MessageInitiation init = initiate(p, 5);
    init.type = 2;
    CHECK_FALSE(wg::noise::consume_initiation(init, p.bob));
  }
}

// --- the kept static-static secret ----------------------------------------------------------

TEST_CASE("noise: a static-static secret kept for an earlier local key is recomputed for the key in use", "[noise]") {
  // The Device copies its identity, then uses the peer's Handshake: a private-key change
  // in between once left the secret for the old key marked current for good, and every
  // later initiation under the new key failed at the responder.
  Pair p;
  const Identity renewed = Identity::from_private(wg::crypto::generate_private_key());
  p.a.invalidate_keys();
  p.a.set_keys(p.alice);  // computed for the old key after the change was recorded
  MessageInitiation init;
  REQUIRE(wg::noise::create_initiation(p.a, renewed, wg::crypto::generate_private_key(),
                                       next_timestamp(), 1, init));
  auto in = wg::noise::consume_initiation(init, p.bob);
  REQUIRE(in);
  CHECK(in->remote_static == renewed.public_key);
  CHECK(*p.a.static_static_local == renewed.public_key);
}

TEST_CASE("noise: the responder's lookup is asked once for the initiator's static key and its secret decides", "[noise]") {
  Pair p;
  const MessageInitiation init = initiate(p);
  int asked = 0;
  PublicKey seen;
  auto kept = [&](const PublicKey& remote) -> std::optional<wg::SymmetricKey> {
    ++asked;
    seen = remote;
    return p.b.static_static(p.bob);
  };
  auto in = wg::noise::consume_initiation(init, p.bob, kept);
  REQUIRE(in);
  CHECK(asked == 1);
  CHECK(seen == p.alice.public_key);
  CHECK(wg::noise::accept_initiation(p.b, *in, p.now) == AcceptResult::accepted);

  // No peer with that key, or a secret that is not the pair's: rejected.
  CHECK_FALSE(wg::noise::consume_initiation(init, p.bob, [](const PublicKey&) {
    return std::optional<wg::SymmetricKey>{};
  }));
  CHECK_FALSE(wg::noise::consume_initiation(init, p.bob, [](const PublicKey&) {
    wg::SymmetricKey wrong;
    wg::random_bytes(wrong.data(), wrong.size());
    return std::optional<wg::SymmetricKey>(wrong);
  }));
  CHECK_FALSE(wg::noise::consume_initiation(init, p.bob, [](const PublicKey&) {
    return std::optional<wg::SymmetricKey>(wg::SymmetricKey{});  // all zero: a low-order key
  }));

  // A message that fails before the static key is decrypted never asks.
  MessageInitiation garbled = init;
  garbled.encrypted_static[0] ^= 1;
  asked = 0;
  CHECK_FALSE(wg::noise::consume_initiation(garbled, p.bob, kept));
  CHECK(asked == 0);
}

// --- low-order points ------------------------------------------------------------------------

TEST_CASE("noise: no initiation to a peer whose static key is a low-order point", "[noise]") {
  for (const char* point : kLowOrderPoints) {
    CAPTURE(point);
    Pair p;
    p.a.remote_static = key_from<PublicKey>(unhex(point));
    p.a.set_keys(p.alice);
    CHECK(p.a.precomputed_static_static.is_zero());
    MessageInitiation init;
    CHECK_FALSE(wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(),
                                             next_timestamp(), 1, init));
    CHECK(p.a.state == State::zeroed);
  }
}

TEST_CASE("noise: low-order ephemerals and statics in messages are rejected", "[noise]") {
  for (const char* point : kLowOrderPoints) {
    CAPTURE(point);
    const PublicKey low = key_from<PublicKey>(unhex(point));

    // An initiation whose ephemeral is a low-order point.
    Pair p;
    MessageInitiation init = initiate(p);
    std::memcpy(init.ephemeral, low.data(), wg::kKeyLen);
    CHECK_FALSE(wg::noise::consume_initiation(init, p.bob));

    // An initiator that claims a low-order static key (the message is otherwise valid:
    // it knows the private key it uses for the static-static step).
    Identity liar = p.alice;
    liar.public_key = low;
    Handshake hs;
    hs.remote_static = p.bob.public_key;
    hs.set_keys(liar);
    REQUIRE(wg::noise::create_initiation(hs, liar, wg::crypto::generate_private_key(),
                                         next_timestamp(), 1, init));
    CHECK_FALSE(wg::noise::consume_initiation(init, p.bob));

    // A response whose ephemeral is a low-order point.
    init = initiate(p, 9);
    MessageResponse resp = respond(p, init);
    std::memcpy(resp.ephemeral, low.data(), wg::kKeyLen);
    const Snapshot before(p.a);
    CHECK_FALSE(wg::noise::consume_response(p.a, p.alice, resp));
    CHECK(Snapshot(p.a) == before);
  }
}

// --- TAI64N ----------------------------------------------------------------------------------

TEST_CASE("noise: tai64n rounds nanoseconds down to 2^24 ns", "[noise]") {
  using std::chrono::system_clock;
  const auto t = system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(
      std::chrono::seconds(1234567890) + std::chrono::nanoseconds(123456789)));
  const Tai64n ts = wg::noise::tai64n(t);
  // 123456789 = 0x075bcd15; masked to a multiple of 2^24: 0x07000000.
  CHECK(hex(ts).substr(16) == "07000000");
  // Within one 2^24 ns step the label does not change; across it, it grows.
  CHECK(wg::noise::tai64n(t + std::chrono::nanoseconds(1)) == ts);
  CHECK(wg::noise::tai64n_after(wg::noise::tai64n(t + std::chrono::nanoseconds(1 << 24)), ts));
  CHECK(wg::noise::tai64n_after(wg::noise::tai64n(t + std::chrono::seconds(1)), ts));
  CHECK_FALSE(wg::noise::tai64n_after(ts, ts));
  CHECK_FALSE(wg::noise::tai64n_after(ts, wg::noise::tai64n(t + std::chrono::seconds(1))));
}

TEST_CASE("noise: tai64n_after compares big-endian, seconds first", "[noise]") {
  CHECK(wg::noise::tai64n_after(timestamp(2, 0), timestamp(1, 0xffffffff)));
  CHECK(wg::noise::tai64n_after(timestamp(1, 2), timestamp(1, 1)));
  CHECK(wg::noise::tai64n_after(timestamp(0x100, 0), timestamp(0xff, 0)));
  CHECK_FALSE(wg::noise::tai64n_after(timestamp(1, 1), timestamp(1, 1)));
  CHECK_FALSE(wg::noise::tai64n_after(Tai64n{}, Tai64n{}));
}

// TAI64 labels are 2^62 + TAI seconds; every WireGuard implementation writes the Unix
// time + 2^62 + 10 (the kernel's tai64n_now: 0x400000000000000aULL + now.tv_sec;
// wireguard-go's tai64n.base = 0x400000000000000a; libtai's TAI_EPOCH). wg/noise.cpp
// adds 2^62 only, so its timestamps run 10 s behind other implementations'.
TEST_CASE("noise: tai64n labels the Unix epoch as 2^62 + 10 like other implementations",
          "[noise]") {
  const Tai64n epoch = wg::noise::tai64n(std::chrono::system_clock::time_point{});
  CHECK(hex(epoch) == "400000000000000a00000000");
}

// --- golden transcript -----------------------------------------------------------------------

namespace {

// One `name = value` block of tests/vectors/golden_handshake.txt (format: see its header).
struct Block {
  int line = 0;
  std::map<std::string, std::string> fields;
  const std::string& at(const std::string& name) const {
    auto it = fields.find(name);
    if (it == fields.end())
      throw std::runtime_error("golden block at line " + std::to_string(line) + ": no " + name);
    return it->second;
  }
};

std::vector<Block> load_blocks(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<Block> out;
  Block cur;
  std::string last, raw;
  int lineno = 0;
  auto finish = [&] {
    if (!cur.fields.empty()) out.push_back(cur);
    cur = Block{};
    last.clear();
  };
  while (std::getline(in, raw)) {
    ++lineno;
    const auto b = raw.find_first_not_of(" \t\r");
    if (b == std::string::npos) {
      finish();
      continue;
    }
    const std::string line = raw.substr(b, raw.find_last_not_of(" \t\r") - b + 1);
    if (line[0] == '#') continue;
    if (b > 0) {  // continuation of the hex value above
      if (last.empty()) throw std::runtime_error("stray continuation at line " + std::to_string(lineno));
      cur.fields[last] += line;
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw std::runtime_error("no '=' at line " + std::to_string(lineno));
    auto strip = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    if (cur.fields.empty()) cur.line = lineno;
    last = strip(line.substr(0, eq));
    cur.fields[last] = strip(line.substr(eq + 1));
  }
  finish();
  return out;
}

uint32_t le32(const Bytes& b) {
  if (b.size() != 4) throw std::runtime_error("index is not 4 bytes");
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

}  // namespace

TEST_CASE("noise: the golden handshake transcript is unchanged", "[noise]") {
  const auto blocks = load_blocks(std::string(WGNET_VECTORS_DIR) + "/golden_handshake.txt");
  REQUIRE(blocks.size() == 2);
  for (const Block& v : blocks) {
    INFO("golden_handshake.txt:" << v.line);
    REQUIRE(v.at("kind") == "handshake");
    const Identity ini = Identity::from_private(key_from<PrivateKey>(unhex(v.at("initiator_static_private"))));
    const Identity res = Identity::from_private(key_from<PrivateKey>(unhex(v.at("responder_static_private"))));
    const auto ini_eph = key_from<PrivateKey>(unhex(v.at("initiator_ephemeral_private")));
    const auto res_eph = key_from<PrivateKey>(unhex(v.at("responder_ephemeral_private")));
    const auto psk = key_from<PresharedKey>(unhex(v.at("preshared_key")));
    const Bytes ts_bytes = unhex(v.at("timestamp"));
    REQUIRE(ts_bytes.size() == 12);
    Tai64n ts;
    std::copy(ts_bytes.begin(), ts_bytes.end(), ts.begin());
    const uint32_t ini_index = le32(unhex(v.at("initiator_index")));
    const uint32_t res_index = le32(unhex(v.at("responder_index")));
    const TimePoint now = TimePoint{} + 1000h;

    CHECK(key_hex(ini.public_key) == v.at("initiator_static_public"));
    CHECK(key_hex(res.public_key) == v.at("responder_static_public"));

    Handshake a, b;
    a.remote_static = res.public_key;
    a.preshared_key = psk;
    a.set_keys(ini);
    b.remote_static = ini.public_key;
    b.preshared_key = psk;
    b.set_keys(res);

    MessageInitiation init;
    REQUIRE(wg::noise::create_initiation(a, ini, ini_eph, ts, ini_index, init));
    wg::CookieGenerator to_responder;
    to_responder.init(res.public_key);
    to_responder.add_macs(as_bytes(init), now);
    CHECK(hex_of(init) == v.at("initiation"));

    auto in = wg::noise::consume_initiation(init, res);
    REQUIRE(in);
    CHECK(hex(in->timestamp) == v.at("timestamp"));
    REQUIRE(wg::noise::accept_initiation(b, *in, now) == AcceptResult::accepted);
    MessageResponse resp;
    REQUIRE(wg::noise::create_response(b, res_eph, res_index, resp));
    wg::CookieGenerator to_initiator;
    to_initiator.init(ini.public_key);
    to_initiator.add_macs(as_bytes(resp), now);
    CHECK(hex_of(resp) == v.at("response"));

    REQUIRE(wg::noise::consume_response(a, ini, resp));
    auto ik = wg::noise::derive_session(a);
    auto rk = wg::noise::derive_session(b);
    REQUIRE(ik);
    REQUIRE(rk);
    CHECK(key_hex(ik->send) == v.at("initiator_send"));
    CHECK(key_hex(ik->receive) == v.at("initiator_receive"));
    CHECK(key_hex(rk->send) == v.at("initiator_receive"));
    CHECK(key_hex(rk->receive) == v.at("initiator_send"));

    // The initiator's first transport message: a keepalive (empty payload), counter 0.
    wg::MessageTransportHeader header{4, res_index, 0};
    uint8_t keepalive[wg::kTransportMinSize];
    std::memcpy(keepalive, &header, sizeof header);
    wg::crypto::aead_seal(keepalive + sizeof header, ik->send.data(), 0, {}, {});
    CHECK(hex(keepalive) == v.at("initiator_keepalive"));
  }
}

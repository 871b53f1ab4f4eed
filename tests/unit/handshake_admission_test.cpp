// HandshakeAdmission on a fake clock: which handshake messages join the queue and which get
// a Diffie-Hellman, a cookie reply or nothing, without a device or a socket.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "wg/cookie.hpp"
#include "wg/crypto.hpp"
#include "wg/handshake_admission.hpp"
#include "wg/handshake_load.hpp"
#include "wg/messages.hpp"
#include "wg/ratelimiter.hpp"

namespace {

using namespace std::chrono_literals;
using wg::HandshakeAdmission;
using wg::MessageType;
using wg::TimePoint;
using Verdict = HandshakeAdmission::Verdict;
using Bytes = std::vector<uint8_t>;

const TimePoint kT0 = TimePoint{} + 1000h;
constexpr size_t kLimit = 64;  // the queue's bound; its mark (under load) is 8
constexpr std::array<uint8_t, 6> kSrc{198, 18, 0, 1, 0xca, 0x6c};
constexpr std::array<uint8_t, 6> kPeerSrc{198, 18, 0, 2, 0xca, 0x6c};
const std::optional<wg::IpAddress> kIp = wg::IpAddress::parse("198.18.0.1");

// Our side (the admission) and a sender stamping messages for us.
struct Setup {
  wg::PublicKey ours = wg::crypto::public_key(wg::crypto::generate_private_key());
  HandshakeAdmission admission{kLimit};
  wg::CookieGenerator sender;
  Setup() {
    admission.set_identity(ours);
    sender.init(ours);
  }
  // An initiation with random contents and valid mac1 (and mac2 once a cookie came).
  Bytes initiation(TimePoint now) {
    Bytes m(wg::kInitiationSize);
    wg::random_bytes(m.data(), m.size());
    m[0] = 1;
    m[1] = m[2] = m[3] = 0;
    sender.add_macs(m, now);
    return m;
  }
  // The sender gets a cookie for kSrc, as after a cookie reply.
  void cookie(TimePoint now) {
    Bytes m = initiation(now);
    auto reply = admission.cookie_reply(m, 7, kSrc, now);
    REQUIRE(sender.consume_reply(reply, now));
  }
  Verdict admit(const Bytes& m, bool load, TimePoint now, std::span<const uint8_t> src = kSrc) {
    return admission.admit(m, MessageType::initiation, src, kIp, load, now);
  }
};

}  // namespace

TEST_CASE("handshake admission: a bad mac1 is dropped, a good one consumed when not under load",
          "[handshake_admission]") {
  Setup s;
  Bytes m = s.initiation(kT0);
  CHECK(s.admit(m, false, kT0) == Verdict::consume);
  m[10] ^= 1;
  CHECK(s.admit(m, false, kT0) == Verdict::drop);
  CHECK(s.admit(m, true, kT0) == Verdict::drop);
}

TEST_CASE("handshake admission: under load, no cookie gets a cookie reply, a cookie is consumed",
          "[handshake_admission]") {
  Setup s;
  CHECK(s.admit(s.initiation(kT0), true, kT0) == Verdict::cookie_reply);
  s.cookie(kT0);
  const Bytes m = s.initiation(kT0 + 1s);
  CHECK(s.admit(m, true, kT0 + 1s) == Verdict::consume);
  // The cookie proves kSrc only.
  CHECK(s.admit(m, true, kT0 + 1s, kPeerSrc) == Verdict::cookie_reply);
}

TEST_CASE("handshake admission: under load, a proven source is rate-limited", "[handshake_admission]") {
  Setup s;
  s.cookie(kT0);
  int consumed = 0;
  for (int i = 0; i < 100; ++i) consumed += s.admit(s.initiation(kT0), true, kT0) == Verdict::consume;
  CHECK(consumed == wg::RateLimiter::kPacketsBurstable);
  // A second later, the bucket has refilled for kPacketsPerSecond more (capped at the burst).
  consumed = 0;
  for (int i = 0; i < 100; ++i) consumed += s.admit(s.initiation(kT0 + 1s), true, kT0 + 1s) == Verdict::consume;
  CHECK(consumed == wg::RateLimiter::kPacketsBurstable);
  // Without an address to limit, nothing is consumed.
  const Bytes m = s.initiation(kT0 + 2s);
  CHECK(s.admission.admit(m, MessageType::initiation, kSrc, std::nullopt, true, kT0 + 2s) == Verdict::drop);
}

TEST_CASE("handshake admission: a known endpoint skips the cookie within its budget, while it is known",
          "[handshake_admission]") {
  Setup s;
  s.admission.endpoint_moved(std::nullopt, std::span<const uint8_t>(kPeerSrc));
  CHECK(s.admission.known(kPeerSrc));
  int consumed = 0;
  for (int i = 0; i < 100; ++i)
    consumed += s.admit(s.initiation(kT0), true, kT0, kPeerSrc) == Verdict::consume;
  CHECK(consumed == wg::HandshakeLoad::kKnownBurst);
  // A response from there gets no such pass.
  Bytes r(wg::kResponseSize);
  wg::random_bytes(r.data(), r.size());
  r[0] = 2;
  r[1] = r[2] = r[3] = 0;
  s.sender.add_macs(r, kT0 + 10s);
  CHECK(s.admission.admit(r, MessageType::response, kPeerSrc, kIp, true, kT0 + 10s) == Verdict::cookie_reply);
  // Counted: two peers there, one leaves, it stays known; the other leaves too, it is not.
  s.admission.endpoint_moved(std::nullopt, std::span<const uint8_t>(kPeerSrc));
  s.admission.endpoint_moved(std::span<const uint8_t>(kPeerSrc), std::nullopt);
  CHECK(s.admission.known(kPeerSrc));
  s.admission.endpoint_moved(std::span<const uint8_t>(kPeerSrc), std::span<const uint8_t>(kSrc));
  CHECK_FALSE(s.admission.known(kPeerSrc));
  CHECK(s.admission.known(kSrc));
  CHECK(s.admit(s.initiation(kT0 + 20s), true, kT0 + 20s, kPeerSrc) == Verdict::cookie_reply);
}

TEST_CASE("handshake admission: the queue's door past its bound", "[handshake_admission]") {
  Setup s;
  const Bytes plain = s.initiation(kT0);
  CHECK(s.admission.may_queue(plain, MessageType::initiation, kSrc, kLimit - 1, kT0));
  CHECK_FALSE(s.admission.may_queue(plain, MessageType::initiation, kSrc, kLimit, kT0));
  // Past the bound: a valid mac2, or an initiation from a known endpoint.
  s.cookie(kT0);
  const Bytes proven = s.initiation(kT0 + 1s);
  CHECK(s.admission.may_queue(proven, MessageType::initiation, kSrc, kLimit, kT0 + 1s));
  s.admission.endpoint_moved(std::nullopt, std::span<const uint8_t>(kPeerSrc));
  CHECK(s.admission.may_queue(plain, MessageType::initiation, kPeerSrc, kLimit, kT0 + 1s));
  CHECK_FALSE(s.admission.may_queue(plain, MessageType::response, kPeerSrc, kLimit, kT0 + 1s));
  // Past the bound and an eighth: nothing.
  CHECK_FALSE(s.admission.may_queue(proven, MessageType::initiation, kSrc, kLimit + kLimit / 8, kT0 + 1s));
  CHECK_FALSE(s.admission.may_queue(plain, MessageType::initiation, kPeerSrc, kLimit + kLimit / 8, kT0 + 1s));
}

TEST_CASE("handshake admission: under load from an eighth of the queue, for a second after", "[handshake_admission]") {
  Setup s;
  CHECK_FALSE(s.admission.under_load(kLimit / 8 - 1, kT0));
  CHECK(s.admission.under_load(kLimit / 8, kT0));
  CHECK(s.admission.under_load(0, kT0 + wg::HandshakeLoad::kHold - 1ns));
  CHECK_FALSE(s.admission.under_load(0, kT0 + wg::HandshakeLoad::kHold));
}

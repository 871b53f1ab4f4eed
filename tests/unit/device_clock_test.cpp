// The protocol's timers end to end through two wg::Devices on a clock the test moves
// (DeviceOptions::clock): keepalive after 10 s, rekey after 120 s, no sending on keys
// older than 180 s, keys zeroed after 540 s, handshake retries after 5 s plus jitter and
// the give-up after them. Nothing sleeps: each move is followed by clock_moved(), which
// returns once the timer thread ran for the new time; what the other side does with the
// result is waited for with a bound.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "../support/device_pair.hpp"
#include "../support/eventually.hpp"
#include "../support/peer_access.hpp"

using namespace wg;
using namespace std::chrono_literals;

namespace {

const PeerAccess kAccess = PeerTestAccess::key();

struct FakeClock {
  const TimePoint base = Clock::now();
  std::atomic<Clock::rep> offset{0};
  TimePoint now() const { return base + Clock::duration(offset.load()); }
  Clock::duration elapsed() const { return Clock::duration(offset.load()); }
  void advance(Clock::duration d) { offset.fetch_add(d.count()); }
};

// Every datagram on the network, by sender; either direction can be cut.
struct Wire {
  struct Seen {
    uint16_t from;
    uint32_t type;
    size_t size;
    uint32_t receiver;  // transport messages: the receiver's index
    Clock::duration at; // the fake clock when sent
  };
  std::mutex mu;
  std::vector<Seen> seen;
  std::atomic<uint16_t> cut_from{0};  // datagrams from this port are dropped

  size_t count(uint16_t from, MessageType type, size_t size = 0) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (auto& s : seen)
      if (s.from == from && s.type == static_cast<uint32_t>(type) && (!size || s.size == size)) ++n;
    return n;
  }
  std::vector<Seen> all() {
    std::lock_guard lock(mu);
    return seen;
  }
};

constexpr size_t kKeepaliveSize = 32;  // header 16 + tag 16

using wgtest::eventually;
using wgtest::ip4_packet;  // (src, dst, sequence number)

// The pair on a clock of its own, every datagram seen by the Wire.
struct Pair {
  FakeClock clock;
  Wire wire;
  // The wall clock moves with the device clock: an initiation's TAI64N timestamp (wall
  // time in steps of 2^24 ns, as the kernel sends it) must be later than the last one a
  // responder took, and these tests move time by seconds between handshakes.
  const std::chrono::system_clock::time_point wall_base = std::chrono::system_clock::now();
  wgtest::DevicePair pair{DeviceOptions{
      .clock = [this] { return clock.now(); },
      .wall_clock = [this] { return wall_base + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                    clock.elapsed()); },
      .error_backoff = {}}};
  wgtest::DeviceNode& a = pair.a;
  wgtest::DeviceNode& b = pair.b;
  PeerPtr a_to_b = pair.a_to_b, b_to_a = pair.b_to_a;

  Pair() {
    pair.net.set_filter([this](uint16_t from, uint16_t, std::span<const uint8_t> d) {
      Wire::Seen s{from, 0, d.size(), 0, clock.elapsed()};
      if (d.size() >= 4) std::memcpy(&s.type, d.data(), 4);
      if (d.size() >= 8) std::memcpy(&s.receiver, d.data() + 4, 4);
      std::lock_guard lock(wire.mu);
      wire.seen.push_back(s);
      return from != wire.cut_from.load();
    });
  }
  uint16_t pa() const { return a.dev.listen_port(); }
  uint16_t pb() const { return b.dev.listen_port(); }

  void advance(Clock::duration d) {
    clock.advance(d);
    REQUIRE(a.dev.clock_moved());
    REQUIRE(b.dev.clock_moved());
  }
  // 10 s on: b's keepalive for a's first packet, waited for until a has taken it (else
  // a, having sent data and heard nothing, would re-handshake at 15 s).
  void keepalive_from_b() {
    const uint64_t before = a_to_b->stats().rx_bytes.load();  // the handshake response
    advance(10s);
    REQUIRE(eventually([&] { return wire.count(pb(), MessageType::transport, kKeepaliveSize) == 1; }));
    REQUIRE(eventually([&] { return a_to_b->stats().rx_bytes.load() > before; }));
  }
  // a → b, as the first packet: the handshake (a initiates), then the packet.
  void first_packet() {
    a.tun.inject(ip4_packet(1, 2, 0x11));
    auto got = b.tun.take(5s);
    REQUIRE(got);
    REQUIRE(*got == ip4_packet(1, 2, 0x11));
    REQUIRE(a.dev.stats().handshakes_completed == 1);
  }
};

}  // namespace

TEST_CASE("device clock: data received and nothing sent back gets a keepalive at 10 s, not before",
          "[device][clock]") {
  Pair pr;
  pr.first_packet();
  const uint64_t before = pr.a_to_b->stats().rx_bytes.load();
  pr.advance(9900ms);
  CHECK(pr.wire.count(pr.pb(), MessageType::transport, kKeepaliveSize) == 0);
  pr.advance(100ms);
  // (A keepalive goes through the sending pipeline, perhaps another thread: waited for.)
  CHECK(eventually([&] { return pr.wire.count(pr.pb(), MessageType::transport, kKeepaliveSize) == 1; }));
  // The keepalive reached a and authenticated there.
  CHECK(eventually([&] { return pr.a_to_b->stats().rx_bytes.load() > before; }));
  // a got nothing but a keepalive: it owes none back.
  pr.advance(11s);
  CHECK(pr.wire.count(pr.pa(), MessageType::transport, kKeepaliveSize) == 0);
}

TEST_CASE("device clock: the initiator re-keys on a send past 120 s into the session, not at 119 s", "[device][clock]") {
  Pair pr;
  pr.first_packet();
  pr.keepalive_from_b();
  pr.advance(109s);
  pr.a.tun.inject(ip4_packet(1, 2, 0x22));
  REQUIRE(pr.b.tun.take(5s));
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == 1);
  pr.advance(1001ms);
  pr.a.tun.inject(ip4_packet(1, 2, 0x33));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 0x33));  // sent on the old session, which is still good
  CHECK(eventually([&] { return pr.a.dev.stats().handshakes_completed.load() == 2; }));
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == 2);
  // b's side is complete when a's first packet under the new keys (its keepalive after
  // the response) arrives.
  CHECK(eventually([&] { return pr.b.dev.stats().handshakes_completed.load() == 2; }));
}

TEST_CASE("device clock: keys 180 s old send nothing, the packet waits for a new handshake", "[device][clock]") {
  Pair pr;
  pr.first_packet();
  uint32_t old_index = 0;
  for (auto& s : pr.wire.all())
    if (s.from == pr.pa() && s.type == static_cast<uint32_t>(MessageType::transport)) old_index = s.receiver;
  REQUIRE(old_index != 0);
  pr.keepalive_from_b();        // (so that neither side re-handshakes on its own)
  pr.wire.cut_from = pr.pb();  // b's answers are lost from here on
  pr.advance(170s);
  pr.a.tun.inject(ip4_packet(1, 2, 0x44));
  REQUIRE(eventually([&] { return pr.wire.count(pr.pa(), MessageType::initiation) == 2; }));
  REQUIRE(eventually([&] { return pr.wire.count(pr.pb(), MessageType::response) == 2; }));  // and lost
  // The link heals; a's retry gets through and the packet that waited follows.
  pr.wire.cut_from = 0;
  pr.advance(kRekeyTimeout + kRekeyTimeoutJitterMax);
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 0x44));
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == 3);
  // Nothing went out under the old keys once they were 180 s old.
  size_t late_old = 0, late_new = 0;
  for (auto& s : pr.wire.all()) {
    if (s.from != pr.pa() || s.type != static_cast<uint32_t>(MessageType::transport) || s.at < 180s) continue;
    (s.receiver == old_index ? late_old : late_new)++;
  }
  CHECK(late_old == 0);
  CHECK(late_new >= 1);
}

TEST_CASE("device clock: session keys are zeroed 540 s after they were made", "[device][clock]") {
  Pair pr;
  pr.first_packet();
  pr.keepalive_from_b();
  CHECK(pr.a_to_b->has_session_keys());
  CHECK(pr.b_to_a->has_session_keys());
  pr.advance(529s);
  CHECK(pr.a_to_b->has_session_keys());
  CHECK(pr.b_to_a->has_session_keys());
  pr.advance(2s);
  CHECK_FALSE(pr.a_to_b->has_session_keys());
  CHECK_FALSE(pr.b_to_a->has_session_keys());
  // Nothing re-keyed meanwhile: an idle tunnel stays quiet.
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == 1);
  CHECK(pr.wire.count(pr.pb(), MessageType::initiation) == 0);
}

TEST_CASE("device clock: an unanswered initiation is retried every 5 s plus jitter, then given up",
          "[device][clock]") {
  Pair pr;
  pr.wire.cut_from = pr.pa();  // b never hears a
  pr.a.tun.inject(ip4_packet(1, 2, 0x55));
  REQUIRE(eventually([&] { return pr.wire.count(pr.pa(), MessageType::initiation) == 1; }));
  constexpr auto kStep = 10ms;
  std::vector<Clock::duration> gaps;
  Clock::duration last = 0s;
  pr.advance(kRekeyTimeout - kStep);
  // Steps of 10 ms: each retry is seen within the step its deadline falls in.
  for (int steps = 0; steps < 20 * 60 && gaps.size() < size_t(kMaxTimerHandshakes + 1); ++steps) {
    const size_t before = pr.wire.count(pr.pa(), MessageType::initiation);
    pr.clock.advance(kStep);
    REQUIRE(pr.a.dev.clock_moved());
    if (pr.wire.count(pr.pa(), MessageType::initiation) > before) {
      gaps.push_back(pr.clock.elapsed() - last);
      last = pr.clock.elapsed();
      pr.clock.advance(kRekeyTimeout - 2 * kStep);
    }
  }
  REQUIRE(gaps.size() == size_t(kMaxTimerHandshakes + 1));
  auto lo = gaps[0], hi = gaps[0];
  for (auto g : gaps) {
    CHECK(g >= kRekeyTimeout);
    CHECK(g < kRekeyTimeout + kRekeyTimeoutJitterMax + kStep);
    lo = std::min(lo, g);
    hi = std::max(hi, g);
  }
  CHECK(hi - lo >= 2 * kStep);  // jittered, not a fixed period
  // Given up: no more initiations, the waiting packet dropped.
  pr.advance(2 * (kRekeyTimeout + kRekeyTimeoutJitterMax));
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == size_t(kMaxTimerHandshakes + 2));
  pr.advance(60s);
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == size_t(kMaxTimerHandshakes + 2));
  // The packet that waited was dropped at the give-up: after the link heals, a new one
  // handshakes and arrives alone.
  pr.wire.cut_from = 0;
  pr.a.tun.inject(ip4_packet(1, 2, 0x66));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 0x66));
  // Nothing after it either: a packet sent next is the next to arrive.
  pr.a.tun.inject(ip4_packet(1, 2, 0x67));
  got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 0x67));
}

// The timer thread held the peers it had scanned (removed ones too) through its sleep,
// until its next round: a removed peer, its state and memory lived on for up to a
// second after `wg set ... remove`, and receive_fuzz saw every input's peer freed in the
// next input (LeakSanitizer ran after one input in twenty, half the campaign's time).
TEST_CASE("device clock: a removed peer is freed by the timer round that drops it, not after the next sleep",
          "[device][clock]") {
  Pair pr;
  // An initiation sent on this thread, its answer lost: a's peer has an armed retry timer
  // (so it is on a's timer list) and no other thread of a's holds it (a data packet
  // would leave it in a's sending pipeline for a moment: this test failed 1 run in 40
  // under load that way).
  pr.wire.cut_from = pr.pb();
  pr.a.dev.initiate_handshake(*pr.a_to_b);
  REQUIRE(pr.wire.count(pr.pa(), MessageType::initiation) == 1);
  REQUIRE(pr.a.dev.clock_moved());  // a round has taken it into its scan and kept it
  std::weak_ptr<Peer> gone = pr.a_to_b;
  pr.a_to_b.reset();
  pr.pair.a_to_b.reset();
  pr.a.dev.remove_peer(pr.b.pub());
  REQUIRE(pr.a.dev.clock_moved());  // a whole timer round began after the removal
  CHECK(gone.expired());
}

// A peer not listening yet (a service started just after its client): the network
// refuses the initiation (ICMP port unreachable, here the memory network's report), and
// the retry comes 100 ms after it, then 200, 400, ... instead of REKEY_TIMEOUT later, so
// the packet that waits goes soon after the peer is up.
TEST_CASE("device clock: a refused initiation is retried after 100 ms, doubling, until the peer listens",
          "[device][clock]") {
  Pair pr;
  pr.b.dev.down();  // b's port is closed: datagrams to it are refused
  pr.a.tun.inject(ip4_packet(1, 2, 0x77));
  REQUIRE(eventually([&] { return pr.wire.count(pr.pa(), MessageType::initiation) == 1; }));
  // The refusal reaches a's timers from its receive thread: wait for the moved deadline.
  auto retry_after = [&](Clock::duration gap) {
    return eventually([&] {
      auto sent = pr.a_to_b->last_initiation(kAccess);
      auto next = pr.a_to_b->with_timers(kAccess, [](Timers& t) { return t.next_deadline(); });
      return sent && next && *next == *sent + gap;
    });
  };
  constexpr auto kStep = 10ms;
  Clock::duration last = 0s;
  for (auto gap : {100ms, 200ms, 400ms}) {
    REQUIRE(retry_after(gap));
    const size_t before = pr.wire.count(pr.pa(), MessageType::initiation);
    Clock::duration waited = 0s;
    while (pr.wire.count(pr.pa(), MessageType::initiation) == before && waited < 1s) {
      pr.clock.advance(kStep);
      waited += kStep;
      REQUIRE(pr.a.dev.clock_moved());
    }
    const auto at = pr.clock.elapsed();
    CHECK(at - last >= gap);
    CHECK(at - last < gap + kStep);
    last = at;
  }
  CHECK(pr.a_to_b->with_timers(kAccess, [](Timers& t) { return t.handshake_attempts(); }) == 0);
  // The fourth was refused too; then b comes up, the next retry (800 ms on) is answered
  // and the packet that waited follows.
  REQUIRE(retry_after(800ms));
  REQUIRE(!pr.b.dev.up());
  pr.advance(800ms);
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 0x77));
  CHECK(pr.wire.count(pr.pa(), MessageType::initiation) == 5);
}

TEST_CASE("device clock: buffers a burst needed and that then stayed idle for 10 s are freed", "[device][clock]") {
  Pair pr;
  // Packets staged while no handshake completes hold a buffer each; once sent, the
  // buffers are idle in a's pool.
  pr.wire.cut_from = pr.pa();
  constexpr uint32_t kBurst = 100;
  const BufferPool& pool = pr.a.dev.buffers();
  const size_t in_use = pool.allocated() - pool.idle();
  for (uint32_t i = 0; i < kBurst; ++i) pr.a.tun.inject(ip4_packet(1, 2, i));
  REQUIRE(eventually([&] { return pool.allocated() - pool.idle() >= in_use + kBurst; }));
  pr.wire.cut_from = 0;
  pr.advance(kRekeyTimeout + kRekeyTimeoutJitterMax);
  for (uint32_t i = 0; i < kBurst; ++i) REQUIRE(pr.b.tun.take(5s));
  // Sparse traffic after the burst, one packet each way at a time: a's TUN reader and
  // its receiver read one where they had read many, for a whole run of reads.
  for (uint32_t i = 0; i < ReadDepth::kWindow; ++i) {
    pr.b.tun.inject(ip4_packet(2, 1, i));
    REQUIRE(pr.a.tun.take(5s));
    pr.a.tun.inject(ip4_packet(1, 2, kBurst + i));
    REQUIRE(pr.b.tun.take(5s));
  }
  pr.keepalive_from_b();  // the last datagram of the exchange: quiet from here on
  REQUIRE(eventually([&] { return pool.idle() >= kBurst; }));
  const size_t allocated = pool.allocated(), idle = pool.idle();
  // A trim frees what stayed idle since the one before; by the second after the quiet
  // began, all but 16 are gone, and what is in use (the readers' next reads) stays.
  pr.advance(11s);
  pr.advance(11s);
  CHECK(pool.idle() == 16);
  CHECK(pool.allocated() == allocated - (idle - 16));
  // After those sparse reads the TUN reader and the receiver hold ReadDepth::kMin
  // buffers each, not the batch the burst grew them to.
  CHECK(pool.allocated() - pool.idle() <= 2 * ReadDepth::kMin);
  // Buffers are mapped again as traffic needs them.
  for (uint32_t i = 0; i < kBurst; ++i) pr.a.tun.inject(ip4_packet(1, 2, i));
  for (uint32_t i = 0; i < kBurst; ++i) REQUIRE(pr.b.tun.take(5s));
}

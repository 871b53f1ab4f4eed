// One peer's path blocked does not hold up the others: a Bind whose sends to peer b
// wait at a gate the test opens (a socket buffer that stays full), while the device's
// timers, on a clock the test moves, keep peer c's keepalive, handshake retransmission
// and key zeroing on time. What waited for b reaches it in order once the gate opens.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "../support/device_pair.hpp"
#include "../support/eventually.hpp"

using namespace wg;
using namespace std::chrono_literals;
using wgtest::eventually;
using wgtest::ip4_packet;
using wgtest::seq_of;

namespace {

struct FakeClock {
  const TimePoint base = Clock::now();
  std::atomic<Clock::rep> offset{0};
  TimePoint now() const { return base + Clock::duration(offset.load()); }
  void advance(Clock::duration d) { offset.fetch_add(d.count()); }
};

// Sends to `blocked_port` wait while the gate is shut: at most 10 s, after which the gate
// counts as broken (so that a device stuck behind it fails the test instead of hanging).
class GatedBind final : public conn::Bind {
public:
  explicit GatedBind(conn::MemoryNetwork& net) : real_(net) {}
  std::vector<conn::ReceiveFn> open(uint16_t port, uint16_t& actual, std::error_code& ec) override {
    return real_.open(port, actual, ec);
  }
  void close() override {
    open_gate();
    real_.close();
  }
  void send(std::span<const std::span<const uint8_t>> bufs, conn::Endpoint& ep, std::error_code& ec) override {
    if (ep.port == blocked_port.load()) {
      std::unique_lock lock(mu_);
      ++waiting_;
      if (!cv_.wait_for(lock, 10s, [&] { return open_; })) broken_ = true;
      --waiting_;
    }
    real_.send(bufs, ep, ec);
  }
  void set_mark(uint32_t mark, std::error_code& ec) override { real_.set_mark(mark, ec); }
  size_t batch_size() const override { return real_.batch_size(); }
  void set_unreachable(conn::UnreachableFn fn) override { real_.set_unreachable(std::move(fn)); }

  void shut_gate() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void open_gate() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Shut and never broken: everything to blocked_port waits.
  bool holding() {
    std::lock_guard lock(mu_);
    return !open_ && !broken_;
  }
  bool broken() {
    std::lock_guard lock(mu_);
    return broken_;
  }
  int waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }
  std::atomic<uint16_t> blocked_port{0};

private:
  conn::MemoryBind real_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  bool broken_ = false;
  int waiting_ = 0;
};

constexpr size_t kKeepaliveSize = 32;

struct Seen {
  uint16_t from, to;
  uint32_t type;
  size_t size;
  bool held;  // b's path was blocked when this went
};

}  // namespace

TEST_CASE("device: a peer whose sends block holds up no other peer's timers", "[device][clock]") {
  FakeClock clock;
  const auto wall_base = std::chrono::system_clock::now();
  DeviceOptions opts{.workers = 2,
                     .clock = [&] { return clock.now(); },
                     .wall_clock = [&] { return wall_base + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                                clock.now() - clock.base); },
                     .error_backoff = {}};
  // What the network's filter touches outlives every device sending through it.
  std::mutex mu;
  std::vector<Seen> seen;
  std::atomic<uint16_t> drop_from{0};
  conn::MemoryNetwork net;
  tun::MemoryDevice a_tun;
  GatedBind a_bind(net);
  Device a(a_tun, a_bind, opts);
  wgtest::DeviceNode b(net, opts), c(net, opts);
  const PrivateKey a_key = crypto::generate_private_key();
  a.set_private_key(a_key);
  b.dev.set_private_key(b.key);
  c.dev.set_private_key(c.key);
  REQUIRE(!a.up());
  REQUIRE(!b.dev.up());
  REQUIRE(!c.dev.up());
  PeerPtr a_b = a.add_peer(b.pub()), a_c = a.add_peer(c.pub());
  PeerPtr b_a = b.dev.add_peer(crypto::public_key(a_key)), c_a = c.dev.add_peer(crypto::public_key(a_key));
  a.add_allowed_ip(*a_b, *IpPrefix::parse("198.19.0.2/32"));
  a.add_allowed_ip(*a_c, *IpPrefix::parse("198.19.0.3/32"));
  b.dev.add_allowed_ip(*b_a, *IpPrefix::parse("198.19.0.1/32"));
  c.dev.add_allowed_ip(*c_a, *IpPrefix::parse("198.19.0.1/32"));
  a.set_endpoint(*a_b, conn::MemoryBind::endpoint_for(b.dev.listen_port()));
  a.set_endpoint(*a_c, conn::MemoryBind::endpoint_for(c.dev.listen_port()));
  const uint16_t pa = a.listen_port(), pb = b.dev.listen_port(), pc = c.dev.listen_port();

  net.set_filter([&](uint16_t from, uint16_t to, std::span<const uint8_t> d) {
    Seen s{from, to, 0, d.size(), a_bind.holding()};
    if (d.size() >= 4) std::memcpy(&s.type, d.data(), 4);
    std::lock_guard lock(mu);
    seen.push_back(s);
    return from != drop_from.load();
  });
  auto count = [&](uint16_t from, uint16_t to, MessageType type, size_t size, bool only_held) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (auto& s : seen)
      if (s.from == from && s.to == to && s.type == static_cast<uint32_t>(type) && (!size || s.size == size) &&
          (!only_held || s.held))
        ++n;
    return n;
  };
  auto advance = [&](Clock::duration d) {
    clock.advance(d);
    REQUIRE(a.clock_moved());
    REQUIRE(b.dev.clock_moved());
    REQUIRE(c.dev.clock_moved());
  };

  // Sessions with both: a packet each way.
  a_tun.inject(ip4_packet(1, 2, 1));
  REQUIRE(b.tun.take(5s));
  a_tun.inject(ip4_packet(1, 3, 1));
  REQUIRE(c.tun.take(5s));

  // b's path blocks: a's packets to b wait in the Bind; b's own packet still reaches a,
  // so a owes b nothing but a keepalive (which queues behind them).
  a_bind.blocked_port = pb;
  a_bind.shut_gate();
  for (uint64_t s = 10; s < 13; ++s) a_tun.inject(ip4_packet(1, 2, s));
  REQUIRE(eventually([&] { return a_bind.waiting() == 1; }));
  b.tun.inject(ip4_packet(2, 1, 100));
  REQUIRE(a_tun.take(5s));
  // c sends too: a owes c a keepalive in 10 s.
  c.tun.inject(ip4_packet(3, 1, 100));
  REQUIRE(a_tun.take(5s));

  SECTION("c's keepalive") {
    advance(10s);
    CHECK(eventually([&] { return count(pa, pc, MessageType::transport, kKeepaliveSize, true) == 1; }));
  }
  SECTION("c's handshake retransmission") {
    advance(kRekeyTimeout);  // an initiation may follow the first one now
    drop_from = pc;         // c's answers are lost
    a.initiate_handshake(*a_c);
    REQUIRE(count(pa, pc, MessageType::initiation, 0, true) == 1);
    advance(kRekeyTimeout + kRekeyTimeoutJitterMax);
    CHECK(count(pa, pc, MessageType::initiation, 0, true) == 2);
  }
  SECTION("c's key zeroing") {
    REQUIRE(a_c->has_session_keys());
    const uint64_t c_had = c_a->stats().rx_bytes.load();
    advance(10s);  // the keepalive owed to c goes (later, it would start a handshake)
    REQUIRE(eventually([&] { return count(pa, pc, MessageType::transport, kKeepaliveSize, true) == 1; }));
    // ... and c has taken it: else c's own new-handshake timer (15 s after its packet
    // with no answer) would start a handshake at the jump below, and a new session.
    REQUIRE(eventually([&] { return c_a->stats().rx_bytes.load() > c_had; }));
    advance(3 * kRejectAfterTime - 10s + 1s);
    CHECK_FALSE(a_c->has_session_keys());
  }
  CHECK(a_bind.waiting() >= 1);  // b's path stayed blocked throughout
  CHECK_FALSE(a_bind.broken());
  // The gate opens: b gets what waited, in order (unless its session was zeroed meanwhile).
  a_bind.open_gate();
  if (clock.now() - clock.base < kRejectAfterTime) {
    std::vector<uint64_t> got;
    while (got.size() < 3) {
      auto p = b.tun.take(5s);
      if (!p) break;
      got.push_back(seq_of(*p));
    }
    CHECK(got == std::vector<uint64_t>{10, 11, 12});
  }
}

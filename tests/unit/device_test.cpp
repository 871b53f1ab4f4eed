// Two wg::Devices wired through the in-memory Bind and TUN: handshake, ordered bulk
// transfer both ways, reconfiguration while traffic flows.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "wg/uapi.hpp"
#include "../support/device_pair.hpp"
#include "../support/eventually.hpp"

using namespace wg;
using namespace std::chrono_literals;

namespace {

using wgtest::eventually;
using wgtest::ip4_packet;
using wgtest::seq_of;
using Node = wgtest::DeviceNode;
using Pair = wgtest::DevicePair;

// Sends `count` packets from one node to the other in windows, checking order.
void transfer(tun::MemoryDevice& from, tun::MemoryDevice& to, uint8_t src, uint8_t dst, uint64_t count,
              uint64_t& received, uint64_t& out_of_order) {
  const uint64_t window = 512;
  uint64_t next_expected = 0;
  for (uint64_t sent = 0; sent < count;) {
    uint64_t n = std::min(window, count - sent);
    for (uint64_t i = 0; i < n; ++i) from.inject(ip4_packet(src, dst, sent + i));
    sent += n;
    while (next_expected < sent) {
      auto p = to.take(5s);
      if (!p) return;  // lost: the caller's check fails
      if (seq_of(*p) != next_expected) ++out_of_order;
      next_expected = seq_of(*p) + 1;
      ++received;
    }
  }
}

// `count` packets each way at once, a → b and b → a: all arrive, in order.
void transfer_both_ways(Pair& pr, uint64_t count) {
  uint64_t ab = 0, ab_ooo = 0, ba = 0, ba_ooo = 0;
  std::thread t1([&] { transfer(pr.a.tun, pr.b.tun, 1, 2, count, ab, ab_ooo); });
  std::thread t2([&] { transfer(pr.b.tun, pr.a.tun, 2, 1, count, ba, ba_ooo); });
  t1.join();
  t2.join();
  CHECK(ab == count);
  CHECK(ba == count);
  CHECK(ab_ooo == 0);
  CHECK(ba_ooo == 0);
}

}  // namespace

TEST_CASE("device: handshake on first packet, then data both ways", "[device]") {
  Pair pr;
  pr.a.tun.inject(ip4_packet(1, 2, 7));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 7));
  // b learned a's endpoint from the handshake and can answer.
  pr.b.tun.inject(ip4_packet(2, 1, 8));
  auto back = pr.a.tun.take(5s);
  REQUIRE(back);
  CHECK(*back == ip4_packet(2, 1, 8));
  CHECK(pr.a.dev.stats().handshakes_completed == 1);
  CHECK(pr.b.dev.stats().handshakes_completed == 1);
  CHECK(pr.a_to_b->stats().last_handshake_ns.load() > 0);
}

// An initiation to `to` as a flood from spoofed sources sends it: random contents (no
// static key behind them), a valid mac1, no mac2.
std::vector<uint8_t> spoofed_initiation(const PublicKey& to) {
  std::vector<uint8_t> m(kInitiationSize);
  random_bytes(m.data(), m.size());
  const uint32_t type = static_cast<uint32_t>(MessageType::initiation);
  std::memcpy(m.data(), &type, sizeof type);
  CookieGenerator macs;
  macs.init(to);
  macs.add_macs(m, Clock::now());
  return m;
}

// A flood of spoofed initiations against pr.b from a thread: bursts of 600 (over the
// queue's mark of 128, under its bound of 1,024: none is dropped at the queue, so b's
// answers are all decisions of the load policy) every 100 ms, from source ports nobody
// listens on (the cookie replies go nowhere), until destroyed. The constructor returns
// once b is under load (it has sent a cookie reply).
class Flood {
public:
  explicit Flood(Pair& pr) : pr_(pr) {
    for (int i = 0; i < 4096; ++i) msgs_.push_back(spoofed_initiation(pr.b.pub()));
    thread_ = std::thread([this] { run(); });
    eventually([&] { return pr_.b.dev.stats().cookie_replies_sent > 0; }, 2s, 10ms);
    REQUIRE(pr_.b.dev.stats().cookie_replies_sent > 0);
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
  }
  uint64_t sent() const { return sent_; }

private:
  void run() {
    for (size_t next = 0; !stop_;) {
      for (int i = 0; i < 600; ++i, ++next)
        sent_ += pr_.net.deliver(static_cast<uint16_t>(1000 + next % 20000), pr_.b.dev.listen_port(),
                                 msgs_[next % msgs_.size()]);
      std::this_thread::sleep_for(100ms);
    }
  }

  Pair& pr_;
  std::vector<std::vector<uint8_t>> msgs_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

TEST_CASE("device: a flood of spoofed initiations gets cookie replies, a real peer still gets in", "[device][load]") {
  Pair pr;
  uint64_t flood;
  {
    Flood f(pr);
    // The real peer's first packet, while b is under load: a's initiation gets a cookie
    // reply, and its retry (REKEY_TIMEOUT later, b still under load) carries mac2 and
    // is answered.
    pr.a.tun.inject(ip4_packet(1, 2, 1));
    auto got = pr.b.tun.take(20s);
    REQUIRE(got);
    CHECK(*got == ip4_packet(1, 2, 1));
    // At least 20 bursts in all (2 s), however soon a got in.
    eventually([&] { return f.sent() >= 12000; }, 10s, 10ms);
    flood = f.sent();
  }
  const auto& st = pr.b.dev.stats();
  const uint64_t cookies = st.cookie_replies_sent.load(), computed = st.handshakes_computed.load(),
                 dropped = st.dropped_handshake.load();
  INFO("flood " << flood << ", cookie replies " << cookies << ", Diffie-Hellman " << computed << ", dropped "
                << dropped);
  // Every message got a cookie, or was dropped at the full queue (when the handshake
  // thread gets less CPU than the flood), but the first few, before the queue first
  // reached its mark, and a's. Without the hold after the mark, the last 128 of every
  // burst cost one each as the queue drained below the mark.
  CHECK(cookies + computed + dropped >= flood);
  CHECK(computed <= 256);
  CHECK(st.handshakes_completed == 1);
  CHECK(pr.a.dev.stats().handshakes_completed == 1);
  // b did not know where a is: a had to prove its address with the cookie.
  CHECK(pr.a.dev.stats().cookie_replies_received >= 1);
}

TEST_CASE("device: under load, a peer at its known endpoint gets in without a cookie round trip", "[device][load]") {
  Pair pr;
  pr.b.dev.set_endpoint(*pr.b_to_a, conn::MemoryBind::endpoint_for(pr.a.dev.listen_port()));
  {
    Flood f(pr);
    pr.a.tun.inject(ip4_packet(1, 2, 1));
    auto got = pr.b.tun.take(20s);
    REQUIRE(got);
    CHECK(*got == ip4_packet(1, 2, 1));
  }
  CHECK(pr.a.dev.stats().cookie_replies_received == 0);
  CHECK(pr.a.dev.stats().handshakes_completed == 1);
  // Once removed, the peer's endpoint is known no more: the peer added again at the same
  // address has to prove it with a cookie.
  pr.b.dev.remove_peer(pr.a.pub());
  auto again = pr.b.dev.add_peer(pr.a.pub());
  pr.b.dev.add_allowed_ip(*again, *IpPrefix::parse("198.19.0.1/32"));
  pr.a.dev.remove_peer(pr.b.pub());
  auto a_again = pr.a.dev.add_peer(pr.b.pub());
  pr.a.dev.add_allowed_ip(*a_again, *IpPrefix::parse("198.19.0.2/32"));
  pr.a.dev.set_endpoint(*a_again, conn::MemoryBind::endpoint_for(pr.b.dev.listen_port()));
  {
    Flood f(pr);
    pr.a.tun.inject(ip4_packet(1, 2, 2));
    auto got = pr.b.tun.take(20s);
    REQUIRE(got);
  }
  CHECK(pr.a.dev.stats().cookie_replies_received >= 1);
}

TEST_CASE("device: 100000 packets each way arrive in order, none lost", "[device]") {
  // Crypto on the workers for every batch of more than one packet, and all on the
  // reading threads (the default on machines with at most 2 cores).
  DeviceOptions options;
  options.inline_batch = GENERATE(size_t{1}, kMaxBatch);
  CAPTURE(options.inline_batch);
  Pair pr(options);
  // Establish the session first so b knows where a is.
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));

  transfer_both_ways(pr, 100000);
  CHECK(pr.a.dev.stats().dropped_decrypt == 0);
  CHECK(pr.b.dev.stats().dropped_replay == 0);
  // tx of one side matches rx of the other once traffic has settled (a sender may count
  // its last batch after the receiver took it).
  eventually([&] {
    return pr.a_to_b->stats().tx_bytes.load() == pr.b_to_a->stats().rx_bytes.load() &&
           pr.b_to_a->stats().tx_bytes.load() == pr.a_to_b->stats().rx_bytes.load();
  });
  CHECK(pr.a_to_b->stats().tx_bytes.load() == pr.b_to_a->stats().rx_bytes.load());
  CHECK(pr.b_to_a->stats().tx_bytes.load() == pr.a_to_b->stats().rx_bytes.load());
}

// As a receive with UDP GRO hands them out (conn::ReceiveFn): several datagrams back to
// back in one pooled buffer, each batch entry pointing into it. Every packet must arrive
// whole and in order (each decrypted in place within its own bytes), and every buffer
// must go back to the pool exactly once: after close, the pool holds each buffer it ever
// made, once (a buffer given back twice would be counted twice; one never given back, not
// at all).
TEST_CASE("device: datagrams received several to a buffer arrive whole, and each buffer returns once", "[device]") {
  DeviceOptions options;
  options.inline_batch = GENERATE(size_t{1}, kMaxBatch);
  const size_t pack = GENERATE(size_t{3}, size_t{46});
  CAPTURE(options.inline_batch, pack);
  Pair pr(options);
  pr.a.bind.set_pack(pack);
  pr.b.bind.set_pack(pack);
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));

  auto payload = [](uint64_t seq) { return size_t{40} + (seq * 37) % 1380; };  // packets of 60..1439 bytes
  auto send = [&](tun::MemoryDevice& from, tun::MemoryDevice& to, uint8_t src, uint8_t dst, uint64_t& whole) {
    const uint64_t count = 20000, window = 512;
    for (uint64_t base = 1; base <= count; base += window) {
      const uint64_t n = std::min(window, count + 1 - base);
      for (uint64_t i = 0; i < n; ++i) from.inject(ip4_packet(src, dst, base + i, payload(base + i)));
      for (uint64_t i = 0; i < n; ++i) {
        auto p = to.take(5s);
        if (!p || *p != ip4_packet(src, dst, base + i, payload(base + i))) return;
        ++whole;
      }
    }
  };
  uint64_t ab = 0, ba = 0;
  std::thread t1([&] { send(pr.a.tun, pr.b.tun, 1, 2, ab); });
  std::thread t2([&] { send(pr.b.tun, pr.a.tun, 2, 1, ba); });
  t1.join();
  t2.join();
  CHECK(ab == 20000);
  CHECK(ba == 20000);
  CHECK(pr.a.dev.stats().dropped_invalid == 0);
  CHECK(pr.b.dev.stats().dropped_invalid == 0);

  for (Node* node : {&pr.a, &pr.b}) {
    node->dev.close();
    const BufferPool& pool = node->dev.buffers();
    CHECK(pool.idle() == pool.allocated());
  }
}

TEST_CASE("device: packets from a source outside the peer's allowed IPs are dropped", "[device]") {
  Pair pr;
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));
  // a sends with source .9, which b does not allow for a.
  pr.a.dev.add_allowed_ip(*pr.a_to_b, *IpPrefix::parse("198.19.0.0/24"));
  pr.a.tun.inject(ip4_packet(9, 2, 1));
  // Then one from .1: b delivers a peer's packets in order, so the first to come out
  // is this one only if the one from .9 was dropped.
  pr.a.tun.inject(ip4_packet(1, 2, 2));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(*got == ip4_packet(1, 2, 2));
  CHECK(pr.b.dev.stats().dropped_source == 1);
}

TEST_CASE("device: peers that never answer cannot starve the others of buffers", "[device]") {
  Pair pr;  // the default pool: 512 buffers
  // Eight peers with no endpoint: packets to them are staged, waiting for a handshake
  // that cannot start. Per peer that is up to 256 packets, 2048 in all: four pools.
  for (uint8_t i = 0; i < 8; ++i) {
    auto dead = pr.a.dev.add_peer(crypto::public_key(crypto::generate_private_key()));
    pr.a.dev.add_allowed_ip(*dead, *IpPrefix::parse("198.19.0." + std::to_string(10 + i) + "/32"));
  }
  for (uint64_t n = 0; n < 300; ++n)
    for (uint8_t i = 0; i < 8; ++i) pr.a.tun.inject(ip4_packet(1, uint8_t(10 + i), n));
  // The live peer still gets through: the reader was not left waiting for buffers.
  pr.a.tun.inject(ip4_packet(1, 2, 4242));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(seq_of(*got) == 4242);
}

// The device's budget for staged packets is for packets waiting for a session. Once
// peers that never answer had filled it, a live peer's packets, staged on their way to
// its session as every packet is, were cut to kMinStagedPackets a read: most of each
// burst dropped.
TEST_CASE("device: peers that never answer cost a live peer none of its bulk traffic", "[device]") {
  Pair pr;
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));
  for (uint8_t i = 0; i < 8; ++i) {
    auto dead = pr.a.dev.add_peer(crypto::public_key(crypto::generate_private_key()));
    pr.a.dev.add_allowed_ip(*dead, *IpPrefix::parse("198.19.0." + std::to_string(10 + i) + "/32"));
  }
  for (uint64_t n = 0; n < 300; ++n)
    for (uint8_t i = 0; i < 8; ++i) pr.a.tun.inject(ip4_packet(1, uint8_t(10 + i), n));
  const uint64_t count = 20000;
  uint64_t ab = 0, ab_ooo = 0;
  transfer(pr.a.tun, pr.b.tun, 1, 2, count, ab, ab_ooo);
  CHECK(ab == count);
  CHECK(ab_ooo == 0);
  // Only the waiting packets were dropped: 8 x 300 to the dead peers, of which the
  // device's budget (512 / 4) and kMinStagedPackets per peer keep at most 128 + 8 x 16.
  CHECK(pr.a.dev.stats().dropped_staged >= 8 * 300 - (512 / 4 + 8 * kMinStagedPackets));
  CHECK(pr.a.dev.stats().dropped_staged <= 8 * 300);
}

// down() zeroes the sessions, and the TUN reader goes on reading: what it reads
// then waits, and must be bounded like any waiting packet. Unbounded, 2,000 packets held
// every buffer of the pool, and after up() nothing could be read or received.
TEST_CASE("device: packets read while the device is down are bounded, and traffic resumes after up", "[device]") {
  Pair pr;
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));
  pr.a.dev.down();
  const uint64_t count = 2000;
  for (uint64_t n = 1; n <= count; ++n) pr.a.tun.inject(ip4_packet(1, 2, n));
  // All read and staged, the peer keeping the device's budget of them (the default bound
  // of 512 buffers / 4; under kMaxStagedPackets).
  const uint64_t kept = std::min<uint64_t>(kMaxStagedPackets, 512 / 4);
  eventually([&] { return pr.a.dev.stats().dropped_staged >= count - kept; });
  CHECK(pr.a.dev.stats().dropped_staged == count - kept);
  REQUIRE(!pr.a.dev.up());
  pr.a.tun.inject(ip4_packet(1, 2, 4242));
  // down() zeroed the session, so the new packet waits too, pushing the oldest kept one
  // out: the newest kept - 1, in order, then the new one. They wait for a new handshake,
  // whose first initiation b may refuse as a replay (its TAI64N timestamp, whitened to
  // 16 ms, can equal the last one's); it is sent again after REKEY_TIMEOUT, as in the
  // kernel.
  uint64_t expected = count - kept + 2;
  bool first = true;
  for (;;) {
    auto p = pr.b.tun.take(first ? kRekeyTimeout + 5s : 5s);
    first = false;
    REQUIRE(p);
    if (seq_of(*p) == 4242) break;
    CHECK(seq_of(*p) == expected);
    ++expected;
  }
  CHECK(expected == count + 1);
}

// A pool bound smaller than the batches the reading threads keep (one TUN reader and two
// receivers of 128 here) once left each reader waiting for a batch the others held: no
// packet moved, and close() waited for a receiver that waited for buffers.
TEST_CASE("device: a buffer bound below the readers' batches is raised, traffic flows and close returns",
          "[device]") {
  DeviceOptions options;
  options.buffer_limit = 8;
  Pair pr(options);
  const size_t batch = std::min(pr.a.tun.batch_size(), pr.a.bind.batch_size());
  for (Node* node : {&pr.a, &pr.b}) CHECK(node->dev.buffers().limit() == kMinBufferBatches * batch);
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));

  transfer_both_ways(pr, 20000);
  for (Node* node : {&pr.a, &pr.b}) {
    node->dev.close();
    CHECK(node->dev.buffers().idle() == node->dev.buffers().allocated());
  }
}

TEST_CASE("device: reconfiguration while traffic flows", "[device]") {
  DeviceOptions options;
  options.inline_batch = GENERATE(size_t{1}, kMaxBatch);  // workers, then reading threads
  CAPTURE(options.inline_batch);
  Pair pr(options);
  pr.a.tun.inject(ip4_packet(1, 2, 0));
  REQUIRE(pr.b.tun.take(5s));

  std::atomic<bool> stop{false};
  std::thread traffic([&] {
    uint64_t seq = 1;
    while (!stop) {
      for (int i = 0; i < 64; ++i) pr.a.tun.inject(ip4_packet(1, 2, seq++));
      for (int i = 0; i < 64; ++i) pr.b.tun.inject(ip4_packet(2, 1, seq++));
      while (pr.b.tun.take(0ms)) {}
      while (pr.a.tun.take(0ms)) {}
      std::this_thread::sleep_for(1ms);
    }
  });

  for (int round = 0; round < 5; ++round) {
    // Remove and re-add the peer on b.
    pr.b.dev.remove_peer(pr.a.pub());
    std::this_thread::sleep_for(10ms);
    pr.b_to_a = pr.b.dev.add_peer(pr.a.pub());
    pr.b.dev.add_allowed_ip(*pr.b_to_a, *IpPrefix::parse("198.19.0.1/32"));
    // Replace a's allowed IPs.
    pr.a.dev.clear_allowed_ips(*pr.a_to_b);
    pr.a.dev.add_allowed_ip(*pr.a_to_b, *IpPrefix::parse("198.19.0.2/32"));
    // Add and remove an unrelated peer.
    auto extra = pr.a.dev.add_peer(crypto::public_key(crypto::generate_private_key()));
    pr.a.dev.add_allowed_ip(*extra, *IpPrefix::parse("198.19.0.100/32"));
    pr.a.dev.remove_peer(extra->public_key());
    std::this_thread::sleep_for(20ms);
  }
  // Change a's private key: b must learn the new public key to talk again.
  PrivateKey new_key = crypto::generate_private_key();
  pr.a.dev.set_private_key(new_key);
  pr.b.dev.remove_peer(pr.a.pub());
  pr.a.key = new_key;
  pr.b_to_a = pr.b.dev.add_peer(pr.a.pub());
  pr.b.dev.add_allowed_ip(*pr.b_to_a, *IpPrefix::parse("198.19.0.1/32"));
  std::this_thread::sleep_for(50ms);
  stop = true;
  traffic.join();
  while (pr.b.tun.take(0ms)) {}

  // After the dust settles the tunnel works with the new key (a handshake may need the
  // rekey timeout to pass if one was just sent: the device rate-limits initiations).
  bool through = false;
  for (int i = 0; i < 80 && !through; ++i) {
    pr.a.tun.inject(ip4_packet(1, 2, 1'000'000 + i));
    while (auto p = pr.b.tun.take(100ms))
      if (seq_of(*p) >= 1'000'000) through = true;
  }
  CHECK(through);
}

TEST_CASE("device: a listen port in use is refused and the old one keeps working", "[device]") {
  // As in the kernel: `wg set listen-port` to a taken port fails with EADDRINUSE and the
  // device keeps its sockets, and later listen-port changes still work.
  Pair pr;
  pr.a.tun.inject(ip4_packet(1, 2, 1));
  REQUIRE(pr.b.tun.take(5s));
  const uint16_t old_port = pr.b.dev.listen_port();
  conn::MemoryBind squatter(pr.net);
  uint16_t taken = 0;
  std::error_code ec;
  squatter.open(0, taken, ec);
  REQUIRE(!ec);
  CHECK(pr.b.dev.set_listen_port(taken) == std::errc::address_in_use);
  CHECK(pr.b.dev.listen_port() == old_port);
  pr.a.tun.inject(ip4_packet(1, 2, 2));
  auto got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(seq_of(*got) == 2);
  pr.b.tun.inject(ip4_packet(2, 1, 3));
  REQUIRE(pr.a.tun.take(5s));
  // Once the port is free, the change works (b's new port reaches a with b's next packet).
  squatter.close();
  CHECK(!pr.b.dev.set_listen_port(taken));
  CHECK(pr.b.dev.listen_port() == taken);
  pr.b.tun.inject(ip4_packet(2, 1, 4));
  got = pr.a.tun.take(5s);
  REQUIRE(got);
  CHECK(seq_of(*got) == 4);
  pr.a.tun.inject(ip4_packet(1, 2, 5));
  got = pr.b.tun.take(5s);
  REQUIRE(got);
  CHECK(seq_of(*got) == 5);
}

TEST_CASE("device: a listen port in use is refused at once while down", "[device]") {
  // wg-quick sets the config before `ip link set up`: a taken ListenPort must fail the
  // `wg setconf` (EADDRINUSE, as wireguard-go), not be kept for an up() that then
  // cannot open a socket and has no one to tell.
  Pair pr;
  pr.b.dev.down();
  const uint16_t old_port = pr.b.dev.listen_port();
  conn::MemoryBind squatter(pr.net);
  uint16_t taken = 0;
  std::error_code ec;
  squatter.open(0, taken, ec);
  REQUIRE(!ec);
  CHECK(pr.b.dev.set_listen_port(taken) == std::errc::address_in_use);
  CHECK(pr.b.dev.listen_port() == old_port);
  std::string err;
  CHECK(uapi::set(pr.b.dev, "listen_port=" + std::to_string(taken) + "\n", &err) == uapi::kErrorPortInUse);
  CHECK(pr.b.dev.listen_port() == old_port);
  // A free port is taken while down and used by the next up().
  squatter.close();
  CHECK(!pr.b.dev.set_listen_port(taken));
  CHECK(!pr.b.dev.is_up());
  REQUIRE(!pr.b.dev.up());
  CHECK(pr.b.dev.listen_port() == taken);
}

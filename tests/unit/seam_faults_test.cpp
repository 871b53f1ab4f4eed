// Faults at the two seams, injected by wrappers: a Bind around the real LinuxBind (two
// devices over real loopback UDP) and a TUN around the in-memory device, each returning
// EINTR, EAGAIN, ENOBUFS or EIO where the real call would have been, so what is tested is
// the core's handling of them: nothing but the refused packets is lost, the device goes
// on, and a seam that fails every call is not spun on.
//
//   MemoryDevice ─ FaultyTun ─ Device A ─ FaultyBind ─ LinuxBind ── 127.0.0.1 ── LinuxBind ─ Device B ─ MemoryDevice
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "../support/eventually.hpp"
#include "bind/linux.hpp"
#include "seam_faults.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"

using namespace wg;
using wgnet_test::BackoffLog;
using wgnet_test::FaultPlan;
using wgnet_test::FaultyBind;
using wgnet_test::FaultyTun;
using namespace std::chrono_literals;
using wgtest::eventually;

namespace {

// An IPv4 packet 198.19.0.src -> 198.19.0.dst whose payload starts with `seq`.
std::vector<uint8_t> packet(uint8_t src, uint8_t dst, uint64_t seq) {
  std::vector<uint8_t> p(120, 0);
  p[0] = 0x45;
  p[2] = static_cast<uint8_t>(p.size() >> 8);
  p[3] = static_cast<uint8_t>(p.size());
  p[8] = 64;
  p[9] = 17;
  p[12] = 198, p[13] = 19, p[15] = src;
  p[16] = 198, p[17] = 19, p[19] = dst;
  std::memcpy(&p[20], &seq, 8);
  return p;
}
uint64_t seq_of(const std::vector<uint8_t>& p) {
  uint64_t s = 0;
  std::memcpy(&s, &p[20], 8);
  return s;
}

DeviceOptions noting(BackoffLog& log) {
  DeviceOptions o;
  o.error_backoff = log.hook();
  return o;
}

struct Link {
  tun::MemoryDevice mem_a, mem_b;
  FaultyTun tun_a{mem_a};
  conn::LinuxBind linux_a{conn::LinuxBind::Options{}}, linux_b{conn::LinuxBind::Options{}};
  FaultyBind bind_a{linux_a};
  BackoffLog backoffs;  // A's waits between failing reads and receives
  Device a{tun_a, bind_a, noting(backoffs)}, b{mem_b, linux_b};

  Link() {
    PrivateKey ka = crypto::generate_private_key(), kb = crypto::generate_private_key();
    a.set_private_key(ka);
    b.set_private_key(kb);
    REQUIRE(!a.up());
    REQUIRE(!b.up());
    auto to_b = a.add_peer(crypto::public_key(kb));
    auto to_a = b.add_peer(crypto::public_key(ka));
    a.add_allowed_ip(*to_b, *IpPrefix::parse("198.19.0.2/32"));
    b.add_allowed_ip(*to_a, *IpPrefix::parse("198.19.0.1/32"));
    a.set_endpoint(*to_b, *conn::Endpoint::parse("127.0.0.1:" + std::to_string(b.listen_port())));
    b.set_endpoint(*to_a, *conn::Endpoint::parse("127.0.0.1:" + std::to_string(a.listen_port())));
    // The first packet makes the handshake.
    mem_a.inject(packet(1, 2, 0));
    auto got = mem_b.take(5s);
    REQUIRE(got);
  }
};

// Sends `count` packets (sequence from..) and takes them at the other end in order;
// returns how many arrived in order before one was missing for 5 s.
uint64_t pass(tun::MemoryDevice& from, tun::MemoryDevice& to, uint8_t src, uint8_t dst, uint64_t first,
              uint64_t count) {
  uint64_t ok = 0;
  for (uint64_t base = 0; base < count; base += 64) {
    uint64_t n = std::min<uint64_t>(64, count - base);
    for (uint64_t i = 0; i < n; ++i) from.inject(packet(src, dst, first + base + i));
    for (uint64_t i = 0; i < n; ++i) {
      auto p = to.take(5s);
      if (!p || seq_of(*p) != first + base + i) return ok;
      ++ok;
    }
  }
  return ok;
}

// Waits until plan's script is used up (the faults were really met), up to 5 s.
bool consumed(FaultPlan& plan) {
  return eventually([&] { return plan.script_done(); }, 5s, 10ms);
}

// A read (or receive) that fails every call with EIO: it must be met (at least once)
// and backed off as Device::keep_reading_after promises, each wait after the first
// failure doubling from 1 ms to 250 ms (the waits asked for, noted by `backoffs`, not a
// count of calls in a time, which load changes; spinning asked for none), then cleared.
// A reader already waiting in the real read returns with the packet sent here and then
// meets the fault; one that had not got there yet (seen under ASan) meets it at once, and
// the packet waits. Either way the faults begin within a moment; the packet is taken
// afterwards, wherever it waited.
void persistent_fault(FaultPlan& faults, BackoffLog& backoffs, tun::MemoryDevice& from, tun::MemoryDevice& to,
                      uint8_t src, uint8_t dst) {
  const uint64_t before = faults.calls;
  faults.set_persistent(EIO);
  from.inject(packet(src, dst, 0));
  const std::vector<int64_t> doubling = {1, 2, 4, 8, 16, 32, 64, 128, 250, 250};
  std::vector<int64_t> waits;
  CHECK(eventually([&] { return (waits = backoffs.longest()).size() >= doubling.size(); }));
  const uint64_t calls = faults.calls - before;
  INFO(calls << " calls");
  CHECK(calls >= 1);
  waits.resize(doubling.size());
  CHECK(waits == doubling);
  faults.set_persistent(0);
  to.take(2s);
}

}  // namespace

TEST_CASE("seams: EINTR, EAGAIN and ENOBUFS from the Bind's receive lose nothing", "[seams]") {
  Link l;
  // Each fault stands where a real receive would have been: no datagram is refused, so
  // every packet must arrive, in order.
  // (Each 0 is a real receive, which waits for traffic: the 32 windows of pass() meet
  // every fault.)
  l.bind_a.receive_faults.script({EINTR, 0, EAGAIN, 0, ENOBUFS, 0, EINTR, EAGAIN, ENOBUFS, 0}, 4);
  CHECK(pass(l.mem_b, l.mem_a, 2, 1, 1, 2000) == 2000);
  CHECK(consumed(l.bind_a.receive_faults));
  CHECK(l.bind_a.receive_faults.injected == 24);
}

TEST_CASE("seams: ENOBUFS and EAGAIN from the Bind's send drop those batches only", "[seams]") {
  Link l;
  l.bind_a.send_faults.script({ENOBUFS, EAGAIN, ENOBUFS}, 5);
  // One packet at a time until the 15 refusals are used up: those packets are lost.
  uint64_t seq = 1;
  for (int i = 0; i < 200 && !l.bind_a.send_faults.script_done(); ++i) {
    l.mem_a.inject(packet(1, 2, seq++));
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(l.bind_a.send_faults.script_done());
  while (l.mem_b.take(200ms)) {}  // whatever got through meanwhile
  // Then everything goes.
  CHECK(pass(l.mem_a, l.mem_b, 1, 2, 1000, 2000) == 2000);
  CHECK(pass(l.mem_b, l.mem_a, 2, 1, 1000, 500) == 500);
}

TEST_CASE("seams: a Bind receive that fails every call is not spun on, and traffic resumes", "[seams]") {
  Link l;
  persistent_fault(l.bind_a.receive_faults, l.backoffs, l.mem_b, l.mem_a, 2, 1);
  CHECK(pass(l.mem_b, l.mem_a, 2, 1, 1, 500) == 500);
}

TEST_CASE("seams: TUN read faults, transient and persistent", "[seams]") {
  Link l;
  SECTION("EINTR, EAGAIN and ENOBUFS lose nothing") {
    l.tun_a.read_faults.script({EINTR, 0, EAGAIN, 0, ENOBUFS, 0}, 4);
    CHECK(pass(l.mem_a, l.mem_b, 1, 2, 1, 2000) == 2000);
    CHECK(consumed(l.tun_a.read_faults));
  }
  SECTION("a read that fails every call is not spun on, and traffic resumes") {
    persistent_fault(l.tun_a.read_faults, l.backoffs, l.mem_a, l.mem_b, 1, 2);
    CHECK(pass(l.mem_a, l.mem_b, 1, 2, 1, 500) == 500);
  }
}

TEST_CASE("seams: TUN write faults drop those packets only", "[seams]") {
  Link l;
  l.tun_a.write_faults.script({ENOBUFS, EAGAIN, EIO}, 5);
  uint64_t seq = 1;
  for (int i = 0; i < 200 && !l.tun_a.write_faults.script_done(); ++i) {
    l.mem_b.inject(packet(2, 1, seq++));
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(l.tun_a.write_faults.script_done());
  while (l.mem_a.take(200ms)) {}
  CHECK(pass(l.mem_b, l.mem_a, 2, 1, 1000, 2000) == 2000);
  CHECK(pass(l.mem_a, l.mem_b, 1, 2, 1000, 500) == 500);
}

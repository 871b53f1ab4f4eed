// wg::Device over the kernel TUN ([root], each case in a network namespace of its own,
// as in tunlinux_test.cpp): read faults around the real TUN, the kernel's answers, a
// reader per queue of a multi-queue TUN.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../support/eventually.hpp"
#include "../support/kernel_tun.hpp"
#include "../support/netns_child.hpp"
#include "../support/packet_bytes.hpp"
#include "bind/linux.hpp"
#include "bind/memory.hpp"
#include "seam_faults.hpp"
#include "skip.hpp"
#include "tun/memory.hpp"
#include "tunlinux/tun.hpp"
#include "wg/base/fd.hpp"
#include "wg/device.hpp"

namespace {

using namespace std::chrono_literals;
using tunlinux::Tun;
using wgtest::be16;
using wgtest::bring_up;
using wgtest::echo_request;
using wgtest::eventually;
using wgtest::is_echo_reply;
using wgtest::is_udp_to_discard;
using wgtest::kIf;
using wgtest::kPeer;
using wgtest::make_tun;
using wgtest::require_in_netns;
using wgtest::send_udp;
using wgtest::sh;
using wgtest::step;
using wgtest::threads_named;
using wgtest::udp_socket;
using wgtest::udp_to_local;

// Devices a (on the TUN, 198.19.0.1) and b (in memory, 198.19.0.2), peers of each other
// over a MemoryNetwork (or what `endpoint` says a listen port is), each knowing the
// other's endpoint, both up.
void pair_up(wg::Device& a, wg::Device& b,
             const std::function<conn::Endpoint(uint16_t)>& endpoint = conn::MemoryBind::endpoint_for) {
  wg::PrivateKey ka = wg::crypto::generate_private_key(), kb = wg::crypto::generate_private_key();
  a.set_private_key(ka);
  b.set_private_key(kb);
  EXPECT(!a.up());
  EXPECT(!b.up());
  auto to_b = a.add_peer(wg::crypto::public_key(kb));
  auto to_a = b.add_peer(wg::crypto::public_key(ka));
  a.add_allowed_ip(*to_b, *wg::IpPrefix::parse("198.19.0.2/32"));
  b.add_allowed_ip(*to_a, *wg::IpPrefix::parse("198.19.0.1/32"));
  a.set_endpoint(*to_b, endpoint(b.listen_port()));
  b.set_endpoint(*to_a, endpoint(a.listen_port()));
}

}  // namespace

// The core over the real TUN with read faults injected around it (tests/unit/
// seam_faults.hpp): transient EINTR/EAGAIN/ENOBUFS lose nothing the kernel queued, and a
// read that fails every call is retried with a backoff, not spun on.
//
//   UDP socket -> kernel -> wgt0 (Tun) -> FaultyTun -> Device A -> MemoryBind ->
//   Device B -> MemoryDevice (counts the datagrams)
TEST_CASE("tun: the core over a real TUN survives read faults and does not spin on a failing read",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    using namespace std::chrono_literals;
    step("two devices");
    auto tun = make_tun(1420);
    wgnet_test::FaultyTun faulty(*tun);
    conn::MemoryNetwork net;
    conn::MemoryBind bind_a(net), bind_b(net);
    tun::MemoryDevice mem_b;
    wgnet_test::BackoffLog backoffs;
    wg::DeviceOptions opts;
    opts.error_backoff = backoffs.hook();
    wg::Device a(faulty, bind_a, opts), b(mem_b, bind_b);
    pair_up(a, b);
    bring_up();
    // Datagrams to 198.19.0.2:9 that reach B, in order, within 5 s each.
    auto arrive = [&](int from, int count) {
      for (int i = from; i < from + count; ++i) {
        for (;;) {
          auto p = mem_b.take(5s);
          EXPECT_MSG(p, "datagram " + std::to_string(i) + " never reached B");
          if (!is_udp_to_discard(*p)) continue;
          std::string got(p->begin() + 28, p->end());
          EXPECT_MSG(got == "datagram " + std::to_string(i), "got '" + got + "' for datagram " + std::to_string(i));
          break;
        }
      }
    };

    step("transient read faults");
    faulty.read_faults.script({EINTR, 0, EAGAIN, 0, ENOBUFS, 0}, 4);
    for (int i = 0; i < 40; ++i) {
      send_udp("datagram " + std::to_string(i));
      arrive(i, 1);  // one read per datagram, so that the script is played
    }
    EXPECT(faulty.read_faults.script_done());

    step("a read that fails every call");
    faulty.read_faults.set_persistent(EIO);
    // Brings the reader back if it is blocked in the real read (then the datagram reaches
    // B now); if it was between two reads, its next one fails and the datagram waits in
    // the kernel's queue with those below. Either way it must arrive, in order.
    send_udp("datagram 40");
    // Retried, not given up: nine failing reads come (within 10 s). Not spun on: after
    // each failing read but the first the reader asks to wait, 1 ms doubling
    // (Device::keep_reading_after), so 64 ms before the ninth. The waits are checked as
    // asked for (backoffs), not timed, so load cannot change what is seen; a spinning
    // reader would ask for none.
    const std::vector<int64_t> doubling = {1, 2, 4, 8, 16, 32, 64, 128};
    std::vector<int64_t> waits;
    EXPECT_MSG(eventually([&] { return (waits = backoffs.longest()).size() >= doubling.size(); }, 10s),
               std::to_string(waits.size()) + " waits between failing reads within 10 s");
    EXPECT(faulty.read_faults.persistent_times().size() >= 9);
    waits.resize(doubling.size());
    std::string asked;
    for (int64_t w : waits) asked += " " + std::to_string(w);
    EXPECT_MSG(waits == doubling, "waits asked for (ms):" + asked);
    for (int i = 41; i < 51; ++i) send_udp("datagram " + std::to_string(i));  // queued in the kernel
    faulty.read_faults.set_persistent(0);
    arrive(40, 11);
    EXPECT(tun->counters().read_dropped == 0);
    a.close();
    b.close();
  });
}

// The core over the real TUN: the kernel's answer to a packet the device just wrote (an
// echo reply) is read by the TUN reader and sent back.
//
//   B (MemoryDevice) echo request -> MemoryBind -> A -> wgt0 -> kernel -> echo reply ->
//   wgt0 -> A -> MemoryBind -> B
TEST_CASE("tun: the core answers echo requests through the kernel", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto tun = make_tun(1420);
    conn::MemoryNetwork net;
    conn::MemoryBind bind_a(net), bind_b(net);
    tun::MemoryDevice mem_b;
    wg::Device a(*tun, bind_a), b(mem_b, bind_b);
    pair_up(a, b);
    bring_up();
    for (uint16_t seq = 1; seq <= 50; ++seq) {
      auto req = echo_request(0x7767, seq, 0);
      EXPECT(mem_b.inject(req));
      for (;;) {
        auto p = mem_b.take(5s);
        EXPECT_MSG(p, "no reply to echo request " + std::to_string(seq));
        if (is_echo_reply(0x7767, seq)(*p)) break;
      }
    }
    a.close();
    b.close();
  });
}

// The core over a 2-queue TUN and a Bind of 2 sockets per family: a reader per queue,
// flows spread over both, each flow in order, nothing lost either way.
//
//   64 local sockets -> wgt0 (2 queues) -> A (2 readers) -> LinuxBind (2 + 2 sockets)
//     -- 127.0.0.1 -- LinuxBind -> B (MemoryDevice) -> answers back to each socket
TEST_CASE("tun: the core reads a multi-queue TUN with a thread per queue, every flow whole and in order",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    sh("ip link set lo up");
    Tun::Options o;
    o.queues = 2;
    o.queue_len = 4096;  // the burst below (1,024) must not overflow the kernel's queue
    std::error_code ec;
    auto tun = Tun::create(kIf, 1420, o, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    conn::LinuxBind::Options bo;
    bo.sockets = 2;
    conn::LinuxBind bind_a(bo), bind_b;
    tun::MemoryDevice mem_b;
    const size_t readers_before = threads_named("wg-tun-read");
    wg::Device a(*tun, bind_a), b(mem_b, bind_b);
    // A's two readers and B's one (each names itself once it runs).
    EXPECT(eventually([&] { return threads_named("wg-tun-read") == readers_before + 3; }, 2s));
    pair_up(a, b, [](uint16_t port) { return *conn::Endpoint::parse("127.0.0.1:" + std::to_string(port)); });
    bring_up();

    step("the handshake, on a first datagram (packets waiting for a session may be dropped)");
    send_udp("first");
    for (;;) {
      auto p = mem_b.take(5s);
      EXPECT_MSG(p, "the first datagram never reached B");
      if (is_udp_to_discard(*p)) break;
    }

    step("64 flows x 16 datagrams from the kernel reach B, each flow in order");
    constexpr int kFlows = 64, kEach = 16;
    std::vector<wg::UniqueFd> socks;
    std::map<uint16_t, int> index_of;  // source port -> flow
    for (int f = 0; f < kFlows; ++f) {
      socks.push_back(udp_socket());
      sockaddr_in me{};
      socklen_t len = sizeof me;
      EXPECT(::getsockname(socks.back().get(), reinterpret_cast<sockaddr*>(&me), &len) == 0);
      index_of[ntohs(me.sin_port)] = f;
    }
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(9);
    std::memcpy(&peer.sin_addr, kPeer, 4);
    for (int i = 0; i < kEach; ++i)
      for (auto& s : socks) {
        const std::string payload = std::to_string(i);
        EXPECT(::sendto(s.get(), payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&peer), sizeof peer) ==
               static_cast<ssize_t>(payload.size()));
      }
    std::vector<int> next(kFlows, 0);
    for (int got = 0; got < kFlows * kEach;) {
      auto p = mem_b.take(5s);
      EXPECT_MSG(p, std::to_string(got) + " of " + std::to_string(kFlows * kEach) + " datagrams reached B");
      if (!is_udp_to_discard(*p)) continue;
      const auto it = index_of.find(be16(&(*p)[20]));
      EXPECT(it != index_of.end());
      const std::string payload(p->begin() + 28, p->end());
      EXPECT_MSG(payload == std::to_string(next[it->second]),
                 "flow " + std::to_string(it->second) + ": " + payload + " where " + std::to_string(next[it->second]) +
                     " was due");
      ++next[it->second];
      ++got;
    }

    step("an answer from B to every flow reaches its socket");
    for (auto& [port, f] : index_of) {
      auto pkt = udp_to_local("answer " + std::to_string(f), true, 9, port, 0);
      // udp_to_local's 198.19.0.2 -> 198.19.0.1 is what B sends back through the tunnel.
      EXPECT(mem_b.inject(std::move(pkt)));
    }
    for (int f = 0; f < kFlows; ++f) {
      pollfd pf{socks[f].get(), POLLIN, 0};
      EXPECT_MSG(::poll(&pf, 1, 5000) == 1, "no answer to flow " + std::to_string(f));
      char buf[64];
      const ssize_t r = ::recv(socks[f].get(), buf, sizeof buf, 0);
      EXPECT(r > 0 && std::string(buf, static_cast<size_t>(r)) == "answer " + std::to_string(f));
    }
    a.close();
    b.close();
  });
}

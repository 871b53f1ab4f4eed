// LinuxBind over real loopback sockets (no root needed), UDP GSO/GRO included, and
// parse_control against well-formed, truncated and hostile control buffers.
//
//   bind A (127.0.0.1 / ::1, port Pa)  ── 128 datagrams ──▶  bind B (port Pb)
//                                      ◀── reply from B's sticky source ──
//
// Loopback passes a UDP_SEGMENT send through whole: a receiver with UDP_GRO gets it as
// one coalesced message, one without gets the datagrams one by one.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <optional>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "bind/linux.hpp"
#include "offload_switches.hpp"
#include "skip.hpp"
#include "../support/eventually.hpp"
#include "../support/netns_child.hpp"
#include "../support/thread_state.hpp"

using conn::Endpoint;
using conn::LinuxBind;
using conn::ReceiveFn;
using namespace std::chrono_literals;

namespace {

constexpr size_t kBatch = LinuxBind::kBatchSize;

bool ipv6_loopback() {
  int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

// What the running kernel offers (loopback supports both from Linux 5.0 on).
bool kernel_gso() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int v = 0;
  socklen_t len = sizeof v;
  bool ok = ::getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &len) == 0;
  ::close(fd);
  return ok;
}

bool kernel_gro() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int one = 1;
  bool ok = ::setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
  ::close(fd);
  return ok;
}

Endpoint endpoint(const std::string& s) {
  auto ep = Endpoint::parse(s);
  REQUIRE(ep);
  return *ep;
}

std::string loopback(int family, uint16_t port) {
  return family == 4 ? "127.0.0.1:" + std::to_string(port) : "[::1]:" + std::to_string(port);
}

// Datagram i: its index in two bytes, then a pattern; sizes vary from 0 to 8000 bytes.
std::vector<uint8_t> datagram(size_t i, uint8_t salt) {
  size_t size = i == 0 ? 0 : std::max<size_t>(2, (i * 997) % 8001);
  std::vector<uint8_t> d(size);
  for (size_t k = 0; k < size; ++k) d[k] = static_cast<uint8_t>(k * 31 + i + salt);
  if (size >= 2) {
    d[0] = static_cast<uint8_t>(i >> 8);
    d[1] = static_cast<uint8_t>(i);
  }
  return d;
}

struct Received {
  std::vector<std::vector<uint8_t>> data;
  std::vector<Endpoint> eps;
  bool too_many = false;  // a receive returned more than it had buffers for
  // A datagram not where ReceiveFn promises: whole inside bufs[k] for a k <= its index,
  // k never decreasing, no two overlapping.
  bool misplaced = false;
  size_t in_place = 0;    // datagrams handed out inside another slot's buffer (not copied apart)
};

// Receives until `want` datagrams arrived or the receive fails (close() ends it), with
// `per_call` buffers of `buf_size` bytes per receive (the core uses 128 of 64 KB).
Received collect(const ReceiveFn& fn, size_t want, size_t buf_size = 9000, size_t per_call = kBatch) {
  std::vector<std::vector<uint8_t>> storage(per_call, std::vector<uint8_t>(buf_size));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<uint8_t*> at(per_call);
  std::vector<size_t> sizes(per_call);
  std::vector<Endpoint> eps(per_call);
  Received r;
  while (r.data.size() < want) {
    std::error_code ec;
    size_t n = fn(bufs, at, sizes, eps, ec);
    if (ec) break;
    if (n > per_call) {  // no REQUIRE off the test's thread
      r.too_many = true;
      break;
    }
    size_t k = 0;
    const uint8_t* end_of_last = nullptr;  // end of the previous datagram in bufs[k]
    for (size_t i = 0; i < n; ++i) {
      const size_t from = k;
      auto inside = [&](size_t j) {
        return at[i] >= storage[j].data() && at[i] + sizes[i] <= storage[j].data() + storage[j].size();
      };
      while (k <= i && !inside(k)) ++k;
      if (k > i || (k == from && end_of_last && at[i] < end_of_last)) {
        r.misplaced = true;
        return r;
      }
      end_of_last = at[i] + sizes[i];
      if (k != i) ++r.in_place;
      r.data.emplace_back(at[i], at[i] + sizes[i]);
      r.eps.push_back(eps[i]);
    }
  }
  return r;
}

// Runs collect() in a thread; gives up (closing `b`) after 5 s so a lost datagram fails
// the test instead of hanging it.
struct Collector {
  LinuxBind& b;
  std::future<Received> f;
  Collector(LinuxBind& bind, const ReceiveFn& fn, size_t want, size_t buf_size = 9000, size_t per_call = kBatch)
      : b(bind), f(std::async(std::launch::async, [=] { return collect(fn, want, buf_size, per_call); })) {}
  Received get() {
    if (f.wait_for(5s) != std::future_status::ready) b.close();
    return f.get();
  }
  // A failed REQUIRE unwinds past get(): end the receive before the future joins it.
  ~Collector() {
    if (f.valid()) b.close();
  }
};

void send_batch(LinuxBind& from, const std::vector<std::vector<uint8_t>>& dgs, Endpoint& to) {
  std::vector<std::span<const uint8_t>> spans(dgs.begin(), dgs.end());
  std::error_code ec;
  from.send(spans, to, ec);
  REQUIRE_FALSE(ec);
}

std::vector<std::vector<uint8_t>> make_batch(uint8_t salt) {
  std::vector<std::vector<uint8_t>> v;
  for (size_t i = 0; i < kBatch; ++i) v.push_back(datagram(i, salt));
  return v;
}

void check_arrived(const Received& r, const std::vector<std::vector<uint8_t>>& sent) {
  REQUIRE_FALSE(r.too_many);
  REQUIRE_FALSE(r.misplaced);
  REQUIRE(r.data.size() == sent.size());
  // Loopback keeps the order; compare one by one.
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("datagram " << i);
    REQUIRE(r.data[i] == sent[i]);
  }
}

// Every datagram came from `family` loopback at `port`, with the loopback address and
// interface as sticky source.
void check_senders(const Received& r, int family, uint16_t port) {
  Endpoint want = endpoint(loopback(family, port));
  const uint32_t lo = if_nametoindex("lo");
  for (auto& ep : r.eps) {
    REQUIRE(ep.same_destination(want));
    REQUIRE(ep.has_source);
    REQUIRE(ep.source_ifindex == lo);
    REQUIRE(std::equal(ep.source.begin(), ep.source.begin() + (family == 4 ? 4 : 16), want.addr.begin()));
  }
}

int bind_raw(int family, uint16_t port) {
  int fd = ::socket(family, SOCK_DGRAM, 0);
  REQUIRE(fd >= 0);
  int r;
  if (family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    r = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  } else {
    int one = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    r = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  int err = r == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

TEST_CASE("bind linux: open on port 0 gives one port to IPv4 and IPv6", "[bind]") {
  LinuxBind b;
  uint16_t port = 0;
  std::error_code ec;
  auto fns = b.open(0, port, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(port != 0);
  REQUIRE(b.batch_size() == 128);
  REQUIRE(bind_raw(AF_INET, port) == EADDRINUSE);
  if (ipv6_loopback()) {
    REQUIRE(fns.size() == 2);
    REQUIRE(bind_raw(AF_INET6, port) == EADDRINUSE);
  }

  SECTION("a second open is refused") {
    uint16_t again = 0;
    REQUIRE(b.open(0, again, ec).empty());
    REQUIRE(ec == std::errc::already_connected);
  }
  SECTION("after close the port is free and can be opened by number") {
    b.close();
    LinuxBind c;
    uint16_t got = 0;
    auto fns2 = c.open(port, got, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(got == port);
    REQUIRE(fns2.size() == fns.size());
  }
}

TEST_CASE("bind linux: opening a port in use fails with address_in_use", "[bind]") {
  LinuxBind a, b;
  uint16_t port = 0, other = 0;
  std::error_code ec;
  a.open(0, port, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(b.open(port, other, ec).empty());
  REQUIRE(ec == std::errc::address_in_use);
  // b stayed closed and can still open elsewhere.
  REQUIRE(b.open(0, other, ec).size() >= 1);
  REQUIRE_FALSE(ec);
  REQUIRE(other != port);
}

// Options::sockets: a SO_REUSEPORT group per family on one port, a receive function per
// socket, datagrams spread by sender; never joining a group someone else holds.
TEST_CASE("bind linux: several sockets per family share the port and spread senders over their receivers",
          "[bind]") {
  LinuxBind::Options o;
  o.sockets = 3;
  LinuxBind b(o);
  uint16_t port = 0;
  std::error_code ec;
  auto fns = b.open(0, port, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(port != 0);
  const size_t families = ipv6_loopback() ? 2 : 1;
  REQUIRE(fns.size() == 3 * families);
  REQUIRE(bind_raw(AF_INET, port) == EADDRINUSE);

  SECTION("64 senders over IPv4: every datagram once, on the first three receivers, spread") {
    constexpr int kSenders = 64, kEach = 4;
    constexpr uint8_t kMarker = 0xff;  // second byte of a sender's last datagram
    std::vector<std::unique_ptr<LinuxBind>> senders;
    for (int i = 0; i < kSenders; ++i) {
      senders.push_back(std::make_unique<LinuxBind>());
      uint16_t p = 0;
      senders.back()->open(0, p, ec);
      REQUIRE_FALSE(ec);
    }
    // Each receiver counts data into `total` and end markers into `markers`; the test
    // closes the bind once every marker arrived (or after 10 s, which then fails
    // below), never on a fixed sleep.
    std::atomic<size_t> total{0}, markers{0};
    std::vector<std::future<std::vector<std::vector<uint8_t>>>> got;
    for (size_t r = 0; r < 3; ++r)
      got.push_back(std::async(std::launch::async, [&, r] {
        std::vector<std::vector<uint8_t>> storage(kBatch, std::vector<uint8_t>(2048)), out;
        std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
        std::vector<uint8_t*> at(kBatch);
        std::vector<size_t> sizes(kBatch);
        std::vector<Endpoint> eps(kBatch);
        for (;;) {
          std::error_code e;
          const size_t n = fns[r](bufs, at, sizes, eps, e);
          if (e) return out;
          for (size_t i = 0; i < n; ++i) {
            out.emplace_back(at[i], at[i] + sizes[i]);
            ++(sizes[i] == 2 && at[i][1] == kMarker ? markers : total);
          }
        }
      }));
    for (int i = 0; i < kSenders; ++i) {
      Endpoint to = endpoint(loopback(4, port));
      std::vector<std::vector<uint8_t>> d;
      for (int k = 0; k < kEach; ++k) d.push_back({static_cast<uint8_t>(i), static_cast<uint8_t>(k)});
      send_batch(*senders[i], d, to);
    }
    const bool all_data = wgtest::eventually([&] { return total >= kSenders * kEach; }, 10s, 1ms);
    // Then each sender's marker: the kernel puts one sender's datagrams on one socket
    // of the group, in order, so once a sender's marker is read, a duplicate of its
    // datagrams would have been read before it.
    for (int i = 0; i < kSenders; ++i) {
      Endpoint to = endpoint(loopback(4, port));
      const std::vector<std::vector<uint8_t>> marker{std::vector<uint8_t>{static_cast<uint8_t>(i), kMarker}};
      send_batch(*senders[i], marker, to);
    }
    const bool all_markers = wgtest::eventually([&] { return markers >= kSenders; }, 10s, 1ms);
    b.close();  // first: a failed REQUIRE would otherwise wait on blocked receivers
    REQUIRE(all_data);
    REQUIRE(all_markers);
    std::map<int, std::set<size_t>> receiver_of;  // sender -> receivers that got its datagrams
    size_t used = 0;
    for (size_t r = 0; r < 3; ++r) {
      const auto rec = got[r].get();
      used += !rec.empty();
      for (auto& d : rec) {
        REQUIRE(d.size() == 2);
        receiver_of[d[0]].insert(r);
      }
    }
    CHECK(total == kSenders * kEach);
    CHECK(markers == kSenders);
    CHECK(receiver_of.size() == kSenders);
    for (auto& [sender, rs] : receiver_of) CHECK(rs.size() == 1);  // one sender (marker too), one socket
    CHECK(used >= 2);  // 64 senders all on one of 3 sockets: (1/3)^63
  }
  SECTION("sends go out, from the group's port") {
    LinuxBind peer;
    uint16_t peer_port = 0;
    auto peer_fns = peer.open(0, peer_port, ec);
    REQUIRE_FALSE(ec);
    Collector c(peer, peer_fns[0], kBatch);
    Endpoint to = endpoint(loopback(4, peer_port));
    auto sent = make_batch(9);
    send_batch(b, sent, to);
    auto r = c.get();
    check_arrived(r, sent);
    check_senders(r, 4, port);
  }
}

TEST_CASE("bind linux: a socket group never joins a port another socket holds, with or without SO_REUSEPORT",
          "[bind]") {
  LinuxBind::Options o;
  o.sockets = 2;
  std::error_code ec;
  // Held by another group (of our user: the kernel would let us join), or by a plain socket.
  for (bool holder_is_group : {true, false}) {
    INFO((holder_is_group ? "held by another group" : "held by a plain socket"));
    LinuxBind holder(holder_is_group ? o : LinuxBind::Options{}), group(o);
    uint16_t port = 0, other = 0;
    holder.open(0, port, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(group.open(port, other, ec).empty());
    REQUIRE(ec == std::errc::address_in_use);
  }
  SECTION("a free port by number, then a plain socket cannot have it") {
    LinuxBind probe;
    uint16_t port = 0, got = 0;
    probe.open(0, port, ec);
    REQUIRE_FALSE(ec);
    probe.close();
    LinuxBind group(o);
    REQUIRE(group.open(port, got, ec).size() >= 2);
    REQUIRE_FALSE(ec);
    REQUIRE(got == port);
    REQUIRE(bind_raw(AF_INET, port) == EADDRINUSE);
  }
  SECTION("zero sockets is invalid") {
    o.sockets = 0;
    LinuxBind none(o);
    uint16_t port = 0;
    REQUIRE(none.open(0, port, ec).empty());
    REQUIRE(ec == std::errc::invalid_argument);
  }
}

// Port 0: the kernel, picking a port for a socket with SO_REUSEPORT, may pick one that a
// group of our own user holds and so join it. With one ephemeral port in the namespace,
// held by a group, open(0) of another group must not end up on it.
TEST_CASE("bind linux: a socket group on port 0 does not join a group holding the only free port",
          "[bind][root]") {
  WGNET_REQUIRE_ROOT();
  wgtest::require_in_netns([] {
    wgtest::sh("ip link set lo up");
    wgtest::write_file("/proc/sys/net/ipv4/ip_local_port_range", "40000 40000");
    LinuxBind::Options o;
    o.sockets = 2;
    LinuxBind holder(o), group(o);
    std::error_code ec;
    uint16_t port = 0, got = 0;
    holder.open(40000, port, ec);
    EXPECT_MSG(!ec && port == 40000, ec.message());
    const bool opened = !group.open(0, got, ec).empty();
    EXPECT_MSG(!opened && ec == std::errc::address_in_use,
               opened ? "joined port " + std::to_string(got) : "failed with " + ec.message());
  });
}

TEST_CASE("bind linux: a batch of 128 crosses loopback with sender and sticky source", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family);
  LinuxBind a, b;
  uint16_t pa = 0, pb = 0;
  std::error_code ec;
  auto fa = a.open(0, pa, ec);
  REQUIRE_FALSE(ec);
  auto fb = b.open(0, pb, ec);
  REQUIRE_FALSE(ec);
  const size_t slot = family == 4 ? 0 : 1;
  REQUIRE(fa.size() > slot);

  auto sent = make_batch(1);
  Collector at_b(b, fb[slot], kBatch);
  Endpoint to_b = endpoint(loopback(family, pb));
  send_batch(a, sent, to_b);
  Received r = at_b.get();
  check_arrived(r, sent);
  check_senders(r, family, pa);

  // B answers from the sticky source it learnt; the source stays valid.
  Endpoint back = r.eps.back();
  auto reply = make_batch(2);
  Collector at_a(a, fa[slot], kBatch);
  send_batch(b, reply, back);
  REQUIRE(back.has_source);
  Received r2 = at_a.get();
  check_arrived(r2, reply);
  check_senders(r2, family, pb);
}

// A datagram to a closed port draws an ICMP port unreachable, reported from the receive
// function with the datagram's destination.
TEST_CASE("bind linux: a datagram to a closed port is reported as refused, with its destination", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family);
  LinuxBind a, b;
  std::mutex mu;
  std::vector<Endpoint> refused;
  a.set_unreachable([&](const Endpoint& ep) {
    std::lock_guard lock(mu);
    refused.push_back(ep);
  });
  uint16_t pa = 0, pb = 0;
  std::error_code ec;
  auto fa = a.open(0, pa, ec);
  REQUIRE_FALSE(ec);
  auto fb = b.open(0, pb, ec);
  REQUIRE_FALSE(ec);
  const size_t slot = family == 4 ? 0 : 1;
  REQUIRE(fa.size() > slot);
  uint16_t closed = 0;  // a port known to be free: opened, then closed
  {
    LinuxBind c;
    c.open(0, closed, ec);
    REQUIRE_FALSE(ec);
  }

  // a's receive function reads the queued error and reports it, then still takes a
  // datagram from b.
  Collector at_a(a, fa[slot], 1);
  Endpoint nowhere = endpoint(loopback(family, closed));
  std::vector<std::vector<uint8_t>> one{datagram(0, 9)};
  send_batch(a, one, nowhere);
  REQUIRE(wgtest::eventually([&] {
    std::lock_guard lock(mu);
    return !refused.empty();
  }));
  std::vector<std::vector<uint8_t>> back{datagram(1, 4)};
  Endpoint to_a = endpoint(loopback(family, pa));
  send_batch(b, back, to_a);
  check_arrived(at_a.get(), back);
  std::lock_guard lock(mu);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].same_destination(nowhere));
}

TEST_CASE("bind linux: a bogus sticky source is cleared and the batch still arrives", "[bind]") {
  int family = GENERATE(4, 6);
  // A test-network address no interface here has (IPv4: ENETUNREACH, IPv6: EINVAL), or
  // the loopback address on an interface that does not exist (ENODEV).
  bool bogus_address = GENERATE(true, false);
  // Equal sizes go as UDP_SEGMENT messages, which the kernel refuses first.
  bool equal_sizes = GENERATE(false, true);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family << (bogus_address ? " bogus address" : " bogus interface")
             << (equal_sizes ? ", equal sizes" : ""));
  LinuxBind a(LinuxBind::Options{}), b;
  uint16_t pa = 0, pb = 0;
  std::error_code ec;
  a.open(0, pa, ec);
  REQUIRE_FALSE(ec);
  auto fb = b.open(0, pb, ec);
  REQUIRE_FALSE(ec);

  Endpoint to_b = endpoint(loopback(family, pb));
  Endpoint bogus = endpoint(family == 4 ? "198.18.0.77:1" : "[fd00:18::77]:1");
  to_b.has_source = true;
  to_b.source = bogus_address ? bogus.addr : to_b.addr;
  to_b.source_ifindex = bogus_address ? if_nametoindex("lo") : 999999;

  auto sent = equal_sizes ? std::vector<std::vector<uint8_t>>(kBatch, std::vector<uint8_t>(1000, 3)) : make_batch(3);
  for (size_t i = 0; i < sent.size() && equal_sizes; ++i) sent[i][0] = static_cast<uint8_t>(i);
  Collector at_b(b, fb[family == 4 ? 0 : 1], kBatch);
  send_batch(a, sent, to_b);
  REQUIRE(a.gso_enabled() == kernel_gso());  // a refusal other than EIO leaves GSO on
  REQUIRE_FALSE(to_b.has_source);
  REQUIRE(to_b.source_ifindex == 0);
  Received r = at_b.get();
  check_arrived(r, sent);
  check_senders(r, family, pa);
}

TEST_CASE("bind linux: close unblocks a blocked receive, later receives are canceled", "[bind]") {
  LinuxBind b;
  uint16_t port = 0;
  std::error_code ec;
  auto fns = b.open(0, port, ec);
  REQUIRE_FALSE(ec);

  std::vector<uint8_t> storage(2048);
  std::array<std::span<uint8_t>, 1> bufs{std::span(storage)};
  std::array<uint8_t*, 1> at{};
  std::array<size_t, 1> sizes{};
  std::array<Endpoint, 1> eps{};
  std::atomic<pid_t> receiver{0};
  auto blocked = std::async(std::launch::async, [&] {
    receiver = ::gettid();
    std::error_code e;
    size_t n = fns[0](bufs, at, sizes, eps, e);
    return std::pair{n, e};
  });
  // Asleep in the receive, not on its way to it: close() must wake it, not merely make
  // a later call fail.
  REQUIRE(wgtest::blocked_in_kernel(receiver));
  REQUIRE(blocked.wait_for(0s) == std::future_status::timeout);

  // The receive waits without a deadline, so operation_canceled can only come from
  // close() waking it. close() waits for the receive to leave, so it runs beside the
  // test: a receive it fails to wake is released by a datagram after 10 s and then
  // returns that datagram, failing below instead of hanging the test.
  auto closing = std::async(std::launch::async, [&] { b.close(); });
  if (blocked.wait_for(10s) != std::future_status::ready) {
    LinuxBind sender;
    uint16_t p = 0;
    sender.open(0, p, ec);
    const std::vector<std::vector<uint8_t>> release{std::vector<uint8_t>{1}};
    for (int family : {4, 6})
      if (family == 4 || ipv6_loopback()) {
        Endpoint to = endpoint(loopback(family, port));
        send_batch(sender, release, to);
      }
  }
  closing.get();
  auto [n, e] = blocked.get();
  REQUIRE(n == 0);
  REQUIRE(e == std::errc::operation_canceled);

  for (auto& fn : fns) {
    std::error_code e2;
    REQUIRE(fn(bufs, at, sizes, eps, e2) == 0);
    REQUIRE(e2 == std::errc::operation_canceled);
  }
  b.close();  // idempotent

  Endpoint ep = endpoint(loopback(4, port));
  std::array<std::span<const uint8_t>, 1> out{std::span<const uint8_t>(storage)};
  b.send(out, ep, ec);
  REQUIRE(ec == std::errc::not_connected);

  SECTION("receive functions of an earlier open stay canceled after reopening") {
    uint16_t p2 = 0;
    auto fresh = b.open(0, p2, ec);
    REQUIRE_FALSE(ec);
    std::error_code e3;
    REQUIRE(fns[0](bufs, at, sizes, eps, e3) == 0);
    REQUIRE(e3 == std::errc::operation_canceled);
  }
}

TEST_CASE("bind linux: set_mark follows the privilege to set SO_MARK", "[bind]") {
  LinuxBind b;
  uint16_t port = 0;
  std::error_code ec;
  b.open(0, port, ec);
  REQUIRE_FALSE(ec);
  b.set_mark(0, ec);  // the current mark: nothing to do, no privilege needed
  REQUIRE_FALSE(ec);

  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int mark = 0x51820;
  bool privileged = ::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) == 0;
  ::close(fd);
  b.set_mark(0x51820, ec);
  if (privileged) {
    REQUIRE_FALSE(ec);
    b.close();
    b.open(0, port, ec);  // reapplied on open
    REQUIRE_FALSE(ec);
  } else {
    REQUIRE(ec == std::errc::operation_not_permitted);
  }
}

// ---- UDP GSO / GRO ---------------------------------------------------------------

namespace {

using Datagrams = std::vector<std::vector<uint8_t>>;

// `count` datagrams of `size` bytes (index in the first two bytes, then a pattern), and
// optionally a shorter last one.
Datagrams equal_batch(size_t count, size_t size, uint8_t salt, size_t last = 0) {
  Datagrams v;
  auto make = [&](size_t i, size_t n) {
    std::vector<uint8_t> d(n);
    for (size_t k = 0; k < n; ++k) d[k] = static_cast<uint8_t>(k * 7 + i * 3 + salt);
    if (n >= 2) {
      d[0] = static_cast<uint8_t>(i >> 8);
      d[1] = static_cast<uint8_t>(i);
    }
    return d;
  };
  for (size_t i = 0; i < count; ++i) v.push_back(make(i, size));
  if (last) v.push_back(make(count, last));
  return v;
}

// Datagrams of the given sizes, each one distinct.
Datagrams sized_batch(const std::vector<size_t>& sizes, uint8_t salt) {
  Datagrams v;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> d(sizes[i]);
    for (size_t k = 0; k < d.size(); ++k) d[k] = static_cast<uint8_t>(k * 13 + i + salt);
    if (d.size() >= 2) {
      d[0] = static_cast<uint8_t>(i >> 8);
      d[1] = static_cast<uint8_t>(i);
    }
    v.push_back(std::move(d));
  }
  return v;
}

Datagrams concat(std::initializer_list<Datagrams> parts) {
  Datagrams v;
  for (auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

struct Pair {
  LinuxBind a, b;
  uint16_t pa = 0, pb = 0;
  std::vector<ReceiveFn> fa, fb;
  Pair(LinuxBind::Options oa, LinuxBind::Options ob) : a(oa), b(ob) {
    std::error_code ec;
    fa = a.open(0, pa, ec);
    REQUIRE_FALSE(ec);
    fb = b.open(0, pb, ec);
    REQUIRE_FALSE(ec);
  }
};

LinuxBind::Options options(bool gso, bool gro) {
  LinuxBind::Options o;
  o.gso = gso;
  o.gro = gro;
  return o;
}

// A plain UDP socket on loopback, optionally with UDP_GRO: sees the messages exactly as
// the kernel delivers them.
struct RawSocket {
  int fd = -1;
  uint16_t port = 0;
  RawSocket(int family, bool gro) {
    fd = ::socket(family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    int one = 1;
    if (gro) REQUIRE(::setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0);
    int buf = 4 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == 4) {
      auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
      sa->sin_family = AF_INET;
      sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *sa;
    } else {
      auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
      sa->sin6_family = AF_INET6;
      sa->sin6_addr = in6addr_loopback;
      len = sizeof *sa;
    }
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0);
    port = ntohs(family == 4 ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                             : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  ~RawSocket() { ::close(fd); }

  struct Message {
    std::vector<uint8_t> data;
    int gso = 0;  // from UDP_GRO; 0 when absent
  };
  // Messages until none comes for 200 ms.
  std::vector<Message> drain() {
    std::vector<Message> out;
    std::vector<uint8_t> buf(70000);
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) return out;
      alignas(cmsghdr) char control[256];
      iovec iov{buf.data(), buf.size()};
      msghdr h{};
      h.msg_iov = &iov;
      h.msg_iovlen = 1;
      h.msg_control = control;
      h.msg_controllen = sizeof control;
      ssize_t n = ::recvmsg(fd, &h, 0);
      REQUIRE(n >= 0);
      Message m;
      m.data.assign(buf.begin(), buf.begin() + n);
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) std::memcpy(&m.gso, CMSG_DATA(c), sizeof m.gso);
      out.push_back(std::move(m));
    }
  }
};

// Every datagram of `r` is the one sent at its place, from A's port.
void check_from(const Received& r, const Datagrams& sent, int family, uint16_t port) {
  check_arrived(r, sent);
  Endpoint want = endpoint(loopback(family, port));
  for (auto& ep : r.eps) REQUIRE(ep.same_destination(want));
}

}  // namespace

TEST_CASE("bind linux: GSO and GRO are on by default where the kernel has them", "[bind]") {
  LinuxBind b(LinuxBind::Options{});
  REQUIRE_FALSE(b.gso_enabled());  // nothing probed before open()
  REQUIRE_FALSE(b.gro_enabled());
  uint16_t port = 0;
  std::error_code ec;
  b.open(0, port, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(b.gso_enabled() == kernel_gso());
  REQUIRE(b.gro_enabled() == kernel_gro());

  LinuxBind off(options(false, false));
  off.open(0, port, ec);
  REQUIRE_FALSE(ec);
  REQUIRE_FALSE(off.gso_enabled());
  REQUIRE_FALSE(off.gro_enabled());
}

TEST_CASE("bind linux: the programs' WG_DISABLE_UDP_GSO / WG_DISABLE_UDP_GRO switch the offloads off and the library ignores them", "[bind]") {
  // The Bind read them itself, so an embedding program inherited switches it never asked for.
  struct Env {  // restores both variables
    std::optional<std::string> gso, gro;
    Env() {
      if (const char* v = std::getenv("WG_DISABLE_UDP_GSO")) gso = v;
      if (const char* v = std::getenv("WG_DISABLE_UDP_GRO")) gro = v;
    }
    ~Env() {
      restore("WG_DISABLE_UDP_GSO", gso);
      restore("WG_DISABLE_UDP_GRO", gro);
    }
    static void restore(const char* name, const std::optional<std::string>& v) {
      if (v) ::setenv(name, v->c_str(), 1);
      else ::unsetenv(name);
    }
  } env;
  ::unsetenv("WG_DISABLE_UDP_GSO");
  ::unsetenv("WG_DISABLE_UDP_GRO");
  REQUIRE(programs::offloads_from_environment().bind.gso);
  REQUIRE(programs::offloads_from_environment().bind.gro);
  auto opened = [](LinuxBind& b) {
    uint16_t port = 0;
    std::error_code ec;
    b.open(0, port, ec);
    REQUIRE_FALSE(ec);
  };

  ::setenv("WG_DISABLE_UDP_GSO", "1", 1);
  ::setenv("WG_DISABLE_UDP_GRO", "0", 1);  // "0" (or empty) leaves it on
  {
    LinuxBind b(programs::offloads_from_environment(false).bind);
    opened(b);
    REQUIRE_FALSE(b.gso_enabled());
    REQUIRE(b.gro_enabled() == kernel_gro());
    LinuxBind plain;
    opened(plain);
    REQUIRE(plain.gso_enabled() == kernel_gso());
    REQUIRE(plain.gro_enabled() == kernel_gro());
  }
  ::setenv("WG_DISABLE_UDP_GSO", "", 1);
  ::setenv("WG_DISABLE_UDP_GRO", "1", 1);
  {
    LinuxBind b(programs::offloads_from_environment(false).bind);
    opened(b);
    REQUIRE(b.gso_enabled() == kernel_gso());
    REQUIRE_FALSE(b.gro_enabled());
    LinuxBind plain;
    opened(plain);
    REQUIRE(plain.gso_enabled() == kernel_gso());
    REQUIRE(plain.gro_enabled() == kernel_gro());
  }
}

TEST_CASE("bind linux: 128 equal datagrams and a shorter last arrive intact, GSO/GRO on and off", "[bind]") {
  int family = GENERATE(4, 6);
  bool gso = GENERATE(true, false);
  bool gro = GENERATE(true, false);
  // 64 KB buffers take messages straight from the kernel; smaller ones go through the
  // socket's scratch.
  size_t buf_size = GENERATE(size_t{65600}, size_t{2048});
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family << " gso " << gso << " gro " << gro << " buffers " << buf_size);
  Pair p(options(gso, true), options(true, gro));
  REQUIRE(p.a.gso_enabled() == (gso && kernel_gso()));
  REQUIRE(p.b.gro_enabled() == (gro && kernel_gro()));
  const size_t slot = family == 4 ? 0 : 1;

  auto sent = equal_batch(128, 1420, 1, 700);
  Collector at_b(p.b, p.fb[slot], sent.size(), buf_size);
  Endpoint to_b = endpoint(loopback(family, p.pb));
  send_batch(p.a, sent, to_b);
  Received r = at_b.get();
  check_arrived(r, sent);
  check_senders(r, family, p.pa);
  // Zero-copy receive: a coalesced message read into a 64 KB buffer hands its datagrams
  // out where they landed (all but each message's first lie in another slot's buffer);
  // through the scratch (small buffers) or without coalescing, each is in its own.
  const bool coalesced = p.a.gso_enabled() && p.b.gro_enabled();
  if (coalesced && buf_size == 65600)
    CHECK(r.in_place >= sent.size() / 2);
  else
    CHECK(r.in_place == 0);
}

TEST_CASE("bind linux: the sender coalesces runs as the rules say", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  if (!kernel_gso() || !kernel_gro()) WGNET_SKIP("the kernel has no UDP GSO or GRO");
  INFO("IPv" << family);
  LinuxBind a(options(true, true));
  uint16_t pa = 0;
  std::error_code ec;
  a.open(0, pa, ec);
  REQUIRE_FALSE(ec);
  RawSocket raw(family, true);  // sees each UDP_SEGMENT message whole
  Endpoint to = endpoint(loopback(family, raw.port));

  struct Want {
    size_t datagrams;
    int gso;  // 0: a single datagram
  };
  Datagrams sent;
  std::vector<Want> want;
  SECTION("byte limit: 46 x 1420 bytes fit 65507 (IPv4) and 65527 (IPv6), 47 do not") {
    sent = equal_batch(128, 1420, 2, 700);
    // The 129th datagram is in the next sendmmsg (128 datagrams each): alone.
    want = {{46, 1420}, {46, 1420}, {36, 1420}, {1, 0}};
  }
  SECTION("segment limit: 64 per message; 128 datagrams per sendmmsg") {
    sent = equal_batch(200, 100, 3);
    want = {{64, 100}, {64, 100}, {64, 100}, {8, 100}};
  }
  SECTION("a shorter datagram ends a run, a longer or empty one starts a new one") {
    std::vector<size_t> sizes = {1000, 1000, 1000, 1000, 1000, 500,  // run + shorter last
                                 1000, 1000, 1000,                   // a longer one follows
                                 1200, 1200,                         // an empty one follows
                                 0,                                  // alone
                                 1200, 1200, 300};                   // run + shorter last
    for (int i = 0; i < 69; ++i) sizes.push_back(300);               // 64, then 5
    sizes.push_back(2000);                                           // longer: a new run,
    sizes.push_back(7);                                              // which 7 ends
    sizes.push_back(7);                                              // alone at the end
    sent = sized_batch(sizes, 4);
    want = {{6, 1000}, {3, 1000}, {2, 1200}, {1, 0}, {3, 1200}, {64, 300}, {5, 300}, {2, 2000}, {1, 0}};
  }
  send_batch(a, sent, to);
  auto msgs = raw.drain();
  REQUIRE(msgs.size() == want.size());
  size_t next = 0;
  for (size_t m = 0; m < msgs.size(); ++m) {
    INFO("message " << m);
    REQUIRE(msgs[m].gso == want[m].gso);
    // The message is its datagrams back to back.
    std::vector<uint8_t> joined;
    for (size_t d = 0; d < want[m].datagrams; ++d) joined.insert(joined.end(), sent[next + d].begin(), sent[next + d].end());
    REQUIRE(msgs[m].data == joined);
    next += want[m].datagrams;
  }
  REQUIRE(next == sent.size());
}

TEST_CASE("bind linux: a receiver without GRO gets every datagram of a GSO send on its own", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family);
  LinuxBind a(options(true, true));
  uint16_t pa = 0;
  std::error_code ec;
  a.open(0, pa, ec);
  REQUIRE_FALSE(ec);
  RawSocket raw(family, false);
  Endpoint to = endpoint(loopback(family, raw.port));

  auto sent = concat({equal_batch(128, 1420, 5, 700), equal_batch(100, 64, 6), sized_batch({900, 900, 0, 80}, 7)});
  send_batch(a, sent, to);
  auto msgs = raw.drain();
  REQUIRE(msgs.size() == sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("datagram " << i);
    REQUIRE(msgs[i].gso == 0);
    REQUIRE(msgs[i].data == sent[i]);
  }
}

TEST_CASE("bind linux: mixed sizes and runs longer than 64 arrive in order", "[bind]") {
  int family = GENERATE(4, 6);
  size_t buf_size = GENERATE(size_t{65600}, size_t{2048});
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family << " buffers " << buf_size);
  Pair p(options(true, true), options(true, true));
  const size_t slot = family == 4 ? 0 : 1;
  std::vector<size_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back(200);  // runs of 64
  for (int i = 0; i < 50; ++i) sizes.push_back(i % 7 == 6 ? 100 : 1300);
  sizes.push_back(0);
  for (int i = 0; i < 30; ++i) sizes.push_back(1500 - i);  // each one shorter: runs of 2
  auto sent = sized_batch(sizes, 8);
  Collector at_b(p.b, p.fb[slot], sent.size(), buf_size);
  Endpoint to_b = endpoint(loopback(family, p.pb));
  send_batch(p.a, sent, to_b);
  check_from(at_b.get(), sent, family, p.pa);
}

TEST_CASE("bind linux: two senders' coalesced batches reach one receiver, each in order", "[bind]") {
  Pair p(options(true, true), options(true, true));
  LinuxBind c(options(true, true));
  uint16_t pc = 0;
  std::error_code ec;
  c.open(0, pc, ec);
  REQUIRE_FALSE(ec);
  auto from_a = equal_batch(128, 1000, 9, 10);
  auto from_c = equal_batch(128, 1100, 10, 20);
  Collector at_b(p.b, p.fb[0], from_a.size() + from_c.size(), 65600);
  Endpoint to_b = endpoint(loopback(4, p.pb));
  auto sa = std::async(std::launch::async, [&] {
    Endpoint to = to_b;
    for (size_t i = 0; i < from_a.size(); i += 43) {  // several sends, interleaving with C's
      std::vector<std::span<const uint8_t>> part(from_a.begin() + static_cast<ptrdiff_t>(i),
                                                 from_a.begin() + static_cast<ptrdiff_t>(std::min(i + 43, from_a.size())));
      std::error_code e;
      p.a.send(part, to, e);
      if (e) return e;
    }
    return std::error_code{};
  });
  {
    Endpoint to = to_b;
    std::vector<std::span<const uint8_t>> all(from_c.begin(), from_c.end());
    c.send(all, to, ec);
    REQUIRE_FALSE(ec);
  }
  REQUIRE_FALSE(sa.get());
  Received r = at_b.get();
  REQUIRE_FALSE(r.too_many);
  Received ra, rc;
  for (size_t i = 0; i < r.data.size(); ++i) {
    REQUIRE((r.eps[i].port == p.pa || r.eps[i].port == pc));
    Received& to = r.eps[i].port == p.pa ? ra : rc;
    to.data.push_back(r.data[i]);
    to.eps.push_back(r.eps[i]);
  }
  check_senders(ra, 4, p.pa);
  check_senders(rc, 4, pc);
  check_arrived(ra, from_a);
  check_arrived(rc, from_c);
}

TEST_CASE("bind linux: what does not fit the receiver's batch is carried to the next call", "[bind]") {
  int family = GENERATE(4, 6);
  size_t buf_size = GENERATE(size_t{65600}, size_t{2048});
  size_t per_call = GENERATE(size_t{1}, size_t{4}, size_t{100}, kBatch);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family << " buffers " << buf_size << " x " << per_call);
  Pair p(options(true, true), options(true, true));
  const size_t slot = family == 4 ? 0 : 1;
  Endpoint to_b = endpoint(loopback(family, p.pb));

  // Everything is queued before the first receive, so reads meet several coalesced
  // messages at once, mixed with single datagrams: 46-datagram messages, a 37 with a
  // short last, 3 singles of rising size, 64-datagram messages, a 2 and a single.
  Datagrams sent;
  auto add = [&](Datagrams d) {
    send_batch(p.a, d, to_b);
    sent.insert(sent.end(), d.begin(), d.end());
  };
  add(equal_batch(128, 1420, 11, 700));
  add(sized_batch({10, 20, 30}, 12));
  add(equal_batch(130, 100, 13));
  add(equal_batch(1, 1420, 14));
  add(equal_batch(128, 1420, 15));

  Received r = collect(p.fb[slot], sent.size(), buf_size, per_call);
  check_from(r, sent, family, p.pa);
}

TEST_CASE("bind linux: the sticky source works with GSO", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family);
  Pair p(options(true, true), options(true, true));
  const size_t slot = family == 4 ? 0 : 1;
  auto sent = equal_batch(128, 1420, 16);
  Collector at_b(p.b, p.fb[slot], sent.size(), 65600);
  Endpoint to_b = endpoint(loopback(family, p.pb));
  send_batch(p.a, sent, to_b);
  Received r = at_b.get();
  check_arrived(r, sent);
  check_senders(r, family, p.pa);

  // B answers A from the source it learnt, coalesced with UDP_SEGMENT and PKTINFO in one
  // control buffer.
  Endpoint back = r.eps.back();
  REQUIRE(back.has_source);
  auto reply = equal_batch(100, 1000, 17, 5);
  Collector at_a(p.a, p.fa[slot], reply.size(), 65600);
  send_batch(p.b, reply, back);
  REQUIRE(back.has_source);
  REQUIRE(p.b.gso_enabled() == kernel_gso());
  Received r2 = at_a.get();
  check_arrived(r2, reply);
  check_senders(r2, family, p.pb);
}

namespace {

// A sendmmsg that refuses every UDP_SEGMENT message with `refusal_errno`, as a kernel
// whose egress device cannot checksum does with EIO; messages before the first
// segmented one go out for real. Counts the refusals.
std::atomic<int> refusal_errno{EIO};
std::atomic<int> segmented_seen{0};

bool is_segmented(const mmsghdr& m) {
  const msghdr& h = m.msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c))
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_SEGMENT) return true;
  return false;
}

int refusing_sendmmsg(int fd, mmsghdr* msgs, unsigned n, int flags) {
  unsigned k = 0;
  while (k < n && !is_segmented(msgs[k])) ++k;
  if (k == 0 && n > 0) {
    ++segmented_seen;
    errno = refusal_errno.load();
    return -1;
  }
  return ::sendmmsg(fd, msgs, k, flags);
}

}  // namespace

TEST_CASE("bind linux: EIO on a segmented send turns GSO off and loses nothing", "[bind]") {
  if (!kernel_gso()) WGNET_SKIP("the kernel has no UDP GSO");
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) WGNET_SKIP("no IPv6 loopback address");
  INFO("IPv" << family);
  refusal_errno = EIO;
  segmented_seen = 0;
  LinuxBind::Options oa = options(true, true);
  oa.sendmmsg = refusing_sendmmsg;
  Pair p(oa, options(true, true));
  const size_t slot = family == 4 ? 0 : 1;
  REQUIRE(p.a.gso_enabled());

  // Single datagrams first (sent before the refusal), then runs: nothing twice, nothing lost.
  auto sent = concat({sized_batch({50, 60, 70}, 18), equal_batch(125, 1420, 19)});
  auto more = equal_batch(128, 1420, 20);
  Collector at_b(p.b, p.fb[slot], sent.size() + more.size(), 65600);
  Endpoint to_b = endpoint(loopback(family, p.pb));
  send_batch(p.a, sent, to_b);
  REQUIRE_FALSE(p.a.gso_enabled());
  REQUIRE(segmented_seen == 1);

  // Later sends go unsegmented straight away.
  send_batch(p.a, more, to_b);
  REQUIRE(segmented_seen == 1);
  Received r = at_b.get();
  check_from(r, concat({sent, more}), family, p.pa);

  SECTION("a reopen probes again") {
    std::error_code ec;
    p.a.close();
    p.a.open(0, p.pa, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.a.gso_enabled());
  }
}

TEST_CASE("bind linux: another refusal of a segmented send resends it unsegmented, GSO stays on", "[bind]") {
  if (!kernel_gso()) WGNET_SKIP("the kernel has no UDP GSO");
  refusal_errno = EINVAL;  // e.g. a segment above the path MTU
  segmented_seen = 0;
  LinuxBind::Options oa = options(true, true);
  oa.sendmmsg = refusing_sendmmsg;
  Pair p(oa, options(true, true));
  auto sent = equal_batch(128, 1420, 21, 700);
  Collector at_b(p.b, p.fb[0], sent.size() * 2, 65600);
  Endpoint to_b = endpoint(loopback(4, p.pb));
  send_batch(p.a, sent, to_b);  // 128, then the 129th alone: one refusal
  REQUIRE(p.a.gso_enabled());
  REQUIRE(segmented_seen == 1);
  send_batch(p.a, sent, to_b);
  REQUIRE(segmented_seen == 2);  // tried again on the next send
  check_from(at_b.get(), concat({sent, sent}), 4, p.pa);
  refusal_errno = EIO;
}

// ---- faults from sendmmsg ---------------------------------------------------------

namespace {

// A sendmmsg that fails as a loaded kernel does, on a script: call i takes fault i.
// EINTR (a signal), EAGAIN (the socket buffer is full: here the socket is writable again
// at once) and ENOBUFS (the device queue or kernel memory ran out) send nothing; a
// partial send takes only the first message, as sendmmsg does when a later one would
// block. Past the script every call is the real one.
enum class SendFault { none, eintr, eagain, partial, enobufs, econnrefused };
std::vector<SendFault> fault_script;
std::atomic<size_t> fault_calls{0};

int faulty_sendmmsg(int fd, mmsghdr* msgs, unsigned n, int flags) {
  const size_t i = fault_calls++;
  switch (i < fault_script.size() ? fault_script[i] : SendFault::none) {
    case SendFault::eintr:
      errno = EINTR;
      return -1;
    case SendFault::eagain:
      errno = EAGAIN;
      return -1;
    case SendFault::enobufs:
      errno = ENOBUFS;
      return -1;
    case SendFault::econnrefused:  // an ICMP error pending on the socket, taken by this send
      errno = ECONNREFUSED;
      return -1;
    case SendFault::partial:
      return ::sendmmsg(fd, msgs, std::min(n, 1u), flags);
    case SendFault::none:
      break;
  }
  return ::sendmmsg(fd, msgs, n, flags);
}

}  // namespace

TEST_CASE("bind linux: EINTR, EAGAIN and partial sends from sendmmsg lose nothing", "[bind]") {
  const bool gso = GENERATE(false, true);
  if (gso && !kernel_gso()) WGNET_SKIP("the kernel has no UDP GSO");
  INFO("gso " << gso);
  using F = SendFault;
  fault_script.clear();
  for (int round = 0; round < 2; ++round)
    fault_script.insert(fault_script.end(), {F::eintr, F::partial, F::eagain, F::partial, F::eintr, F::none});
  fault_calls = 0;
  LinuxBind::Options oa = options(gso, true);
  oa.sendmmsg = faulty_sendmmsg;
  Pair p(oa, options(true, true));
  auto sent = concat({equal_batch(128, 1420, 31, 700), sized_batch({1, 200, 1420, 64, 64, 64, 9000}, 32),
                      equal_batch(100, 500, 33)});
  Collector at_b(p.b, p.fb[0], 3 * sent.size(), 65600);
  Endpoint to_b = endpoint(loopback(4, p.pb));
  for (int i = 0; i < 3; ++i) send_batch(p.a, sent, to_b);  // each send reports no error
  CHECK(fault_calls > fault_script.size());  // the whole script was played, then real calls
  fault_script.clear();
  check_from(at_b.get(), concat({sent, sent, sent}), 4, p.pa);
}

// The kernel leaves an ICMP error pending on the socket, and the next send, to anyone,
// returns it instead of sending: that send goes again and nothing is lost or reported.
TEST_CASE("bind linux: a pending ICMP error taken by a send loses nothing", "[bind]") {
  using F = SendFault;
  fault_script = {F::econnrefused, F::partial, F::econnrefused};
  fault_calls = 0;
  LinuxBind::Options oa = options(false, true);
  oa.sendmmsg = faulty_sendmmsg;
  Pair p(oa, options(true, true));
  auto sent = equal_batch(100, 500, 34);
  Collector at_b(p.b, p.fb[0], sent.size(), 65600);
  Endpoint to_b = endpoint(loopback(4, p.pb));
  send_batch(p.a, sent, to_b);  // reports no error
  CHECK(fault_calls > fault_script.size());
  fault_script.clear();
  check_from(at_b.get(), sent, 4, p.pa);
}

TEST_CASE("bind linux: ENOBUFS from sendmmsg is reported, the next send goes whole", "[bind]") {
  // The kernel's WireGuard drops a packet its UDP tunnel cannot send (ENOBUFS: a full
  // device queue); here the datagrams before the refused one went, the rest of that
  // batch is dropped and the error reported, and the next batch goes whole.
  using F = SendFault;
  fault_script = {F::partial, F::enobufs};
  fault_calls = 0;
  LinuxBind::Options oa = options(false, true);
  oa.sendmmsg = faulty_sendmmsg;
  Pair p(oa, options(false, true));
  auto first = equal_batch(128, 1000, 34);
  auto second = equal_batch(128, 1000, 35);
  Collector at_b(p.b, p.fb[0], 1 + second.size(), 65600);
  Endpoint to_b = endpoint(loopback(4, p.pb));
  std::vector<std::span<const uint8_t>> spans(first.begin(), first.end());
  std::error_code ec;
  p.a.send(spans, to_b, ec);
  CHECK(ec == std::errc::no_buffer_space);
  CHECK(fault_calls == 2);  // not retried in a loop
  send_batch(p.a, second, to_b);
  fault_script.clear();
  check_from(at_b.get(), concat({Datagrams(first.begin(), first.begin() + 1), second}), 4, p.pa);
}

// ---- parse_control ---------------------------------------------------------------

namespace {

// Builds a control buffer message by message, as the kernel lays it out.
struct Control {
  std::vector<uint8_t> bytes;

  Control& add(int level, int type, const void* data, size_t n) {
    return raw(CMSG_LEN(n), level, type, data, n, CMSG_SPACE(n));
  }
  // A header claiming `cmsg_len`, followed by `n` bytes of data, padded to `space`.
  Control& raw(size_t cmsg_len, int level, int type, const void* data, size_t n, size_t space) {
    size_t at = bytes.size();
    bytes.resize(at + std::max(space, CMSG_LEN(0) + n));
    cmsghdr h{};
    h.cmsg_len = cmsg_len;
    h.cmsg_level = level;
    h.cmsg_type = type;
    std::memcpy(&bytes[at], &h, sizeof h);
    if (n) std::memcpy(&bytes[at + CMSG_LEN(0)], data, n);
    return *this;
  }
  Control& truncate(size_t len) {
    bytes.resize(len);
    return *this;
  }
};

in_pktinfo pktinfo4(const char* spec_dst, const char* addr, int ifindex) {
  in_pktinfo pi{};
  inet_pton(AF_INET, spec_dst, &pi.ipi_spec_dst);
  inet_pton(AF_INET, addr, &pi.ipi_addr);
  pi.ipi_ifindex = ifindex;
  return pi;
}

in6_pktinfo pktinfo6(const char* addr, unsigned ifindex) {
  in6_pktinfo pi{};
  inet_pton(AF_INET6, addr, &pi.ipi6_addr);
  pi.ipi6_ifindex = ifindex;
  return pi;
}

std::string source_of(const Endpoint& ep, int family) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == 4 ? AF_INET : AF_INET6, ep.source.data(), buf, sizeof buf);
  return buf;
}

struct Parsed {
  Endpoint ep;
  uint16_t gso;
};

// Parses `c` from an exactly-sized heap copy (so any over-read trips ASan), at `shift`
// bytes past an aligned address (so a misaligned load trips UBSan). `ep` starts with a
// stale source that parsing must replace or clear.
Parsed parse(const Control& c, size_t shift) {
  std::vector<uint8_t> heap(shift + c.bytes.size());  // ends exactly where c ends
  if (!c.bytes.empty()) std::memcpy(heap.data() + shift, c.bytes.data(), c.bytes.size());
  Parsed p{};
  p.ep = Endpoint::parse("198.19.0.1:1").value();
  p.ep.has_source = true;
  p.ep.source = {9, 9, 9, 9};
  p.ep.source_ifindex = 99;
  p.gso = 7;
  conn::parse_control(c.bytes.empty() ? nullptr : heap.data() + shift, c.bytes.size(), p.ep, p.gso);
  REQUIRE(p.ep.port == 1);  // the destination is left alone
  return p;
}

void require_no_source(const Parsed& p) {
  REQUIRE_FALSE(p.ep.has_source);
  REQUIRE(p.ep.source_ifindex == 0);
  REQUIRE(p.ep.source == std::array<uint8_t, 16>{});
}

}  // namespace

TEST_CASE("bind linux: parse_control reads well-formed control messages", "[bind]") {
  size_t shift = GENERATE(0, 1, 3);
  INFO("shift " << shift);
  int gro_int = 1400;
  uint16_t gro_u16 = 1200;
  char timestamp[16] = {1, 2, 3};

  SECTION("nothing") {
    auto p = parse(Control{}, shift);
    require_no_source(p);
    REQUIRE(p.gso == 0);
  }
  SECTION("IP_PKTINFO: ipi_spec_dst and ifindex") {
    auto pi = pktinfo4("198.18.0.1", "198.18.0.255", 7);
    auto p = parse(Control{}.add(IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi), shift);
    REQUIRE(p.ep.has_source);
    REQUIRE(source_of(p.ep, 4) == "198.18.0.1");
    REQUIRE(p.ep.source_ifindex == 7);
    REQUIRE(p.gso == 0);
  }
  SECTION("IP_PKTINFO without ipi_spec_dst falls back to ipi_addr") {
    auto pi = pktinfo4("0.0.0.0", "198.18.0.2", 3);
    auto p = parse(Control{}.add(IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi), shift);
    REQUIRE(p.ep.has_source);
    REQUIRE(source_of(p.ep, 4) == "198.18.0.2");
  }
  SECTION("IP_PKTINFO of zeros is no source") {
    auto pi = pktinfo4("0.0.0.0", "0.0.0.0", 3);
    require_no_source(parse(Control{}.add(IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi), shift));
  }
  SECTION("IPV6_PKTINFO") {
    auto pi = pktinfo6("fd00:18::1", 5);
    auto p = parse(Control{}.add(IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof pi), shift);
    REQUIRE(p.ep.has_source);
    REQUIRE(source_of(p.ep, 6) == "fd00:18::1");
    REQUIRE(p.ep.source_ifindex == 5);
  }
  SECTION("UDP_GRO as an int") {
    auto p = parse(Control{}.add(SOL_UDP, UDP_GRO, &gro_int, sizeof gro_int), shift);
    REQUIRE(p.gso == 1400);
    require_no_source(p);
  }
  SECTION("UDP_GRO as a u16") {
    auto p = parse(Control{}.add(SOL_UDP, UDP_GRO, &gro_u16, sizeof gro_u16), shift);
    REQUIRE(p.gso == 1200);
  }
  SECTION("UDP_GRO out of range or too short is ignored") {
    int negative = -5, huge = 70000;
    uint8_t one = 9;
    REQUIRE(parse(Control{}.add(SOL_UDP, UDP_GRO, &negative, sizeof negative), shift).gso == 0);
    REQUIRE(parse(Control{}.add(SOL_UDP, UDP_GRO, &huge, sizeof huge), shift).gso == 0);
    REQUIRE(parse(Control{}.add(SOL_UDP, UDP_GRO, &one, 1), shift).gso == 0);
  }
  SECTION("several messages, unknown ones skipped") {
    auto pi = pktinfo4("127.0.0.1", "127.0.0.1", 1);
    Control c;
    c.add(SOL_SOCKET, SO_TIMESTAMP, timestamp, sizeof timestamp)
        .add(IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi)
        .add(1234, 5678, timestamp, 3)
        .add(SOL_UDP, UDP_GRO, &gro_int, sizeof gro_int);
    auto p = parse(c, shift);
    REQUIRE(p.ep.has_source);
    REQUIRE(source_of(p.ep, 4) == "127.0.0.1");
    REQUIRE(p.ep.source_ifindex == 1);
    REQUIRE(p.gso == 1400);
  }
  SECTION("the last message may lack its padding") {
    Control c;
    c.add(SOL_SOCKET, SO_TIMESTAMP, timestamp, sizeof timestamp).add(SOL_UDP, UDP_GRO, &gro_int, sizeof gro_int);
    c.truncate(c.bytes.size() - (CMSG_SPACE(sizeof(int)) - CMSG_LEN(sizeof(int))));
    REQUIRE(parse(c, shift).gso == 1400);
  }
  SECTION("unknown level and type only") {
    Control c;
    c.add(SOL_SOCKET, SO_TIMESTAMP, timestamp, sizeof timestamp).add(IPPROTO_IP, 999, timestamp, 8);
    auto p = parse(c, shift);
    require_no_source(p);
    REQUIRE(p.gso == 0);
  }
  SECTION("PKTINFO under the wrong level is not read") {
    auto pi = pktinfo6("fd00:18::1", 5);
    require_no_source(parse(Control{}.add(IPPROTO_IP, IPV6_PKTINFO, &pi, sizeof pi), shift));
  }
}

TEST_CASE("bind linux: parse_control survives malformed control buffers", "[bind]") {
  size_t shift = GENERATE(0, 1);
  INFO("shift " << shift);
  auto pi4 = pktinfo4("198.18.0.1", "198.18.0.1", 2);
  auto pi6 = pktinfo6("fd00:18::1", 2);
  int gro = 1400;
  const size_t hdr = CMSG_LEN(0);

  SECTION("truncated IP_PKTINFO (cmsg_len short of the struct) is ignored") {
    auto p = parse(Control{}.raw(CMSG_LEN(sizeof pi4 - 4), IPPROTO_IP, IP_PKTINFO, &pi4, sizeof pi4 - 4,
                                 CMSG_SPACE(sizeof pi4 - 4)),
                   shift);
    require_no_source(p);
  }
  SECTION("truncated IPV6_PKTINFO is ignored, a later message still parsed") {
    Control c;
    c.raw(CMSG_LEN(sizeof pi6 - 1), IPPROTO_IPV6, IPV6_PKTINFO, &pi6, sizeof pi6 - 1, CMSG_SPACE(sizeof pi6 - 1))
        .add(SOL_UDP, UDP_GRO, &gro, sizeof gro);
    auto p = parse(c, shift);
    require_no_source(p);
    REQUIRE(p.gso == 1400);
  }
  SECTION("buffer cut inside a header") {
    Control c;
    c.add(IPPROTO_IP, IP_PKTINFO, &pi4, sizeof pi4).truncate(hdr - 3);
    require_no_source(parse(c, shift));
  }
  SECTION("buffer cut inside the data, header intact") {
    Control c;
    c.add(IPPROTO_IP, IP_PKTINFO, &pi4, sizeof pi4).truncate(hdr + 4);
    require_no_source(parse(c, shift));
  }
  SECTION("cmsg_len smaller than the header stops parsing (no endless loop)") {
    size_t bad_len = GENERATE(0, 1, 8, CMSG_LEN(0) - 1);
    Control c;
    c.raw(bad_len, IPPROTO_IP, IP_PKTINFO, nullptr, 0, hdr).add(IPPROTO_IP, IP_PKTINFO, &pi4, sizeof pi4);
    auto p = parse(c, shift);
    require_no_source(p);
    REQUIRE(p.gso == 0);
  }
  SECTION("cmsg_len past the end of the buffer") {
    size_t bad_len = GENERATE(CMSG_SPACE(sizeof(in_pktinfo)) + 1, size_t{4096}, ~size_t{0}, ~size_t{0} - 7);
    Control c;
    c.raw(bad_len, IPPROTO_IP, IP_PKTINFO, &pi4, sizeof pi4, CMSG_SPACE(sizeof pi4));
    auto p = parse(c, shift);
    require_no_source(p);
  }
  SECTION("a valid message, then one whose cmsg_len runs past the end") {
    Control c;
    c.add(SOL_UDP, UDP_GRO, &gro, sizeof gro).raw(1 << 20, IPPROTO_IPV6, IPV6_PKTINFO, &pi6, sizeof pi6, 0);
    auto p = parse(c, shift);
    REQUIRE(p.gso == 1400);
    require_no_source(p);
  }
  SECTION("a header-only message (cmsg_len == CMSG_LEN(0)) is skipped") {
    Control c;
    c.raw(hdr, IPPROTO_IP, IP_PKTINFO, nullptr, 0, hdr).add(IPPROTO_IPV6, IPV6_PKTINFO, &pi6, sizeof pi6);
    auto p = parse(c, shift);
    REQUIRE(p.ep.has_source);
    REQUIRE(source_of(p.ep, 6) == "fd00:18::1");
  }
}

TEST_CASE("bind linux: parse_control on random bytes stays in bounds", "[bind]") {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20000; ++round) {
    Control c;
    c.bytes.resize(rng() % 200);
    for (auto& b : c.bytes) b = static_cast<uint8_t>(rng());
    // Often plant a plausible header so parsing gets past the first message.
    if (c.bytes.size() >= sizeof(cmsghdr) && rng() % 2) {
      cmsghdr h{};
      h.cmsg_len = rng() % (c.bytes.size() + 8);
      int kinds[][2] = {{IPPROTO_IP, IP_PKTINFO}, {IPPROTO_IPV6, IPV6_PKTINFO}, {SOL_UDP, UDP_GRO}};
      auto& k = kinds[rng() % 3];
      h.cmsg_level = k[0];
      h.cmsg_type = k[1];
      std::memcpy(c.bytes.data(), &h, sizeof h);
    }
    auto p = parse(c, round % 2);
    if (!p.ep.has_source) REQUIRE(p.ep.source_ifindex == 0);
  }
}

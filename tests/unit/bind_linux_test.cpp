// LinuxBind over real loopback sockets (no root needed), and parse_control against
// well-formed, truncated and hostile control buffers.
//
//   bind A (127.0.0.1 / ::1, port Pa)  ── 128 datagrams ──▶  bind B (port Pb)
//                                      ◀── reply from B's sticky source ──
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "bind/linux.hpp"

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
};

// Receives until `want` datagrams arrived or the receive fails (close() ends it).
Received collect(const ReceiveFn& fn, size_t want) {
  std::vector<std::vector<uint8_t>> storage(kBatch, std::vector<uint8_t>(9000));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<size_t> sizes(kBatch);
  std::vector<Endpoint> eps(kBatch);
  Received r;
  while (r.data.size() < want) {
    std::error_code ec;
    size_t n = fn(bufs, sizes, eps, ec);
    if (ec) break;
    for (size_t i = 0; i < n; ++i) {
      r.data.emplace_back(storage[i].begin(), storage[i].begin() + static_cast<ptrdiff_t>(sizes[i]));
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
  Collector(LinuxBind& bind, const ReceiveFn& fn, size_t want)
      : b(bind), f(std::async(std::launch::async, [fn, want] { return collect(fn, want); })) {}
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

TEST_CASE("bind linux: a batch of 128 crosses loopback with sender and sticky source", "[bind]") {
  int family = GENERATE(4, 6);
  if (family == 6 && !ipv6_loopback()) return;
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

TEST_CASE("bind linux: a bogus sticky source is cleared and the batch still arrives", "[bind]") {
  int family = GENERATE(4, 6);
  // A test-network address no interface here has (IPv4: ENETUNREACH, IPv6: EINVAL), or
  // the loopback address on an interface that does not exist (ENODEV).
  bool bogus_address = GENERATE(true, false);
  if (family == 6 && !ipv6_loopback()) return;
  INFO("IPv" << family << (bogus_address ? " bogus address" : " bogus interface"));
  LinuxBind a, b;
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

  auto sent = make_batch(3);
  Collector at_b(b, fb[family == 4 ? 0 : 1], kBatch);
  send_batch(a, sent, to_b);
  REQUIRE_FALSE(to_b.has_source);
  REQUIRE(to_b.source_ifindex == 0);
  Received r = at_b.get();
  check_arrived(r, sent);
  check_senders(r, family, pa);
}

TEST_CASE("bind linux: close unblocks a blocked receive; later receives are canceled", "[bind]") {
  LinuxBind b;
  uint16_t port = 0;
  std::error_code ec;
  auto fns = b.open(0, port, ec);
  REQUIRE_FALSE(ec);

  std::vector<uint8_t> storage(2048);
  std::array<std::span<uint8_t>, 1> bufs{std::span(storage)};
  std::array<size_t, 1> sizes{};
  std::array<Endpoint, 1> eps{};
  auto blocked = std::async(std::launch::async, [&] {
    std::error_code e;
    size_t n = fns[0](bufs, sizes, eps, e);
    return std::pair{n, e};
  });
  REQUIRE(blocked.wait_for(100ms) == std::future_status::timeout);  // really blocked

  auto t0 = std::chrono::steady_clock::now();
  b.close();
  REQUIRE(blocked.wait_for(1s) == std::future_status::ready);
  REQUIRE(std::chrono::steady_clock::now() - t0 < 1s);
  auto [n, e] = blocked.get();
  REQUIRE(n == 0);
  REQUIRE(e == std::errc::operation_canceled);

  for (auto& fn : fns) {
    std::error_code e2;
    REQUIRE(fn(bufs, sizes, eps, e2) == 0);
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
    REQUIRE(fns[0](bufs, sizes, eps, e3) == 0);
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
  p.ep = Endpoint::parse("10.0.0.1:1").value();
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

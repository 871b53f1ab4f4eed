// tunlinux offload engine: GSO split of super-packets (read side) and GRO coalescing
// (write side) against hand-built packets checked by a naive checksum, including the
// regressions wireguard-go fixed in its own GRO; then the kernel TUN with offloads on
// ([root], each in a forked child in its own network namespace):
//
//   child: unshare(CLONE_NEWNET), lo up, IPv6 off
//     wgt0 = Tun (TSO/USO/GRO), 198.19.0.1/24          "peer" 198.19.0.2 = this test
//     TCP sender -> 198.19.0.2:5001 --TSO--> Tun::read  (we answer the SYN and ACK)
//     Tun::write(GRO batch) --> kernel --> accepted socket 198.19.0.1:5002 / UDP :5003
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <string_view>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "offload_switches.hpp"
#include "../support/netns_child.hpp"
#include "skip.hpp"
#include "tunlinux/checksum.hpp"
#include "tunlinux/offload.hpp"
#include "tunlinux/tun.hpp"
#include "wg/base/fd.hpp"

namespace {

using wgtest::be16;
using wgtest::be32;
using wgtest::put16;
using wgtest::put32;
using wgtest::l4_verify;
using wgtest::naive_checksum;

using namespace std::chrono_literals;
using tunlinux::Gro;
using tunlinux::OffloadError;
using tunlinux::VirtioNetHdr;
using Bytes = std::vector<uint8_t>;

constexpr size_t kOffset = 16;  // what the core passes
constexpr uint8_t kAck = 0x10, kPsh = 0x08, kFin = 0x01, kSyn = 0x02, kCwr = 0x80, kRst = 0x04;

// ---------------------------------------------------------------- packets by hand



size_t ip_header_len(const uint8_t* p) { return (p[0] >> 4) == 4 ? (p[0] & 0xf) * 4u : 40; }

// The one's complement sum of the pseudo-header of an IPv4/IPv6 packet whose transport
// is `l4_len` bytes long.
uint32_t naive_pseudo(const uint8_t* p, size_t l4_len) {
  Bytes ph;
  if ((p[0] >> 4) == 4) {
    ph.assign(p + 12, p + 20);
    ph.insert(ph.end(), {0, p[9], static_cast<uint8_t>(l4_len >> 8), static_cast<uint8_t>(l4_len)});
  } else {
    ph.assign(p + 8, p + 40);
    ph.insert(ph.end(), {0, 0, static_cast<uint8_t>(l4_len >> 8), static_cast<uint8_t>(l4_len), 0, 0, 0, p[6]});
  }
  return naive_checksum(ph.data(), ph.size());
}

bool ipv4_checksum_ok(const uint8_t* p) { return (p[0] >> 4) != 4 || naive_checksum(p, ip_header_len(p)) == 0xffff; }

bool l4_checksum_ok(const uint8_t* p, size_t len) {
  const size_t ihl = ip_header_len(p);
  return naive_checksum(p + ihl, len - ihl, naive_pseudo(p, len - ihl)) == 0xffff;
}

struct Ip {
  bool v6 = false;
  uint8_t ttl = 64, tos = 0;
  uint16_t id = 0x1234;
  uint16_t frag = 0x4000;  // flags + fragment offset: DF
  uint32_t flow = 0;       // IPv6 flow label
  Bytes options;           // IPv4 options (a multiple of 4 bytes)
  uint8_t src = 2, dst = 1;  // 198.19.0.src / fd00:19::src
};

struct Tcp {
  uint16_t sport = 5001, dport = 40000;
  uint32_t seq = 1000, ack = 77;
  uint8_t flags = kAck;
  uint16_t window = 512;
  Bytes options;  // a multiple of 4 bytes
};

Bytes payload_bytes(size_t n, uint32_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i + seed) * 2654435761u >> 13);
  return b;
}

// IP header + transport + payload, every length and checksum filled in.
Bytes ip_packet(const Ip& ip, uint8_t proto, const Bytes& l4) {
  Bytes p;
  if (!ip.v6) {
    const size_t ihl = 20 + ip.options.size();
    p.resize(ihl);
    p[0] = static_cast<uint8_t>(0x40 | ihl / 4);
    p[1] = ip.tos;
    put16(&p[2], static_cast<uint16_t>(ihl + l4.size()));
    put16(&p[4], ip.id);
    put16(&p[6], ip.frag);
    p[8] = ip.ttl;
    p[9] = proto;
    const uint8_t src[4] = {198, 19, 0, ip.src}, dst[4] = {198, 19, 0, ip.dst};
    std::memcpy(&p[12], src, 4);
    std::memcpy(&p[16], dst, 4);
    std::copy(ip.options.begin(), ip.options.end(), p.begin() + 20);
    put16(&p[10], static_cast<uint16_t>(~naive_checksum(p.data(), ihl)));
  } else {
    p.resize(40);
    put32(&p[0], 6u << 28 | uint32_t{ip.tos} << 20 | (ip.flow & 0xfffff));
    put16(&p[4], static_cast<uint16_t>(l4.size()));
    p[6] = proto;
    p[7] = ip.ttl;
    const uint8_t pre[8] = {0xfd, 0, 0, 0x19, 0, 0, 0, 0};
    std::memcpy(&p[8], pre, 8);
    p[23] = ip.src;
    std::memcpy(&p[24], pre, 8);
    p[39] = ip.dst;
  }
  p.insert(p.end(), l4.begin(), l4.end());
  return p;
}

void fill_l4_checksum(Bytes& p, size_t csum_at) {
  const size_t ihl = ip_header_len(p.data());
  put16(&p[csum_at], 0);
  uint16_t c = static_cast<uint16_t>(~naive_checksum(&p[ihl], p.size() - ihl, naive_pseudo(p.data(), p.size() - ihl)));
  if (p[(p[0] >> 4) == 4 ? 9 : 6] == 17 && c == 0) c = 0xffff;
  put16(&p[csum_at], c);
}

Bytes tcp_packet(const Ip& ip, const Tcp& t, const Bytes& payload) {
  Bytes l4(20 + t.options.size());
  put16(&l4[0], t.sport);
  put16(&l4[2], t.dport);
  put32(&l4[4], t.seq);
  put32(&l4[8], t.ack);
  l4[12] = static_cast<uint8_t>(l4.size() / 4 << 4);
  l4[13] = t.flags;
  put16(&l4[14], t.window);
  std::copy(t.options.begin(), t.options.end(), l4.begin() + 20);
  l4.insert(l4.end(), payload.begin(), payload.end());
  Bytes p = ip_packet(ip, 6, l4);
  fill_l4_checksum(p, ip_header_len(p.data()) + 16);
  return p;
}

Bytes udp_packet(const Ip& ip, uint16_t sport, uint16_t dport, const Bytes& payload, bool zero_checksum = false) {
  Bytes l4(8);
  put16(&l4[0], sport);
  put16(&l4[2], dport);
  put16(&l4[4], static_cast<uint16_t>(8 + payload.size()));
  l4.insert(l4.end(), payload.begin(), payload.end());
  Bytes p = ip_packet(ip, 17, l4);
  if (!zero_checksum) fill_l4_checksum(p, ip_header_len(p.data()) + 6);
  return p;
}

const Bytes kTimestamps = {1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9};  // NOP NOP TS(7, 9)

// ---------------------------------------------------------------- GSO helpers

// A super-packet as the kernel hands it over: one header, `payload` behind it, the
// transport checksum field holding the pseudo-header sum (NEEDS_CSUM).
struct Super {
  VirtioNetHdr hdr;
  Bytes pkt;
};

Super super_packet(const Bytes& single, uint8_t gso_type, uint16_t gso_size, const Bytes& payload) {
  // `single` is a header-only packet; lengths are rewritten for the whole.
  Super s;
  const size_t ihl = ip_header_len(single.data());
  const bool tcp = gso_type != tunlinux::kVirtioNetHdrGsoUdpL4;
  const size_t hdr_len = tcp ? ihl + (single[ihl + 12] >> 4) * 4u : ihl + 8;
  s.pkt.assign(single.begin(), single.begin() + static_cast<long>(hdr_len));
  s.pkt.insert(s.pkt.end(), payload.begin(), payload.end());
  if ((s.pkt[0] >> 4) == 4) {
    put16(&s.pkt[2], static_cast<uint16_t>(s.pkt.size()));
    put16(&s.pkt[10], 0);
    put16(&s.pkt[10], static_cast<uint16_t>(~naive_checksum(s.pkt.data(), ihl)));
  } else {
    put16(&s.pkt[4], static_cast<uint16_t>(s.pkt.size() - 40));
  }
  if (!tcp) put16(&s.pkt[ihl + 4], static_cast<uint16_t>(s.pkt.size() - ihl));
  const size_t csum_off = tcp ? 16 : 6;
  put16(&s.pkt[ihl + csum_off], naive_checksum(nullptr, 0, naive_pseudo(s.pkt.data(), s.pkt.size() - ihl)));
  s.hdr.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
  s.hdr.gso_type = gso_type;
  s.hdr.hdr_len = static_cast<uint16_t>(hdr_len);
  s.hdr.gso_size = gso_size;
  s.hdr.csum_start = static_cast<uint16_t>(ihl);
  s.hdr.csum_offset = static_cast<uint16_t>(csum_off);
  return s;
}

struct Buffers {
  Buffers(size_t n, size_t room) : storage(n, Bytes(kOffset + room)), sizes(n) {
    for (auto& s : storage) spans.emplace_back(s);
  }
  Bytes packet(size_t i) const {
    return {storage[i].begin() + kOffset, storage[i].begin() + static_cast<long>(kOffset + sizes[i])};
  }
  std::vector<Bytes> storage;
  std::vector<std::span<uint8_t>> spans;
  std::vector<size_t> sizes;
};

// Splits and returns the segments, or fails the test with the error.
std::vector<Bytes> split(const Super& s, size_t mtu) {
  tunlinux::GsoPacket gp;
  std::error_code ec;
  REQUIRE(tunlinux::gso_parse(s.hdr, s.pkt, gp, ec));
  Buffers out(gp.segments, gp.segment_len(0));
  const size_t n = tunlinux::gso_split(s.hdr, s.pkt, out.spans, out.sizes, kOffset, mtu, ec);
  INFO(ec.message());
  REQUIRE(!ec);
  std::vector<Bytes> segs;
  for (size_t i = 0; i < n; ++i) segs.push_back(out.packet(i));
  return segs;
}

std::error_code split_error(const Super& s, size_t mtu = 1500, size_t buffers = 64) {
  Buffers out(buffers, 1500);
  std::error_code ec;
  const size_t n = tunlinux::gso_split(s.hdr, s.pkt, out.spans, out.sizes, kOffset, mtu, ec);
  CHECK((n == 0) == static_cast<bool>(ec));
  return ec;
}

// ---------------------------------------------------------------- GRO helpers

// A batch of packets, each at kOffset in a buffer of exactly its size.
struct Batch {
  explicit Batch(const std::vector<Bytes>& packets, uint8_t headroom_fill = 0xee) {
    for (const auto& p : packets) {
      Bytes b(kOffset, headroom_fill);
      b.insert(b.end(), p.begin(), p.end());
      storage.push_back(std::move(b));
    }
    for (auto& s : storage) spans.emplace_back(s);
  }
  std::vector<Bytes> storage;
  std::vector<std::span<uint8_t>> spans;
};

Bytes flatten(const Gro& gro, const Gro::Write& w) {
  Bytes out;
  for (const iovec& v : gro.iov(w)) {
    const auto* b = static_cast<const uint8_t*>(v.iov_base);
    out.insert(out.end(), b, b + v.iov_len);
  }
  return out;
}

struct Planned {
  VirtioNetHdr hdr;
  Bytes pkt;  // after the virtio-net header
  std::vector<uint16_t> members;
};

std::vector<Planned> plan(Gro& gro, Batch& batch, tunlinux::GroOptions opts = {}) {
  gro.plan(batch.spans, kOffset, opts);
  std::vector<Planned> out;
  for (const auto& w : gro.writes()) {
    Bytes flat = flatten(gro, w);
    REQUIRE(flat.size() >= tunlinux::kVirtioNetHdrLen);
    Planned p;
    p.hdr = VirtioNetHdr::decode(flat.data());
    p.pkt.assign(flat.begin() + tunlinux::kVirtioNetHdrLen, flat.end());
    auto m = gro.members(w);
    p.members.assign(m.begin(), m.end());
    REQUIRE(w.gso_type == p.hdr.gso_type);
    out.push_back(std::move(p));
  }
  return out;
}

bool zero_header(const VirtioNetHdr& h) {
  return h.flags == 0 && h.gso_type == 0 && h.hdr_len == 0 && h.gso_size == 0 && h.csum_start == 0 &&
         h.csum_offset == 0;
}

// Splits a coalesced write back (as the kernel would segment it) and checks it gives the
// member packets: same bytes, but IPv4 ID/header checksum when DF lets them differ, and
// TCP/UDP checksums only checked for validity (0 and 0xffff are both zero).
void check_round_trip(const Planned& w, const std::vector<Bytes>& inputs) {
  if (w.members.size() == 1 && zero_header(w.hdr)) {
    REQUIRE(w.pkt == inputs[w.members[0]]);
    return;
  }
  REQUIRE(w.hdr.flags == tunlinux::kVirtioNetHdrFNeedsCsum);
  REQUIRE(w.pkt.size() <= tunlinux::kGroMaxLen);
  // What the kernel sees: the checksum field holds the pseudo-header sum of the whole.
  const size_t ihl = ip_header_len(w.pkt.data());
  REQUIRE(w.hdr.csum_start == ihl);
  REQUIRE(be16(&w.pkt[ihl + w.hdr.csum_offset]) == naive_checksum(nullptr, 0, naive_pseudo(w.pkt.data(), w.pkt.size() - ihl)));
  REQUIRE(ipv4_checksum_ok(w.pkt.data()));
  Super s{w.hdr, w.pkt};
  auto segs = split(s, 65535);
  REQUIRE(segs.size() == w.members.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    const Bytes& in = inputs[w.members[i]];
    Bytes a = segs[i], b = in;
    REQUIRE(a.size() == b.size());
    CHECK(ipv4_checksum_ok(a.data()));
    CHECK(l4_checksum_ok(a.data(), a.size()));
    const size_t csum_at = ihl + w.hdr.csum_offset;
    a[csum_at] = a[csum_at + 1] = b[csum_at] = b[csum_at + 1] = 0;
    if ((a[0] >> 4) == 4 && (b[6] & 0x40)) {
      a[4] = a[5] = a[10] = a[11] = b[4] = b[5] = b[10] = b[11] = 0;
    }
    CHECK(a == b);
  }
}

// A TCPv4 flow of `n` segments of `mss` bytes: consecutive sequence numbers, ACK only.
std::vector<Bytes> tcp_flow(size_t n, size_t mss, Ip ip = {}, Tcp t = {}) {
  std::vector<Bytes> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(tcp_packet(ip, t, payload_bytes(mss, static_cast<uint32_t>(t.seq))));
    t.seq += static_cast<uint32_t>(mss);
    if (!(ip.frag & 0x4000)) ++ip.id;
  }
  return out;
}

}  // namespace

// ================================================================ finish_read

namespace {

// An IPv4/UDP packet 198.19.0.1:4000 -> 198.19.0.2:9 whose UDP checksum field holds only
// the pseudo-header sum, as the kernel hands it over with NEEDS_CSUM.
std::vector<uint8_t> partial_udp(size_t payload) {
  std::vector<uint8_t> p(28 + payload);
  p[0] = 0x45;
  put16(&p[2], static_cast<uint16_t>(p.size()));
  p[8] = 64;
  p[9] = IPPROTO_UDP;
  const uint8_t src[4] = {198, 19, 0, 1}, dst[4] = {198, 19, 0, 2};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  put16(&p[10], static_cast<uint16_t>(~naive_checksum(p.data(), 20)));
  put16(&p[20], 4000);
  put16(&p[22], 9);
  put16(&p[24], static_cast<uint16_t>(8 + payload));
  for (size_t i = 0; i < payload; ++i) p[28 + i] = static_cast<uint8_t>(i * 7 + 1);
  put16(&p[26], tunlinux::pseudo_header_checksum(IPPROTO_UDP, src, dst, static_cast<uint32_t>(8 + payload)));
  return p;
}

}  // namespace

TEST_CASE("tun: finish_read completes a partial checksum and rejects GSO", "[tunlinux]") {
  tunlinux::VirtioNetHdr hdr;
  hdr.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
  hdr.csum_start = 20;
  hdr.csum_offset = 6;

  SECTION("UDP of every small length") {
    for (size_t payload = 0; payload < 64; ++payload) {
      auto p = partial_udp(payload);
      REQUIRE(tunlinux::finish_read(hdr, p));
      REQUIRE(l4_verify(p.data(), p.size()) == 0xffff);
    }
  }
  SECTION("a checksum field beyond the packet is refused") {
    auto p = partial_udp(0);
    hdr.csum_offset = 7;  // field at 27..28, packet ends at 28
    CHECK_FALSE(tunlinux::finish_read(hdr, p));
  }
  SECTION("GSO packets are refused while no offload is negotiated") {
    auto p = partial_udp(100);
    hdr.gso_type = 1;  // VIRTIO_NET_HDR_GSO_TCPV4
    CHECK_FALSE(tunlinux::finish_read(hdr, p));
  }
  SECTION("without NEEDS_CSUM the packet is left alone") {
    auto p = partial_udp(10);
    auto copy = p;
    REQUIRE(tunlinux::finish_read(tunlinux::VirtioNetHdr{}, p));
    CHECK(p == copy);
  }
}

// ================================================================ GSO split

TEST_CASE("offload: gso_split cuts TCP and UDP super-packets into valid segments", "[offload]") {
  struct Row {
    const char* name;
    bool v6, tcp;
    Bytes options;
    size_t payload;
    uint16_t gso_size;
    uint8_t flags;
    size_t mtu;
  };
  const Row rows[] = {
      {"TCPv4, no options, even split", false, true, {}, 1460 * 4, 1460, kAck, 1500},
      {"TCPv4, timestamps, last shorter", false, true, kTimestamps, 64000, 1448, kAck | kPsh, 1500},
      {"TCPv4 FIN|PSH|CWR only where they belong", false, true, {}, 5000, 1000, kAck | kPsh | kFin | kCwr, 1500},
      {"TCPv6, no options", true, true, {}, 65000, 1440, kAck, 1500},
      {"TCPv6, timestamps, last shorter", true, true, kTimestamps, 10001, 1208, kAck | kPsh, 1280},
      {"TCP one segment", false, true, {}, 100, 1460, kAck | kPsh, 1500},
      {"UDPv4 equal", false, false, {}, 1200 * 8, 1200, 0, 1500},
      {"UDPv4 last shorter", false, false, {}, 30001, 1472, 0, 1500},
      {"UDPv6 last shorter", true, false, {}, 4000, 1232, 0, 1280},
      {"UDP gso_size 1", false, false, {}, 300, 1, 0, 1500},
  };
  for (const Row& row : rows) {
    SECTION(row.name) {
      Ip ip;
      ip.v6 = row.v6;
      ip.id = 0xfffe;  // wraps
      const Bytes payload = payload_bytes(row.payload, 3);
      Tcp t;
      t.seq = 0xffffff00;  // wraps
      t.flags = row.flags;
      t.options = row.options;
      const Bytes single = row.tcp ? tcp_packet(ip, t, {}) : udp_packet(ip, 4000, 9, {});
      const uint8_t type = row.tcp ? (row.v6 ? tunlinux::kVirtioNetHdrGsoTcpV6 : tunlinux::kVirtioNetHdrGsoTcpV4)
                                   : tunlinux::kVirtioNetHdrGsoUdpL4;
      const Super s = super_packet(single, type, row.gso_size, payload);
      const auto segs = split(s, row.mtu);

      const size_t hdr_len = s.hdr.hdr_len, ihl = s.hdr.csum_start;
      REQUIRE(segs.size() == (row.payload + row.gso_size - 1) / row.gso_size);
      Bytes joined;
      for (size_t i = 0; i < segs.size(); ++i) {
        INFO("segment " << i);
        const Bytes& g = segs[i];
        const bool last = i + 1 == segs.size();
        CHECK(g.size() <= row.mtu);
        CHECK(g.size() == hdr_len + (last ? row.payload - i * row.gso_size : row.gso_size));
        CHECK(std::equal(s.pkt.begin() + 12, s.pkt.begin() + static_cast<long>(ihl), g.begin() + 12));  // addresses
        if (row.v6) {
          CHECK(be16(&g[4]) == g.size() - 40);
        } else {
          CHECK(be16(&g[2]) == g.size());
          CHECK(be16(&g[4]) == static_cast<uint16_t>(0xfffe + i));
          CHECK(ipv4_checksum_ok(g.data()));
        }
        CHECK(l4_checksum_ok(g.data(), g.size()));
        if (row.tcp) {
          CHECK(be32(&g[ihl + 4]) == static_cast<uint32_t>(0xffffff00 + i * row.gso_size));
          const uint8_t f = g[ihl + 13];
          CHECK(((f & kFin) != 0) == (last && (row.flags & kFin)));
          CHECK(((f & kPsh) != 0) == (last && (row.flags & kPsh)));
          CHECK(((f & kCwr) != 0) == (i == 0 && (row.flags & kCwr)));
          CHECK(std::equal(row.options.begin(), row.options.end(), g.begin() + static_cast<long>(ihl + 20)));
        } else {
          CHECK(be16(&g[ihl + 4]) == g.size() - ihl);
        }
        joined.insert(joined.end(), g.begin() + static_cast<long>(hdr_len), g.end());
      }
      CHECK(joined == payload);
    }
  }
}

TEST_CASE("offload: gso_split keeps IPv4 options in every segment", "[offload]") {
  Ip ip;
  ip.options = {0x94, 0x04, 0, 0};  // Router Alert
  const Super s = super_packet(tcp_packet(ip, {}, {}), tunlinux::kVirtioNetHdrGsoTcpV4, 1000, payload_bytes(2500, 1));
  REQUIRE(s.hdr.csum_start == 24);
  const auto segs = split(s, 1500);
  REQUIRE(segs.size() == 3);
  for (const auto& g : segs) {
    CHECK(g[0] == 0x46);
    CHECK(std::equal(ip.options.begin(), ip.options.end(), g.begin() + 20));
    CHECK(ipv4_checksum_ok(g.data()));
    CHECK(l4_checksum_ok(g.data(), g.size()));
  }
}

TEST_CASE("offload: gso_split completes a NEEDS_CSUM checksum without GSO", "[offload]") {
  for (size_t n : {0, 1, 2, 3, 1000, 1471, 1472}) {
    Bytes p = udp_packet({}, 4000, 9, payload_bytes(n, 5));
    put16(&p[26], naive_checksum(nullptr, 0, naive_pseudo(p.data(), p.size() - 20)));  // partial, as the kernel leaves it
    VirtioNetHdr h;
    h.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
    h.csum_start = 20;
    h.csum_offset = 6;
    Buffers out(1, 1500);
    std::error_code ec;
    REQUIRE(tunlinux::gso_split(h, p, out.spans, out.sizes, kOffset, 1500, ec) == 1);
    REQUIRE(!ec);
    const Bytes g = out.packet(0);
    CHECK(g.size() == p.size());
    CHECK(l4_checksum_ok(g.data(), g.size()));
    CHECK(be16(&g[26]) != 0);
  }
  SECTION("a plain packet is copied as it is") {
    const Bytes p = tcp_packet({}, {}, payload_bytes(10, 1));
    Buffers out(1, 1500);
    std::error_code ec;
    REQUIRE(tunlinux::gso_split(VirtioNetHdr{}, p, out.spans, out.sizes, kOffset, 1500, ec) == 1);
    CHECK(out.packet(0) == p);
  }
}

TEST_CASE("offload: gso_split rejects malformed headers without reading past the packet", "[offload]") {
  const Super tcp4 = super_packet(tcp_packet({}, {}, {}), tunlinux::kVirtioNetHdrGsoTcpV4, 1000, payload_bytes(3000, 1));
  Ip v6;
  v6.v6 = true;
  const Super tcp6 = super_packet(tcp_packet(v6, {}, {}), tunlinux::kVirtioNetHdrGsoTcpV6, 1000, payload_bytes(3000, 1));
  const Super udp4 = super_packet(udp_packet({}, 1, 2, {}), tunlinux::kVirtioNetHdrGsoUdpL4, 1000, payload_bytes(3000, 1));
  REQUIRE(!split_error(tcp4));
  REQUIRE(!split_error(tcp6));
  REQUIRE(!split_error(udp4));

  struct Row {
    const char* name;
    const Super* base;
    std::function<void(Super&)> mutate;
    OffloadError want;
  };
  const Row rows[] = {
      {"gso_type UDP (UFO)", &tcp4, [](Super& s) { s.hdr.gso_type = tunlinux::kVirtioNetHdrGsoUdp; }, OffloadError::unknown_gso_type},
      {"gso_type 9", &tcp4, [](Super& s) { s.hdr.gso_type = 9; }, OffloadError::unknown_gso_type},
      {"ECN on UDP_L4", &udp4, [](Super& s) { s.hdr.gso_type |= tunlinux::kVirtioNetHdrGsoEcn; }, OffloadError::unknown_gso_type},
      {"gso_size 0", &tcp4, [](Super& s) { s.hdr.gso_size = 0; }, OffloadError::zero_gso_size},
      {"no NEEDS_CSUM", &tcp4, [](Super& s) { s.hdr.flags = 0; }, OffloadError::no_needs_csum},
      {"csum_start 0", &tcp4, [](Super& s) { s.hdr.csum_start = 0; }, OffloadError::bad_csum_start},
      {"csum_start past the end", &tcp4, [](Super& s) { s.hdr.csum_start = 0xffff; }, OffloadError::bad_csum_start},
      {"csum_offset UDP's on TCP", &tcp4, [](Super& s) { s.hdr.csum_offset = 6; }, OffloadError::bad_csum_offset},
      {"csum_offset past the end", &udp4, [](Super& s) { s.hdr.csum_offset = 0xfff0; }, OffloadError::bad_csum_offset},
      {"hdr_len past the end", &tcp4, [](Super& s) { s.hdr.hdr_len = static_cast<uint16_t>(s.pkt.size() + 1); }, OffloadError::bad_hdr_len},
      {"TCPV4 on IPv6", &tcp6, [](Super& s) { s.hdr.gso_type = tunlinux::kVirtioNetHdrGsoTcpV4; }, OffloadError::ip_version_mismatch},
      {"TCPV6 on IPv4", &tcp4, [](Super& s) { s.hdr.gso_type = tunlinux::kVirtioNetHdrGsoTcpV6; }, OffloadError::ip_version_mismatch},
      {"IP version 5", &tcp4, [](Super& s) { s.pkt[0] = 0x55; }, OffloadError::bad_ip_header},
      {"IHL 4", &tcp4, [](Super& s) { s.pkt[0] = 0x44; }, OffloadError::bad_ip_header},
      {"IHL past the end", &tcp4, [](Super& s) { s.pkt.resize(30); s.pkt[0] = 0x4f; s.hdr.hdr_len = 0; }, OffloadError::bad_ip_header},
      {"an IPv4 fragment", &tcp4, [](Super& s) { s.pkt[6] |= 0x20; }, OffloadError::bad_ip_header},
      {"TCPV4 on a UDP packet", &tcp4, [](Super& s) { s.pkt[9] = 17; }, OffloadError::bad_ip_header},
      {"an IPv6 hop-by-hop header", &tcp6, [](Super& s) { s.pkt[6] = 0; }, OffloadError::ipv6_extension_header},
      {"an IPv6 routing header", &tcp6, [](Super& s) { s.pkt[6] = 43; }, OffloadError::ipv6_extension_header},
      {"TCP data offset 4", &tcp4, [](Super& s) { s.pkt[20 + 12] = 0x40; }, OffloadError::bad_transport_header},
      {"TCP data offset past the end", &tcp4,
       [](Super& s) { s.pkt.resize(50); s.pkt[20 + 12] = 0xf0; s.hdr.hdr_len = 0; }, OffloadError::bad_transport_header},
      {"truncated TCP header", &tcp4, [](Super& s) { s.pkt.resize(30); s.hdr.hdr_len = 0; }, OffloadError::bad_transport_header},
      {"truncated UDP header", &udp4, [](Super& s) { s.pkt.resize(24); s.hdr.hdr_len = 0; }, OffloadError::bad_transport_header},
      {"empty packet", &tcp4, [](Super& s) { s.pkt.clear(); s.hdr.hdr_len = 0; }, OffloadError::bad_ip_header},
      {"segments beyond the MTU", &tcp4, [](Super& s) { s.hdr.gso_size = 1461; }, OffloadError::segment_too_large},
      {"more segments than buffers", &tcp4, [](Super& s) { s.hdr.gso_size = 40; }, OffloadError::too_many_segments},
  };
  for (const Row& row : rows) {
    SECTION(row.name) {
      Super s = *row.base;
      row.mutate(s);
      // Exactly as long as the packet: ASan sees any read past it.
      Bytes exact(s.pkt);
      s.pkt = exact;
      const std::error_code ec = split_error(s);
      CHECK(ec == row.want);
      CHECK(&ec.category() == &tunlinux::offload_category());
    }
  }
  SECTION("a NEEDS_CSUM field past the end of a plain packet") {
    Super s = super_packet(udp_packet({}, 1, 2, {}), tunlinux::kVirtioNetHdrGsoUdpL4, 1000, payload_bytes(100, 1));
    s.hdr.gso_type = tunlinux::kVirtioNetHdrGsoNone;
    s.hdr.csum_start = static_cast<uint16_t>(s.pkt.size() - 1);
    s.hdr.csum_offset = 0;
    CHECK(split_error(s, 65535) == OffloadError::bad_csum_offset);
  }
  SECTION("a NEEDS_CSUM field at an odd offset (found by gso_fuzz)") {
    // Across two 16-bit words of the sum: whatever was stored there would not verify.
    Super s = super_packet(udp_packet({}, 1, 2, {}), tunlinux::kVirtioNetHdrGsoUdpL4, 1000, payload_bytes(100, 1));
    s.hdr.gso_type = tunlinux::kVirtioNetHdrGsoNone;
    s.hdr.csum_offset = 7;
    CHECK(split_error(s) == OffloadError::bad_csum_offset);
  }
  SECTION("a buffer too small for its segment") {
    Buffers out(8, 1000);  // segments are 1040 bytes
    std::error_code ec;
    CHECK(tunlinux::gso_split(tcp4.hdr, tcp4.pkt, out.spans, out.sizes, kOffset, 1500, ec) == 0);
    CHECK(ec == OffloadError::segment_too_large);
  }
}

TEST_CASE("offload: gso_split goes on where the buffers ran out", "[offload]") {
  const Super s = super_packet(tcp_packet({}, {}, {}), tunlinux::kVirtioNetHdrGsoTcpV4, 1000, payload_bytes(9500, 2));
  const auto whole = split(s, 1500);
  REQUIRE(whole.size() == 10);
  tunlinux::GsoPacket gp;
  std::error_code ec;
  REQUIRE(tunlinux::gso_parse(s.hdr, s.pkt, gp, ec));
  std::vector<Bytes> pieces;
  for (size_t next = 0; next < gp.segments;) {
    Buffers out(3, 1500);
    const size_t k = tunlinux::gso_split(gp, s.pkt, next, out.spans, out.sizes, kOffset, 1500, ec);
    REQUIRE(!ec);
    REQUIRE(k == std::min<size_t>(3, gp.segments - next));
    for (size_t i = 0; i < k; ++i) pieces.push_back(out.packet(i));
    next += k;
  }
  CHECK(pieces == whole);
}

// ================================================================ GRO

TEST_CASE("offload: GRO merges a TCPv4 run into one GSO packet the kernel accepts", "[offload]") {
  Tcp t;
  t.options = kTimestamps;
  auto pkts = tcp_flow(5, 1448, {}, t);
  pkts.back() = [&] {  // the last one shorter, with PSH
    Tcp last = t;
    last.seq = t.seq + 4 * 1448;
    last.flags = kAck | kPsh;
    return tcp_packet({}, last, payload_bytes(100, 9));
  }();
  Batch batch(pkts);
  Gro gro;
  auto writes = plan(gro, batch);
  REQUIRE(writes.size() == 1);
  const Planned& w = writes[0];
  CHECK(w.members == std::vector<uint16_t>{0, 1, 2, 3, 4});
  CHECK(w.hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV4);
  CHECK(w.hdr.gso_size == 1448);
  CHECK(w.hdr.hdr_len == 20 + 32);
  CHECK(w.hdr.csum_start == 20);
  CHECK(w.hdr.csum_offset == 16);
  CHECK(w.pkt.size() == 52 + 4 * 1448 + 100);
  CHECK(be16(&w.pkt[2]) == w.pkt.size());
  CHECK((w.pkt[33] & kPsh) != 0);
  CHECK(gro.iov(gro.writes()[0]).size() == 6);  // headers + 5 payloads, no copy
  check_round_trip(w, pkts);
  SECTION("the caller's packets are left as they were") {
    for (size_t i = 0; i < pkts.size(); ++i) {
      CHECK(std::equal(pkts[i].begin(), pkts[i].end(), batch.storage[i].begin() + kOffset));
    }
  }
}

TEST_CASE("offload: GRO merges TCPv6 and UDP runs", "[offload]") {
  Ip v6;
  v6.v6 = true;
  v6.flow = 0x12345;
  SECTION("TCPv6") {
    auto pkts = tcp_flow(4, 1220, v6);
    Batch batch(pkts);
    Gro gro;
    auto writes = plan(gro, batch);
    REQUIRE(writes.size() == 1);
    CHECK(writes[0].hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV6);
    CHECK(be16(&writes[0].pkt[4]) == writes[0].pkt.size() - 40);
    check_round_trip(writes[0], pkts);
  }
  for (bool six : {false, true}) {
    SECTION(six ? "UDPv6, the last shorter" : "UDPv4, the last shorter") {
      Ip ip = six ? v6 : Ip{};
      std::vector<Bytes> pkts;
      for (int i = 0; i < 6; ++i) {
        pkts.push_back(udp_packet(ip, 4000, 9, payload_bytes(i == 5 ? 17 : 1200, static_cast<uint32_t>(i))));
        ip.id = static_cast<uint16_t>(ip.id + 1);
      }
      Batch batch(pkts);
      Gro gro;
      auto writes = plan(gro, batch);
      REQUIRE(writes.size() == 1);
      CHECK(writes[0].hdr.gso_type == tunlinux::kVirtioNetHdrGsoUdpL4);
      CHECK(writes[0].hdr.gso_size == 1200);
      CHECK(writes[0].hdr.csum_offset == 6);
      const size_t ihl = six ? 40 : 20;
      CHECK(be16(&writes[0].pkt[ihl + 4]) == writes[0].pkt.size() - ihl);
      check_round_trip(writes[0], pkts);
    }
  }
}

TEST_CASE("offload: GRO leaves apart what the kernel would not merge", "[offload]") {
  // Each row: a flow of three segments where `change` alters the second (index 1);
  // `writes` is how many writes come out.
  struct Row {
    const char* name;
    std::function<Bytes(Ip, Tcp, const Bytes&)> second;
    size_t writes;
  };
  auto mk = [](auto f) { return [f](Ip ip, Tcp t, const Bytes& pl) { f(ip, t); return tcp_packet(ip, t, pl); }; };
  const Row rows[] = {
      {"baseline: all three merge", mk([](Ip&, Tcp&) {}), 1},
      // wireguard-go checked the wrong bit for "more fragments" (regression).
      {"IPv4 more-fragments bit", mk([](Ip& ip, Tcp&) { ip.frag = 0x4000 | 0x2000; }), 3},
      {"IPv4 fragment offset", mk([](Ip& ip, Tcp&) { ip.frag = 0x4000 | 0x0001; }), 3},
      {"IPv4 reserved flag", mk([](Ip& ip, Tcp&) { ip.frag = 0xc000; }), 3},
      {"DF differs", mk([](Ip& ip, Tcp&) { ip.frag = 0; }), 3},
      // wireguard-go did not compare TTLs (regression).
      {"TTL differs", mk([](Ip& ip, Tcp&) { ip.ttl = 63; }), 3},
      {"TOS differs", mk([](Ip& ip, Tcp&) { ip.tos = 4; }), 3},
      // wireguard-go did not look at IP options (regression).
      {"IPv4 options", mk([](Ip& ip, Tcp&) { ip.options = {1, 1, 1, 1}; }), 3},
      {"sequence gap", mk([](Ip&, Tcp& t) { t.seq += 1; }), 3},
      {"ACK number differs", mk([](Ip&, Tcp& t) { t.ack += 1; }), 3},
      {"window differs", mk([](Ip&, Tcp& t) { t.window += 1; }), 3},
      {"options differ", mk([](Ip&, Tcp& t) { t.options = {1, 1, 8, 10, 0, 0, 0, 8, 0, 0, 0, 9}; }), 3},
      {"options of another length", mk([](Ip&, Tcp& t) { t.options = {1, 1, 1, 1}; }), 3},
      {"SYN", mk([](Ip&, Tcp& t) { t.flags = kAck | kSyn; }), 3},
      {"RST", mk([](Ip&, Tcp& t) { t.flags = kAck | kRst; }), 3},
      {"FIN", mk([](Ip&, Tcp& t) { t.flags = kAck | kFin; }), 3},
      {"CWR", mk([](Ip&, Tcp& t) { t.flags = kAck | kCwr; }), 3},
      {"no ACK", mk([](Ip&, Tcp& t) { t.flags = kPsh; }), 3},
      {"PSH ends the run", mk([](Ip&, Tcp& t) { t.flags = kAck | kPsh; }), 2},
      {"another port", mk([](Ip&, Tcp& t) { t.sport += 1; }), 3},
      {"another address", mk([](Ip& ip, Tcp&) { ip.src = 3; }), 3},
      {"a longer segment", [](Ip ip, Tcp t, const Bytes&) { return tcp_packet(ip, t, payload_bytes(1001, 0)); }, 3},
      {"a shorter segment ends the run", [](Ip ip, Tcp t, const Bytes&) { return tcp_packet(ip, t, payload_bytes(999, 0)); }, 2},
      // A pure ACK ends the run: the next segment, though in sequence, must not overtake it.
      {"no payload", [](Ip ip, Tcp t, const Bytes&) { t.seq += 1000; return tcp_packet(ip, t, {}); }, 3},
      {"a bad TCP checksum",
       [](Ip ip, Tcp t, const Bytes& pl) { Bytes p = tcp_packet(ip, t, pl); p[40] ^= 1; return p; }, 3},
      // Found by gro_fuzz once checksums went unverified (trusted): merged, the second
      // segment came back with the head's urgent pointer (regression).
      {"urgent pointer differs (URG not set)",
       [](Ip ip, Tcp t, const Bytes& pl) { Bytes p = tcp_packet(ip, t, pl); p[39] = 1; fill_l4_checksum(p, 36); return p; }, 3},
      {"a bad IPv4 header checksum",
       [](Ip ip, Tcp t, const Bytes& pl) { Bytes p = tcp_packet(ip, t, pl); p[10] ^= 1; return p; }, 3},
  };
  for (const Row& row : rows) {
    SECTION(row.name) {
      Ip ip;
      Tcp t;
      std::vector<Bytes> pkts;
      for (int i = 0; i < 3; ++i) {
        const Bytes pl = payload_bytes(1000, t.seq);
        pkts.push_back(i == 1 ? row.second(ip, t, pl) : tcp_packet(ip, t, pl));
        t.seq += 1000;
      }
      Batch batch(pkts);
      Gro gro;
      const auto writes = plan(gro, batch);
      CHECK(writes.size() == row.writes);
      for (const auto& w : writes) check_round_trip(w, pkts);
      // Trusted, only the bad TCP checksum merges (it is not looked at).
      Batch again(pkts);
      const auto trusted = plan(gro, again, {true, true, true});
      CHECK(trusted.size() == (std::string_view(row.name) == "a bad TCP checksum" ? 1 : row.writes));
    }
  }
}

TEST_CASE("offload: GRO IPv4 IDs must be consecutive without DF", "[offload]") {
  Ip ip;
  ip.frag = 0;
  auto pkts = tcp_flow(3, 500, ip);  // IDs 0x1234, 0x1235, 0x1236
  {
    Batch batch(pkts);
    Gro gro;
    auto writes = plan(gro, batch);
    REQUIRE(writes.size() == 1);
    check_round_trip(writes[0], pkts);
  }
  Tcp t;
  t.seq += 500;
  ip.id = 0x1236;  // skips one
  pkts[1] = tcp_packet(ip, t, payload_bytes(500, t.seq));
  Batch batch(pkts);
  Gro gro;
  const auto writes = plan(gro, batch);
  REQUIRE(writes.size() >= 2);
  CHECK(writes[0].members == std::vector<uint16_t>{0});
}

TEST_CASE("offload: GRO never mixes TCPv4 and TCPv6 (regression)", "[offload]") {
  // wireguard-go's tcpPacketsCanCoalesce did not tell the families apart. Two flows with
  // the same ports and sequence numbers, interleaved: each merges with its own family.
  Ip v6;
  v6.v6 = true;
  Tcp t;
  std::vector<Bytes> pkts;
  for (int i = 0; i < 4; ++i) {
    const Bytes pl = payload_bytes(800, t.seq);
    pkts.push_back(tcp_packet({}, t, pl));
    pkts.push_back(tcp_packet(v6, t, pl));
    t.seq += 800;
  }
  Batch batch(pkts);
  Gro gro;
  auto writes = plan(gro, batch);
  REQUIRE(writes.size() == 2);
  CHECK(writes[0].hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV4);
  CHECK(writes[0].members == std::vector<uint16_t>{0, 2, 4, 6});
  CHECK(writes[1].hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV6);
  CHECK(writes[1].members == std::vector<uint16_t>{1, 3, 5, 7});
  for (const auto& w : writes) check_round_trip(w, pkts);
}

TEST_CASE("offload: GRO never merges a zero-checksum UDP datagram", "[offload]") {
  std::vector<Bytes> pkts;
  Ip ip;
  for (int i = 0; i < 4; ++i) {
    pkts.push_back(udp_packet(ip, 4000, 9, payload_bytes(500, static_cast<uint32_t>(i)), i == 2));
    ++ip.id;
  }
  Batch batch(pkts);
  Gro gro;
  auto writes = plan(gro, batch);
  REQUIRE(writes.size() == 3);  // 0+1 | 2 | 3
  CHECK(writes[0].members == std::vector<uint16_t>{0, 1});
  CHECK(zero_header(writes[1].hdr));
  CHECK(writes[1].pkt == pkts[2]);
  CHECK(zero_header(writes[2].hdr));
}

TEST_CASE("offload: GRO UDP runs: longer datagrams, 64 segments, 64 KB", "[offload]") {
  Gro gro;
  SECTION("a longer datagram starts a new run") {
    std::vector<Bytes> pkts = {udp_packet({}, 1, 2, payload_bytes(500, 1)), udp_packet({}, 1, 2, payload_bytes(600, 2))};
    Batch batch(pkts);
    CHECK(plan(gro, batch).size() == 2);
  }
  SECTION("at most 64 datagrams per write") {
    std::vector<Bytes> pkts;
    for (int i = 0; i < 100; ++i) pkts.push_back(udp_packet({}, 1, 2, payload_bytes(100, static_cast<uint32_t>(i))));
    Batch batch(pkts);
    auto writes = plan(gro, batch);
    REQUIRE(writes.size() == 2);
    CHECK(writes[0].members.size() == 64);
    CHECK(writes[1].members.size() == 36);
    for (const auto& w : writes) check_round_trip(w, pkts);
  }
  SECTION("at most 64 KB per write") {
    auto pkts = tcp_flow(60, 1400);
    Batch batch(pkts);
    auto writes = plan(gro, batch);
    REQUIRE(writes.size() == 2);
    CHECK(writes[0].pkt.size() <= 65535);
    CHECK(writes[0].members.size() == (65535 - 40) / 1400);
    for (const auto& w : writes) check_round_trip(w, pkts);
  }
}

TEST_CASE("offload: GRO keeps the order within each flow and writes in first-packet order", "[offload]") {
  Tcp a, b;
  b.sport = 5002;
  std::vector<Bytes> pkts;
  const Bytes icmp = [] {
    Bytes p = ip_packet({}, 1, Bytes(16, 0));
    return p;
  }();
  for (int i = 0; i < 3; ++i) {
    pkts.push_back(tcp_packet({}, a, payload_bytes(700, a.seq)));
    if (i == 1) pkts.push_back(icmp);
    pkts.push_back(tcp_packet({}, b, payload_bytes(700, b.seq)));
    a.seq += 700;
    b.seq += 700;
  }
  // a0 b0 a1 icmp b1 a2 b2
  Batch batch(pkts);
  Gro gro;
  auto writes = plan(gro, batch);
  REQUIRE(writes.size() == 3);
  CHECK(writes[0].members == std::vector<uint16_t>{0, 2, 5});
  CHECK(writes[1].members == std::vector<uint16_t>{1, 4, 6});
  CHECK(writes[2].members == std::vector<uint16_t>{3});
  for (const auto& w : writes) check_round_trip(w, pkts);
}

TEST_CASE("offload: GRO leaves no virtio-net header state behind between batches (regression)", "[offload]") {
  // wireguard-go once left a previous batch's header in front of a packet written plain.
  auto pkts = tcp_flow(4, 1000);
  Batch batch(pkts, 0xff);
  Gro gro;
  auto first = plan(gro, batch);
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV4);
  SECTION("the same buffers again, GRO off") {
    auto second = plan(gro, batch, {false, false});
    REQUIRE(second.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(zero_header(second[i].hdr));
      CHECK(second[i].pkt == pkts[i]);
    }
  }
  SECTION("the same buffers again, now with a gap: the plain one has a zeroed header") {
    batch.storage[2][kOffset + 24] ^= 0x80;  // sequence number: no longer consecutive, checksum bad
    auto second = plan(gro, batch);
    REQUIRE(second.size() == 3);
    CHECK(zero_header(second[1].hdr));
    CHECK(second[1].members == std::vector<uint16_t>{2});
  }
  SECTION("options off: TCP off, UDP off") {
    std::vector<Bytes> udp;
    for (int i = 0; i < 3; ++i) udp.push_back(udp_packet({}, 1, 2, payload_bytes(100, static_cast<uint32_t>(i))));
    Batch both(udp);
    CHECK(plan(gro, both, {true, false}).size() == 3);
    CHECK(plan(gro, batch, {false, true}).size() == 4);
    CHECK(plan(gro, both, {false, true}).size() == 1);
  }
}

TEST_CASE("offload: GRO writes non-IP, short and odd packets plain", "[offload]") {
  std::vector<Bytes> pkts = {Bytes{}, Bytes(1, 0x45), Bytes(19, 0x45), Bytes(40, 0x60), Bytes(60, 0x00)};
  Batch batch(pkts);
  Gro gro;
  auto writes = plan(gro, batch);
  REQUIRE(writes.size() == pkts.size());
  for (size_t i = 0; i < pkts.size(); ++i) {
    CHECK(zero_header(writes[i].hdr));
    CHECK(writes[i].pkt == pkts[i]);
  }
  SECTION("a buffer shorter than the offset is a write with no iovec") {
    Bytes tiny(4);
    std::span<uint8_t> one[] = {tiny};
    gro.plan(one, kOffset, {});
    REQUIRE(gro.writes().size() == 1);
    CHECK(gro.writes()[0].iov_count == 0);
  }
}

// What the kernel does with a NEEDS_CSUM packet it must checksum (forwarding it out of an
// interface without offload): the sum from csum_start to the end, complemented, into the
// field. Returns the packet so completed.
Bytes kernel_completes(Bytes p, const VirtioNetHdr& h) {
  const size_t at = h.csum_start + h.csum_offset;
  uint16_t c = static_cast<uint16_t>(~naive_checksum(&p[h.csum_start], p.size() - h.csum_start));
  if (h.csum_offset == 6 && c == 0) c = 0xffff;  // UDP
  put16(&p[at], c);
  return p;
}

TEST_CASE("offload: plain_header trusts authenticated TCP and UDP, flags the rest DATA_VALID", "[offload]") {
  Ip v4, v6;
  v6.v6 = true;
  const Bytes pl = payload_bytes(333, 5);
  SECTION("TCP and UDP, IPv4 and IPv6: NEEDS_CSUM, the pseudo-header sum, the checksum completes as it was") {
    Ip opts = v4;
    opts.options = {1, 1, 1, 1};
    const std::vector<Bytes> pkts = {tcp_packet(v4, {}, pl), tcp_packet(v6, {}, pl), udp_packet(v4, 1, 2, pl),
                                     udp_packet(v6, 1, 2, pl), tcp_packet(opts, {}, pl), tcp_packet(v4, {}, {})};
    for (const Bytes& orig : pkts) {
      Bytes p = orig;
      const VirtioNetHdr h = tunlinux::plain_header(p, true);
      const size_t ihl = ip_header_len(p.data());
      const bool tcp = p[(p[0] >> 4) == 4 ? 9 : 6] == 6;
      CHECK(h.flags == tunlinux::kVirtioNetHdrFNeedsCsum);
      CHECK(h.gso_type == tunlinux::kVirtioNetHdrGsoNone);
      CHECK(h.csum_start == ihl);
      CHECK(h.csum_offset == (tcp ? 16 : 6));
      CHECK(h.hdr_len == ihl + (tcp ? 20 : 8));
      CHECK(be16(&p[ihl + h.csum_offset]) == naive_checksum(nullptr, 0, naive_pseudo(p.data(), p.size() - ihl)));
      CHECK(kernel_completes(p, h) == orig);  // only the checksum field changed
      Bytes untouched = orig;
      CHECK(zero_header(tunlinux::plain_header(untouched, false)));
      CHECK(untouched == orig);
    }
  }
  SECTION("what has no checksum to skip: DATA_VALID, the packet unchanged") {
    Ip frag = v4, offset = v4;
    frag.frag = 0x2000;  // more fragments
    offset.frag = 0x0010;
    Bytes icmp = ip_packet(v4, 1, Bytes(40, 8));
    Bytes truncated = tcp_packet(v4, {}, {});
    truncated.resize(30);
    put16(&truncated[2], 30);
    Bytes padded = udp_packet(v4, 1, 2, pl), padded6 = udp_packet(v6, 1, 2, pl);
    padded.resize(padded.size() + 3);  // bytes past the IP length
    padded6.resize(padded6.size() + 3);
    const std::vector<Bytes> pkts = {tcp_packet(frag, {}, pl), udp_packet(offset, 1, 2, pl),
                                     udp_packet(v4, 1, 2, pl, true), icmp, truncated, padded, padded6,
                                     ip_packet(v6, 0, Bytes(48, 6)),  // a hop-by-hop header first
                                     Bytes(60, 0x00), Bytes(10, 0x45), Bytes{}};
    for (const Bytes& orig : pkts) {
      Bytes p = orig;
      const VirtioNetHdr h = tunlinux::plain_header(p, true);
      CHECK(h.flags == tunlinux::kVirtioNetHdrFDataValid);
      CHECK(h.gso_type == tunlinux::kVirtioNetHdrGsoNone);
      CHECK(p == orig);
    }
  }
}

TEST_CASE("offload: trusted GRO merges without verifying and writes plain packets checksum-partial", "[offload]") {
  auto pkts = tcp_flow(3, 1000);
  pkts[1][40] ^= 1;  // a bad TCP checksum in the middle (as its sender made it)
  Gro gro;
  {
    Batch batch(pkts);
    CHECK(plan(gro, batch).size() == 3);  // verified: the bad one stays apart
  }
  Batch batch(pkts);
  const auto writes = plan(gro, batch, {true, true, true});
  REQUIRE(writes.size() == 1);
  CHECK(writes[0].members.size() == 3);
  CHECK(writes[0].hdr.gso_type == tunlinux::kVirtioNetHdrGsoTcpV4);
  // A packet that merges with nothing leaves with plain_header's NEEDS_CSUM.
  const Bytes alone = tcp_packet({}, {}, payload_bytes(100, 1));
  Batch one({alone});
  const auto plain = plan(gro, one, {true, true, true});
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].hdr.flags == tunlinux::kVirtioNetHdrFNeedsCsum);
  CHECK(kernel_completes(plain[0].pkt, plain[0].hdr) == alone);
}

TEST_CASE("offload: GRO then gso_split gives back random batches", "[offload]") {
  std::mt19937 rng(2024);
  for (int round = 0; round < 300; ++round) {
    // Up to four flows of both families and protocols, segments mostly in order.
    struct Flow {
      Ip ip;
      Tcp t;
      bool udp;
      size_t mss;
    };
    std::vector<Flow> flows(1 + rng() % 4);
    for (size_t f = 0; f < flows.size(); ++f) {
      flows[f].ip.v6 = rng() % 2;
      flows[f].ip.frag = rng() % 4 ? 0x4000 : 0;
      flows[f].t.sport = static_cast<uint16_t>(6000 + f);
      flows[f].t.seq = static_cast<uint32_t>(rng());
      flows[f].t.options = rng() % 2 ? kTimestamps : Bytes{};
      flows[f].udp = rng() % 3 == 0;
      flows[f].mss = 1 + rng() % 1400;
    }
    std::vector<Bytes> pkts(1 + rng() % 128);
    std::vector<size_t> flow_of(pkts.size());
    for (size_t i = 0; i < pkts.size(); ++i) {
      Bytes& p = pkts[i];
      flow_of[i] = rng() % flows.size();
      Flow& f = flows[flow_of[i]];
      size_t n = rng() % 8 ? f.mss : rng() % (f.mss + 1);
      if (rng() % 20 == 0) f.t.seq += 1;
      f.t.flags = rng() % 10 ? kAck : kAck | kPsh;
      p = f.udp ? udp_packet(f.ip, f.t.sport, 9, payload_bytes(n, f.t.seq)) : tcp_packet(f.ip, f.t, payload_bytes(n, f.t.seq));
      f.t.seq += static_cast<uint32_t>(n);
      ++f.ip.id;
    }
    Batch batch(pkts);
    Gro gro;
    auto writes = plan(gro, batch);
    std::vector<int> seen(pkts.size());
    std::vector<long> last_of_flow(flows.size(), -1);
    for (const auto& w : writes) {
      for (uint16_t m : w.members) {
        ++seen[m];
        REQUIRE(last_of_flow[flow_of[m]] < m);  // in order within its flow
        last_of_flow[flow_of[m]] = m;
      }
      check_round_trip(w, pkts);
    }
    REQUIRE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  }
}

// ================================================================ kernel TUN with offloads

namespace {

constexpr const char* kIf = "wgt0";
const uint8_t kLocal[4] = {198, 19, 0, 1};
const uint8_t kPeer[4] = {198, 19, 0, 2};

using wgtest::require_in_netns;
using wgtest::sh;
using wgtest::step;
using wgtest::write_file;

std::unique_ptr<tunlinux::Tun> make_tun(int mtu, const tunlinux::Tun::Options& opts = {}) {
  std::error_code ec;
  auto tun = tunlinux::Tun::create(kIf, mtu, opts, ec);
  EXPECT_MSG(tun && !ec, ec.message());
  sh(std::string("ip link set ") + kIf + " up && ip addr add 198.19.0.1/24 dev " + kIf);
  return tun;
}

// The kernel's view of the interface's TSO (ETHTOOL_GTSO), as `ethtool -k` shows it.
bool tso_on(const char* name) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ethtool_value ev{ETHTOOL_GTSO, 0};
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&ev);
  const int r = ::ioctl(s, SIOCETHTOOL, &ifr);
  ::close(s);
  EXPECT_MSG(r == 0, std::strerror(errno));
  return ev.data != 0;
}

// A TCP segment between the test's peer 198.19.0.2:`peer_port` and 198.19.0.1:`port`.
Bytes peer_segment(uint16_t peer_port, uint16_t port, uint32_t seq, uint32_t ack, uint8_t flags, const Bytes& payload,
                   const Bytes& options = {}) {
  Ip ip;
  ip.src = 2;
  ip.dst = 1;
  Tcp t;
  t.sport = peer_port;
  t.dport = port;
  t.seq = seq;
  t.ack = ack;
  t.flags = flags;
  t.window = 0xffff;
  t.options = options;
  return tcp_packet(ip, t, payload);
}

struct Segment {
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  uint16_t sport = 0, dport = 0;
  Bytes payload;
};

Segment parse_segment(std::span<const uint8_t> p) {
  Segment s;
  const size_t ihl = ip_header_len(p.data()), th = (p[ihl + 12] >> 4) * 4u;
  s.sport = be16(&p[ihl]);
  s.dport = be16(&p[ihl + 2]);
  s.seq = be32(&p[ihl + 4]);
  s.ack = be32(&p[ihl + 8]);
  s.flags = p[ihl + 13];
  s.payload.assign(p.begin() + static_cast<long>(ihl + th), p.end());
  return s;
}

bool is_tcp_to(std::span<const uint8_t> p, uint16_t dport) {
  return p.size() >= 40 && p[0] == 0x45 && p[9] == 6 && std::memcmp(&p[16], kPeer, 4) == 0 && be16(&p[22]) == dport;
}

struct ReadBatch {
  explicit ReadBatch(size_t n, size_t room) : storage(n, Bytes(kOffset + room)), sizes(n) {
    for (auto& s : storage) spans.emplace_back(s);
  }
  std::span<const uint8_t> packet(size_t i) const { return {storage[i].data() + kOffset, sizes[i]}; }
  std::vector<Bytes> storage;
  std::vector<std::span<uint8_t>> spans;
  std::vector<size_t> sizes;
};

void write_all(tunlinux::Tun& tun, std::vector<Bytes> pkts) {
  Batch b(pkts);
  std::error_code ec;
  const size_t n = tun.write(b.spans, kOffset, ec);
  EXPECT_MSG(!ec, ec.message());
  EXPECT(n == pkts.size());
}

// Reads until a TCP segment to 198.19.0.2:`dport` arrives.
Segment read_segment(tunlinux::Tun& tun, uint16_t dport) {
  ReadBatch b(8, 1500);
  for (;;) {
    std::error_code ec;
    const size_t n = tun.read(b.spans, b.sizes, kOffset, ec);
    EXPECT_MSG(!ec, ec.message());
    for (size_t i = 0; i < n; ++i) {
      if (is_tcp_to(b.packet(i), dport)) return parse_segment(b.packet(i));
    }
  }
}

// The writev() the test binary sees: passes everything through, except that it refuses
// (EINVAL) coalesced packets written to g_refuse_fd, as a kernel without the support
// would. Only ever set in a forked child.
int g_refuse_fd = -1;

}  // namespace

extern "C" ssize_t writev(int fd, const struct iovec* iov, int count) {
  using Fn = ssize_t (*)(int, const struct iovec*, int);
  static const Fn real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "writev"));
  if (fd == g_refuse_fd && fd >= 0 && count > 0 && iov[0].iov_len >= tunlinux::kVirtioNetHdrLen &&
      static_cast<const uint8_t*>(iov[0].iov_base)[1] != tunlinux::kVirtioNetHdrGsoNone) {
    errno = EINVAL;
    return -1;
  }
  return real(fd, iov, count);
}

TEST_CASE("tun offload: negotiation, ethtool's view and the off-switches", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("everything on");
    auto tun = make_tun(1420);
    const unsigned all = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | tunlinux::kTunFUso4 | tunlinux::kTunFUso6;
    EXPECT_MSG(tun->offloads() == all, std::to_string(tun->offloads()));  // Linux >= 6.2
    EXPECT(tso_on(kIf));
    EXPECT(tun->gro().tcp && tun->gro().udp);
    tun.reset();

    step("WG_TUN_DISABLE_TSO/USO/GRO: the programs' switches, which the library ignores");
    ::setenv("WG_TUN_DISABLE_TSO", "1", 1);
    ::setenv("WG_TUN_DISABLE_GRO", "1", 1);
    const auto opts = programs::offloads_from_environment().tun;
    EXPECT(!opts.tso && opts.uso && !opts.gro);
    std::error_code ec;
    tun = tunlinux::Tun::create(kIf, 1420, opts, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->offloads() == (TUN_F_CSUM | tunlinux::kTunFUso4 | tunlinux::kTunFUso6));
    EXPECT(!tso_on(kIf));
    EXPECT(!tun->gro().tcp && !tun->gro().udp);
    tun.reset();
    // Without Options, everything on whatever the environment says (the Tun read it
    // itself, so an embedding program inherited switches it never asked for).
    tun = tunlinux::Tun::create(kIf, 1420, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->offloads() == all);
    EXPECT(tun->gro().tcp && tun->gro().udp);
    tun.reset();
    ::setenv("WG_TUN_DISABLE_USO", "1", 1);
    ::setenv("WG_TUN_DISABLE_GRO", "0", 1);
    tun = tunlinux::Tun::create(kIf, 1420, programs::offloads_from_environment().tun, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->offloads() == 0);
    EXPECT(tun->gro().tcp && tun->gro().udp);
  });
}

TEST_CASE("tun offload: a 1 MB TCP send reads back as MTU-sized, checksummed segments", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    constexpr int kMtu = 1420;
    constexpr size_t kTotal = 1 << 20;
    constexpr uint16_t kPort = 5001;
    auto tun = make_tun(kMtu);

    step("connect from the namespace to 198.19.0.2 through the TUN");
    std::atomic<bool> sent{false};
    std::string sender_error;
    const wg::UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int s = sock.get();
    EXPECT(s >= 0);
    // A failed EXPECT below unwinds: the sender is stopped (the socket shut down) and
    // joined first, so that the failure is reported; the socket closes after it.
    wgtest::StoppingThread sender([&] {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(kPort);
      std::memcpy(&to.sin_addr, kPeer, 4);
      if (::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        sender_error = std::string("connect: ") + std::strerror(errno);
        return;
      }
      const Bytes data = payload_bytes(kTotal, 0);
      for (size_t at = 0; at < data.size();) {
        ssize_t r = ::send(s, data.data() + at, data.size() - at, MSG_NOSIGNAL);
        if (r <= 0) {
          sender_error = std::string("send: ") + std::strerror(errno);
          break;
        }
        at += static_cast<size_t>(r);
      }
      ::shutdown(s, SHUT_WR);
      sent = true;
      char c;
      [[maybe_unused]] ssize_t r = ::recv(s, &c, 1, 0);  // until we close
    }, [s] { ::shutdown(s, SHUT_RDWR); });

    const Segment syn = read_segment(*tun, kPort);
    EXPECT(syn.flags == kSyn);
    const uint16_t their_port = syn.sport;
    const uint32_t isn = 0x10000000;
    // MSS 1380, window scale 7: room for the kernel to build big super-packets.
    const Bytes synack_opts = {2, 4, 0x05, 0x64, 1, 3, 3, 7};
    write_all(*tun, {peer_segment(kPort, their_port, isn, syn.seq + 1, kSyn | kAck, {}, synack_opts)});

    step("receive, check every segment, ACK every batch");
    const Bytes expected = payload_bytes(kTotal, 0);
    uint32_t next = syn.seq + 1;
    size_t got = 0, segments = 0, largest = 0;
    bool fin = false;
    ReadBatch b(128, kMtu);  // one MTU per buffer: super-packets must be split to fit
    while (!fin) {
      std::error_code ec;
      const size_t n = tun->read(b.spans, b.sizes, kOffset, ec);
      EXPECT_MSG(!ec, ec.message());
      for (size_t i = 0; i < n; ++i) {
        const auto p = b.packet(i);
        if (!is_tcp_to(p, their_port) && !is_tcp_to(p, kPort)) continue;
        EXPECT(p.size() <= static_cast<size_t>(kMtu));
        EXPECT(be16(&p[2]) == p.size());
        EXPECT(ipv4_checksum_ok(p.data()));
        EXPECT(l4_checksum_ok(p.data(), p.size()));
        const Segment s = parse_segment(p);
        largest = std::max(largest, p.size());
        if (s.payload.empty() && !(s.flags & kFin)) continue;
        EXPECT_MSG(s.seq == next, std::to_string(s.seq) + " != " + std::to_string(next));
        EXPECT(got + s.payload.size() <= kTotal);
        EXPECT(std::equal(s.payload.begin(), s.payload.end(), expected.begin() + static_cast<long>(got)));
        got += s.payload.size();
        next += static_cast<uint32_t>(s.payload.size());
        ++segments;
        if (s.flags & kFin) {
          ++next;
          fin = true;
        }
      }
      write_all(*tun, {peer_segment(kPort, their_port, isn + 1, next, kAck, {})});
    }
    EXPECT(got == kTotal);
    EXPECT(largest == static_cast<size_t>(kMtu));
    const auto c = tun->counters();
    EXPECT_MSG(c.read_split > 0, "no super-packet was split");
    EXPECT(c.read_dropped == 0);
    write_all(*tun, {peer_segment(kPort, their_port, isn + 1, next, kAck | kFin, {})});
    sender.join();
    // Only after the join: the FIN can be read here before the sender, back from
    // shutdown(), has set `sent` (under load it was not yet, about 1 run in 20).
    EXPECT(sent.load());
    EXPECT_MSG(sender_error.empty(), sender_error);
  });
}

TEST_CASE("tun offload: a coalesced GRO batch reaches local TCP and UDP sockets", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto tun = make_tun(1420);

    step("a listening socket; the handshake by hand");
    constexpr uint16_t kPort = 5002, kPeerPort = 41000;
    int lst = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(kPort);
    std::memcpy(&addr.sin_addr, kLocal, 4);
    EXPECT(::bind(lst, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    EXPECT(::listen(lst, 1) == 0);
    uint32_t seq = 0x20000000;
    write_all(*tun, {peer_segment(kPeerPort, kPort, seq, 0, kSyn, {}, {2, 4, 0x05, 0x64})});
    const Segment synack = read_segment(*tun, kPeerPort);
    EXPECT(synack.flags == (kSyn | kAck));
    EXPECT(synack.ack == seq + 1);
    ++seq;
    const uint32_t ack = synack.seq + 1;
    write_all(*tun, {peer_segment(kPeerPort, kPort, seq, ack, kAck, {})});
    int conn = ::accept4(lst, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT(conn >= 0);

    step("40 segments in one write");
    constexpr size_t kSegs = 40, kMss = 1000;
    const Bytes data = payload_bytes(kSegs * kMss, 7);
    std::vector<Bytes> segs;
    for (size_t i = 0; i < kSegs; ++i) {
      Bytes pl(data.begin() + static_cast<long>(i * kMss), data.begin() + static_cast<long>((i + 1) * kMss));
      segs.push_back(peer_segment(kPeerPort, kPort, seq, ack, i + 1 == kSegs ? kAck | kPsh : kAck, pl));
      seq += kMss;
    }
    write_all(*tun, segs);
    EXPECT(tun->counters().write_coalesced == 1);
    Bytes received(data.size());
    for (size_t at = 0; at < received.size();) {
      ssize_t r = ::recv(conn, received.data() + at, received.size() - at, 0);
      EXPECT_MSG(r > 0, std::strerror(errno));
      at += static_cast<size_t>(r);
    }
    EXPECT(received == data);

    step("UDP: 20 datagrams in one write arrive as 20 datagrams");
    int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    addr.sin_port = htons(5003);
    EXPECT(::bind(udp, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::vector<Bytes> dgrams;
    Ip ip;
    for (int i = 0; i < 20; ++i) {
      dgrams.push_back(udp_packet(ip, 41001, 5003, payload_bytes(i == 19 ? 333 : 1200, static_cast<uint32_t>(i))));
      ++ip.id;
    }
    write_all(*tun, dgrams);
    EXPECT(tun->counters().write_coalesced == 2);
    EXPECT(tun->gro().udp);
    for (int i = 0; i < 20; ++i) {
      Bytes got(2000);
      ssize_t r = ::recv(udp, got.data(), got.size(), 0);
      EXPECT_MSG(r == (i == 19 ? 333 : 1200), std::to_string(r));
      got.resize(static_cast<size_t>(r));
      EXPECT(got == payload_bytes(got.size(), static_cast<uint32_t>(i)));
    }

    step("a kernel that refuses coalesced packets: GRO off, nothing lost");
    g_refuse_fd = tun->fd();
    std::vector<Bytes> more;
    const Bytes data2 = payload_bytes(10 * kMss, 8);
    for (size_t i = 0; i < 10; ++i) {
      Bytes pl(data2.begin() + static_cast<long>(i * kMss), data2.begin() + static_cast<long>((i + 1) * kMss));
      more.push_back(peer_segment(kPeerPort, kPort, seq, ack, kAck, pl));
      seq += kMss;
    }
    write_all(*tun, more);
    EXPECT(!tun->gro().tcp);
    EXPECT(tun->gro().udp);
    EXPECT(tun->counters().write_coalesced == 2);
    EXPECT(tun->counters().write_rejected == 0);
    write_all(*tun, more);  // plain from now on (the duplicates are simply ignored by TCP)
    g_refuse_fd = -1;
    Bytes received2(data2.size());
    for (size_t at = 0; at < received2.size();) {
      ssize_t r = ::recv(conn, received2.data() + at, received2.size() - at, 0);
      EXPECT_MSG(r > 0, std::strerror(errno));
      at += static_cast<size_t>(r);
    }
    EXPECT(received2 == data2);
    ::close(udp);
    ::close(conn);
    ::close(lst);
  });
}

TEST_CASE("tun offload: a super-packet larger than the read batch continues in the next read", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto tun = make_tun(1500);
    step("a UDP_SEGMENT send of 40 datagrams");
    const Bytes data = payload_bytes(40 * 1000, 3);
    EXPECT(wgtest::send_udp_segmented(kPeer, 9, 1000, data));

    step("read it 16 buffers at a time");
    Bytes joined;
    size_t reads = 0;
    ReadBatch b(16, 1500);
    while (joined.size() < data.size()) {
      std::error_code ec;
      const size_t n = tun->read(b.spans, b.sizes, kOffset, ec);
      EXPECT_MSG(!ec, ec.message());
      ++reads;
      for (size_t i = 0; i < n; ++i) {
        const auto p = b.packet(i);
        if (p.size() < 28 || p[9] != 17 || be16(&p[22]) != 9) continue;
        EXPECT(p.size() == 1028);
        EXPECT(ipv4_checksum_ok(p.data()));
        EXPECT(l4_checksum_ok(p.data(), p.size()));
        joined.insert(joined.end(), p.begin() + 28, p.end());
      }
    }
    EXPECT(joined == data);
    EXPECT(reads >= 3);
    EXPECT(tun->counters().read_split == 1);
    EXPECT(tun->counters().read_dropped == 0);
  });
}

// ---------------------------------------------------------------- multi-queue TUN

TEST_CASE("offload: flow_queue gives both directions of a flow one queue and spreads flows", "[offload]") {
  using tunlinux::flow_queue;
  for (size_t queues : {2u, 3u, 4u, 16u}) {
    std::vector<size_t> used(queues);
    for (bool v6 : {false, true}) {
      for (uint16_t port = 40000; port < 40256; ++port) {
        Ip there, back;
        there.v6 = back.v6 = v6;
        back.src = there.dst;
        back.dst = there.src;
        Tcp out, in;
        out.sport = in.dport = port;
        out.dport = in.sport = 5201;
        const size_t q = flow_queue(tcp_packet(there, out, {}), queues);
        REQUIRE(q < queues);
        CHECK(flow_queue(tcp_packet(back, in, payload_bytes(100, 1)), queues) == q);
        CHECK(flow_queue(udp_packet(there, port, 53, {}), queues) ==
              flow_queue(udp_packet(back, 53, port, payload_bytes(3, 1)), queues));
        ++used[q];
      }
    }
    // 512 flows: every queue gets a fair share (a queue below half of it would mean a
    // hash that clusters).
    for (size_t q = 0; q < queues; ++q) CHECK(used[q] > 512 / queues / 2);
  }
  SECTION("later fragments, other protocols and non-IP") {
    Ip frag;
    frag.frag = 0x0010;  // offset 128 bytes: no ports in it
    // A later fragment's first bytes are not ports: only protocol and addresses count.
    const size_t q = flow_queue(udp_packet(frag, 1111, 2222, {}), 16);
    size_t others = 0;
    for (uint16_t port = 1; port <= 64; ++port) {
      CHECK(flow_queue(udp_packet(frag, port, 2222, {}), 16) == q);
      others += flow_queue(udp_packet({}, port, 2222, {}), 16) != q;  // unfragmented: ports count
    }
    CHECK(others > 32);
    Bytes icmp = ip_packet({}, 1, Bytes(8));
    CHECK(flow_queue(icmp, 16) < 16);
    CHECK(flow_queue(Bytes{0x45, 0, 0}, 4) == 0);       // too short
    CHECK(flow_queue(Bytes(40, 0x20), 4) == 0);         // version 2
    CHECK(flow_queue(Bytes(), 4) == 0);
    CHECK(flow_queue(icmp, 1) == 0);
    CHECK(flow_queue(icmp, 0) == 0);
  }
}

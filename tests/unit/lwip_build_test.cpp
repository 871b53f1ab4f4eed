// wgnet::lwip runs in-process without any network: one netif whose output captures
// packets, input through netif->input. Checks the options lwipopts.h promises (SYN with
// MSS, window scale 7, SACK_PERM; RFC 6528 ISNs; checksum control per netif) and that
// TCP, ICMP and raw pcbs work over IPv4 and IPv6.
//
//     lwIP (198.19.0.1, fd00:19::1)  --output-->  TunnelNetif::sent  (inspected here)
//                                    <--input---  packets built here, "from" .0.2 / ::2
//
// lwIP's state is global (one stack per process): lwip_init() runs once, and each test
// adds its netif and removes it again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "lwip/init.h"
#include "lwip/ip.h"
#include "lwip/ip_addr.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/raw.h"
#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "wgnet_lwip_hooks.h"

// lwIP's clock. netstack/ provides the real one; weak so that one wins once both are
// linked into the same test binary.
extern "C" __attribute__((weak)) u32_t sys_now(void) {
  using namespace std::chrono;
  return static_cast<u32_t>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

namespace {

using Packet = std::vector<uint8_t>;

constexpr u16_t kMtu = 1420;
constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoIcmp6 = 58;
constexpr uint8_t kTcpSyn = 0x02;
constexpr uint8_t kTcpAck = 0x10;

uint16_t get16(const Packet& p, size_t at) {
  return static_cast<uint16_t>(p.at(at) << 8 | p.at(at + 1));
}
uint32_t get32(const Packet& p, size_t at) {
  return static_cast<uint32_t>(get16(p, at)) << 16 | get16(p, at + 2);
}
void put16(Packet& p, size_t at, uint16_t v) {
  p.at(at) = static_cast<uint8_t>(v >> 8);
  p.at(at + 1) = static_cast<uint8_t>(v);
}
void put32(Packet& p, size_t at, uint32_t v) {
  put16(p, at, static_cast<uint16_t>(v >> 16));
  put16(p, at + 2, static_cast<uint16_t>(v));
}

// ---- Internet checksum (RFC 1071) over big-endian 16-bit words ----
uint32_t add_words(const uint8_t* data, size_t len, uint32_t sum) {
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>(data[i] << 8 | data[i + 1]);
  if (len % 2 != 0) sum += static_cast<uint32_t>(data[len - 1] << 8);
  return sum;
}
uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

bool is_v6(const Packet& p) { return (p.at(0) >> 4) == 6; }
size_t l4_offset(const Packet& p) { return is_v6(p) ? 40 : static_cast<size_t>(p.at(0) & 0x0f) * 4; }
uint8_t l4_proto(const Packet& p) { return is_v6(p) ? p.at(6) : p.at(9); }

// Checksum of the transport part including its pseudo header (none for ICMPv4).
// 0 for a packet whose checksum field is right.
uint16_t l4_checksum(const Packet& p) {
  const size_t off = l4_offset(p);
  const size_t len = p.size() - off;
  uint32_t sum = 0;
  if (l4_proto(p) != kProtoIcmp) {
    if (is_v6(p)) {
      sum = add_words(p.data() + 8, 32, sum);
    } else {
      sum = add_words(p.data() + 12, 8, sum);
    }
    sum += static_cast<uint32_t>(len >> 16) + static_cast<uint32_t>(len & 0xffff) + l4_proto(p);
  }
  return fold(add_words(p.data() + off, len, sum));
}
size_t l4_checksum_field(const Packet& p) { return l4_offset(p) + (l4_proto(p) == kProtoTcp ? 16 : 2); }

// Fills in the IPv4 header checksum and the transport checksum.
void seal(Packet& p) {
  if (!is_v6(p)) {
    put16(p, 10, 0);
    put16(p, 10, fold(add_words(p.data(), l4_offset(p), 0)));
  }
  put16(p, l4_checksum_field(p), 0);
  put16(p, l4_checksum_field(p), l4_checksum(p));
}

// ---- Addresses: our side and the peer's ----
struct Endpoints {
  ip_addr_t local;
  ip_addr_t remote;
};

Endpoints endpoints(bool v6) {
  Endpoints e{};
  REQUIRE(ipaddr_aton(v6 ? "fd00:19::1" : "198.19.0.1", &e.local) == 1);
  REQUIRE(ipaddr_aton(v6 ? "fd00:19::2" : "198.19.0.2", &e.remote) == 1);
  return e;
}

Packet addr_bytes(const ip_addr_t& a) {
  const auto* bytes = IP_IS_V6_VAL(a) ? reinterpret_cast<const uint8_t*>(ip_2_ip6(&a)->addr)
                                     : reinterpret_cast<const uint8_t*>(&ip_2_ip4(&a)->addr);
  return Packet(bytes, bytes + (IP_IS_V6_VAL(a) ? 16 : 4));
}

// An IP packet from `src` to `dst` around `l4`, checksums filled in.
Packet ip_packet(const ip_addr_t& src, const ip_addr_t& dst, uint8_t proto, const Packet& l4) {
  const Packet s = addr_bytes(src);
  const Packet d = addr_bytes(dst);
  Packet p;
  if (IP_IS_V6_VAL(src)) {
    p = {0x60, 0, 0, 0, 0, 0, proto, 64};
    put16(p, 4, static_cast<uint16_t>(l4.size()));
  } else {
    p = {0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0};
    put16(p, 2, static_cast<uint16_t>(20 + l4.size()));
  }
  p.insert(p.end(), s.begin(), s.end());
  p.insert(p.end(), d.begin(), d.end());
  p.insert(p.end(), l4.begin(), l4.end());
  seal(p);
  return p;
}

struct Segment {
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;
  Packet options;
};

Packet tcp_bytes(const Segment& s) {
  Packet t(20);
  put16(t, 0, s.sport);
  put16(t, 2, s.dport);
  put32(t, 4, s.seq);
  put32(t, 8, s.ack);
  t[12] = static_cast<uint8_t>((20 + s.options.size()) / 4 << 4);
  t[13] = s.flags;
  put16(t, 14, s.window);
  t.insert(t.end(), s.options.begin(), s.options.end());
  return t;
}

struct TcpOptions {
  std::optional<uint16_t> mss;
  std::optional<uint8_t> window_scale;
  bool sack_permitted = false;
};

Segment parse_tcp(const Packet& p) {
  REQUIRE(l4_proto(p) == kProtoTcp);
  const size_t off = l4_offset(p);
  Segment s;
  s.sport = get16(p, off);
  s.dport = get16(p, off + 2);
  s.seq = get32(p, off + 4);
  s.ack = get32(p, off + 8);
  s.flags = p.at(off + 13);
  s.window = get16(p, off + 14);
  const size_t header = static_cast<size_t>(p.at(off + 12) >> 4) * 4;
  s.options.assign(p.begin() + static_cast<long>(off + 20), p.begin() + static_cast<long>(off + header));
  return s;
}

TcpOptions parse_options(const Packet& o) {
  TcpOptions r;
  for (size_t i = 0; i < o.size();) {
    const uint8_t kind = o[i];
    if (kind == 0) break;        // end of options
    if (kind == 1) { ++i; continue; }  // NOP
    REQUIRE(i + 1 < o.size());
    const uint8_t len = o[i + 1];
    REQUIRE(len >= 2);
    REQUIRE(i + len <= o.size());
    if (kind == 2 && len == 4) r.mss = get16(o, i + 2);
    if (kind == 3 && len == 3) r.window_scale = o[i + 2];
    if (kind == 4 && len == 2) r.sack_permitted = true;
    i += len;
  }
  return r;
}

void ensure_lwip_init() {
  static const bool done = [] {
    lwip_init();
    return true;
  }();
  (void)done;
}

// The tunnel netif: 198.19.0.1/24 and fd00:19::1/64, MTU 1420, every packet lwIP sends
// lands in `sent`. Declare it before any pcb so the pcbs go first.
class TunnelNetif {
 public:
  TunnelNetif() {
    ensure_lwip_init();
    ip4_addr_t addr, mask, gw;
    IP4_ADDR(&addr, 198, 19, 0, 1);
    IP4_ADDR(&mask, 255, 255, 255, 0);
    ip4_addr_set_zero(&gw);
    REQUIRE(netif_add(&netif_, &addr, &mask, &gw, this, &TunnelNetif::init, ip_input) != nullptr);
    ip6_addr_t addr6;
    REQUIRE(ip6addr_aton("fd00:19::1", &addr6) == 1);
    s8_t index = -1;
    REQUIRE(netif_add_ip6_address(&netif_, &addr6, &index) == ERR_OK);
    netif_ip6_addr_set_state(&netif_, index, IP6_ADDR_PREFERRED);
    netif_set_default(&netif_);
    netif_set_up(&netif_);
    netif_set_link_up(&netif_);
  }
  ~TunnelNetif() { netif_remove(&netif_); }
  TunnelNetif(const TunnelNetif&) = delete;
  TunnelNetif& operator=(const TunnelNetif&) = delete;

  struct netif* get() { return &netif_; }

  // Hands one packet to lwIP as if it came out of the tunnel.
  err_t input(const Packet& pkt) {
    pbuf* p = pbuf_alloc(PBUF_RAW, static_cast<u16_t>(pkt.size()), PBUF_POOL);
    REQUIRE(p != nullptr);
    REQUIRE(pbuf_take(p, pkt.data(), static_cast<u16_t>(pkt.size())) == ERR_OK);
    const err_t err = netif_.input(p, &netif_);
    if (err != ERR_OK) pbuf_free(p);
    return err;
  }

  std::vector<Packet> sent;

 private:
  static err_t init(struct netif* n) {
    n->name[0] = 'w';
    n->name[1] = 'g';
    n->mtu = kMtu;
    n->output = [](struct netif* nif, pbuf* p, const ip4_addr_t*) { return capture(nif, p); };
    n->output_ip6 = [](struct netif* nif, pbuf* p, const ip6_addr_t*) { return capture(nif, p); };
    return ERR_OK;
  }
  static err_t capture(struct netif* n, pbuf* p) {
    Packet pkt(p->tot_len);
    REQUIRE(pbuf_copy_partial(p, pkt.data(), p->tot_len, 0) == p->tot_len);
    static_cast<TunnelNetif*>(n->state)->sent.push_back(std::move(pkt));
    return ERR_OK;
  }

  struct netif netif_ {};
};

struct TcpAbort {
  void operator()(tcp_pcb* pcb) const { tcp_abort(pcb); }
};
using TcpPcb = std::unique_ptr<tcp_pcb, TcpAbort>;

struct RawRemove {
  void operator()(raw_pcb* pcb) const { raw_remove(pcb); }
};
using RawPcb = std::unique_ptr<raw_pcb, RawRemove>;

err_t on_connected(void* arg, tcp_pcb*, err_t err) {
  if (arg != nullptr) *static_cast<bool*>(arg) = (err == ERR_OK);
  return ERR_OK;
}

// Connects to remote:port (from local_port, 0 = any); the SYN is out when this returns.
TcpPcb connect(const ip_addr_t& remote, u16_t port, u16_t local_port = 0, bool* connected = nullptr) {
  TcpPcb pcb(tcp_new_ip_type(static_cast<u8_t>(IP_GET_TYPE(&remote))));
  REQUIRE(pcb);
  if (local_port != 0) {
    REQUIRE(tcp_bind(pcb.get(), IP_IS_V6_VAL(remote) ? IP6_ADDR_ANY : IP4_ADDR_ANY, local_port) == ERR_OK);
  }
  tcp_arg(pcb.get(), connected);
  REQUIRE(tcp_connect(pcb.get(), &remote, port, on_connected) == ERR_OK);
  return pcb;
}

}  // namespace

TEST_CASE("lwip: SYN carries MSS, window scale 7 and SACK-permitted", "[lwip]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  TunnelNetif tunnel;
  const Endpoints e = endpoints(v6);
  const TcpPcb pcb = connect(e.remote, 80);

  REQUIRE(tunnel.sent.size() == 1);
  const Packet& syn = tunnel.sent[0];
  CHECK(is_v6(syn) == v6);
  CHECK(l4_checksum(syn) == 0);
  if (!v6) CHECK(fold(add_words(syn.data(), l4_offset(syn), 0)) == 0);
  const Segment s = parse_tcp(syn);
  CHECK(s.flags == kTcpSyn);
  CHECK(s.dport == 80);
  CHECK(s.window == 0xffff);  // a SYN's window is never scaled
  const TcpOptions o = parse_options(s.options);
  // TCP_MSS 1380 = MTU 1420 - 40; over IPv6 lwIP takes 20 more for the larger header.
  CHECK(o.mss == (v6 ? 1360 : 1380));
  CHECK(o.window_scale == 7);
  CHECK(o.sack_permitted);
}

TEST_CASE("lwip: initial sequence numbers follow RFC 6528", "[lwip]") {
  TunnelNetif tunnel;
  const Endpoints e = endpoints(false);

  SECTION("connections from different ports get unrelated ISNs") {
    std::vector<TcpPcb> pcbs;
    std::vector<uint32_t> isns;
    for (u16_t port = 40000; port < 40008; ++port) {
      pcbs.push_back(connect(e.remote, 80, port));
      REQUIRE(tunnel.sent.size() == isns.size() + 1);
      isns.push_back(parse_tcp(tunnel.sent.back()).seq);
    }
    uint32_t largest_step = 0;
    bool all_steps_equal = true;
    for (size_t i = 1; i < isns.size(); ++i) {
      const uint32_t step = isns[i] - isns[i - 1];
      const uint32_t distance = std::min(step, static_cast<uint32_t>(0u - step));
      largest_step = std::max(largest_step, distance);
      if (step != isns[1] - isns[0]) all_steps_equal = false;
      for (size_t j = 0; j < i; ++j) CHECK(isns[i] != isns[j]);
    }
    // lwIP's default (iss += tcp_ticks) would give equal steps of a few units. Keyed
    // hashes spread over 2^32: seven steps all below 2^24 happen with p < 2^-49.
    CHECK_FALSE(all_steps_equal);
    CHECK(largest_step > (1u << 24));
  }

  SECTION("the same 4-tuple later gets an ISN advanced by a 4 us clock") {
    using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as in glue.c
    const auto before_first = Clock::now();
    TcpPcb first = connect(e.remote, 80, 40100);
    const auto after_first = Clock::now();
    const uint32_t isn1 = parse_tcp(tunnel.sent.back()).seq;
    first.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));

    const auto before_second = Clock::now();
    const TcpPcb second = connect(e.remote, 80, 40100);
    const auto after_second = Clock::now();
    const Segment syn = parse_tcp(tunnel.sent.back());
    REQUIRE(syn.sport == 40100);
    const uint32_t ticks = syn.seq - isn1;
    const auto quarter_us = [](Clock::duration d) {
      return static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count() / 4000);
    };
    CHECK(ticks + 1 >= quarter_us(before_second - after_first));
    CHECK(ticks <= quarter_us(after_second - before_first) + 1);
  }

  SECTION("the ISN depends on every element of the tuple") {
    const u32_t base = wgnet_lwip_tcp_isn(&e.local, 40200, &e.remote, 80);
    // Same tuple within microseconds: equal up to the clock's advance.
    CHECK(wgnet_lwip_tcp_isn(&e.local, 40200, &e.remote, 80) - base < 1000u);
    CHECK(wgnet_lwip_tcp_isn(&e.local, 40201, &e.remote, 80) - base >= 1000u);
    CHECK(wgnet_lwip_tcp_isn(&e.local, 40200, &e.remote, 81) - base >= 1000u);
    CHECK(wgnet_lwip_tcp_isn(&e.remote, 40200, &e.local, 80) - base >= 1000u);
  }
}

TEST_CASE("lwip: a handshake completes through netif->input", "[lwip]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  TunnelNetif tunnel;
  const Endpoints e = endpoints(v6);
  bool connected = false;
  const TcpPcb pcb = connect(e.remote, 80, 0, &connected);
  REQUIRE(tunnel.sent.size() == 1);
  const Segment syn = parse_tcp(tunnel.sent[0]);
  tunnel.sent.clear();

  Segment syn_ack;
  syn_ack.sport = 80;
  syn_ack.dport = syn.sport;
  syn_ack.seq = 0x10000000;
  syn_ack.ack = syn.seq + 1;
  syn_ack.flags = kTcpSyn | kTcpAck;
  syn_ack.window = 0xffff;
  syn_ack.options = {2, 4, 0x05, 0x64, 1, 3, 3, 7, 1, 1, 4, 2};  // MSS 1380, WS 7, SACK_PERM
  Packet pkt = ip_packet(e.remote, e.local, kProtoTcp, tcp_bytes(syn_ack));

  SECTION("a valid SYN-ACK opens the connection with a scaled 4 MiB window") {
    CHECK(tunnel.input(pkt) == ERR_OK);
    CHECK(connected);
    REQUIRE(tunnel.sent.size() == 1);
    CHECK(l4_checksum(tunnel.sent[0]) == 0);
    const Segment ack = parse_tcp(tunnel.sent[0]);
    CHECK(ack.flags == kTcpAck);
    CHECK(ack.seq == syn.seq + 1);
    CHECK(ack.ack == syn_ack.seq + 1);
    CHECK(ack.window == TCP_WND >> TCP_RCV_SCALE);
    CHECK(pcb->snd_scale == 7);
    CHECK(pcb->rcv_scale == TCP_RCV_SCALE);
  }

  SECTION("a bad checksum is dropped while the netif checks checksums") {
    pkt.at(l4_checksum_field(pkt)) ^= 0x5a;
    tunnel.input(pkt);
    CHECK_FALSE(connected);
    CHECK(tunnel.sent.empty());
  }

  SECTION("a bad checksum passes once the netif skips inbound checks") {
    pkt.at(l4_checksum_field(pkt)) ^= 0x5a;
    NETIF_SET_CHECKSUM_CTRL(tunnel.get(), NETIF_CHECKSUM_GEN_IP | NETIF_CHECKSUM_GEN_UDP |
                                              NETIF_CHECKSUM_GEN_TCP | NETIF_CHECKSUM_GEN_ICMP |
                                              NETIF_CHECKSUM_GEN_ICMP6);
    CHECK(tunnel.input(pkt) == ERR_OK);
    CHECK(connected);
    REQUIRE(tunnel.sent.size() == 1);
    CHECK(l4_checksum(tunnel.sent[0]) == 0);  // generation stays on
  }
}

TEST_CASE("lwip: answers pings and hands echo replies to raw pcbs", "[lwip]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  TunnelNetif tunnel;
  const Endpoints e = endpoints(v6);
  const uint8_t proto = v6 ? kProtoIcmp6 : kProtoIcmp;
  const uint8_t echo_request = v6 ? 128 : 8;
  const uint8_t echo_reply = v6 ? 129 : 0;
  const auto echo = [](uint8_t type) {  // identifier 0x1234, sequence 1, some data
    constexpr std::string_view kData = "wgnet ping";
    Packet m(8 + kData.size());
    m[0] = type;
    put32(m, 4, 0x12340001);
    std::memcpy(m.data() + 8, kData.data(), kData.size());
    return m;
  };

  SECTION("an echo request to our address gets a reply") {
    CHECK(tunnel.input(ip_packet(e.remote, e.local, proto, echo(echo_request))) == ERR_OK);
    REQUIRE(tunnel.sent.size() == 1);
    const Packet& reply = tunnel.sent[0];
    CHECK(l4_checksum(reply) == 0);
    CHECK(l4_proto(reply) == proto);
    CHECK(addr_bytes(e.local) == Packet(reply.begin() + (v6 ? 8 : 12), reply.begin() + (v6 ? 24 : 16)));
    Packet message(reply.begin() + static_cast<long>(l4_offset(reply)), reply.end());
    put16(message, 2, 0);  // checked above
    CHECK(message == echo(echo_reply));  // same identifier, sequence and data
  }

  SECTION("a raw pcb receives echo replies, IP header first") {
    struct Received {
      std::vector<Packet> packets;
    } received;
    RawPcb raw(raw_new_ip_type(static_cast<u8_t>(IP_GET_TYPE(&e.remote)), proto));
    REQUIRE(raw);
    raw_recv(
        raw.get(),
        [](void* arg, raw_pcb*, pbuf* p, const ip_addr_t*) -> u8_t {
          Packet pkt(p->tot_len);
          pbuf_copy_partial(p, pkt.data(), p->tot_len, 0);
          static_cast<Received*>(arg)->packets.push_back(std::move(pkt));
          pbuf_free(p);
          return 1;  // eaten
        },
        &received);
    const Packet in = ip_packet(e.remote, e.local, proto, echo(echo_reply));
    CHECK(tunnel.input(in) == ERR_OK);
    REQUIRE(received.packets.size() == 1);
    CHECK(received.packets[0] == in);
    CHECK(tunnel.sent.empty());
  }
}

// Our lwIP patch series as a TCP sender, deterministically: two lwIP endpoints in one
// process, joined by a scripted link that drops chosen segments, on a fake clock that
// the test advances 1 ms at a time. Each test asserts what the sender does — which
// segments it sends again and when, whether a retransmission timeout fired, cwnd and
// ssthresh after recovery — with and without SACK; and which connections the timers
// visit (only those with work pending).
//
//   sender  198.19.0.1 (netif A) ──data──▶ Link (one-way delay, drop rules) ──▶ netif B
//                                ◀──ACKs── Link ◀──────────────────────────── receiver
//                                                                        198.19.0.2:port
//
// The binary links lwIP alone (no netstack/) so that sys_now() here is the only clock.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "lwip/inet_chksum.h"
#include "lwip/init.h"
#include "lwip/ip.h"
#include "lwip/ip4_frag.h"
#include "lwip/ip6_frag.h"
#include "lwip/nd6.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"

namespace {
u32_t g_now = 1000;     // ms; lwIP treats 0 specially in places
uint64_t g_ms = 1000;   // the same clock, never wrapping (as CLOCK_MONOTONIC's ms)

// Moves the clock forward to `ms` ms before sys_now() wraps; timers due meanwhile run
// at the next check.
void jump_to_wrap(u32_t ms) {
  const u32_t to = 0u - ms;
  g_ms += static_cast<u32_t>(to - g_now);
  g_now = to;
}
// `a` is at or before `b` on the wrapping millisecond clock.
bool not_after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) <= 0; }
}  // namespace
extern "C" u32_t sys_now(void) { return g_now; }
// TCP_CLOCK_US (patch 0005) on the same fake clock; glue.c's real one is weak.
extern "C" u32_t wgnet_lwip_now_us(void) { return static_cast<u32_t>(g_ms * 1000u); }
// TCP_TICKS_NOW (patch 0012), 20 ms slow ticks of the same clock, from 1000 ticks before
// the counter wraps: every case from the 20th simulated second on runs past the wrap.
extern "C" u32_t wgnet_lwip_slow_ticks(void) { return 0xffffffffu - 1000u + static_cast<u32_t>(g_ms / 20u); }

namespace {

using Packet = std::vector<uint8_t>;
constexpr u16_t kMtu = 1420;
constexpr uint32_t kDelayMs = 5;  // one way: 10 ms RTT

uint16_t get16(const Packet& p, size_t at) { return static_cast<uint16_t>(p[at] << 8 | p[at + 1]); }
uint32_t get32(const Packet& p, size_t at) { return static_cast<uint32_t>(get16(p, at)) << 16 | get16(p, at + 2); }

// What the link sees of one IPv4 TCP packet.
struct Seg {
  bool from_sender;
  uint32_t seq, ack;
  uint8_t flags;
  size_t payload;
  bool has_sack;  // carries a SACK option (kind 5)
};

Seg parse(const Packet& p, bool from_sender) {
  const size_t ihl = static_cast<size_t>(p[0] & 0x0f) * 4;
  const size_t doff = static_cast<size_t>(p[ihl + 12] >> 4) * 4;
  Seg s{from_sender, get32(p, ihl + 4), get32(p, ihl + 8), p[ihl + 13], get16(p, 2) - ihl - doff, false};
  for (size_t o = ihl + 20; o < ihl + doff;) {
    const uint8_t kind = p[o];
    if (kind == 0) break;
    if (kind == 1) {
      ++o;
      continue;
    }
    if (kind == 5) s.has_sack = true;
    o += std::max<size_t>(p[o + 1], 2);
  }
  return s;
}

// Rewrites a SYN's SACK_PERM option into two NOPs: the peer then never sees SACK.
void strip_sack_perm(Packet& p) {
  const size_t ihl = static_cast<size_t>(p[0] & 0x0f) * 4;
  const size_t doff = static_cast<size_t>(p[ihl + 12] >> 4) * 4;
  for (size_t o = ihl + 20; o < ihl + doff;) {
    if (p[o] == 0) break;
    if (p[o] == 1) {
      ++o;
      continue;
    }
    if (p[o] == 4) p[o] = p[o + 1] = 1;
    o += std::max<size_t>(p[o + 1], 2);
  }
}

class Link;
Link* g_link = nullptr;

// Both netifs, the packets in flight, the drop rules and a log of every data segment
// the sender put on the wire.
class Link {
 public:
  struct Sent {
    uint32_t at, seq;
    size_t len;
  };
  // Decides per packet; true = drop. `nth` counts the sender's transmissions of this
  // sequence number (1 = first).
  std::function<bool(const Seg&, int nth)> drop = [](const Seg&, int) { return false; };
  bool strip_sack = false;
  std::vector<Sent> sent;  // data segments from the sender, in order
  std::map<uint32_t, int> times_sent;
  int dropped = 0;
  // A bottleneck on the sender's direction: at most one data packet per
  // `bottleneck_ms`, and at most `queue_limit` waiting (0 = no bottleneck).
  uint32_t bottleneck_ms = 0;
  size_t queue_limit = 0;
  uint32_t extra_delay_ms = 0;  // added to the sender's direction (a longer path)
  int queue_drops = 0;
  uint32_t max_queue = 0;
  // The packets due in the same millisecond reach lwIP as one input batch (patch 0009,
  // as the netstack feeds it); around each packet to the receiver, these hooks see it.
  bool batch = false;
  std::function<void(const Seg&)> before_b = [](const Seg&) {};
  std::function<void()> after_b = [] {};

  Link() {
    g_link = this;
    add(a_, "198.19.0.1");
    add(b_, "198.19.0.2");
  }
  ~Link() {
    netif_remove(&a_);
    netif_remove(&b_);
    g_link = nullptr;
  }
  netif* a() { return &a_; }
  netif* b() { return &b_; }
  // Hands a packet to the sender's netif at once, as if from the receiver.
  void inject_to_sender(const Packet& pkt) {
    pbuf* p = pbuf_alloc(PBUF_RAW, static_cast<u16_t>(pkt.size()), PBUF_RAM);
    REQUIRE(p != nullptr);
    pbuf_take(p, pkt.data(), static_cast<u16_t>(pkt.size()));
    if (a_.input(p, &a_) != ERR_OK) pbuf_free(p);
  }

  // Advances the clock by ms, 1 ms at a time: due packets arrive, lwIP's timers run.
  void run(uint32_t ms, const std::function<bool()>& done = nullptr) {
    for (uint32_t i = 0; i < ms; ++i) {
      ++g_now;
      ++g_ms;
      if (batch) tcp_input_batch_begin();
      while (!q_.empty() && not_after(q_.front().due, g_now)) {
        InFlight f = std::move(q_.front());
        q_.pop_front();
        netif* to = f.to_b ? &b_ : &a_;
        if (f.to_b) before_b(parse(f.pkt, true));
        pbuf* p = pbuf_alloc(PBUF_RAW, static_cast<u16_t>(f.pkt.size()), PBUF_RAM);
        REQUIRE(p != nullptr);
        pbuf_take(p, f.pkt.data(), static_cast<u16_t>(f.pkt.size()));
        if (to->input(p, to) != ERR_OK) pbuf_free(p);
        if (f.to_b) after_b();
      }
      if (batch) tcp_input_batch_end();
      sys_check_timeouts();
      if (done && done()) return;
    }
  }

 private:
  struct InFlight {
    uint32_t due;
    bool to_b;
    Packet pkt;
  };
  std::deque<InFlight> q_;
  netif a_{}, b_{};

  void add(netif& n, const char* ip) {
    ip4_addr_t addr, mask, gw;
    ip4addr_aton(ip, &addr);
    ip4addr_aton("255.255.255.0", &mask);
    ip4_addr_set_zero(&gw);
    REQUIRE(netif_add(&n, &addr, &mask, &gw, this, &Link::init, ip_input) != nullptr);
    // The link rewrites options: no inbound checksum checks, generation stays on.
    NETIF_SET_CHECKSUM_CTRL(&n, NETIF_CHECKSUM_GEN_IP | NETIF_CHECKSUM_GEN_TCP);
    netif_set_up(&n);
    netif_set_link_up(&n);
  }
  static err_t init(netif* n) {
    n->mtu = kMtu;
    n->output = [](netif* nif, pbuf* p, const ip4_addr_t*) { return g_link->carry(nif, p); };
    return ERR_OK;
  }
  err_t carry(netif* from, pbuf* p) {
    Packet pkt(p->tot_len);
    pbuf_copy_partial(p, pkt.data(), p->tot_len, 0);
    if ((pkt[0] >> 4) != 4 || pkt[9] != 6) return ERR_OK;
    const bool from_sender = from == &a_;
    if (strip_sack && (pkt[33] & 0x02)) strip_sack_perm(pkt);
    const Seg s = parse(pkt, from_sender);
    // WGNET_TCP_TEST_TRACE=1 prints every packet the link carries (for a failing case)
    if (std::getenv("WGNET_TCP_TEST_TRACE") != nullptr)
      std::fprintf(stderr, "%u %s seq %u ack %u flags %x len %zu\n", g_now, from_sender ? "A>B" : "B>A", s.seq,
                   s.ack, s.flags, s.payload);
    int nth = 0;
    if (from_sender && s.payload > 0) {
      nth = ++times_sent[s.seq];
      sent.push_back({g_now, s.seq, s.payload});
    }
    if (drop(s, nth)) {
      ++dropped;
      return ERR_OK;
    }
    uint32_t due = g_now + kDelayMs + (from_sender ? extra_delay_ms : 0);
    if (from_sender && bottleneck_ms != 0) {
      // departures of the packets still queued at the bottleneck
      while (!departures_.empty() && not_after(departures_.front(), g_now)) departures_.pop_front();
      if (departures_.size() >= queue_limit) {
        ++queue_drops;
        return ERR_OK;
      }
      const uint32_t last = departures_.empty() ? g_now : departures_.back();
      const uint32_t leave = (not_after(last, g_now) ? g_now : last) + bottleneck_ms;
      departures_.push_back(leave);
      max_queue = std::max<uint32_t>(max_queue, static_cast<uint32_t>(departures_.size()));
      due = leave + kDelayMs + extra_delay_ms;
    }
    // the queue is ordered by due time (a bottleneck delays only one direction)
    auto at = q_.end();
    while (at != q_.begin() && !not_after(std::prev(at)->due, due)) --at;
    q_.insert(at, {due, from_sender, std::move(pkt)});
    return ERR_OK;
  }
  std::deque<uint32_t> departures_;
};

// One connection across the link: the sender writes `total` bytes as fast as lwIP
// takes them; the receiver checks them and opens its window at once.
struct Transfer {
  tcp_pcb* snd = nullptr;
  tcp_pcb* rcv = nullptr;
  tcp_pcb* listener = nullptr;
  size_t total, written = 0, received = 0;
  size_t back_total = 0, back_written = 0;  // the receiver's own data, sent back
  uint32_t iss = 0;
  bool corrupt = false, rto_seen = false;
  int recoveries = 0;
  bool was_in_recovery = false;

  Transfer(Link& link, size_t bytes) : total(bytes) {
    static u16_t port = 5000;
    ++port;
    listener = tcp_new();
    tcp_bind_netif(listener, link.b());
    REQUIRE(tcp_bind(listener, IP_ANY_TYPE, port) == ERR_OK);
    listener = tcp_listen(listener);
    REQUIRE(listener != nullptr);
    tcp_arg(listener, this);
    tcp_accept(listener, [](void* arg, tcp_pcb* pcb, err_t) -> err_t {
      auto* t = static_cast<Transfer*>(arg);
      t->rcv = pcb;
      tcp_arg(pcb, t);
      tcp_nagle_disable(pcb);
      tcp_sent(pcb, [](void* arg, tcp_pcb*, u16_t) -> err_t {
        static_cast<Transfer*>(arg)->fill_back();
        return ERR_OK;
      });
      t->fill_back();
      tcp_recv(pcb, [](void* arg, tcp_pcb* pcb, pbuf* p, err_t) -> err_t {
        auto* t = static_cast<Transfer*>(arg);
        if (p == nullptr) return ERR_OK;
        for (pbuf* q = p; q != nullptr; q = q->next) {
          const auto* d = static_cast<const uint8_t*>(q->payload);
          for (u16_t i = 0; i < q->len; ++i)
            if (d[i] != static_cast<uint8_t>((t->received + i) % 251)) t->corrupt = true;
          t->received += q->len;
        }
        tcp_recved(pcb, p->tot_len);
        pbuf_free(p);
        return ERR_OK;
      });
      return ERR_OK;
    });
    snd = tcp_new();
    tcp_bind_netif(snd, link.a());
    tcp_arg(snd, this);
    tcp_nagle_disable(snd);
    ip_addr_t dst;
    ipaddr_aton("198.19.0.2", &dst);
    REQUIRE(tcp_connect(snd, &dst, port, [](void* arg, tcp_pcb*, err_t) -> err_t {
              static_cast<Transfer*>(arg)->fill();
              return ERR_OK;
            }) == ERR_OK);
    iss = snd->lastack;  // tcp_connect sends the SYN at snd_lbb = lastack
    tcp_sent(snd, [](void* arg, tcp_pcb*, u16_t) -> err_t {
      static_cast<Transfer*>(arg)->fill();
      return ERR_OK;
    });
  }
  ~Transfer() {
    // The members go first: the RSTs that tcp_abort() sends pass the link's drop rule,
    // which may ask segment_of() (mss()) about a pcb already freed.
    tcp_pcb* const pcbs[] = {snd, rcv};
    snd = rcv = nullptr;
    for (tcp_pcb* p : pcbs) {
      if (p != nullptr) {
        tcp_arg(p, nullptr);
        tcp_recv(p, nullptr);
        tcp_sent(p, nullptr);
        tcp_abort(p);
      }
    }
    if (listener != nullptr) tcp_close(listener);
  }
  void fill() {
    // Whole segments per write, so that segment k starts at byte k * mss.
    uint8_t chunk[8 * 1380];
    while (written < total) {
      const size_t room = std::min<size_t>(tcp_sndbuf(snd), sizeof chunk);
      size_t n = std::min(room, total - written);
      if (n < total - written) n -= n % mss();
      if (n == 0 || tcp_sndqueuelen(snd) >= TCP_SND_QUEUELEN - 4) break;
      for (size_t i = 0; i < n; ++i) chunk[i] = static_cast<uint8_t>((written + i) % 251);
      if (tcp_write(snd, chunk, static_cast<u16_t>(n), TCP_WRITE_FLAG_COPY) != ERR_OK) break;
      written += n;
    }
    tcp_output(snd);
  }
  // The receiver's data towards the sender (bidirectional tests), whole segments.
  void fill_back() {
    uint8_t chunk[4 * 1380] = {};
    // a bulk stream that keeps only ~48 segments queued, so that its segments are
    // made as it goes (after the first loss, with SACK room) and some always wait
    while (rcv != nullptr && back_written < back_total && tcp_sndqueuelen(rcv) < 48) {
      size_t n = std::min<size_t>({tcp_sndbuf(rcv), sizeof chunk, back_total - back_written});
      if (n < back_total - back_written) n -= n % rcv->mss;
      if (n == 0 || tcp_write(rcv, chunk, static_cast<u16_t>(n), TCP_WRITE_FLAG_COPY) != ERR_OK) break;
      back_written += n;
    }
    if (rcv != nullptr) tcp_output(rcv);
  }
  // Data sequence number of payload byte `offset` (the SYN takes one).
  uint32_t seq_of(size_t offset) const { return iss + 1 + static_cast<uint32_t>(offset); }
  size_t segment_of(uint32_t seq) const { return (seq - iss - 1) / mss(); }
  size_t mss() const { return snd != nullptr ? snd->mss : 1380; }

  void watch() {
    if (snd->flags & TF_RTO) rto_seen = true;
    if (snd->rec.in_recovery && !was_in_recovery) ++recoveries;
    was_in_recovery = snd->rec.in_recovery != 0;
  }
  // Runs until everything arrived (or ms pass), watching for the RTO path.
  bool run(Link& link, uint32_t ms) {
    link.run(ms, [&] {
      watch();
      return received == total && snd->unacked == nullptr;
    });
    return received == total && !corrupt;
  }
};

// Transmissions of the data segment that starts at seq, in order.
std::vector<Link::Sent> sends_of(const Link& link, uint32_t seq) {
  std::vector<Link::Sent> out;
  for (const auto& s : link.sent)
    if (s.seq == seq) out.push_back(s);
  return out;
}
int retransmissions(const Link& link) {
  int n = 0;
  for (const auto& [seq, times] : link.times_sent) n += times - 1;
  return n;
}

struct LwipInit {
  LwipInit() { lwip_init(); }
};
void init_once() { static LwipInit once; }

constexpr size_t kSegments = 400;

}  // namespace

TEST_CASE("lwip tcp: SACK is negotiated and one lost segment is repaired without an RTO", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, 60 * 1380);
  link.drop = [&](const Seg& s, int nth) { return s.from_sender && s.payload > 0 && nth == 1 && s.seq == t.seq_of(20 * t.mss()); };
  REQUIRE(t.run(link, 5000));
  CHECK((t.snd->flags & TF_SACK) != 0);
  CHECK(link.dropped == 1);
  CHECK_FALSE(t.rto_seen);
  const auto sends = sends_of(link, t.seq_of(20 * t.mss()));
  REQUIRE(sends.size() == 2);
  // Repaired about one RTT after the loss (SACKs of later segments), not after an RTO.
  CHECK(sends[1].at - sends[0].at < 40);
  CHECK(retransmissions(link) == 1);
}

TEST_CASE("lwip tcp: the first data segment lost", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  link.drop = [&](const Seg& s, int nth) { return s.from_sender && nth == 1 && s.seq == t.seq_of(0); };
  REQUIRE(t.run(link, 10000));
  CHECK(link.dropped == 1);
  // Only a few segments follow it in the initial window: enough for three SACKs
  // (RFC 6675's DupThresh) or for RACK; no timeout.
  CHECK_FALSE(t.rto_seen);
  CHECK(sends_of(link, t.seq_of(0)).size() == 2);
  CHECK(retransmissions(link) == 1);
}

TEST_CASE("lwip tcp: every 20th segment lost, each repaired once by SACK recovery", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  link.drop = [&](const Seg& s, int nth) {
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) % 20 == 10;
  };
  REQUIRE(t.run(link, 20000));
  CHECK(link.dropped == static_cast<int>(kSegments / 20));
  CHECK_FALSE(t.rto_seen);
  // Each lost segment went out exactly twice. The only other retransmission allowed
  // is RFC 6675's rescue (rule 4): the last segment, once, at the tail.
  for (const auto& [seq, times] : link.times_sent) {
    const size_t k = t.segment_of(seq);
    if (k % 20 == 10) {
      CHECK(times == 2);
    } else if (times != 1) {
      CHECK(k == kSegments - 1);
      CHECK(times == 2);
    }
  }
}

TEST_CASE("lwip tcp: a burst of 10 lost segments is repaired in one recovery", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  link.drop = [&](const Seg& s, int nth) {
    const size_t k = t.segment_of(s.seq);
    return s.from_sender && s.payload > 0 && nth == 1 && k >= 100 && k < 110;
  };
  tcpwnd_size_t ssthresh_in = 0, cwnd_before = 0, cwnd_prev = 0;
  link.run(10000, [&] {
    if (t.snd->rec.in_recovery && !t.was_in_recovery) {
      ssthresh_in = t.snd->ssthresh;
      cwnd_before = cwnd_prev;
    }
    cwnd_prev = t.snd->cwnd;
    t.watch();
    return t.received == t.total && t.snd->unacked == nullptr;
  });
  REQUIRE(t.received == t.total);
  CHECK_FALSE(t.corrupt);
  CHECK(link.dropped == 10);
  CHECK_FALSE(t.rto_seen);
  CHECK(t.recoveries == 1);
  CHECK(retransmissions(link) == 10);
  // One reduction for the whole burst, kept after recovery; cwnd restarts from it
  // (then grows), not from 1 MSS as after an RTO.
  CHECK(ssthresh_in >= 2u * t.mss());
  CHECK(ssthresh_in < cwnd_before);
  CHECK(t.snd->ssthresh == ssthresh_in);
  CHECK(t.snd->cwnd >= t.snd->ssthresh);
}

TEST_CASE("lwip tcp: the last segment lost is found by the tail loss probe, not the RTO", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  const uint32_t last = t.seq_of((kSegments - 1) * 1380);
  link.drop = [&](const Seg& s, int nth) { return s.from_sender && s.seq == last && nth == 1; };
  REQUIRE(t.run(link, 10000));
  CHECK(link.dropped == 1);
  CHECK_FALSE(t.rto_seen);
  const auto sends = sends_of(link, last);
  REQUIRE(sends.size() == 2);
  // Alone in flight once the ACK before it came: PTO = 2 SRTT (~10 ms here) + 40 ms
  // of delayed ACK, checked on 10 ms ticks; the RTO would be 200 ms at least.
  CHECK(sends[1].at - sends[0].at < 100);
  CHECK(retransmissions(link) == 1);
}

TEST_CASE("lwip tcp: the last three segments lost: probe, then RACK repairs the rest", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  link.drop = [&](const Seg& s, int nth) {
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) >= kSegments - 3;
  };
  REQUIRE(t.run(link, 10000));
  CHECK(link.dropped == 3);
  CHECK_FALSE(t.rto_seen);
  for (size_t k = kSegments - 3; k < kSegments; ++k) {
    const auto sends = sends_of(link, t.seq_of(k * 1380));
    REQUIRE(sends.size() == 2);
    CHECK(sends[1].at - sends[0].at < 100);
  }
}

TEST_CASE("lwip tcp: a lost retransmission is found again without an RTO", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  const uint32_t victim = t.seq_of(100 * 1380);
  link.drop = [&](const Seg& s, int nth) { return s.from_sender && s.seq == victim && nth <= 2; };
  REQUIRE(t.run(link, 10000));
  CHECK(link.dropped == 2);
  const auto sends = sends_of(link, victim);
  REQUIRE(sends.size() == 3);
  // RACK: later segments sent after the first retransmission were SACKed, so it is
  // lost too; found within a few RTTs, not an RTO (>= 200 ms) later.
  CHECK_FALSE(t.rto_seen);
  CHECK(sends[2].at - sends[1].at < 100);
}

TEST_CASE("lwip tcp: lost SACK-carrying ACKs do not stop the repair", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  int sack_acks_dropped = 0;
  link.drop = [&](const Seg& s, int nth) {
    if (s.from_sender) return s.payload > 0 && nth == 1 && t.segment_of(s.seq) == 150;
    if (s.has_sack && sack_acks_dropped < 2) return ++sack_acks_dropped, true;
    return false;
  };
  REQUIRE(t.run(link, 10000));
  CHECK(sack_acks_dropped == 2);
  CHECK_FALSE(t.rto_seen);
  CHECK(sends_of(link, t.seq_of(150 * t.mss())).size() == 2);
}

TEST_CASE("lwip tcp: without SACK, NewReno repairs three losses of one window by partial ACKs", "[lwip-tcp]") {
  init_once();
  Link link;
  link.strip_sack = true;
  Transfer t(link, kSegments * 1380);
  link.drop = [&](const Seg& s, int nth) {
    const size_t k = t.segment_of(s.seq);
    return s.from_sender && s.payload > 0 && nth == 1 && (k == 120 || k == 124 || k == 128);
  };
  REQUIRE(t.run(link, 20000));
  CHECK((t.snd->flags & TF_SACK) == 0);
  CHECK(link.dropped == 3);
  CHECK_FALSE(t.rto_seen);
  CHECK(retransmissions(link) == 3);
  // One RTT per hole: the second and third go out after the partial ACKs.
  const auto a = sends_of(link, t.seq_of(120 * t.mss()));
  const auto c = sends_of(link, t.seq_of(128 * t.mss()));
  REQUIRE(a.size() == 2);
  REQUIRE(c.size() == 2);
  CHECK(c[1].at > a[1].at);
}

TEST_CASE("lwip tcp: the retransmission timeout is RFC 6298's, 200 ms at least, not 3 s", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, 40 * 1380);
  // Everything from the sender is lost for a while once 10 segments went through.
  uint32_t blackout_from = 0;
  link.drop = [&](const Seg& s, int) {
    if (!s.from_sender || s.payload == 0) return false;
    if (t.segment_of(s.seq) < 10 && blackout_from == 0) return false;
    if (blackout_from == 0) blackout_from = g_now;
    return g_now < blackout_from + 150;
  };
  REQUIRE(t.run(link, 20000));
  CHECK(t.rto_seen);
  // The first segment lost in the blackout: its next transmission is the RTO's.
  const auto sends = sends_of(link, t.seq_of(10 * t.mss()));
  REQUIRE(sends.size() >= 2);
  const uint32_t waited = sends[1].at - sends[0].at;
  CHECK(waited >= 200);
  CHECK(waited <= 260);
}

TEST_CASE("lwip tcp: CUBIC reduces to beta = 0.7 and PRR sends in proportion to delivery", "[lwip-tcp]") {
  init_once();
  Link link;
  // Long enough that new data is waiting while the loss is repaired.
  Transfer t(link, 4000 * 1380);
  link.drop = [&](const Seg& s, int nth) {
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) == 1000;
  };
  tcpwnd_size_t cwnd_prev = 0, cwnd_at_loss = 0, ssthresh_in = 0, cwnd_exit = 0;
  uint32_t prr_out = 0, prr_delivered = 0, recover_fs = 0;
  link.run(10000, [&] {
    if (t.snd->rec.in_recovery && !t.was_in_recovery) {
      cwnd_at_loss = cwnd_prev;
      ssthresh_in = t.snd->ssthresh;
    }
    if (!t.snd->rec.in_recovery && t.was_in_recovery) {
      cwnd_exit = t.snd->cwnd;
      prr_out = t.snd->rec.prr_out;
      prr_delivered = t.snd->rec.prr_delivered;
      recover_fs = t.snd->rec.recover_fs;
    }
    cwnd_prev = t.snd->cwnd;
    t.watch();
    return t.received == t.total && t.snd->unacked == nullptr;
  });
  REQUIRE(t.received == t.total);
  REQUIRE(t.recoveries == 1);
  CHECK_FALSE(t.rto_seen);
  // ssthresh = 0.7 cwnd at the loss (RFC 9438 4.6; W_max records that cwnd, the
  // first loss has no fast convergence), not FlightSize / 2
  const double w_max_bytes = t.snd->rec.cubic.w_max * t.mss();
  CHECK(w_max_bytes >= cwnd_at_loss);
  CHECK(ssthresh_in == Approx(0.7 * w_max_bytes).margin(1));
  // PRR: what went out during recovery is what was delivered, scaled by
  // ssthresh / RecoverFS (RFC 6937), give or take a segment and the retransmission
  // that starts recovery; neither a burst nor a silence.
  REQUIRE(recover_fs > 0);
  const double proportional = static_cast<double>(prr_delivered) * ssthresh_in / recover_fs;
  CHECK(prr_out <= proportional + 2 * t.mss());
  CHECK(prr_out + 2 * t.mss() >= proportional);
  // recovery ends at ssthresh (then CUBIC grows it)
  CHECK(cwnd_exit >= ssthresh_in);
  CHECK(cwnd_exit <= ssthresh_in + 2 * t.mss());
}

TEST_CASE("lwip tcp: HyStart++ leaves slow start when the queue builds, before it overflows", "[lwip-tcp]") {
  init_once();
  Link link;
  link.bottleneck_ms = 1;  // ~11 Mbit/s: 10 packets fill the 10 ms RTT
  link.queue_limit = 100;
  Transfer t(link, 3000 * 1380);
  REQUIRE(t.run(link, 60000));
  CHECK(t.snd->rec.cubic.hystart_done);
  // Slow start without an exit doubles cwnd until the 100-packet queue overflows.
  CHECK(link.queue_drops == 0);
  CHECK(link.max_queue < 100);
  CHECK(retransmissions(link) == 0);
}

TEST_CASE("lwip tcp: a bidirectional flow reports its SACKs on data segments", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, 2000 * 1380);
  t.back_total = 100000 * 1380;  // more than it can send meanwhile: always backlogged
  int sack_on_data = 0, sack_on_empty = 0;
  link.drop = [&](const Seg& s, int nth) {
    if (!s.from_sender && s.has_sack) (s.payload > 0 ? sack_on_data : sack_on_empty)++;
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) % 100 == 50;
  };
  REQUIRE(t.run(link, 20000));
  CHECK(link.dropped == 20);
  CHECK_FALSE(t.rto_seen);
  // after the first loss the receiver's segments have room for a SACK block, and it
  // has data waiting: from then on its SACKs ride on that data
  INFO("SACK blocks on data segments " << sack_on_data << ", on empty ACKs " << sack_on_empty);
  CHECK(sack_on_data > 0);
  CHECK(sack_on_empty < sack_on_data);
}

// Found by tests/fuzz/lwip_tcp_fuzz.cpp (corpus entry mss_in_ack): before patch 0007 an
// ACK with an MSS option shrank pcb->mss under the queued segments and the next
// tcp_write aborted the process ("mss_local is too small").
// A pure ACK from the receiver to the sender with the given 4 option bytes.
Packet crafted_ack(const Transfer& t, const uint8_t (&opt)[4]) {
  Packet ack(20 + 24, 0);
  ack[0] = 0x45;
  ack[3] = static_cast<uint8_t>(ack.size());
  ack[8] = 64;
  ack[9] = 6;
  const uint8_t src[4] = {198, 19, 0, 2}, dst[4] = {198, 19, 0, 1};
  std::memcpy(&ack[12], src, 4);
  std::memcpy(&ack[16], dst, 4);
  auto put = [&](size_t at, uint32_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i, v >>= 8) ack[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v);
  };
  put(20, t.rcv->local_port, 2);
  put(22, t.snd->local_port, 2);
  put(24, t.rcv->snd_nxt, 4);
  put(28, t.snd->lastack, 4);
  ack[32] = (24 / 4) << 4;
  ack[33] = 0x10;
  put(34, 0xffff, 2);
  std::memcpy(&ack[40], opt, 4);
  return ack;
}

TEST_CASE("lwip tcp: an MSS option outside the SYN is ignored", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, 200 * 1380);
  link.run(30, [&] { return t.rcv != nullptr && t.snd->unsent != nullptr; });
  REQUIRE(t.rcv != nullptr);
  const u16_t mss_before = t.snd->mss;
  link.inject_to_sender(crafted_ack(t, {2, 4, 0, 100}));
  CHECK(t.snd->mss == mss_before);
  // and the transfer goes on (tcp_write with segments already queued)
  REQUIRE(t.run(link, 10000));
}

// Found by lwip_tcp_fuzz (corpus entry option_kind_last_byte): an option kind in the
// last byte of the options made tcp_parseopt read its length byte past the pbuf.
// Caught by AddressSanitizer (CI runs these tests under it); here it must simply be
// ignored, whatever the kind.
TEST_CASE("lwip tcp: an option kind in the last byte of the options is ignored", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, 200 * 1380);
  link.run(30, [&] { return t.rcv != nullptr && t.snd->unsent != nullptr; });
  REQUIRE(t.rcv != nullptr);
  for (uint8_t kind : {2, 3, 4, 5, 8, 30}) link.inject_to_sender(crafted_ack(t, {1, 1, 1, kind}));
  REQUIRE(t.run(link, 10000));
  CHECK(t.snd->mss == 1380);
}

TEST_CASE("lwip tcp: a loss-free transfer retransmits nothing", "[lwip-tcp]") {
  init_once();
  Link link;
  Transfer t(link, kSegments * 1380);
  REQUIRE(t.run(link, 10000));
  CHECK(retransmissions(link) == 0);
  CHECK_FALSE(t.rto_seen);
  CHECK_FALSE(t.snd->rec.in_recovery);
}

// --- the receiver: patches 0008 (linear out-of-order queue) and 0009 (batched ACKs) ---

// What the receiver sent and took: ACKs carrying SACK blocks, duplicate ACKs (a pure
// ACK for the same sequence number as the one before), and data segments that reached
// it out of order (beyond rcv_nxt). Declared before the Transfer: its destructor's RSTs
// still pass the hooks.
struct ReceiverCounts {
  int sack_acks = 0, dupacks = 0, out_of_order = 0;
  uint32_t last_ack = 0;
};
void count_receiver(Link& link, const Transfer& t, ReceiverCounts& c, std::function<bool(const Seg&, int)> drop) {
  link.drop = [&c, drop](const Seg& s, int nth) {
    if (!s.from_sender && s.payload == 0 && !(s.flags & (TCP_SYN | TCP_FIN | TCP_RST))) {
      if (s.has_sack) ++c.sack_acks;
      if (s.ack == c.last_ack) ++c.dupacks;
      c.last_ack = s.ack;
    }
    return drop(s, nth);
  };
  link.before_b = [&t, &c](const Seg& s) {
    if (t.rcv != nullptr && s.payload > 0 && TCP_SEQ_GT(s.seq, t.rcv->rcv_nxt)) ++c.out_of_order;
  };
}

TEST_CASE("lwip tcp: in an input batch, out-of-order segments from a SACK peer get one ACK per batch", "[lwip-tcp]") {
  init_once();
  Link link;
  link.batch = true;
  ReceiverCounts c;
  Transfer t(link, 2000 * 1380);
  count_receiver(link, t, c, [&](const Seg& s, int nth) {
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) % 200 == 100;
  });
  REQUIRE(t.run(link, 20000));
  CHECK(link.dropped == 10);
  CHECK_FALSE(t.rto_seen);
  CHECK(t.recoveries == 10);
  // without batching every out-of-order segment is ACKed on its own (RFC 5681 4.2)
  INFO("ACKs with SACK blocks " << c.sack_acks << ", out-of-order segments " << c.out_of_order);
  CHECK(c.out_of_order > 100);
  CHECK(c.sack_acks > 0);
  CHECK(c.sack_acks * 4 < c.out_of_order);
}

TEST_CASE("lwip tcp: in an input batch, a peer without SACK still gets a duplicate ACK per segment", "[lwip-tcp]") {
  init_once();
  Link link;
  link.batch = true;
  link.strip_sack = true;
  ReceiverCounts c;
  Transfer t(link, 600 * 1380);
  count_receiver(link, t, c, [&](const Seg& s, int nth) {
    return s.from_sender && s.payload > 0 && nth == 1 && t.segment_of(s.seq) == 300;
  });
  REQUIRE(t.run(link, 20000));
  CHECK_FALSE(t.rcv->flags & TF_SACK);
  CHECK_FALSE(t.rto_seen);
  // the first out-of-order segment's ACK may be the first for that number (the last
  // in-order one waited as a delayed ACK); every later one repeats it
  INFO("duplicate ACKs " << c.dupacks << ", out-of-order segments " << c.out_of_order);
  CHECK(c.out_of_order >= 3);
  CHECK(c.dupacks >= c.out_of_order - 1);
}

TEST_CASE("lwip tcp: a connection its application aborts within an input batch leaves the batch", "[lwip-tcp]") {
  // The pcb was deferred by an earlier segment of the batch, then freed by tcp_abort in
  // the receive callback: the batch's end must not send for it (AddressSanitizer in CI).
  init_once();
  Link link;
  link.batch = true;
  Transfer t(link, 400 * 1380);
  size_t abort_after = 100 * 1380;
  bool aborted = false;
  link.run(100, [&] { return t.rcv != nullptr; });
  REQUIRE(t.rcv != nullptr);
  tcp_recv(t.rcv, nullptr);
  static size_t* s_abort_after;
  static bool* s_aborted;
  static Transfer* s_t;
  static bool s_queued;
  s_queued = false;
  s_abort_after = &abort_after;
  s_aborted = &aborted;
  s_t = &t;
  // the receiver's RST frees the sender's pcb: forget it then
  tcp_err(t.snd, [](void* arg, err_t) { static_cast<Transfer*>(arg)->snd = nullptr; });
  tcp_recv(t.rcv, [](void*, tcp_pcb* pcb, pbuf* p, err_t) -> err_t {
    if (p == nullptr) return ERR_OK;
    const u16_t len = p->tot_len;
    s_t->received += len;
    pbuf_free(p);
    // abort once an earlier segment of this batch deferred the pcb's ACK
    if (s_t->received >= *s_abort_after && !*s_aborted && pcb->batch_queued) {
      *s_aborted = true;
      s_queued = true;
      s_t->rcv = nullptr;
      tcp_abort(pcb);
      return ERR_ABRT;
    }
    tcp_recved(pcb, len);
    return ERR_OK;
  });
  link.run(5000, [&] { return aborted; });
  REQUIRE(aborted);
  CHECK(s_queued);  // it was waiting for the batch's end when it was freed
  link.run(100);  // the rest of that batch and the sender's reaction, no use after free
  CHECK(t.rcv == nullptr);
  CHECK(t.snd == nullptr);  // the receiver's RST reached the sender
}

// The queue's remembered tail and its running bounds, checked against a walk after
// every segment the receiver takes.
void check_ooseq(const tcp_pcb* pcb) {
  if (pcb == nullptr) return;
  const tcp_seg* last = nullptr;
  u32_t bytes = 0, pbufs = 0;
  for (const tcp_seg* s = pcb->ooseq; s != nullptr; s = s->next) {
    if (last != nullptr) REQUIRE(TCP_SEQ_LT(last->tcphdr->seqno, s->tcphdr->seqno));
    last = s;
    bytes += s->p->tot_len;
    pbufs += pbuf_clen(s->p);
  }
  if (pcb->ooseq_tail != nullptr) REQUIRE(pcb->ooseq_tail == last);
  REQUIRE(pcb->ooseq_bound_bytes >= bytes);
  REQUIRE(pcb->ooseq_bound_pbufs >= pbufs);
}

TEST_CASE("lwip tcp: the out-of-order queue keeps its tail and bounds through reordering and repair", "[lwip-tcp]") {
  init_once();
  for (bool batch : {false, true}) {
    Link link;
    link.batch = batch;
    Transfer t(link, 3000 * 1380);
    uint32_t rng = 12345;
    link.drop = [&](const Seg& s, int) {
      rng = rng * 1103515245u + 12345u;
      return s.from_sender && s.payload > 0 && (rng >> 16) % 100 < 3;  // 3 %, retransmissions too
    };
    size_t deepest = 0;
    link.after_b = [&] {
      check_ooseq(t.rcv);
      size_t n = 0;
      for (const tcp_seg* s = t.rcv != nullptr ? t.rcv->ooseq : nullptr; s != nullptr; s = s->next) ++n;
      deepest = std::max(deepest, n);
    };
    INFO("batch " << batch);
    REQUIRE(t.run(link, 60000));
    CHECK(link.dropped > 60);
    CHECK(deepest > 10);  // the queue was exercised, not just a segment or two
  }
}

// --- patch 0010: BBR ---

// Selects the congestion control of the pcbs a test creates, and CUBIC again after.
struct UseCc {
  explicit UseCc(u8_t cc) { tcp_cc_default = cc; }
  ~UseCc() { tcp_cc_default = TCP_CC_CUBIC; }
};

// 1 segment per ms through a bottleneck queue of 100 (BDP: 11 ms x 1 segment/ms).
struct Bottleneck : Link {
  Bottleneck() {
    bottleneck_ms = 1;
    queue_limit = 100;
  }
};

TEST_CASE("lwip tcp: BBR measures the bottleneck and keeps about two BDPs queued", "[lwip-tcp]") {
  init_once();
  UseCc bbr(TCP_CC_BBR);
  Bottleneck link;
  Transfer t(link, 6000 * 1380);
  REQUIRE(t.snd->rec.cc == TCP_CC_BBR);
  link.run(3000);  // startup overflows the queue once, as slow start does
  const int drops_after_startup = link.queue_drops;
  link.max_queue = 0;
  const auto& b = t.snd->rec.bbr;
  REQUIRE(t.run(link, 20000));
  INFO("bw " << b.bw << " B/s, min_rtt " << b.min_rtt_us << " us, max queue " << link.max_queue);
  CHECK(b.filled_pipe);
  CHECK(b.bw >= 1380 * 1000 * 9 / 10);
  CHECK(b.bw <= 1380 * 1000 * 11 / 10);
  CHECK(b.min_rtt_us >= 10000);
  CHECK(b.min_rtt_us <= 13000);
  // window gain 3 without pacing: the queue holds about two BDPs (11 each) with the
  // burst allowances, far from the buffer's 100, and never overflows
  CHECK(link.max_queue <= 50);
  CHECK(link.queue_drops == drops_after_startup);
}

// Segments the receiver got in `ms` of a transfer through the bottleneck at `loss` %
// random loss of data segments (retransmissions too), the same losses for both.
size_t delivered_under_loss(u8_t cc, int loss, uint32_t ms) {
  UseCc use(cc);
  Bottleneck link;
  Transfer t(link, 100000 * 1380);
  uint32_t rng = 4242;
  link.drop = [&](const Seg& s, int) {
    rng = rng * 1103515245u + 12345u;
    return s.from_sender && s.payload > 0 && int((rng >> 16) % 1000) < loss * 10;
  };
  link.run(ms, [&] {
    t.watch();
    return false;
  });
  CHECK_FALSE(t.corrupt);
  return t.received / 1380;
}

TEST_CASE("lwip tcp: under 2 % random loss BBR keeps the bottleneck busy, CUBIC does not", "[lwip-tcp]") {
  init_once();
  const size_t bbr = delivered_under_loss(TCP_CC_BBR, 2, 10000);
  const size_t cubic = delivered_under_loss(TCP_CC_CUBIC, 2, 10000);
  INFO("segments in 10 s at 1 per ms: BBR " << bbr << ", CUBIC " << cubic);
  CHECK(bbr >= 9000);            // 90 % of what the bottleneck carries
  CHECK(bbr * 10 >= cubic * 12);  // and a fifth more than CUBIC
}

TEST_CASE("lwip tcp: BBR drains to 4 segments to measure a minimum RTT 10 s old", "[lwip-tcp]") {
  init_once();
  UseCc bbr(TCP_CC_BBR);
  Bottleneck link;
  Transfer t(link, 100000 * 1380);
  link.run(3000);
  const auto& b = t.snd->rec.bbr;
  REQUIRE(b.min_rtt_us <= 13000);
  link.extra_delay_ms = 6;  // the path gets longer: no RTT sample reaches the old minimum
  bool probed = false;
  u32_t cwnd_in_probe = 0xffffffff;
  link.run(12000, [&] {
    if (b.mode == 3) {
      probed = true;
      cwnd_in_probe = std::min<u32_t>(cwnd_in_probe, t.snd->cwnd);
    }
    return probed && b.mode != 3;
  });
  REQUIRE(probed);
  CHECK(cwnd_in_probe <= 4u * 1380);
  link.run(500);
  INFO("min_rtt after probe-rtt " << b.min_rtt_us);
  CHECK(b.min_rtt_us >= 16000);  // the new path's
  CHECK(b.mode == 2);
}

TEST_CASE("lwip tcp: after an RTO BBR restarts at one segment and grows back to its model", "[lwip-tcp]") {
  init_once();
  UseCc bbr(TCP_CC_BBR);
  Bottleneck link;
  Transfer t(link, 100000 * 1380);
  link.run(3000);
  bool blackout = true;
  link.drop = [&](const Seg&, int) { return blackout; };
  u32_t cwnd_at_rto = 0;
  link.run(3000, [&] {
    if (t.snd->flags & TF_RTO) cwnd_at_rto = t.snd->cwnd;
    return cwnd_at_rto != 0;
  });
  REQUIRE(cwnd_at_rto != 0);
  CHECK(cwnd_at_rto == 1380);
  blackout = false;
  link.run(3000);
  CHECK(t.snd->cwnd >= 11u * 1380);  // at least a BDP again
  CHECK(t.snd->rec.bbr.bw >= 1380 * 1000 * 9 / 10);
}

// --- the timers: patch 0012 (only connections with work pending are visited) ---

namespace {

// n connections, each with one small exchange done and then idle.
struct IdleConnections {
  std::vector<std::unique_ptr<Transfer>> all;
  IdleConnections(Link& link, size_t n, u32_t keep_idle_ms = 0) {
    for (size_t i = 0; i < n; ++i) {
      all.push_back(std::make_unique<Transfer>(link, 100));
      if (keep_idle_ms != 0) {
        ip_set_option(all.back()->snd, SOF_KEEPALIVE);
        all.back()->snd->keep_idle = keep_idle_ms;
        all.back()->snd->keep_intvl = 1000;
        all.back()->snd->keep_cnt = 3;
      }
    }
    link.run(2000);
    for (auto& t : all) {
      REQUIRE(t->received == t->total);
      REQUIRE(t->snd->unacked == nullptr);
    }
  }
};

}  // namespace

TEST_CASE("lwip tcp timers: idle connections are not visited, a busy one costs its own ticks", "[lwip-tcp]") {
  init_once();
  Link link;
  IdleConnections idle(link, 1000);
  // A simulated minute: one transfer among the 1,000 idle connections, then quiet.
  const u32_t visits_before = tcp_timer_visits;
  Transfer busy(link, kSegments * 1380);
  uint32_t busy_until = 0;
  link.run(60000, [&] {
    if (busy_until == 0 && busy.received == busy.total && busy.snd->unacked == nullptr) busy_until = g_now;
    return false;
  });
  REQUIRE(busy.received == busy.total);
  REQUIRE(busy_until != 0);
  const u32_t visits = tcp_timer_visits - visits_before;
  // Each visited about twice per 10 ms tick while it has work (fast and slow timer);
  // an lwIP that walked every pcb would have made 1,000 x 9,000 visits.
  INFO("timer visits " << visits << ", segments " << link.sent.size());
  CHECK(visits < 2 * link.sent.size() + 1000);
  CHECK(tcp_armed_pcbs == nullptr);
  // Nothing left to time: the stack's thread may sleep until a packet comes.
  CHECK(sys_timeouts_sleeptime() == SYS_TIMEOUTS_SLEEPTIME_INFINITE);
}

TEST_CASE("lwip tcp timers: an idle connection's keepalive is sent when due, and only then", "[lwip-tcp]") {
  init_once();
  Link link;
  int probes = 0;  // before `idle`: its end sends resets through link.drop
  u32_t first_probe = 0;
  IdleConnections idle(link, 200, 10000);
  u32_t last = idle.all[0]->snd->tmr;  // slow ticks of the last segment received
  for (auto& t : idle.all)
    if (TCP_SEQ_LT(t->snd->tmr, last)) last = t->snd->tmr;
  // Idle, the senders send nothing but keepalive probes, each answered by an ACK.
  link.drop = [&](const Seg& s, int) {
    if (s.from_sender && s.payload == 0 && ++probes == 1) first_probe = wgnet_lwip_slow_ticks();
    return false;
  };
  const u32_t visits_before = tcp_timer_visits;
  link.run(35000);
  const u32_t visits = tcp_timer_visits - visits_before;
  // The first probes 10 s (500 slow ticks) after the last segment, as tcp_slowtmr
  // reckons it (more than 500 ticks), on the next whole second (50 ticks); the next
  // 10 s after each answer: 3 rounds for each of the 200 in the 33 s after the first.
  INFO("probes " << probes << ", the first " << first_probe - last << " ticks after the last segment, visits "
                 << visits);
  CHECK(first_probe - last >= 501);
  CHECK(first_probe - last <= 501 + 50);
  CHECK(first_probe % 50 <= 1);  // (the slow timer runs every other 10 ms tick)
  CHECK(probes == 3 * 200);
  // A few visits per probe on each side (the probe sent, taken, answered, the answer
  // taken), none in between.
  CHECK(visits <= 10u * static_cast<u32_t>(probes));
  for (auto& t : idle.all) CHECK(t->snd->state == ESTABLISHED);
}

TEST_CASE("lwip tcp timers: a keepalive nobody answers ends the connection on time", "[lwip-tcp]") {
  init_once();
  Link link;
  IdleConnections idle(link, 1, 5000);
  Transfer* t = idle.all[0].get();
  tcp_err(t->snd, [](void* arg, err_t err) {
    auto* tr = static_cast<Transfer*>(arg);
    tr->snd = nullptr;  // lwIP freed it
    tr->corrupt = err != ERR_ABRT;  // (reused: the wrong error)
  });
  link.drop = [](const Seg& s, int) { return !s.from_sender; };  // the peer is gone
  const u32_t last = t->snd->tmr;
  u32_t ended = 0;
  link.run(20000, [&] {
    if (t->snd == nullptr && ended == 0) ended = wgnet_lwip_slow_ticks();
    return ended != 0;
  });
  REQUIRE(ended != 0);
  CHECK_FALSE(t->corrupt);
  // keep_idle 5 s plus 3 probes 1 s apart: 8 s (400 ticks) after the last segment,
  // on a whole second.
  INFO("ended " << ended - last << " ticks after the last segment");
  CHECK(ended - last >= 401);
  CHECK(ended - last <= 401 + 50);
  CHECK(ended % 50 <= 1);
}

TEST_CASE("lwip tcp timers: with only TIME-WAIT left nothing is visited, and TIME-WAIT still ends", "[lwip-tcp]") {
  init_once();
  Link link;
  {
    IdleConnections idle(link, 1);
    Transfer* t = idle.all[0].get();
    // The sender closes first (TIME-WAIT on its side), then the receiver.
    REQUIRE(tcp_close(t->snd) == ERR_OK);
    t->snd = nullptr;
    link.run(1000);
    REQUIRE(tcp_close(t->rcv) == ERR_OK);
    t->rcv = nullptr;
    link.run(1000);
  }
  REQUIRE(tcp_tw_pcbs != nullptr);
  CHECK(tcp_armed_pcbs == nullptr);
  const u32_t visits_before = tcp_timer_visits;
  link.run(2 * TCP_MSL + 2000);
  CHECK(tcp_tw_pcbs == nullptr);
  CHECK(tcp_timer_visits == visits_before);
}

TEST_CASE("lwip tcp timers: a keepalive changed on an idle connection holds once it is armed", "[lwip-tcp]") {
  init_once();
  Link link;
  std::vector<u32_t> probes;  // slow ticks of each probe; before `idle`, whose end sends resets
  IdleConnections idle(link, 1, 10000);
  tcp_pcb* const p = idle.all[0]->snd;
  link.drop = [&](const Seg& s, int) {
    if (s.from_sender && s.payload == 0) probes.push_back(wgnet_lwip_slow_ticks());
    return false;
  };
  link.run(2000);
  REQUIRE(probes.empty());
  // Earlier: the heap held it for 10 s after its last segment; now due 3 s after it.
  const u32_t last = p->tmr;
  p->keep_idle = 3000;
  tcp_arm(p);
  link.run(5000, [&] { return !probes.empty(); });
  REQUIRE(probes.size() == 1);
  INFO("the first probe " << probes[0] - last << " ticks after the last segment");
  CHECK(probes[0] - last >= 151);
  CHECK(probes[0] - last <= 151 + 50);
  link.run(100);  // the answer
  // Later: 20 s after the answer, not 3.
  const u32_t answered = p->tmr;
  p->keep_idle = 20000;
  tcp_arm(p);
  link.run(15000);
  CHECK(probes.size() == 1);
  link.run(7000);
  REQUIRE(probes.size() == 2);
  CHECK(probes[1] - answered >= 1001);
  CHECK(probes[1] - answered <= 1001 + 50);
}

TEST_CASE("lwip tcp timers: connections closed while they wait for a keepalive leave the heap", "[lwip-tcp]") {
  init_once();
  Link link;
  int probes = 0;  // before `idle`: its end sends resets through link.drop
  IdleConnections idle(link, 64, 10000);
  link.drop = [&](const Seg& s, int) {
    probes += s.from_sender && s.payload == 0;
    return false;
  };
  link.run(3000);
  // Every other one aborted (both ends) from the middle of the heap, due at one tick.
  for (size_t i = 0; i < idle.all.size(); ++i) idle.all.erase(idle.all.begin() + static_cast<std::ptrdiff_t>(i));
  REQUIRE(idle.all.size() == 32);
  probes = 0;
  link.run(9000);  // past the first round (10 s after the last segment, on a whole second)
  CHECK(probes == 32);
  CHECK(tcp_armed_pcbs == nullptr);
  for (auto& t : idle.all) CHECK(t->snd->state == ESTABLISHED);
}

TEST_CASE("lwip timers: reassembly and ND timers stop while idle, a fragment restarts one", "[lwip-tcp]") {
  init_once();
  Link link;
  link.run(2000);  // each has run since the last state went
  CHECK_FALSE(lwip_cyclic_timer_armed(ip_reass_tmr));
  CHECK_FALSE(lwip_cyclic_timer_armed(ip6_reass_tmr));
  CHECK_FALSE(lwip_cyclic_timer_armed(nd6_tmr));
  // The first fragment of a UDP datagram whose rest never comes.
  uint8_t pkt[28] = {0x45, 0, 0, 28, 0x12, 0x34, 0x20, 0x00, 64, 17, 0, 0, 198, 19, 0, 1, 198, 19, 0, 2};
  const u16_t sum = inet_chksum(pkt, 20);
  std::memcpy(pkt + 10, &sum, sizeof sum);
  pbuf* p = pbuf_alloc(PBUF_RAW, sizeof pkt, PBUF_RAM);
  REQUIRE(p != nullptr);
  pbuf_take(p, pkt, sizeof pkt);
  if (link.b()->input(p, link.b()) != ERR_OK) pbuf_free(p);
  CHECK_FALSE(ip_reass_idle());
  CHECK(lwip_cyclic_timer_armed(ip_reass_tmr));
  // It waits IP_REASS_MAXAGE runs of the timer, then goes, and the timer stops again.
  link.run((IP_REASS_MAXAGE - 2) * 1000);
  CHECK_FALSE(ip_reass_idle());
  CHECK(lwip_cyclic_timer_armed(ip_reass_tmr));
  link.run(4000);
  CHECK(ip_reass_idle());
  CHECK_FALSE(lwip_cyclic_timer_armed(ip_reass_tmr));
  // Started with no state to keep, ND's runs once and stops.
  lwip_cyclic_timer_needed(nd6_tmr);
  CHECK(lwip_cyclic_timer_armed(nd6_tmr));
  link.run(1500);
  CHECK_FALSE(lwip_cyclic_timer_armed(nd6_tmr));
}

TEST_CASE("lwip tcp timers: keepalives of different idle times fall due each at its own time", "[lwip-tcp]") {
  init_once();
  Link link;
  // By the probe's seq (which names the connection); before `idle`, whose end sends
  // resets through link.drop.
  std::map<uint32_t, u32_t> first_probe;
  struct Armed {
    u32_t idle_ticks, last;
  };
  std::map<uint32_t, Armed> armed;
  IdleConnections idle(link, 40);
  // Idle times of 2..41 s, armed in a shuffled order.
  std::vector<size_t> order(idle.all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 shuffle_with(7);
  std::shuffle(order.begin(), order.end(), shuffle_with);
  for (size_t i : order) {
    tcp_pcb* p = idle.all[i]->snd;
    ip_set_option(p, SOF_KEEPALIVE);
    p->keep_idle = static_cast<u32_t>(2 + i) * 1000;
    p->keep_intvl = 1000;
    p->keep_cnt = 3;
    tcp_arm(p);
    armed[p->snd_nxt - 1] = {p->keep_idle / 20, p->tmr};
  }
  // Every other one closed (both ends), out of the middle of the heap.
  std::vector<uint32_t> closed;
  for (size_t i = 0; i < idle.all.size(); i += 2) {
    closed.push_back(idle.all[i]->snd->snd_nxt - 1);
    idle.all[i].reset();
  }
  link.drop = [&](const Seg& s, int) {
    if (s.from_sender && s.payload == 0 && armed.count(s.seq) && !first_probe.count(s.seq))
      first_probe[s.seq] = wgnet_lwip_slow_ticks();
    return false;
  };
  link.run(45000);
  size_t open = 0;
  for (auto& t : idle.all) {
    if (t == nullptr) continue;
    ++open;
    const uint32_t seq = t->snd->snd_nxt - 1;
    REQUIRE(first_probe.count(seq) == 1);
    const Armed& a = armed[seq];
    // Due after its own idle time (more than that many slow ticks), on the next whole
    // second (50 ticks).
    INFO("idle " << a.idle_ticks / 50 << " s: probed " << first_probe[seq] - a.last << " ticks after its last segment");
    CHECK(first_probe[seq] - a.last >= a.idle_ticks + 1);
    CHECK(first_probe[seq] - a.last <= a.idle_ticks + 1 + 50);
  }
  CHECK(open == 20);
  for (uint32_t seq : closed) CHECK(first_probe.count(seq) == 0);
}

TEST_CASE("lwip timers: across the wrap of the millisecond clock the RTO holds, then the timers stop", "[lwip-tcp]") {
  init_once();
  Link link;
  link.run(2000);
  jump_to_wrap(150);
  link.run(1);  // what fell due in the jump
  Transfer t(link, 40 * 1380);
  // As the RTO case above: everything from the sender lost for 150 ms once 10 segments
  // went through, so that the RTO falls after sys_now() wraps.
  uint32_t blackout_from = 0;
  bool blackout = false;
  link.drop = [&](const Seg& s, int) {
    if (!s.from_sender || s.payload == 0) return false;
    if (t.segment_of(s.seq) < 10 && !blackout) return false;
    if (!blackout) {
      blackout = true;
      blackout_from = g_now;
    }
    return static_cast<uint32_t>(g_now - blackout_from) < 150;
  };
  REQUIRE(t.run(link, 20000));
  CHECK(t.rto_seen);
  const auto sends = sends_of(link, t.seq_of(10 * t.mss()));
  REQUIRE(sends.size() >= 2);
  INFO("first sent at " << sends[0].at << ", again at " << sends[1].at);
  CHECK(sends[0].at > 0x80000000u);  // before the wrap
  CHECK(sends[1].at < 0x80000000u);  // after it
  const uint32_t waited = sends[1].at - sends[0].at;
  CHECK(waited >= 200);
  CHECK(waited <= 260);
  // Idle again past the wrap: nothing armed, nothing scheduled.
  link.run(5000);
  CHECK(tcp_armed_pcbs == nullptr);
  CHECK(sys_timeouts_sleeptime() == SYS_TIMEOUTS_SLEEPTIME_INFINITE);
}

// Fuzzes our lwIP patch series as a TCP sender: a connection with data in flight gets
// the input as a run of segments "from the peer" — any flags, ACK numbers around the
// unacknowledged range, windows, and options (SACK blocks with arbitrary edges, bad
// lengths) — interleaved with clock ticks, so the scoreboard, recovery, RACK, TLP and
// CUBIC see hostile ACKs. lwIP's asserts stay on: a broken invariant aborts.
// Records may also carry data at any offset from rcv_nxt (the receiver's out-of-order
// queue, patch 0008), and run inside an input batch (patch 0009); after every record
// the queue's remembered tail and running bounds are checked against a walk. Inputs of
// odd length run the connection under BBR (patch 0010), even ones under CUBIC.
//
//   input = record* ; record = flags(1) ack_delta(2) wnd(2) ticks(1) optlen(1) opts(optlen)
//   flags: bits 0-5 TCP flags (ACK always set); bit 6: a data segment, seq =
//   rcv_nxt + ack_delta * 16, wnd % 1400 + 1 payload bytes (the ACK number is then
//   snd_una); bit 7: delivered in one input batch with the records before it that have
//   bit 7 (no clock ticks within a batch).
//
// lwIP alone is linked (no netstack/), so sys_now() here is the only clock.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lwip/init.h"
#include "lwip/ip.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"

namespace {
u32_t g_now = 1000;
}
extern "C" u32_t sys_now(void) { return g_now; }
extern "C" u32_t wgnet_lwip_now_us(void) { return g_now * 1000u; }
extern "C" u32_t wgnet_lwip_slow_ticks(void) { return g_now / 20u; }  // TCP_TICKS_NOW (patch 0012)

namespace {

netif g_if{};
// What lwIP sends (the SYN, data, ACKs) is read whole, so ASan checks its pbuf chain,
// into one static buffer: storing each packet until the next input would leave every
// input with more allocations than frees, and libFuzzer would run LeakSanitizer's scan
// after most of them.
err_t capture(netif*, pbuf* p, const ip4_addr_t*) {
  static uint8_t pkt[0x10000];
  if (pbuf_copy_partial(p, pkt, p->tot_len, 0) != p->tot_len) __builtin_trap();
  return ERR_OK;
}

void init_once() {
  static bool done = false;
  if (done) return;
  done = true;
  lwip_init();
  ip4_addr_t addr, mask, gw;
  ip4addr_aton("198.19.0.1", &addr);
  ip4addr_aton("255.255.255.0", &mask);
  ip4_addr_set_zero(&gw);
  netif_add(&g_if, &addr, &mask, &gw, nullptr, [](netif* n) -> err_t {
    n->mtu = 1420;
    n->output = capture;
    return ERR_OK;
  }, ip_input);
  // No checksums either way: the injected segments carry none, and computing them for
  // every segment sent (instrumented, it was a fifth of the time) checks nothing that
  // capture() reading each packet whole does not.
  NETIF_SET_CHECKSUM_CTRL(&g_if, 0);
  netif_set_up(&g_if);
  netif_set_link_up(&g_if);
}

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8), p[1] = uint8_t(v); }
void put32(uint8_t* p, uint32_t v) { put16(p, uint16_t(v >> 16)), put16(p + 2, uint16_t(v)); }

// A segment from 198.19.0.2:port_peer to the pcb.
void inject(const tcp_pcb* pcb, uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd,
            const uint8_t* opts, size_t optlen, size_t payload) {
  const size_t given = optlen > 40 ? 40 : optlen;
  optlen = (given + 3) & ~size_t{3};  // padded with NOPs
  const size_t len = 20 + 20 + optlen + payload;
  std::vector<uint8_t> pkt(len, 0);
  pkt[0] = 0x45;
  put16(&pkt[2], uint16_t(len));
  pkt[8] = 64;
  pkt[9] = 6;
  put32(&pkt[12], 0xC6130002u);  // 198.19.0.2
  put32(&pkt[16], 0xC6130001u);  // 198.19.0.1
  uint8_t* t = &pkt[20];
  put16(t, pcb->remote_port);
  put16(t + 2, pcb->local_port);
  put32(t + 4, seq);
  put32(t + 8, ack);
  t[12] = uint8_t((20 + optlen) / 4 << 4);
  t[13] = flags;
  put16(t + 14, wnd);
  for (size_t i = 0; i < optlen; ++i) t[20 + i] = (opts != nullptr && i < given) ? opts[i] : 1;
  pbuf* p = pbuf_alloc(PBUF_RAW, uint16_t(len), PBUF_RAM);
  if (p == nullptr) return;
  pbuf_take(p, pkt.data(), uint16_t(len));
  if (g_if.input(p, &g_if) != ERR_OK) pbuf_free(p);
}

void tick(unsigned ms) {
  for (unsigned i = 0; i < ms; ++i) {
    ++g_now;
    sys_check_timeouts();
  }
}

bool g_dead = false;

// The out-of-order queue agrees with what patch 0008 remembers about it.
void check_ooseq(const tcp_pcb* pcb) {
  const tcp_seg* last = nullptr;
  u32_t bytes = 0, pbufs = 0;
  for (const tcp_seg* s = pcb->ooseq; s != nullptr; s = s->next) {
    if (last != nullptr && !TCP_SEQ_LT(last->tcphdr->seqno, s->tcphdr->seqno)) __builtin_trap();
    last = s;
    bytes += s->p->tot_len;
    pbufs += pbuf_clen(s->p);
  }
  if (pcb->ooseq_tail != nullptr && pcb->ooseq_tail != last) __builtin_trap();
  if (pcb->ooseq_bound_bytes < bytes || pcb->ooseq_bound_pbufs < pbufs) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  init_once();
  g_dead = false;
  static u16_t port = 20000;
  if (++port > 60000) port = 20001;

  // An established connection (SYN answered by hand) with 64 segments written.
  tcp_cc_default = (size % 2) ? TCP_CC_BBR : TCP_CC_CUBIC;
  tcp_pcb* pcb = tcp_new();
  tcp_bind_netif(pcb, &g_if);
  tcp_nagle_disable(pcb);
  tcp_err(pcb, [](void*, err_t) { g_dead = true; });
  ip_addr_t dst;
  ipaddr_aton("198.19.0.2", &dst);
  if (tcp_connect(pcb, &dst, port, nullptr) != ERR_OK) {
    tcp_abort(pcb);
    return 0;
  }
  const uint32_t iss = pcb->lastack;
  const uint32_t peer_iss = 0x10000000u;
  // SYN-ACK with MSS 1380, window scale 7, SACK permitted
  const uint8_t synopts[12] = {2, 4, 0x05, 0x64, 1, 3, 3, 7, 1, 1, 4, 2};
  inject(pcb, peer_iss, iss + 1, 0x12, 0xffff, synopts, sizeof synopts, 0);
  if (g_dead || pcb->state != ESTABLISHED) {
    if (!g_dead) tcp_abort(pcb);
    return 0;
  }
  // One write per segment: tcp_write's length is 16 bits, so one write of the whole
  // 88,320 bytes would queue only 22,784 of them.
  static uint8_t chunk[1380];
  for (int i = 0; i < 64 && pcb->snd_buf >= sizeof chunk; ++i) tcp_write(pcb, chunk, sizeof chunk, TCP_WRITE_FLAG_COPY);
  tcp_output(pcb);

  size_t at = 0;
  int records = 0;
  bool batch = false;
  while (at + 7 <= size && records++ < 200 && !g_dead) {
    const uint8_t flags = uint8_t((data[at] & 0x3f) | 0x10);  // always ACK; any of FIN SYN RST PSH URG
    const bool with_data = (data[at] & 0x40) != 0;
    const bool in_batch = (data[at] & 0x80) != 0;
    const auto delta = int16_t(data[at + 1] << 8 | data[at + 2]);
    const auto wnd = uint16_t(data[at + 3] << 8 | data[at + 4]);
    const unsigned ticks = data[at + 5] % 64;
    size_t optlen = data[at + 6] % 41;
    at += 7;
    if (at + optlen > size) optlen = size - at;
    // ACK numbers around snd_una (deltas in units of 64 bytes reach the whole flight)
    const uint32_t ack = pcb->lastack + uint32_t(int32_t(delta) * 64);
    // SACK edges in the input are relative to snd_una as well, so they hit segments:
    // kind 5 options get their edges rebased, any other bytes pass as they are
    std::vector<uint8_t> opts(data + at, data + at + optlen);
    for (size_t o = 0; o + 1 < opts.size();) {
      if (opts[o] == 0 || opts[o] == 1) {
        ++o;
        continue;
      }
      const size_t l = opts[o + 1];
      if (opts[o] == 5) {
        for (size_t e = o + 2; e + 4 <= o + l && e + 4 <= opts.size(); e += 4) {
          const uint32_t rel = uint32_t(opts[e] << 8 | opts[e + 1]) * 16;
          put32(&opts[e], pcb->lastack + rel);
        }
      }
      if (l < 2) break;
      o += l;
    }
    at += optlen;
    if (flags & 0x04) break;  // RST: the connection ends, as it may
    if (in_batch && !batch) tcp_input_batch_begin();
    if (!in_batch && batch) tcp_input_batch_end();
    batch = in_batch;
    if (with_data)
      inject(pcb, pcb->rcv_nxt + uint32_t(int32_t(delta) * 16), pcb->lastack, flags & ~0x02, 0xffff, opts.data(),
             opts.size(), wnd % 1400 + 1);
    else
      inject(pcb, pcb->rcv_nxt, ack, flags & ~0x02, wnd, opts.data(), opts.size(), 0);
    if (g_dead) break;
    check_ooseq(pcb);
    if (!batch) tick(ticks);
    if (g_dead) break;
    if (pcb->snd_buf > 1380) tcp_write(pcb, chunk, 1380, TCP_WRITE_FLAG_COPY), tcp_output(pcb);
  }
  if (batch) tcp_input_batch_end();
  if (!g_dead) {
    tcp_err(pcb, nullptr);
    tcp_abort(pcb);
  }
  tick(1);
  return 0;
}

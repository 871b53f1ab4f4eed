// Fuzzes Gro::plan with batches built from the input: mostly TCP/UDP flows (IPv4/IPv6)
// whose segments the input bends (sequence gaps, flags, TTL/TOS/DF/ID, lengths, a
// flipped byte), plus raw packets. Checks that every packet leaves exactly once and in
// order within its flow, that every gather list stays inside its buffers (each packet
// sits in a heap block of exactly its size, so ASan sees an overrun), and that each
// coalesced write split back with gso_split gives the packets it took, checksums valid.
// With mode bit 2 the packets count as authenticated (GroOptions::trusted): a plain write
// then carries plain_header()'s NEEDS_CSUM, whose completed checksum must be the packet's
// own where that was right, or DATA_VALID with the packet unchanged.
//   cmake --preset fuzz && cmake --build build-fuzz --target gro_fuzz
//   build-fuzz/bin/gro_fuzz -max_total_time=60 tests/fuzz/corpus/gro
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "tunlinux/offload.hpp"

namespace {

using wgtest::be16;
using wgtest::put16;
using wgtest::put32;
using wgtest::naive_checksum;

using Bytes = std::vector<uint8_t>;
constexpr size_t kOffset = 16;

void check(bool ok) {
  if (!ok) __builtin_trap();
}



uint16_t pseudo(const uint8_t* ip, size_t l4_len) {
  uint8_t ph[40] = {};
  size_t n;
  if ((ip[0] >> 4) == 4) {
    std::memcpy(ph, ip + 12, 8);
    ph[9] = ip[9];
    put16(ph + 10, static_cast<uint16_t>(l4_len));
    n = 12;
  } else {
    std::memcpy(ph, ip + 8, 32);
    put16(ph + 34, static_cast<uint16_t>(l4_len));
    ph[39] = ip[6];
    n = 40;
  }
  return naive_checksum(ph, n);
}

struct Flow {
  bool v6, udp, df;
  uint8_t ttl, tos;
  uint16_t id, sport, window;
  uint32_t seq, ack, label;
  uint8_t options;  // TCP option bytes, a multiple of 4
  uint16_t mss;
};

Bytes build(const Flow& f, uint16_t payload_len, uint8_t flags) {
  const size_t ihl = f.v6 ? 40 : 20, l4h = f.udp ? 8 : 20 + f.options;
  Bytes p(ihl + l4h + payload_len);
  uint8_t* l4 = p.data() + ihl;
  for (size_t i = 0; i < payload_len; ++i) l4[l4h + i] = static_cast<uint8_t>((f.seq + i) * 131);
  if (f.v6) {
    put32(&p[0], 6u << 28 | uint32_t{f.tos} << 20 | (f.label & 0xfffff));
    put16(&p[4], static_cast<uint16_t>(p.size() - 40));
    p[6] = f.udp ? 17 : 6;
    p[7] = f.ttl;
    p[8] = 0xfd, p[11] = 0x19, p[23] = 2;
    p[24] = 0xfd, p[27] = 0x19, p[39] = 1;
  } else {
    p[0] = 0x45;
    p[1] = f.tos;
    put16(&p[2], static_cast<uint16_t>(p.size()));
    put16(&p[4], f.id);
    put16(&p[6], f.df ? 0x4000 : 0);
    p[8] = f.ttl;
    p[9] = f.udp ? 17 : 6;
    p[12] = 198, p[13] = 19, p[15] = 2;
    p[16] = 198, p[17] = 19, p[19] = 1;
    put16(&p[10], static_cast<uint16_t>(~naive_checksum(p.data(), 20)));
  }
  put16(l4, f.sport);
  put16(l4 + 2, 9);
  size_t csum_at;
  if (f.udp) {
    put16(l4 + 4, static_cast<uint16_t>(8 + payload_len));
    csum_at = 6;
  } else {
    put32(l4 + 4, f.seq);
    put32(l4 + 8, f.ack);
    l4[12] = static_cast<uint8_t>(l4h / 4 << 4);
    l4[13] = flags;
    put16(l4 + 14, f.window);
    for (size_t i = 20; i < l4h; ++i) l4[i] = i + 1 == l4h ? 0 : 1;  // NOPs, then EOL
    csum_at = 16;
  }
  uint16_t c = static_cast<uint16_t>(~naive_checksum(l4, p.size() - ihl, pseudo(p.data(), p.size() - ihl)));
  if (f.udp && c == 0) c = 0xffff;
  put16(l4 + csum_at, c);
  return p;
}

// The bytes of write `w` (virtio-net header first).
Bytes flatten(const tunlinux::Gro& gro, const tunlinux::Gro::Write& w) {
  Bytes out;
  for (const iovec& v : gro.iov(w)) {
    const auto* b = static_cast<const uint8_t*>(v.iov_base);
    out.insert(out.end(), b, b + v.iov_len);
  }
  return out;
}

void check_coalesced(const Bytes& flat, std::span<const uint16_t> members, const std::vector<Bytes>& pkts) {
  const auto hdr = tunlinux::VirtioNetHdr::decode(flat.data());
  const std::span<const uint8_t> pkt(flat.data() + tunlinux::kVirtioNetHdrLen, flat.size() - tunlinux::kVirtioNetHdrLen);
  check(hdr.flags == tunlinux::kVirtioNetHdrFNeedsCsum);
  check(pkt.size() <= tunlinux::kGroMaxLen);
  const size_t ihl = hdr.csum_start;
  check(ihl == ((pkt[0] >> 4) == 4 ? 20u : 40u));
  check(be16(&pkt[ihl + hdr.csum_offset]) == pseudo(pkt.data(), pkt.size() - ihl));
  if ((pkt[0] >> 4) == 4) check(naive_checksum(pkt.data(), 20) == 0xffff && be16(&pkt[2]) == pkt.size());
  if (hdr.gso_type == tunlinux::kVirtioNetHdrGsoUdpL4) check(members.size() <= tunlinux::kGroMaxUdpSegments);

  tunlinux::GsoPacket gp;
  std::error_code ec;
  check(tunlinux::gso_parse(hdr, pkt, gp, ec));
  std::vector<Bytes> store(members.size(), Bytes(kOffset + gp.segment_len(0)));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  std::vector<size_t> sizes(members.size());
  const size_t n = tunlinux::gso_split(hdr, pkt, bufs, sizes, kOffset, 65535, ec);
  check(!ec && n == members.size());
  for (size_t i = 0; i < n; ++i) {
    Bytes a(store[i].begin() + kOffset, store[i].begin() + static_cast<long>(kOffset + sizes[i]));
    Bytes b = pkts[members[i]];
    check(a.size() == b.size());
    check(naive_checksum(a.data() + ihl, a.size() - ihl, pseudo(a.data(), a.size() - ihl)) == 0xffff);
    // Equal but for the L4 checksum (0 and 0xffff are both zero) and, under DF, the IPv4
    // ID and header checksum (the kernel may rewrite those).
    const size_t csum_at = ihl + hdr.csum_offset;
    a[csum_at] = a[csum_at + 1] = b[csum_at] = b[csum_at + 1] = 0;
    if ((a[0] >> 4) == 4 && (b[6] & 0x40)) a[4] = a[5] = a[10] = a[11] = b[4] = b[5] = b[10] = b[11] = 0;
    check(a == b);
  }
}

// A plain write: zeros without `trusted`; with it, DATA_VALID and the packet as it came,
// or NEEDS_CSUM at a TCP/UDP checksum field holding the pseudo-header sum, the rest as
// it came, and the checksum the kernel would complete equal to the packet's own when
// that was right. Sets `rewritten` for the NEEDS_CSUM case.
void check_plain(const tunlinux::VirtioNetHdr& h, const Bytes& out, const Bytes& in, bool trusted, bool& rewritten) {
  check(h.gso_type == tunlinux::kVirtioNetHdrGsoNone && h.gso_size == 0 && out.size() == in.size());
  rewritten = trusted && h.flags == tunlinux::kVirtioNetHdrFNeedsCsum;
  if (!rewritten) {
    check(h.flags == (trusted ? tunlinux::kVirtioNetHdrFDataValid : 0));
    check(h.hdr_len == 0 && h.csum_start == 0 && h.csum_offset == 0 && out == in);
    return;
  }
  const size_t start = h.csum_start, at = start + h.csum_offset;
  check((h.csum_offset == 16 || h.csum_offset == 6) && at + 2 <= out.size() && start >= 20);
  for (size_t i = 0; i < out.size(); ++i) check(i == at || i == at + 1 || out[i] == in[i]);
  check(be16(&out[at]) == pseudo(out.data(), out.size() - start));
  if (naive_checksum(in.data() + start, in.size() - start, pseudo(in.data(), in.size() - start)) == 0xffff) {
    uint16_t c = static_cast<uint16_t>(~naive_checksum(out.data() + start, out.size() - start));
    if (h.csum_offset == 6 && c == 0) c = 0xffff;
    check(c == be16(&in[at]) || (c == 0xffff && be16(&in[at]) == 0));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t mode = in.ConsumeIntegral<uint8_t>();
  const tunlinux::GroOptions opts{(mode & 1) == 0, (mode & 2) == 0, (mode & 4) != 0};

  std::vector<Flow> flows(1 + in.ConsumeIntegralInRange<size_t>(0, 3));
  for (Flow& f : flows) {
    const uint8_t bits = in.ConsumeIntegral<uint8_t>();
    f.v6 = bits & 1;
    f.udp = bits & 2;
    f.df = !(bits & 4);
    f.ttl = 64;
    f.tos = 0;
    f.id = in.ConsumeIntegral<uint16_t>();
    f.sport = static_cast<uint16_t>(1000 + (&f - flows.data()));
    f.window = 512;
    f.seq = in.ConsumeIntegral<uint32_t>();
    f.ack = 1;
    f.label = bits >> 4;
    f.options = static_cast<uint8_t>((bits >> 3 & 1) * 12);
    f.mss = in.ConsumeIntegralInRange<uint16_t>(1, 1460);
  }

  const size_t count = in.ConsumeIntegralInRange<size_t>(1, tunlinux::kGroMaxBatch);
  std::vector<Bytes> pkts;
  std::vector<int> flow_of;  // -1: raw
  while (pkts.size() < count && in.remaining_bytes() > 0) {
    const uint8_t op = in.ConsumeIntegral<uint8_t>();
    if ((op & 0xf0) == 0xf0) {
      pkts.push_back(in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 200)));
      flow_of.push_back(-1);
      continue;
    }
    const size_t fi = op % flows.size();
    Flow f = flows[fi];
    uint16_t len = f.mss;
    uint8_t flags = 0x10;  // ACK
    const uint8_t twist = (op >> 2) & 0x3;
    if (twist == 1) {
      const uint8_t t = in.ConsumeIntegral<uint8_t>();
      switch (t % 10) {
        case 0: f.seq += 1; break;
        case 1: len = static_cast<uint16_t>(in.ConsumeIntegralInRange<uint16_t>(0, f.mss)); break;
        case 2: len = static_cast<uint16_t>(f.mss + 1); break;
        case 3: flags = in.ConsumeIntegral<uint8_t>(); break;
        case 4: f.ttl = 63; break;
        case 5: f.tos = 4; break;
        case 6: f.df = !f.df; break;
        case 7: f.id = static_cast<uint16_t>(f.id + 2); break;
        case 8: f.ack += 1; break;
        case 9: f.window += 1; break;
      }
    } else if (twist == 2) {
      flags |= 0x08;  // PSH
    }
    Bytes p = build(f, len, flags);
    // A flipped byte may move the packet to another flow (or none): its order is unknown.
    const bool flipped = (op >> 4) == 0xe;
    if (flipped) p[in.ConsumeIntegral<uint16_t>() % p.size()] ^= 0x5a;
    flows[fi].seq += len;
    flows[fi].id = static_cast<uint16_t>(flows[fi].id + 1);
    pkts.push_back(std::move(p));
    flow_of.push_back(flipped ? -1 : static_cast<int>(fi));
  }

  // Each packet in a heap block of exactly headroom + its size.
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<std::span<uint8_t>> bufs;
  for (const Bytes& p : pkts) {
    blocks.push_back(std::make_unique<uint8_t[]>(kOffset + p.size()));
    std::memset(blocks.back().get(), 0xee, kOffset);  // stale "header" state
    if (!p.empty()) std::memcpy(blocks.back().get() + kOffset, p.data(), p.size());
    bufs.emplace_back(blocks.back().get(), kOffset + p.size());
  }

  tunlinux::Gro gro;
  gro.plan(bufs, kOffset, opts);
  std::vector<int> seen(pkts.size());
  std::vector<long> last(flows.size(), -1);
  long first_prev = -1;
  for (const auto& w : gro.writes()) {
    const auto members = gro.members(w);
    check(!members.empty() && w.iov_count > 0);
    check(members[0] > first_prev);
    first_prev = members[0];
    for (size_t i = 0; i < members.size(); ++i) {
      const uint16_t m = members[i];
      check(m < pkts.size() && ++seen[m] == 1);
      if (flow_of[m] >= 0) {
        check(last[static_cast<size_t>(flow_of[m])] < m);
        last[static_cast<size_t>(flow_of[m])] = m;
      }
    }
    const Bytes flat = flatten(gro, w);
    check(flat.size() >= tunlinux::kVirtioNetHdrLen);
    const Bytes out(flat.begin() + tunlinux::kVirtioNetHdrLen, flat.end());
    bool csum_rewritten = false;
    if (w.gso_type == tunlinux::kVirtioNetHdrGsoNone) {
      check(members.size() == 1);
      check_plain(tunlinux::VirtioNetHdr::decode(flat.data()), out, pkts[members[0]], opts.trusted, csum_rewritten);
    } else {
      check(members.size() >= 2);
      check(w.gso_type == tunlinux::kVirtioNetHdrGsoUdpL4 ? opts.udp : opts.tcp);
      check_coalesced(flat, members, pkts);
    }
    // The caller's packets are not changed, but for the checksum field of a plain packet
    // written checksum-partial: the buffer holds what was written.
    for (uint16_t m : members) {
      const Bytes& want = csum_rewritten ? out : pkts[m];
      check(std::equal(want.begin(), want.end(), bufs[m].begin() + kOffset, bufs[m].end()));
    }
  }
  check(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  return 0;
}

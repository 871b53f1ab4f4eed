// Write side of the offload engine: Gro::plan() merges runs of TCP segments and UDP
// datagrams of one flow into GSO packets the kernel accepts on a TUN write.
//
//   1. classify each packet once: its flow (TCP/UDP 5-tuple) if any, and whether it may
//      merge at all (header checks, checksums)
//   2. a mergeable packet joins the newest run of its flow if the kernel's GRO rules
//      allow it, else it starts a run of its own; one that may not merge ends that run
//   3. emit in the order of first packets: a run of one is a plain write; a longer run is
//      [virtio-net header + rewritten headers][head payload][payload]... as one gather list
#include <algorithm>
#include <cstring>

#include "tunlinux/checksum.hpp"
#include "tunlinux/ip_fields.hpp"
#include "tunlinux/offload.hpp"

namespace tunlinux {
namespace {

// Candidate::kind
constexpr uint8_t kNoFlow = 0, kTcp4 = 1, kTcp6 = 2, kUdp4 = 3, kUdp6 = 4;

bool is_tcp(uint8_t kind) { return kind == kTcp4 || kind == kTcp6; }
bool is_v6(uint8_t kind) { return kind == kTcp6 || kind == kUdp6; }

size_t src_at(uint8_t kind) { return is_v6(kind) ? ip::kIpv6Src : ip::kIpv4Src; }
size_t addr_len(uint8_t kind) { return is_v6(kind) ? 16 : 4; }

uint32_t mix(uint32_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i += 4) {
    uint32_t w;
    std::memcpy(&w, p + i, 4);
    h = (h ^ w) * 0x9e3779b1u;
    h ^= h >> 15;
  }
  return h;
}

uint16_t l4_pseudo(uint8_t kind, const uint8_t* pkt, size_t l4_len) {
  const size_t at = src_at(kind), n = addr_len(kind);
  return pseudo_header_checksum(is_tcp(kind) ? ip::kProtoTcp : ip::kProtoUdp, {pkt + at, n}, {pkt + at + n, n},
                                static_cast<uint32_t>(l4_len));
}

}  // namespace

// Step 1: the flow a packet belongs to (IP version, addresses, protocol, ports), and
// the tests every merge needs that look at the packet alone. The kernel would not merge
// a packet that fails one; neither do we, and it ends its flow's run so it is not
// overtaken.
Gro::Candidate Gro::classify(std::span<const uint8_t> p, GroOptions opts) {
  Candidate c;
  const size_t len = p.size();
  const uint8_t* d = p.data();
  if (len < ip::kIpv4MinLen) return c;
  uint8_t proto;
  bool v6, ip_ok;
  if ((d[0] >> 4) == 4) {
    c.ip_len = static_cast<uint8_t>((d[0] & 0xf) * 4u);
    if (c.ip_len < ip::kIpv4MinLen || c.ip_len > len) return c;
    if (ip::load16(d + ip::kIpv4Frag) & ip::kIpv4NotDf) return c;  // MF, offset or reserved bit: no ports
    proto = d[ip::kIpv4Proto];
    v6 = false;
    ip_ok = c.ip_len == ip::kIpv4MinLen && ip::load16(d + ip::kIpv4TotalLen) == len &&
            checksum(d, ip::kIpv4MinLen) == 0xffff;  // no options, no padding, intact
  } else if ((d[0] >> 4) == 6) {
    if (len < ip::kIpv6Len) return c;
    proto = d[ip::kIpv6Next];  // an extension header is not TCP/UDP: no flow
    c.ip_len = ip::kIpv6Len;
    v6 = true;
    ip_ok = ip::load16(d + ip::kIpv6PayloadLen) == len - ip::kIpv6Len;
  } else {
    return c;
  }
  const uint8_t* l4 = d + c.ip_len;
  const size_t l4_total = len - c.ip_len;
  if (proto == ip::kProtoTcp && opts.tcp && l4_total >= ip::kTcpMinLen) {
    c.kind = v6 ? kTcp6 : kTcp4;
    const size_t th = (l4[ip::kTcpDataOff] >> 4) * 4u;
    const uint8_t flags = l4[ip::kTcpFlags];
    c.l4_len = static_cast<uint8_t>(th);
    c.mergeable = ip_ok && th >= ip::kTcpMinLen && th < l4_total &&  // a payload
                  (flags == ip::kTcpAck || flags == (ip::kTcpAck | ip::kTcpPsh));
  } else if (proto == ip::kProtoUdp && opts.udp && l4_total >= ip::kUdpLen) {
    c.kind = v6 ? kUdp6 : kUdp4;
    c.l4_len = ip::kUdpLen;
    c.mergeable = ip_ok && l4_total > ip::kUdpLen &&  // a payload
                  ip::load16(l4 + ip::kUdpLenField) == l4_total &&
                  ip::load16(l4 + ip::kUdpCsum) != 0;  // no checksum: the kernel never merges it
  } else {
    return c;
  }
  c.hash = mix(mix(c.kind, d + src_at(c.kind), 2 * addr_len(c.kind)), l4, 4);
  // A merged packet goes out with NEEDS_CSUM, which tells the kernel its checksum is yet
  // to be computed: a corrupt segment would be delivered as good. Verify first, as GRO
  // does, unless the tunnel authenticated the packet (as the kernel's GRO merges what
  // its WireGuard marked CHECKSUM_UNNECESSARY without looking).
  if (c.mergeable && !opts.trusted)
    c.mergeable = checksum(l4, l4_total, l4_pseudo(c.kind, d, l4_total)) == 0xffff;
  if (c.mergeable) c.payload = static_cast<uint16_t>(l4_total - c.l4_len);
  return c;
}

// Step 2: may packet i (classified as c) join run r, whose flow (addresses, ports,
// protocol, IP version) it has? Appends it when it may.
bool Gro::try_append(Run& r, uint16_t i, const Candidate& c) {
  if (r.closed) return false;
  const Candidate& hc = cand_[r.head];
  const uint8_t* h = bufs_[r.head].data() + offset_;
  const uint8_t* p = bufs_[i].data() + offset_;

  if (is_v6(c.kind)) {
    // Version, traffic class and flow label in one word; the hop limit.
    if (std::memcmp(h, p, 4) != 0 || h[ip::kIpv6HopLimit] != p[ip::kIpv6HopLimit]) return false;
  } else {
    if (h[ip::kIpv4Tos] != p[ip::kIpv4Tos] || h[ip::kIpv4Ttl] != p[ip::kIpv4Ttl]) return false;
    const uint16_t hf = ip::load16(h + ip::kIpv4Frag), pf = ip::load16(p + ip::kIpv4Frag);
    if ((hf ^ pf) & ip::kIpv4Df) return false;
    // Without DF the kernel re-segments with consecutive IDs: merge only what it would rebuild.
    if (!(hf & ip::kIpv4Df) &&
        ip::load16(p + ip::kIpv4Id) != static_cast<uint16_t>(ip::load16(h + ip::kIpv4Id) + r.count))
      return false;
  }
  if (c.payload > r.gso_size || r.len + c.payload > kGroMaxLen) return false;

  const uint8_t* ht = h + hc.ip_len;
  const uint8_t* pt = p + c.ip_len;
  bool last = c.payload < r.gso_size;
  if (is_tcp(c.kind)) {
    // Same data offset (so options of one length), ACK number, window and options; the
    // flags are ACK or ACK|PSH (classify), the head's ACK alone (a PSH head is closed).
    if (c.l4_len != hc.l4_len || ip::load32(pt + ip::kTcpSeq) != r.next_seq ||
        std::memcmp(ht + ip::kTcpAckNum, pt + ip::kTcpAckNum, 5) != 0 ||  // ACK number, data offset
        std::memcmp(ht + ip::kTcpFlags + 1, pt + ip::kTcpFlags + 1, 2) != 0 ||  // window
        // The urgent pointer, meaningless without URG (never merged), would still come
        // back as the head's: unverified checksums (trusted) no longer keep it equal.
        std::memcmp(ht + ip::kTcpUrgent, pt + ip::kTcpUrgent, 2) != 0 ||
        std::memcmp(ht + ip::kTcpMinLen, pt + ip::kTcpMinLen, c.l4_len - ip::kTcpMinLen) != 0)
      return false;
    last |= (pt[ip::kTcpFlags] & ip::kTcpPsh) != 0;
  } else {
    last |= r.count + 1u >= kGroMaxUdpSegments;
  }

  next_[r.tail] = i;
  r.tail = i;
  ++r.count;
  r.len += c.payload;
  r.next_seq += c.payload;
  r.closed = last;
  return true;
}

void Gro::plan(std::span<const std::span<uint8_t>> bufs, size_t offset, GroOptions opts) {
  bufs_ = bufs.first(std::min(bufs.size(), kGroMaxBatch));
  offset_ = offset;
  trusted_ = opts.trusted;
  n_writes_ = n_iov_ = n_members_ = n_slots_ = 0;
  size_t n_runs = 0;
  const size_t n = bufs_.size();

  for (uint16_t i = 0; i < n; ++i) {
    run_of_[i] = next_[i] = static_cast<uint16_t>(kNone);
    cand_[i] = {};
    if (bufs_[i].size() < offset || offset < kVirtioNetHdrLen) continue;
    const std::span<const uint8_t> p = bufs_[i].subspan(offset);
    const Candidate c = classify(p, opts);
    cand_[i] = c;
    if (c.kind == kNoFlow) continue;

    // The newest run of this flow, if any.
    size_t r = n_runs;
    while (r-- > 0) {
      const Run& run = runs_[r];
      const Candidate& hc = cand_[run.head];
      if (hc.hash != c.hash || hc.kind != c.kind) continue;
      const uint8_t* h = bufs_[run.head].data() + offset;
      const size_t at = src_at(c.kind), alen = addr_len(c.kind);
      if (std::memcmp(h + at, p.data() + at, 2 * alen) == 0 &&
          std::memcmp(h + hc.ip_len, p.data() + c.ip_len, 4) == 0)
        break;
    }
    if (!c.mergeable) {
      if (r < n_runs) runs_[r].closed = true;  // what follows must not overtake it
      continue;
    }
    if (r < n_runs && try_append(runs_[r], i, c)) {
      run_of_[i] = static_cast<uint16_t>(r);
      continue;
    }
    Run& fresh = runs_[n_runs];
    fresh = {};
    fresh.head = fresh.tail = i;
    fresh.count = 1;
    fresh.gso_size = c.payload;
    fresh.len = static_cast<uint32_t>(p.size());
    if (is_tcp(c.kind)) {
      const uint8_t* th = p.data() + c.ip_len;
      fresh.next_seq = ip::load32(th + ip::kTcpSeq) + c.payload;
      fresh.closed = th[ip::kTcpFlags] & ip::kTcpPsh;
    }
    run_of_[i] = static_cast<uint16_t>(n_runs++);
  }

  // Step 3: one write per plain packet or run, in the order of first packets.
  for (uint16_t i = 0; i < n; ++i) {
    if (run_of_[i] == kNone) {
      emit_plain(i);
      continue;
    }
    const Run& r = runs_[run_of_[i]];
    if (r.head != i) continue;  // written with its head
    if (r.count == 1) emit_plain(i);
    else emit_run(r);
  }
}

void Gro::emit_plain(uint16_t i) {
  Write& w = writes_[n_writes_++];
  w = {};
  w.iov_begin = static_cast<uint16_t>(n_iov_);
  w.member_begin = static_cast<uint16_t>(n_members_);
  w.member_count = 1;
  members_[n_members_++] = i;
  const std::span<uint8_t> b = bufs_[i];
  if (b.size() < offset_ || offset_ < kVirtioNetHdrLen) return;  // iov_count 0: rejected
  uint8_t* start = b.data() + offset_ - kVirtioNetHdrLen;
  plain_header(b.subspan(offset_), trusted_).encode(start);  // GSO_NONE: a complete packet
  iov_[n_iov_++] = {start, b.size() - offset_ + kVirtioNetHdrLen};
  w.iov_count = 1;
}

void Gro::emit_run(const Run& r) {
  const Candidate& hc = cand_[r.head];
  const size_t ip_len = hc.ip_len, hdr_len = hc.ip_len + hc.l4_len;
  const uint8_t* head = bufs_[r.head].data() + offset_;
  const bool tcp = is_tcp(hc.kind);

  // The merged packet's headers: the head's, with the lengths of the whole.
  uint8_t* slot = slots_[n_slots_++].data();
  uint8_t* h = slot + kVirtioNetHdrLen;
  std::memcpy(h, head, hdr_len);
  if (is_v6(hc.kind)) {
    ip::store16(h + ip::kIpv6PayloadLen, static_cast<uint16_t>(r.len - ip_len));
  } else {
    ip::store16(h + ip::kIpv4TotalLen, static_cast<uint16_t>(r.len));
    ip::store16(h + ip::kIpv4Csum, 0);
    ip::store16(h + ip::kIpv4Csum, static_cast<uint16_t>(~checksum(h, ip_len)));
  }
  uint8_t* l4 = h + ip_len;
  const size_t csum_at = tcp ? ip::kTcpCsum : ip::kUdpCsum;
  if (tcp) {
    l4[ip::kTcpFlags] |= bufs_[r.tail][offset_ + cand_[r.tail].ip_len + ip::kTcpFlags] & ip::kTcpPsh;
  } else {
    ip::store16(l4 + ip::kUdpLenField, static_cast<uint16_t>(r.len - ip_len));
  }
  // CHECKSUM_PARTIAL as the kernel keeps it: the field holds the folded pseudo-header
  // sum, and the kernel adds the rest when (if ever) it needs the checksum.
  ip::store16(l4 + csum_at, l4_pseudo(hc.kind, h, r.len - ip_len));

  VirtioNetHdr vh;
  vh.flags = kVirtioNetHdrFNeedsCsum;
  vh.gso_type = tcp ? (is_v6(hc.kind) ? kVirtioNetHdrGsoTcpV6 : kVirtioNetHdrGsoTcpV4) : kVirtioNetHdrGsoUdpL4;
  vh.hdr_len = static_cast<uint16_t>(hdr_len);
  vh.gso_size = r.gso_size;
  vh.csum_start = static_cast<uint16_t>(ip_len);
  vh.csum_offset = static_cast<uint16_t>(csum_at);
  vh.encode(slot);

  Write& w = writes_[n_writes_++];
  w = {};
  w.iov_begin = static_cast<uint16_t>(n_iov_);
  w.member_begin = static_cast<uint16_t>(n_members_);
  w.gso_type = vh.gso_type;
  iov_[n_iov_++] = {slot, kVirtioNetHdrLen + hdr_len};
  for (uint16_t i = r.head; i != kNone; i = next_[i]) {
    const size_t skip = cand_[i].ip_len + cand_[i].l4_len;
    iov_[n_iov_++] = {bufs_[i].data() + offset_ + skip, cand_[i].payload};
    members_[n_members_++] = i;
  }
  w.iov_count = static_cast<uint16_t>(n_iov_ - w.iov_begin);
  w.member_count = static_cast<uint16_t>(n_members_ - w.member_begin);
}

}  // namespace tunlinux

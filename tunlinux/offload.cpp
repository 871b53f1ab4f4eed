// Read side of the offload engine: validating a GSO super-packet from the kernel and
// cutting it into segments the way the kernel's own GSO would (tcp_gso_segment,
// __udp_gso_segment, inet_gso_segment), plus the offload error category.
#include "tunlinux/offload.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "tunlinux/checksum.hpp"
#include "tunlinux/ip_fields.hpp"

namespace tunlinux {
namespace {

class OffloadCategory final : public std::error_category {
public:
  const char* name() const noexcept override { return "tunlinux.offload"; }
  std::string message(int e) const override {
    switch (static_cast<OffloadError>(e)) {
      case OffloadError::unknown_gso_type: return "unknown virtio-net gso_type";
      case OffloadError::zero_gso_size: return "GSO packet with gso_size 0";
      case OffloadError::no_needs_csum: return "GSO packet without NEEDS_CSUM";
      case OffloadError::bad_csum_start: return "csum_start is not the transport header";
      case OffloadError::bad_csum_offset: return "csum_offset is not the transport checksum";
      case OffloadError::bad_hdr_len: return "hdr_len beyond the packet";
      case OffloadError::ip_version_mismatch: return "gso_type does not match the IP version";
      case OffloadError::bad_ip_header: return "malformed IP header";
      case OffloadError::ipv6_extension_header: return "IPv6 extension headers are not split";
      case OffloadError::bad_transport_header: return "malformed TCP/UDP header";
      case OffloadError::segment_too_large: return "segment larger than the MTU or its buffer";
      case OffloadError::too_many_segments: return "more segments than buffers";
    }
    return "unknown offload error";
  }
};

bool is_ipv6_extension(uint8_t next) {
  switch (next) {
    case 0: case 43: case 44: case 50: case 51: case 60: case 135: case 139: case 140: case 253: case 254:
      return true;
    default:
      return false;
  }
}

// Stores the complement of `sum` as a TCP/UDP checksum; UDP sends a zero result as
// 0xffff, since 0 means "no checksum" there (RFC 768).
void store_l4_checksum(uint8_t* field, uint16_t sum, bool udp) {
  uint16_t v = static_cast<uint16_t>(~sum);
  if (udp && v == 0) v = 0xffff;
  ip::store16(field, v);
}

}  // namespace

const std::error_category& offload_category() {
  static const OffloadCategory category;
  return category;
}

std::error_code make_error_code(OffloadError e) { return {static_cast<int>(e), offload_category()}; }

VirtioNetHdr plain_header(std::span<uint8_t> packet, bool trusted) {
  VirtioNetHdr h;
  if (!trusted) return h;
  h.flags = kVirtioNetHdrFDataValid;
  uint8_t* d = packet.data();
  const size_t len = packet.size();
  size_t ip_len;
  uint8_t proto;
  size_t at, alen;  // source address and the length of each address
  if (len >= ip::kIpv4MinLen && (d[0] >> 4) == 4) {
    ip_len = (d[0] & 0xf) * 4u;
    if (ip_len < ip::kIpv4MinLen || (ip::load16(d + ip::kIpv4Frag) & ip::kIpv4NotDf) ||
        ip::load16(d + ip::kIpv4TotalLen) != len)  // padded or cut: the sum would cover other bytes
      return h;
    proto = d[ip::kIpv4Proto];
    at = ip::kIpv4Src;
    alen = 4;
  } else if (len >= ip::kIpv6Len && (d[0] >> 4) == 6) {
    ip_len = ip::kIpv6Len;
    if (ip::load16(d + ip::kIpv6PayloadLen) != len - ip::kIpv6Len) return h;
    proto = d[ip::kIpv6Next];
    at = ip::kIpv6Src;
    alen = 16;
  } else {
    return h;
  }
  const bool tcp = proto == ip::kProtoTcp;
  if (!tcp && proto != ip::kProtoUdp) return h;
  if (ip_len + (tcp ? ip::kTcpMinLen : ip::kUdpLen) > len) return h;
  uint8_t* field = d + ip_len + (tcp ? ip::kTcpCsum : ip::kUdpCsum);
  if (!tcp && ip::load16(field) == 0) return h;  // no checksum (IPv4): nothing to skip
  ip::store16(field, pseudo_header_checksum(proto, {d + at, alen}, {d + at + alen, alen},
                                            static_cast<uint32_t>(len - ip_len)));
  h.flags = kVirtioNetHdrFNeedsCsum;
  h.hdr_len = static_cast<uint16_t>(ip_len + (tcp ? ip::kTcpMinLen : ip::kUdpLen));
  h.csum_start = static_cast<uint16_t>(ip_len);
  h.csum_offset = static_cast<uint16_t>(tcp ? ip::kTcpCsum : ip::kUdpCsum);
  return h;
}

size_t flow_queue(std::span<const uint8_t> packet, size_t queues) {
  if (queues <= 1 || packet.empty()) return 0;
  const uint8_t* p = packet.data();
  const size_t len = packet.size();
  size_t addr_at, addr_len, l4;
  uint8_t proto;
  bool ports;
  if (p[0] >> 4 == 4 && len >= ip::kIpv4MinLen) {
    addr_at = ip::kIpv4Src;
    addr_len = 4;
    l4 = (p[0] & 0x0f) * 4u;
    proto = p[ip::kIpv4Proto];
    ports = (ip::load16(p + ip::kIpv4Frag) & 0x1fff) == 0;  // not a later fragment
  } else if (p[0] >> 4 == 6 && len >= ip::kIpv6Len) {
    addr_at = ip::kIpv6Src;
    addr_len = 16;
    l4 = ip::kIpv6Len;
    proto = p[ip::kIpv6Next];
    ports = true;
  } else {
    return 0;
  }
  ports = ports && (proto == ip::kProtoTcp || proto == ip::kProtoUdp) && len >= l4 + 4;
  // Symmetric: the two addresses (and the two ports) are combined by xor and by sum, so
  // swapping them changes nothing, and the sum keeps pairs apart that xor alone merges.
  uint64_t x = proto, sum = 0;
  for (size_t i = 0; i < addr_len; i += 4) {
    const uint32_t a = ip::load32(p + addr_at + i), b = ip::load32(p + addr_at + addr_len + i);
    x = (x << 7 | x >> 57) ^ (a ^ b);
    sum += uint64_t{a} + b;
  }
  if (ports) {
    const uint32_t a = ip::load16(p + l4), b = ip::load16(p + l4 + 2);
    x ^= uint64_t{a ^ b} << 32;
    sum += (uint64_t{a} + b) << 17;
  }
  uint64_t h = (x ^ (sum * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<size_t>((h >> 32) * queues >> 32);
}

size_t GsoPacket::segment_len(size_t i) const {
  const size_t at = hdr_len + i * gso_size;
  return hdr_len + std::min<size_t>(gso_size, len - at);
}

bool gso_parse(const VirtioNetHdr& hdr, std::span<const uint8_t> pkt, GsoPacket& out, std::error_code& ec) {
  ec.clear();
  auto fail = [&](OffloadError e) {
    ec = e;
    return false;
  };
  const uint8_t type = hdr.gso_type & static_cast<uint8_t>(~kVirtioNetHdrGsoEcn);
  const bool ecn = hdr.gso_type & kVirtioNetHdrGsoEcn;
  int version = 0;  // 0: either
  bool tcp;
  switch (type) {
    case kVirtioNetHdrGsoTcpV4:
      tcp = true;
      version = 4;
      break;
    case kVirtioNetHdrGsoTcpV6:
      tcp = true;
      version = 6;
      break;
    case kVirtioNetHdrGsoUdpL4:
      tcp = false;
      break;
    default:
      return fail(OffloadError::unknown_gso_type);
  }
  if (ecn && !tcp) return fail(OffloadError::unknown_gso_type);
  if (hdr.gso_size == 0) return fail(OffloadError::zero_gso_size);
  if (!(hdr.flags & kVirtioNetHdrFNeedsCsum)) return fail(OffloadError::no_needs_csum);
  const size_t len = pkt.size();
  if (hdr.hdr_len > len) return fail(OffloadError::bad_hdr_len);
  if (len < 1) return fail(OffloadError::bad_ip_header);
  const uint8_t* p = pkt.data();
  const int actual = p[0] >> 4;
  if (actual != 4 && actual != 6) return fail(OffloadError::bad_ip_header);
  if (version != 0 && actual != version) return fail(OffloadError::ip_version_mismatch);
  const uint8_t proto = tcp ? ip::kProtoTcp : ip::kProtoUdp;

  size_t ip_len;
  if (actual == 4) {
    ip_len = (p[0] & 0xf) * 4u;
    if (len < ip::kIpv4MinLen || ip_len < ip::kIpv4MinLen || ip_len > len) return fail(OffloadError::bad_ip_header);
    if (ip::load16(p + ip::kIpv4Frag) & ip::kIpv4NotDf) return fail(OffloadError::bad_ip_header);
    if (p[ip::kIpv4Proto] != proto) return fail(OffloadError::bad_ip_header);
  } else {
    ip_len = ip::kIpv6Len;
    if (len < ip_len) return fail(OffloadError::bad_ip_header);
    const uint8_t next = p[ip::kIpv6Next];
    if (next != proto) {
      return fail(is_ipv6_extension(next) ? OffloadError::ipv6_extension_header : OffloadError::bad_ip_header);
    }
  }
  if (hdr.csum_start != ip_len) return fail(OffloadError::bad_csum_start);
  if (hdr.csum_offset != (tcp ? ip::kTcpCsum : ip::kUdpCsum)) return fail(OffloadError::bad_csum_offset);

  size_t l4_len = ip::kUdpLen;
  if (tcp) {
    if (ip_len + ip::kTcpMinLen > len) return fail(OffloadError::bad_transport_header);
    l4_len = (p[ip_len + ip::kTcpDataOff] >> 4) * 4u;
    if (l4_len < ip::kTcpMinLen || ip_len + l4_len > len) return fail(OffloadError::bad_transport_header);
  } else if (ip_len + l4_len > len) {
    return fail(OffloadError::bad_transport_header);
  }

  out.ipv6 = actual == 6;
  out.tcp = tcp;
  out.ip_hdr_len = static_cast<uint16_t>(ip_len);
  out.hdr_len = static_cast<uint16_t>(ip_len + l4_len);
  out.gso_size = hdr.gso_size;
  out.len = len;
  const size_t payload = len - out.hdr_len;
  out.segments = payload == 0 ? 1 : (payload + hdr.gso_size - 1) / hdr.gso_size;
  return true;
}

size_t gso_split(const GsoPacket& gp, std::span<const uint8_t> pkt, size_t first,
                 std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset, size_t mtu,
                 std::error_code& ec) {
  ec.clear();
  if (first >= gp.segments) return 0;
  const size_t n = std::min({bufs.size(), sizes.size(), gp.segments - first});
  // All or nothing: the first segment is the longest, and each must fit its buffer.
  if (gp.segment_len(first) > std::min<size_t>(mtu, 0xffff)) {
    ec = OffloadError::segment_too_large;
    return 0;
  }
  for (size_t k = 0; k < n; ++k) {
    if (bufs[k].size() < offset || bufs[k].size() - offset < gp.segment_len(first + k)) {
      ec = OffloadError::segment_too_large;
      return 0;
    }
  }

  const uint8_t* in = pkt.data();
  const size_t ip_len = gp.ip_hdr_len, hdr_len = gp.hdr_len;
  const size_t addr_len = gp.ipv6 ? 16 : 4;
  const size_t src_at = gp.ipv6 ? ip::kIpv6Src : ip::kIpv4Src;
  const std::span<const uint8_t> src(in + src_at, addr_len), dst(in + src_at + addr_len, addr_len);
  const uint8_t proto = gp.tcp ? ip::kProtoTcp : ip::kProtoUdp;
  const size_t csum_at = ip_len + (gp.tcp ? ip::kTcpCsum : ip::kUdpCsum);
  const uint16_t id0 = gp.ipv6 ? 0 : ip::load16(in + ip::kIpv4Id);
  const uint32_t seq0 = gp.tcp ? ip::load32(in + ip_len + ip::kTcpSeq) : 0;

  for (size_t k = 0; k < n; ++k) {
    const size_t i = first + k;
    const size_t seg_len = gp.segment_len(i);
    const size_t l4_total = seg_len - ip_len;
    uint8_t* out = bufs[k].data() + offset;
    std::memcpy(out, in, hdr_len);
    std::memcpy(out + hdr_len, in + hdr_len + i * gp.gso_size, seg_len - hdr_len);

    if (gp.ipv6) {
      ip::store16(out + ip::kIpv6PayloadLen, static_cast<uint16_t>(seg_len - ip::kIpv6Len));
    } else {
      ip::store16(out + ip::kIpv4TotalLen, static_cast<uint16_t>(seg_len));
      ip::store16(out + ip::kIpv4Id, static_cast<uint16_t>(id0 + i));
      ip::store16(out + ip::kIpv4Csum, 0);
      ip::store16(out + ip::kIpv4Csum, static_cast<uint16_t>(~checksum(out, ip_len)));
    }
    uint8_t* l4 = out + ip_len;
    if (gp.tcp) {
      ip::store32(l4 + ip::kTcpSeq, static_cast<uint32_t>(seq0 + i * gp.gso_size));
      if (i + 1 != gp.segments) l4[ip::kTcpFlags] &= static_cast<uint8_t>(~(ip::kTcpFin | ip::kTcpPsh));
      if (i != 0) l4[ip::kTcpFlags] &= static_cast<uint8_t>(~ip::kTcpCwr);
    } else {
      ip::store16(l4 + ip::kUdpLenField, static_cast<uint16_t>(l4_total));
    }
    ip::store16(out + csum_at, 0);
    const uint16_t pseudo = pseudo_header_checksum(proto, src, dst, static_cast<uint32_t>(l4_total));
    store_l4_checksum(out + csum_at, checksum(l4, l4_total, pseudo), !gp.tcp);
    sizes[k] = seg_len;
  }
  return n;
}

size_t gso_split(const VirtioNetHdr& hdr, std::span<const uint8_t> pkt, std::span<const std::span<uint8_t>> bufs,
                 std::span<size_t> sizes, size_t offset, size_t mtu, std::error_code& ec) {
  ec.clear();
  if (hdr.gso_type == kVirtioNetHdrGsoNone) {
    if (bufs.empty() || sizes.empty()) {
      ec = OffloadError::too_many_segments;
      return 0;
    }
    if (pkt.size() > mtu || bufs[0].size() < offset || bufs[0].size() - offset < pkt.size()) {
      ec = OffloadError::segment_too_large;
      return 0;
    }
    const std::span<uint8_t> out = bufs[0].subspan(offset, pkt.size());
    if (!pkt.empty()) std::memcpy(out.data(), pkt.data(), pkt.size());
    if (!finish_read(hdr, out)) {
      ec = OffloadError::bad_csum_offset;
      return 0;
    }
    sizes[0] = pkt.size();
    return 1;
  }
  GsoPacket gp;
  if (!gso_parse(hdr, pkt, gp, ec)) return 0;
  if (gp.segments > std::min(bufs.size(), sizes.size())) {
    ec = OffloadError::too_many_segments;
    return 0;
  }
  return gso_split(gp, pkt, 0, bufs, sizes, offset, mtu, ec);
}

bool finish_read(const VirtioNetHdr& hdr, std::span<uint8_t> packet) {
  if (hdr.gso_type != kVirtioNetHdrGsoNone) return false;
  if (hdr.flags & kVirtioNetHdrFNeedsCsum) {
    // An odd offset puts the field across two 16-bit words of the sum: no checksum at all.
    const size_t start = hdr.csum_start, at = start + hdr.csum_offset;
    if (at + 2 > packet.size() || hdr.csum_offset % 2 != 0) return false;
    uint8_t* field = packet.data() + at;
    const uint16_t partial = ip::load16(field);
    ip::store16(field, 0);
    // Zero is stored as 0xffff, as the kernel does: 0 means "no checksum" to UDP, and
    // both are zero in one's complement.
    store_l4_checksum(field, checksum(packet.data() + start, packet.size() - start, partial), true);
  }
  return true;
}

}  // namespace tunlinux

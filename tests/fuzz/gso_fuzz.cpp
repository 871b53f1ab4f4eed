// Fuzzes gso_split with any virtio-net header and packet: the input is the 10-byte
// header, a mode byte, an MTU and the packet. With mode bit 0 the harness first makes
// the header agree with the packet (NEEDS_CSUM, csum_start/offset, IP version), so the
// fuzzer spends its time past the validation too. Checks: a rejected packet names an
// offload error; an accepted one gives segments no longer than the MTU, each with valid
// IPv4 header and TCP/UDP checksums, that together carry the packet's payload bytes in
// order; a GSO_NONE packet comes back whole with its partial checksum completed.
//   cmake --preset fuzz && cmake --build build-fuzz --target gso_fuzz
//   build-fuzz/bin/gso_fuzz -max_total_time=60 tests/fuzz/corpus/gso
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "tunlinux/offload.hpp"

namespace {

using wgtest::be16;
using wgtest::be32;
using wgtest::naive_checksum;

using Bytes = std::vector<uint8_t>;
constexpr size_t kOffset = 16;
constexpr size_t kMaxBuffers = 2048;

void check(bool ok) {
  if (!ok) __builtin_trap();
}



uint16_t pseudo(const uint8_t* ip, size_t l4_len, uint8_t proto) {
  uint8_t ph[40] = {};
  size_t n;
  if ((ip[0] >> 4) == 4) {
    std::memcpy(ph, ip + 12, 8);
    ph[9] = proto;
    ph[10] = static_cast<uint8_t>(l4_len >> 8);
    ph[11] = static_cast<uint8_t>(l4_len);
    n = 12;
  } else {
    std::memcpy(ph, ip + 8, 32);
    ph[34] = static_cast<uint8_t>(l4_len >> 8);
    ph[35] = static_cast<uint8_t>(l4_len);
    ph[39] = proto;
    n = 40;
  }
  return naive_checksum(ph, n);
}

// Makes `h` agree with `pkt` where it can: the fuzzer's bytes pick the GSO type.
void agree(tunlinux::VirtioNetHdr& h, std::span<uint8_t> pkt, uint8_t mode) {
  if (pkt.empty()) return;
  static constexpr uint8_t kTypes[] = {tunlinux::kVirtioNetHdrGsoTcpV4, tunlinux::kVirtioNetHdrGsoTcpV6,
                                       tunlinux::kVirtioNetHdrGsoUdpL4, tunlinux::kVirtioNetHdrGsoNone};
  h.gso_type = kTypes[(mode >> 1) & 3];
  const bool tcp = h.gso_type == tunlinux::kVirtioNetHdrGsoTcpV4 || h.gso_type == tunlinux::kVirtioNetHdrGsoTcpV6;
  const bool v6 = h.gso_type == tunlinux::kVirtioNetHdrGsoTcpV6 || (h.gso_type == tunlinux::kVirtioNetHdrGsoUdpL4 && (mode & 8));
  pkt[0] = static_cast<uint8_t>(v6 ? 0x60 | (pkt[0] & 0xf) : 0x40 | std::max(5, pkt[0] & 0xf));
  const size_t ihl = v6 ? 40 : (pkt[0] & 0xf) * 4u;
  if (v6 && pkt.size() > 6) pkt[6] = tcp ? 6 : 17;
  if (!v6 && pkt.size() > 9) pkt[9] = tcp ? 6 : 17;
  if (!v6 && pkt.size() > 7) pkt[6] &= 0x40, pkt[7] = 0;  // not a fragment
  h.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
  h.csum_start = static_cast<uint16_t>(ihl);
  h.csum_offset = tcp ? 16 : 6;
  if (h.gso_size == 0) h.gso_size = 1;
  h.hdr_len = 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Bytes raw_hdr = in.ConsumeBytes<uint8_t>(tunlinux::kVirtioNetHdrLen);
  if (raw_hdr.size() < tunlinux::kVirtioNetHdrLen) return 0;
  tunlinux::VirtioNetHdr hdr = tunlinux::VirtioNetHdr::decode(raw_hdr.data());
  const uint8_t mode = in.ConsumeIntegral<uint8_t>();
  const size_t mtu = in.ConsumeIntegralInRange<size_t>(20, 9100);
  Bytes pkt = in.ConsumeRemainingBytes<uint8_t>();
  if (mode & 1) agree(hdr, pkt, mode);
  const Bytes original = pkt;

  // As many buffers as the packet needs (bounded), each as long as its longest segment
  // or the MTU, whichever is shorter.
  size_t want = 1, room = std::min(mtu, pkt.size());
  tunlinux::GsoPacket gp;
  std::error_code ec;
  const bool gso = hdr.gso_type != tunlinux::kVirtioNetHdrGsoNone;
  if (gso && tunlinux::gso_parse(hdr, pkt, gp, ec)) {
    want = std::min(gp.segments, kMaxBuffers);
    room = std::min(mtu, gp.segment_len(0));
  }
  std::vector<Bytes> store(want, Bytes(kOffset + room));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  std::vector<size_t> sizes(want);

  const size_t n = tunlinux::gso_split(hdr, pkt, bufs, sizes, kOffset, mtu, ec);
  check(pkt == original);  // the input is only read
  if (ec) {
    check(n == 0 && &ec.category() == &tunlinux::offload_category());
    return 0;
  }

  if (!gso) {
    check(n == 1 && sizes[0] == pkt.size() && pkt.size() <= mtu);
    Bytes out(store[0].begin() + kOffset, store[0].begin() + static_cast<long>(kOffset + sizes[0]));
    if (hdr.flags & tunlinux::kVirtioNetHdrFNeedsCsum) {
      const size_t start = hdr.csum_start, at = start + hdr.csum_offset;
      check(at + 2 <= pkt.size());
      check(naive_checksum(out.data() + start, out.size() - start, be16(&pkt[at])) == 0xffff);
      out[at] = pkt[at], out[at + 1] = pkt[at + 1];
    }
    check(out == pkt);
    return 0;
  }

  // Accepted: the header really did agree with the packet.
  check(n == gp.segments && hdr.gso_size > 0 && (hdr.flags & tunlinux::kVirtioNetHdrFNeedsCsum));
  const bool v6 = (pkt[0] >> 4) == 6;
  const size_t ihl = v6 ? 40 : (pkt[0] & 0xf) * 4u;
  check(hdr.csum_start == ihl && gp.hdr_len <= pkt.size());
  const bool tcp = gp.tcp;
  const uint8_t proto = tcp ? 6 : 17;
  check(hdr.gso_type != tunlinux::kVirtioNetHdrGsoTcpV4 || !v6);
  check(hdr.gso_type != tunlinux::kVirtioNetHdrGsoTcpV6 || v6);

  Bytes payload;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = store[i].data() + kOffset;
    const size_t len = sizes[i];
    check(len <= mtu && len >= gp.hdr_len);
    check(len - gp.hdr_len <= hdr.gso_size);
    check(i + 1 == n || len - gp.hdr_len == hdr.gso_size);
    if (v6) {
      check(be16(s + 4) == len - 40);
    } else {
      check(be16(s + 2) == len);
      check(naive_checksum(s, ihl) == 0xffff);
      check(be16(s + 4) == static_cast<uint16_t>(be16(&pkt[4]) + i));
    }
    check(naive_checksum(s + ihl, len - ihl, pseudo(s, len - ihl, proto)) == 0xffff);
    if (tcp) {
      check(be32(s + ihl + 4) == static_cast<uint32_t>(be32(&pkt[ihl + 4]) + i * hdr.gso_size));
      const uint8_t f = s[ihl + 13], of = pkt[ihl + 13];
      check((f & 0x09) == (i + 1 == n ? (of & 0x09) : 0));  // FIN, PSH on the last only
      check((f & 0x80) == (i == 0 ? (of & 0x80) : 0));      // CWR on the first only
    } else {
      check(be16(s + ihl + 4) == len - ihl);
    }
    payload.insert(payload.end(), s + gp.hdr_len, s + len);
  }
  check(payload.size() == pkt.size() - gp.hdr_len);
  check(std::equal(payload.begin(), payload.end(), pkt.begin() + gp.hdr_len));
  return 0;
}

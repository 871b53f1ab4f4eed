// The virtio-net header (struct virtio_net_hdr) that an IFF_VNET_HDR TUN device puts in
// front of every packet, and the TUN offload bits: the constants <linux/virtio_net.h>
// and Debian 12's <linux/if_tun.h> would give, where those do not compile as C++ or are
// too old to have them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tunlinux {

// Bytes of the header; we keep the kernel's default size (TUNSETVNETHDRSZ not used).
inline constexpr size_t kVirtioNetHdrLen = 10;

// flags
inline constexpr uint8_t kVirtioNetHdrFNeedsCsum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
inline constexpr uint8_t kVirtioNetHdrFDataValid = 2;  // VIRTIO_NET_HDR_F_DATA_VALID
// gso_type
inline constexpr uint8_t kVirtioNetHdrGsoNone = 0;   // VIRTIO_NET_HDR_GSO_NONE
inline constexpr uint8_t kVirtioNetHdrGsoTcpV4 = 1;  // VIRTIO_NET_HDR_GSO_TCPV4
inline constexpr uint8_t kVirtioNetHdrGsoUdp = 3;    // VIRTIO_NET_HDR_GSO_UDP (UFO: never used)
inline constexpr uint8_t kVirtioNetHdrGsoTcpV6 = 4;  // VIRTIO_NET_HDR_GSO_TCPV6
inline constexpr uint8_t kVirtioNetHdrGsoUdpL4 = 5;  // VIRTIO_NET_HDR_GSO_UDP_L4 (Linux 6.2)
inline constexpr uint8_t kVirtioNetHdrGsoEcn = 0x80; // VIRTIO_NET_HDR_GSO_ECN, or'ed into TCP types

// TUNSETOFFLOAD bits missing from Debian 12's <linux/if_tun.h> (Linux 6.2 added them;
// the kernel enables USO only when both are offered).
inline constexpr unsigned kTunFUso4 = 0x20;  // TUN_F_USO4
inline constexpr unsigned kTunFUso6 = 0x40;  // TUN_F_USO6

// A struct virtio_net_hdr with its fields in host order: the kernel uses the host's
// byte order for a legacy header unless TUNSETVNETLE/BE says otherwise, and nobody
// sets those.
struct VirtioNetHdr {
  uint8_t flags = 0;
  uint8_t gso_type = 0;
  uint16_t hdr_len = 0;  // the kernel's hint only: the linear part of its skb
  uint16_t gso_size = 0;
  uint16_t csum_start = 0;
  uint16_t csum_offset = 0;

  static VirtioNetHdr decode(const uint8_t* p) {
    VirtioNetHdr h;
    h.flags = p[0];
    h.gso_type = p[1];
    std::memcpy(&h.hdr_len, p + 2, 2);
    std::memcpy(&h.gso_size, p + 4, 2);
    std::memcpy(&h.csum_start, p + 6, 2);
    std::memcpy(&h.csum_offset, p + 8, 2);
    return h;
  }
  void encode(uint8_t* p) const {
    p[0] = flags;
    p[1] = gso_type;
    std::memcpy(p + 2, &hdr_len, 2);
    std::memcpy(p + 4, &gso_size, 2);
    std::memcpy(p + 6, &csum_start, 2);
    std::memcpy(p + 8, &csum_offset, 2);
  }
};

}  // namespace tunlinux

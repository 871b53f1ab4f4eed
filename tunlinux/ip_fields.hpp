// Byte offsets and big-endian accessors for the IPv4, IPv6, TCP and UDP header fields
// the offload engine reads and rewrites. Internal to tunlinux/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tunlinux::ip {

inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;

inline constexpr size_t kIpv4MinLen = 20;
inline constexpr size_t kIpv6Len = 40;
inline constexpr size_t kTcpMinLen = 20;
inline constexpr size_t kTcpMaxLen = 60;
inline constexpr size_t kUdpLen = 8;

// IPv4: byte 1 TOS, 2 total length, 4 id, 6 flags + fragment offset, 8 TTL, 9 protocol,
// 10 header checksum, 12 source, 16 destination.
inline constexpr size_t kIpv4Tos = 1, kIpv4TotalLen = 2, kIpv4Id = 4, kIpv4Frag = 6, kIpv4Ttl = 8,
                        kIpv4Proto = 9, kIpv4Csum = 10, kIpv4Src = 12;
inline constexpr uint16_t kIpv4Df = 0x4000;
// Everything in the flags + fragment offset word but DF: the reserved bit, MF (0x2000)
// and the 13-bit offset (0x1fff). Non-zero means a fragment (or a bogus reserved bit).
inline constexpr uint16_t kIpv4NotDf = 0xbfff;

// IPv6: bytes 0-3 version, traffic class, flow label; 4 payload length; 6 next header;
// 7 hop limit; 8 source, 24 destination.
inline constexpr size_t kIpv6PayloadLen = 4, kIpv6Next = 6, kIpv6HopLimit = 7, kIpv6Src = 8;

// TCP: 0 ports, 4 sequence, 8 acknowledgement number, 12 data offset, 13 flags, 14 window,
// 16 checksum, 18 urgent pointer.
inline constexpr size_t kTcpSeq = 4, kTcpAckNum = 8, kTcpDataOff = 12, kTcpFlags = 13, kTcpCsum = 16,
                        kTcpUrgent = 18;
inline constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpPsh = 0x08, kTcpAck = 0x10,
                         kTcpUrg = 0x20, kTcpEce = 0x40, kTcpCwr = 0x80;

// UDP: 0 ports, 4 length, 6 checksum.
inline constexpr size_t kUdpLenField = 4, kUdpCsum = 6;

inline uint16_t load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t load32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace tunlinux::ip

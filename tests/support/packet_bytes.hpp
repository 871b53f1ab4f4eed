// Big-endian field access and the Internet checksum written out as RFC 1071 states it,
// independent of tunlinux::checksum: the reference the offload tests, fuzz targets and
// benchmarks check packets against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace wgtest {

inline uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t be32(const uint8_t* p) { return uint32_t{be16(p)} << 16 | be16(p + 2); }
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}

// RFC 1071 as written: big-endian 16-bit words, an odd last byte padded, end-around
// carry; `initial` is a partial sum to continue (a pseudo-header's).
inline uint16_t naive_checksum(const uint8_t* p, size_t n, uint32_t initial = 0) {
  uint64_t sum = initial;
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n % 2) sum += static_cast<uint32_t>(p[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// The TCP/UDP checksum of an IPv4 packet over its pseudo-header, recomputed naively:
// 0xffff when valid.
inline uint16_t l4_verify(const uint8_t* ip, size_t len) {
  const size_t ihl = (ip[0] & 0xf) * 4u;
  std::vector<uint8_t> pseudo(12 + len - ihl);
  std::memcpy(pseudo.data(), ip + 12, 8);
  pseudo[9] = ip[9];
  put16(&pseudo[10], static_cast<uint16_t>(len - ihl));
  std::memcpy(pseudo.data() + 12, ip + ihl, len - ihl);
  return naive_checksum(pseudo.data(), pseudo.size());
}

}  // namespace wgtest

// Internet checksum with a 64-bit accumulator: native-order 32-bit loads, 32 bytes per
// iteration, folded and byte-swapped once at the end (the one's complement sum does not
// depend on byte order, RFC 1071 section 2(B)).
#include "tunlinux/checksum.hpp"

#include <bit>
#include <cstring>

namespace tunlinux {
namespace {

inline uint64_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint32_t fold64(uint64_t acc) {
  acc = (acc & 0xffffffff) + (acc >> 32);  // <= 2^33
  acc = (acc & 0xffffffff) + (acc >> 32);  // <= 2^32
  acc = (acc & 0xffff) + (acc >> 16);
  acc = (acc & 0xffff) + (acc >> 16);
  acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint32_t>(acc);
}

}  // namespace

uint16_t checksum(const uint8_t* data, size_t len, uint32_t initial) {
  // 32-bit words into 64 bits: 2^32 additions before overflow, far beyond any packet.
  uint64_t acc = 0;
  while (len >= 32) {
    acc += load32(data) + load32(data + 4) + load32(data + 8) + load32(data + 12) +
           load32(data + 16) + load32(data + 20) + load32(data + 24) + load32(data + 28);
    data += 32;
    len -= 32;
  }
  while (len >= 4) {
    acc += load32(data);
    data += 4;
    len -= 4;
  }
  if (len >= 2) {
    uint16_t v;
    std::memcpy(&v, data, sizeof v);
    acc += v;
    data += 2;
    len -= 2;
  }
  if (len == 1) {
    // The odd byte is the high half of a big-endian word: in native order that is the
    // low byte on a little-endian machine.
    acc += std::endian::native == std::endian::little ? data[0] : uint32_t{data[0]} << 8;
  }
  uint32_t sum = fold64(acc);
  if constexpr (std::endian::native == std::endian::little) {
    sum = ((sum & 0xff) << 8) | (sum >> 8);
  }
  return static_cast<uint16_t>(fold64(uint64_t{sum} + initial));
}

uint16_t pseudo_header_checksum(uint8_t protocol, std::span<const uint8_t> src,
                                std::span<const uint8_t> dst, uint32_t l4_length) {
  uint32_t initial = protocol + (l4_length >> 16) + (l4_length & 0xffff);
  return checksum(dst.data(), dst.size(), checksum(src.data(), src.size(), initial));
}

}  // namespace tunlinux

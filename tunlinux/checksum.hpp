// The Internet checksum (RFC 1071) for the TUN offload path: completing checksums the
// kernel left partial (VIRTIO_NET_HDR_F_NEEDS_CSUM) and, later, rewriting them after
// GSO split and GRO coalescing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tunlinux {

// One's complement sum of `data` taken as big-endian 16-bit words (an odd last byte is
// padded with a zero byte), plus `initial`, folded to 16 bits. Not complemented: store
// ~checksum(...) in a header. `initial` may be any 32-bit partial sum (for example a
// pseudo_header_checksum() result or a field that already holds one). Any alignment.
uint16_t checksum(const uint8_t* data, size_t len, uint32_t initial = 0);

// Folded, uncomplemented sum of the TCP/UDP pseudo-header: source and destination
// addresses (both 4 or both 16 bytes), protocol and the L4 length (header + payload).
// Feed it as `initial` to checksum() over the L4 header and payload.
uint16_t pseudo_header_checksum(uint8_t protocol, std::span<const uint8_t> src,
                                std::span<const uint8_t> dst, uint32_t l4_length);

}  // namespace tunlinux

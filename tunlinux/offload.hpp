// The virtio-net offload engine of the TUN device, with no I/O of its own:
//   read side:  gso_split() cuts a TSO/USO super-packet the kernel hands us into
//               MTU-sized packets; finish_read() completes a partial checksum in place;
//   write side: Gro plans the writes of a batch, coalescing TCP segments and UDP
//               datagrams of one flow into one packet behind a GSO virtio-net header, as
//               the kernel's GRO engine would have merged them.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>
#include <type_traits>

#include "tunlinux/virtio_net.hpp"

namespace tunlinux {

// Why gso_split() refused a packet.
enum class OffloadError {
  unknown_gso_type = 1,   // not NONE, TCPV4, TCPV6 or UDP_L4 (or ECN on a UDP type)
  zero_gso_size,          // a GSO type with gso_size 0
  no_needs_csum,          // a GSO type without NEEDS_CSUM: no transport header to find
  bad_csum_start,         // csum_start is not where the transport header begins
  bad_csum_offset,        // not the TCP/UDP checksum field, or past the end or odd (GSO_NONE)
  bad_hdr_len,            // hdr_len runs past the end of the packet
  ip_version_mismatch,    // TCPV4 on an IPv6 packet or TCPV6 on an IPv4 one
  bad_ip_header,          // truncated, IHL below 5, a fragment, or not the protocol gso_type says
  ipv6_extension_header,  // an IPv6 packet whose next header is not TCP/UDP
  bad_transport_header,   // truncated TCP/UDP header or a TCP data offset below 5
  segment_too_large,      // a segment would exceed the MTU or its buffer
  too_many_segments,      // more segments than buffers
};
const std::error_category& offload_category();
std::error_code make_error_code(OffloadError e);

}  // namespace tunlinux

template <>
struct std::is_error_code_enum<tunlinux::OffloadError> : std::true_type {};

namespace tunlinux {

// ---------------------------------------------------------------- read side: GSO split

// A GSO packet that passed gso_parse(): what splitting it needs.
struct GsoPacket {
  bool ipv6 = false;
  bool tcp = false;
  uint16_t ip_hdr_len = 0;  // also csum_start
  uint16_t hdr_len = 0;     // IP + TCP/UDP header, recomputed (the kernel's is a hint)
  uint16_t gso_size = 0;    // payload bytes per segment
  size_t len = 0;           // the whole super-packet
  size_t segments = 0;      // at least 1

  size_t segment_len(size_t i) const;  // IP length of segment i < segments
};

// Checks a packet read behind `hdr` whose gso_type is not NONE: every field the split
// relies on is validated against the packet itself (the header comes from the kernel,
// but a fuzzer or a confused kernel must not make us read past `pkt`). IPv4 options are
// carried into every segment; IPv6 extension headers are refused.
bool gso_parse(const VirtioNetHdr& hdr, std::span<const uint8_t> pkt, GsoPacket& out, std::error_code& ec);

// Writes segments [first, first + n) of `gp` (n = min(bufs.size(), segments left)),
// segment k at bufs[k - first].data() + offset with its length in sizes[k - first]:
// headers copied, IPv4 total length, ID (+1 per segment) and header checksum, IPv6
// payload length, TCP sequence number (FIN and PSH kept on the last segment only, CWR on
// the first only) or UDP length, and the TCP/UDP checksum computed over pseudo-header and
// segment. Every segment must fit in `mtu` and in its buffer (else segment_too_large and
// nothing is promised about the buffers). Returns n. `pkt` must be what gso_parse saw.
size_t gso_split(const GsoPacket& gp, std::span<const uint8_t> pkt, size_t first,
                 std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset, size_t mtu,
                 std::error_code& ec);

// The whole read side for one packet: a GSO packet is parsed and split into as many of
// `bufs` as it needs (too_many_segments if they are not enough); a GSO_NONE packet is
// copied into bufs[0] with its checksum completed (finish_read). Returns the number of
// packets, 0 with ec set when the packet must be dropped.
size_t gso_split(const VirtioNetHdr& hdr, std::span<const uint8_t> pkt, std::span<const std::span<uint8_t>> bufs,
                 std::span<size_t> sizes, size_t offset, size_t mtu, std::error_code& ec);

// Turns one GSO_NONE packet read behind `hdr` into a plain IP packet, in place: completes
// a checksum the kernel left partial (VIRTIO_NET_HDR_F_NEEDS_CSUM: the field at
// csum_start + csum_offset holds the pseudo-header sum, the checksum covers csum_start to
// the end). Returns false when the packet must be dropped: a GSO packet (it cannot be
// finished in place: gso_split) or a checksum field past the end or at an odd offset.
bool finish_read(const VirtioNetHdr& hdr, std::span<uint8_t> packet);

// ---------------------------------------------------------------- multi-queue TUN

// The queue (0 .. queues-1) a multi-queue Tun writes the IP packet on: a hash of its
// flow that is the same both ways (addresses and, for TCP and UDP, ports swapped give the
// same queue), of the protocol, the addresses and, where the packet has them whole (an
// IPv4 first fragment or unfragmented; IPv6 with TCP or UDP right after the fixed
// header), the ports. Anything that is not IPv4 or IPv6, or too short, goes to queue 0.
size_t flow_queue(std::span<const uint8_t> packet, size_t queues);

// ---------------------------------------------------------------- write side: GRO

// Packets Gro considers at once; Tun::write plans a larger batch in chunks of this size.
inline constexpr size_t kGroMaxBatch = 128;
// The kernel's limits: a coalesced IP packet of at most 64 KB, and UDP_GRO_CNT_MAX
// datagrams (older kernels also refuse more than 64 UDP segments on write).
inline constexpr size_t kGroMaxLen = 65535;
inline constexpr size_t kGroMaxUdpSegments = 64;

struct GroOptions {
  bool tcp = true;
  bool udp = true;
  // The packets were authenticated by the tunnel that decrypted them: merge TCP and UDP
  // without verifying their checksums first, and write plain packets as plain_header()
  // does with `trusted`.
  bool trusted = false;
};

// The virtio-net header of a complete packet about to be written to the TUN.
//
// Without `trusted`: flags 0, GSO_NONE; the kernel verifies the packet's checksums.
// With it (the tunnel authenticated the packet, which the kernel's own WireGuard marks
// CHECKSUM_UNNECESSARY): a TCP or UDP packet (IPv4 not a fragment, IPv6 without extension
// headers, its IP length the packet's, its transport header whole, a UDP checksum
// present) gets NEEDS_CSUM with the pseudo-header sum in its checksum field, which
// changes the packet: the kernel takes CHECKSUM_PARTIAL as verified on local delivery,
// and computes the checksum only if it forwards the packet (on an interface without
// checksum offload). Any other packet gets DATA_VALID, which Linux (6.18) accepts on a
// TUN write and ignores: it still verifies, as tests/unit/tunlinux_test.cpp shows for
// both flags.
VirtioNetHdr plain_header(std::span<uint8_t> packet, bool trusted);

// Plans the writes for one batch of IP packets: which packets merge, the headers of each
// merged packet, and the gather list (iovec) of every write. Coalesces as the kernel's GRO
// would accept:
//   both  same IP version, addresses, protocol, ports; same TTL/hop limit and TOS/traffic
//         class; IPv4: no options, not a fragment, DF equal, IDs consecutive unless DF;
//         IPv6: same flow label, no extension headers; a valid IPv4 header checksum and
//         (unless GroOptions::trusted) valid L4 checksums; a payload; the coalesced packet
//         at most 64 KB;
//   TCP   consecutive sequence numbers, same ACK, window and options; flags ACK, or
//         ACK|PSH which ends the run; each segment no longer than the first, a shorter
//         one ends the run;
//   UDP   a non-zero checksum; each datagram no longer than the first, a shorter one ends
//         the run; at most kGroMaxUdpSegments.
// A packet joins only the newest run of its flow, and one of the flow that may not merge
// ends that run, so the order within a flow is kept; writes come in the order of their
// first packet. The caller's packets are not changed:
// a merged packet's rewritten headers (IP length and checksum, the pseudo-header sum in
// the TCP/UDP checksum field with NEEDS_CSUM, PSH from the last segment) and its
// virtio-net header live in this object, followed by the payloads in place. A plain write
// is the packet behind plain_header()'s virtio-net header written into its headroom (so
// no header state survives from an earlier batch; with GroOptions::trusted, a plain TCP or
// UDP packet's checksum field is the one byte range of a caller's packet that changes). Not thread-safe; about 20 KB: fine on a stack.
class Gro {
public:
  struct Write {
    uint16_t iov_begin = 0, iov_count = 0;        // iov_count 0: the buffer is shorter than offset
    uint16_t member_begin = 0, member_count = 0;  // the input packets, in order
    uint8_t gso_type = kVirtioNetHdrGsoNone;      // NONE for a plain packet
  };

  // Plans bufs[i].subspan(offset) for i < bufs.size() <= kGroMaxBatch; offset must be at
  // least kVirtioNetHdrLen. Forgets the previous plan. The iovecs point into bufs and into
  // this object: keep both alive and unchanged until the writes are done.
  void plan(std::span<const std::span<uint8_t>> bufs, size_t offset, GroOptions opts);

  std::span<const Write> writes() const { return {writes_.data(), n_writes_}; }
  std::span<const iovec> iov(const Write& w) const { return {iov_.data() + w.iov_begin, w.iov_count}; }
  std::span<const uint16_t> members(const Write& w) const { return {members_.data() + w.member_begin, w.member_count}; }

private:
  // A packet as classified once: its flow (kind 0: not TCP/UDP, so none) and whether it
  // may merge at all.
  struct Candidate {
    uint8_t kind = 0;  // see gro.cpp
    bool mergeable = false;
    uint8_t ip_len = 0, l4_len = 0;
    uint16_t payload = 0;  // set when mergeable
    uint32_t hash = 0;     // of the flow
  };
  // A run of packets of one flow that merge into one write.
  struct Run {
    uint16_t head = 0, tail = 0, count = 0;
    uint16_t gso_size = 0;  // the head's payload
    uint32_t len = 0;       // IP length of the merged packet so far
    uint32_t next_seq = 0;  // TCP: where the next segment must start
    bool closed = false;    // PSH, a short segment or a limit: nothing more joins
  };
  static constexpr size_t kNone = 0xffff;
  // virtio-net header + IPv6 (40) + the longest TCP header (60), rounded up.
  static constexpr size_t kHeaderSlot = 112;

  static Candidate classify(std::span<const uint8_t> p, GroOptions opts);
  bool try_append(Run& r, uint16_t i, const Candidate& c);
  void emit_run(const Run& r);
  void emit_plain(uint16_t i);

  std::span<const std::span<uint8_t>> bufs_;
  size_t offset_ = 0;
  bool trusted_ = false;
  size_t n_writes_ = 0, n_iov_ = 0, n_members_ = 0, n_slots_ = 0;
  std::array<Candidate, kGroMaxBatch> cand_;
  std::array<Run, kGroMaxBatch> runs_;
  std::array<uint16_t, kGroMaxBatch> run_of_;  // packet -> run, kNone when plain
  std::array<uint16_t, kGroMaxBatch> next_;    // packet -> next packet of its run
  std::array<Write, kGroMaxBatch> writes_;
  std::array<iovec, kGroMaxBatch + kGroMaxBatch / 2> iov_;  // one per packet + one per merged write
  std::array<uint16_t, kGroMaxBatch> members_;
  std::array<std::array<uint8_t, kHeaderSlot>, kGroMaxBatch / 2> slots_;
};

}  // namespace tunlinux

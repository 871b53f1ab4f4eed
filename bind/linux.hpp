// LinuxBind: the batched UDP Bind over one IPv4 and one IPv6 socket sharing a port —
// recvmmsg/sendmmsg, sticky source addresses (IP_PKTINFO / IPV6_PKTINFO), 7 MB socket
// buffers, UDP GSO on send (UDP_SEGMENT) and UDP GRO on receive.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "bind/bind.hpp"

struct mmsghdr;  // <sys/socket.h>

namespace conn {

// Parses the control data of one received datagram (`len` bytes at `control`, any
// alignment) into ep's sticky source (IP_PKTINFO: ipi_spec_dst, or ipi_addr when that is
// unset, and ipi_ifindex; IPV6_PKTINFO: ipi6_addr and ipi6_ifindex) and gso_size (UDP_GRO,
// an int or a u16 payload; 0 when absent). Clears ep's source first; leaves its
// destination alone. Hostile input is fine: unknown messages are skipped, truncated ones
// ignored, and parsing stops at a cmsg_len below the header or past the end. Never reads
// outside [control, control + len). A free function so a fuzz target can call it.
void parse_control(const uint8_t* control, size_t len, Endpoint& ep, uint16_t& gso_size);

class LinuxBind final : public Bind {
public:
  static constexpr size_t kBatchSize = 128;
  // A send coalesces at most this many datagrams into one UDP_SEGMENT message (kernels
  // before 6.x allow 64, newer ones 128), of at most kMaxGsoBytes4 / kMaxGsoBytes6 bytes
  // (the largest UDP payload of IPv4 / IPv6).
  static constexpr size_t kMaxGsoSegments = 64;
  static constexpr size_t kMaxGsoBytes4 = 65535 - 20 - 8;
  static constexpr size_t kMaxGsoBytes6 = 65535 - 8;
  // With GRO on, receive buffers of at least this size take datagrams straight from the
  // kernel (wg::kBufferSize is larger) and a coalesced message's datagrams are handed out
  // where they landed, several in one buffer (see ReceiveFn); smaller ones go through a
  // per-socket 64 KB scratch, one message per syscall (correct, slower). Datagrams that do not fit the batch wait in
  // that per-socket carry: usually part of one message, at most what one read took
  // (kBatchSize messages of 64 KB, when a read meets a burst of coalesced messages after
  // single datagrams); more than 128 KB is freed once handed out.
  static constexpr size_t kGroBufferSize = 65535;

  // The offloads. Each one is used only if the kernel takes it at open() (UDP_SEGMENT:
  // Linux 4.18, UDP_GRO: 5.0); otherwise the bind works without it.
  struct Options {
    // Send: coalesce runs of equal-size datagrams (the last of a run may be shorter) to
    // one endpoint into one UDP_SEGMENT message; the kernel (or the NIC) splits them.
    bool gso = true;
    // Receive: let the kernel hand over coalesced "super-datagrams" (UDP_GRO), which the
    // receive function splits back into datagrams.
    bool gro = true;
    // UDP sockets per family, in one SO_REUSEPORT group on the listen port, each with a
    // receive function of its own (a thread each in the core): the kernel spreads the
    // datagrams by a hash of their addresses and ports, so each peer (one address and
    // port) stays on one socket and many peers spread over all. Sends go from the first
    // socket of the family. 1: one plain socket per family, no SO_REUSEPORT. With more,
    // open() first binds sockets without SO_REUSEPORT to the port (with port 0: to the
    // one the kernel picks for them) and puts the group there once they are closed, so it
    // does not join another program's group (a port held is address_in_use; only a group
    // binding the same port in that instant could still meet ours).
    size_t sockets = 1;
    // Test seam: replaces ::sendmmsg for every send (e.g. to fail segmented messages
    // with EIO, which real kernels return when the egress device cannot checksum).
    int (*sendmmsg)(int fd, ::mmsghdr* msgs, unsigned n, int flags) = nullptr;
  };
  // Every offload on. The Bind reads no environment: the programs' switches
  // (WG_DISABLE_UDP_GSO, WG_DISABLE_UDP_GRO) are theirs, examples/common/offload_switches.hpp.
  LinuxBind();
  explicit LinuxBind(Options options);
  ~LinuxBind() override;  // close()s
  LinuxBind(const LinuxBind&) = delete;
  LinuxBind& operator=(const LinuxBind&) = delete;

  // Opens an IPv4 and an IPv6 (v6-only) socket on `port` (Options::sockets of each); with port 0 the IPv4 socket
  // picks one and the IPv6 socket takes the same (retrying with a fresh port if that one
  // is taken for IPv6). A family the kernel lacks (EAFNOSUPPORT) is skipped. Returns one
  // ReceiveFn per socket (IPv4's first), to be called from one thread each and not after
  // the LinuxBind is destroyed. Errors are errno values (errc::address_in_use, ...).
  // With GRO, a receive splits each coalesced message into consecutive datagrams of the
  // batch; those that do not fit are kept in the socket and returned first by the next
  // receive (never dropped; lost only when the bind closes). Probes GSO and GRO.
  std::vector<ReceiveFn> open(uint16_t port, uint16_t& actual_port, std::error_code& ec) override;
  // Wakes every blocked receive and send, waits until they have left the sockets, then
  // closes them. Every ReceiveFn of this open returns 0 with errc::operation_canceled
  // from then on (also after a later open()). Idempotent.
  void close() override;
  // Sends the batch to ep with sendmmsg (one syscall per 128 datagrams while the socket
  // takes them), from ep's sticky source when it has one. With GSO, each run of
  // datagrams of one size (a shorter one ends it; at most kMaxGsoSegments and
  // kMaxGsoBytes4/6) goes as one message whose iovecs point at the caller's datagrams
  // (no copy). A segmented message the kernel refuses is sent again one datagram per
  // message; EIO (the egress device cannot checksum) also turns GSO off for this bind
  // until the next open(). Nothing is lost either way. A sticky source the kernel
  // refuses (EINVAL, EADDRNOTAVAIL, ENETUNREACH, ENODEV) is cleared from ep and the
  // batch goes from the default source. A full socket buffer is waited for up to 1 s.
  // Thread-safe; errc::not_connected when closed, address_family_not_supported without
  // a socket of ep's family; an oversized datagram (EMSGSIZE) is skipped and reported,
  // the rest still go.
  void send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) override;
  // SO_MARK on both sockets (errc::operation_not_permitted without CAP_NET_ADMIN). The
  // mark is remembered and applied by later open()s; setting the current mark is a no-op.
  void set_mark(uint32_t mark, std::error_code& ec) override;
  size_t batch_size() const override { return kBatchSize; }
  // The sockets ask for ICMP errors (IP_RECVERR, IPV6_RECVERR); each destination or port
  // unreachable about a datagram sent is reported with the datagram's destination.
  void set_unreachable(UnreachableFn fn) override;
  // The sockets (receive functions) of the open bind; 0 when closed.
  size_t receivers() const;

  // Whether sends use UDP_SEGMENT now: allowed by the options, taken by the kernel at the
  // last open(), not turned off by EIO since. False before the first open().
  bool gso_enabled() const { return gso_.load(std::memory_order_relaxed); }
  // Whether the sockets of the last open() receive with UDP_GRO (allowed by the options
  // and taken by the kernel). False before the first open().
  bool gro_enabled() const { return gro_.load(std::memory_order_relaxed); }

private:
  struct Socket;   // one UDP socket and its receive scratch (linux.cpp)
  struct Sockets;  // the open sockets and the eventfd that close() signals

  void read_errors(Socket& s);
  size_t receive(Socket& s, uint64_t generation, std::span<const std::span<uint8_t>> bufs,
                 std::span<uint8_t*> at, std::span<size_t> sizes, std::span<Endpoint> eps,
                 std::error_code& ec);
  // enter() registers a user of sockets_ (false when closed, or when `generation` is not
  // 0 and not the current one); leave() ends it. close() waits for all users to leave.
  bool enter(uint64_t generation);
  void leave();

  const Options options_;  // never changes
  UnreachableFn unreachable_;  // changes only while closed
  // gso_: set by open(), cleared by a send that got EIO; gro_: set by open().
  std::atomic<bool> gso_{false};
  std::atomic<bool> gro_{false};

  // Serializes open(), close() and set_mark(); guards mark_. sockets_ changes only under
  // it and only while no user is registered, so registered users read it without a lock.
  mutable std::mutex lifecycle_mu_;
  std::unique_ptr<Sockets> sockets_;
  uint32_t mark_ = 0;

  // Guards the fields below.
  std::mutex mu_;
  std::condition_variable idle_cv_;
  bool open_ = false;
  uint64_t generation_ = 0;  // bumped by every open(); ReceiveFns carry theirs
  unsigned users_ = 0;
};

}  // namespace conn

// tunlinux::Tun: the kernel TUN device (/dev/net/tun) behind tun::Device, opened with a
// virtio-net header in front of every packet so the kernel hands us 64 KB TSO/USO
// super-packets (split here into MTU-sized packets) and takes GRO-coalesced ones (merged
// here from the batch), plus an rtnetlink thread that reports up/down/MTU events.
//
// Offloads and their off-switches (Options; the overloads without Options turn every
// offload on, and the library reads no environment: the programs' WG_TUN_DISABLE_*
// switches are in examples/common/offload_switches.hpp):
//   tso = false  no TUN_F_TSO4/TSO6: the kernel segments TCP itself, reads carry one
//                packet each
//   uso = false  no TUN_F_USO4/USO6 (Linux >= 6.2): the same for UDP_SEGMENT senders
//   gro = false  write() writes every packet on its own, never coalesced
//   csum = false write() leaves every checksum for the kernel to verify (with it on,
//                the writer vouches for what it writes: offload.hpp, plain_header)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <sys/uio.h>

#include "tun/device.hpp"
#include "tunlinux/offload.hpp"
#include "tunlinux/virtio_net.hpp"
#include "wg/base/fd.hpp"

namespace tunlinux {

class Tun final : public tun::Device {
  // Only create() and from_fd() can name it (explicit: `{}` does not make one).
  struct Private {
    explicit Private() = default;
  };

public:
  // Which offloads to offer; each one can be turned off on its own (some kernels and
  // drivers mishandle each of them).
  struct Options {
    bool tso = true;  // TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6: read TCP super-packets
    bool uso = true;  // TUN_F_CSUM | TUN_F_USO4 | TUN_F_USO6: read UDP super-packets
    bool gro = true;  // coalesce TCP and UDP flows on write
    // The packets written were authenticated by the caller (WireGuard's AEAD): the kernel
    // need not verify their TCP/UDP checksums, nor GRO before merging them (GroOptions::
    // trusted, plain_header). Only with a virtio-net header.
    bool csum = true;
    // Packets the kernel may queue for the reader (the interface's txqueuelen, which
    // sizes the TUN's ring; past it the kernel drops and counts tx_dropped). create()
    // raises a smaller queue to this; 0 leaves it alone. The kernel's own WireGuard
    // queues up to 1,024 packets per device between the stack and its crypto; a TUN
    // starts at 500, 26 ms of a 200 Mbit/s UDP flow, which a descheduled reader on a
    // busy 2-vCPU machine outlasts.
    unsigned queue_len = 1024;
    // Receive queues (IFF_MULTI_QUEUE), each its own descriptor, read through queue(i):
    // the kernel puts each flow it sends on one queue (its own hash for a flow it has
    // not seen written; else the queue the flow was last written on), and write() writes
    // each flow on the queue our symmetric flow hash picks (flow_queue), so both
    // directions of a flow stay on one queue and flows spread over all of them. 1: a
    // plain TUN (no IFF_MULTI_QUEUE). A persistent interface keeps the kind it was made
    // with: create() asking another is device_or_resource_busy, as is an interface whose
    // queues another process holds (the kernel would let us join it).
    unsigned queues = 1;
    // The system calls behind read() and write(), never null: tests put the kernel's
    // transient failures (EINTR, EAGAIN, ENOMEM) exactly where the real calls are.
    ssize_t (*readv)(int, const iovec*, int) = ::readv;
    ssize_t (*writev)(int, const iovec*, int) = ::writev;
  };

  // Creates (or attaches to a free, persistent) TUN interface `name` ("" lets the
  // kernel pick tunN) with IFF_TUN | IFF_NO_PI | IFF_VNET_HDR, negotiates offloads
  // (TUNSETOFFLOAD with CSUM|TSO4|TSO6|USO4|USO6 as `opts` allow, falling back to
  // CSUM|TSO4|TSO6, then to none: offloads() tells what the kernel took), sets its MTU
  // (0 keeps the kernel default), raises its queue to opts.queue_len and starts the
  // event thread. The descriptor is
  // non-blocking and close-on-exec. Errors: operation_not_permitted without
  // CAP_NET_ADMIN (permission_denied where /dev/net/tun is closed to the caller),
  // device_or_resource_busy when the name belongs to a device that is
  // not a free TUN, invalid_argument for a name of IFNAMSIZ bytes or more.
  static std::unique_ptr<Tun> create(const std::string& name, int mtu, const Options& opts, std::error_code& ec);
  static std::unique_ptr<Tun> create(const std::string& name, int mtu, std::error_code& ec) {
    return create(name, mtu, Options{}, ec);
  }

  // Adopts an attached TUN descriptor (WG_TUN_FD from a parent process). Its flags are
  // kept: IFF_TUN and IFF_NO_PI are required, IFF_VNET_HDR is used when present (its
  // header size reset to 10 bytes and offloads negotiated afresh as create() does).
  // On success the Tun owns `fd`; on failure the caller still does. With opts.queues > 1
  // the descriptor must be of an IFF_MULTI_QUEUE interface (else invalid_argument) and
  // the other queues are attached to it by name (in the caller's namespace).
  static std::unique_ptr<Tun> from_fd(int fd, const Options& opts, std::error_code& ec);
  static std::unique_ptr<Tun> from_fd(int fd, std::error_code& ec) { return from_fd(fd, Options{}, ec); }
  // The same for an interface in a network namespace the caller cannot enter (wg-run: a
  // TUN opened in a child's user and network namespaces): `link_fd`, a link_socket()
  // made in that namespace, finds the interface there, queries it and carries its
  // events. opts.queues must be 1 (else invalid_argument: more queues would be attached
  // by name in the caller's namespace). On success the Tun owns both descriptors; on
  // failure the caller still does.
  static std::unique_ptr<Tun> from_fd(int fd, int link_fd, const Options& opts, std::error_code& ec);
  // An rtnetlink socket subscribed to link events in the calling thread's network
  // namespace (non-blocking, close-on-exec), for from_fd(fd, link_fd, ...).
  static wg::UniqueFd link_socket(std::error_code& ec);

  // Owns every descriptor given: fds (one per queue, at least one), nl_fd, close_fd, wake_fd.
  Tun(Private, std::vector<int> fds, std::string name, int ifindex, bool vnet_hdr, unsigned offloads,
      const Options& opts, int nl_fd, int close_fd, int wake_fd);
  ~Tun() override;
  Tun(const Tun&) = delete;
  Tun& operator=(const Tun&) = delete;

  // read(): `offset` may be any value; each buffer holds offset + mtu() bytes at least
  // (a longer packet is dropped and counted, never truncated). Blocks until a packet
  // arrives, then returns every packet already queued, up to bufs.size(). A TSO/USO
  // super-packet is read into a 64 KB scratch buffer of the device and split into as many
  // of the buffers as it has segments; when the buffers run out, the next read() goes on
  // with its remaining segments first. A plain packet is read straight into its buffer.
  // Returns 0 with operation_canceled after close() or once the interface is deleted.
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override;

  // write(): with a virtio-net header (every device create() makes) `offset` must be at
  // least kVirtioNetHdrLen: a plain packet's header is written into the 10 bytes just
  // before it so header and packet leave in one write(). With GRO on, runs of TCP or UDP
  // packets of one flow leave as one coalesced packet (Gro, one writev() each; the
  // packets' bytes are not changed). If the kernel refuses a coalesced packet (EINVAL),
  // that kind of GRO (TCP or UDP) is turned off for the device and the run is written
  // packet by packet. Packets the kernel refuses (EINVAL: not IPv4/IPv6, malformed) or
  // cannot take now (ENOMEM/ENOBUFS: no memory for it; EAGAIN for longer than 100 ms)
  // are skipped and counted; the batch goes on. EINTR is retried. Returns the number of packets written.
  // Stops with io_error while the interface is down, operation_canceled after close().
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override;

  // Reading without blocking, beside read(), for a caller that polls: read_now() places
  // the packets queued now as read() does (0 when none are); wait_readable() blocks until
  // read_now() may have some, false with operation_canceled after close(). If
  // read_now()'s buffers end inside a super-packet, the rest waits for the next read of
  // either kind, and a thread in wait_readable() or read() is woken for it.
  bool wait_readable(std::error_code& ec);
  size_t read_now(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                  std::error_code& ec);
  // The same on queue `queue` (invalid_argument past queues()).
  size_t read_now(size_t queue, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                  std::error_code& ec);

  // Options::queues; queue(i) reads queue i (queue(0) is *this), writes go by flow.
  size_t queues() const override { return queues_.size(); }
  tun::Device& queue(size_t i) override;

  size_t batch_size() const override { return 128; }
  // The interface MTU, read at open and refreshed from rtnetlink events.
  int mtu() const override { return mtu_.load(std::memory_order_relaxed); }

  // Called on the event thread: first once with the current state (up or down), then
  // on every change of IFF_UP/IFF_RUNNING (up = both set), on MTU changes, and with
  // down when the interface is deleted, after which the device closes itself. The
  // handler may call close() but must not destroy the Tun.
  void set_event_handler(std::function<void(tun::Event)> handler) override;

  // Unblocks read() and blocked writes, closes the descriptor (a non-persistent
  // interface disappears) and stops the event thread. Idempotent, thread-safe.
  void close() override;

  const std::string& name() const { return name_; }
  // In the interface's current namespace (it may change when the interface moves).
  int ifindex() const { return ifindex_.load(std::memory_order_relaxed); }
  // The interface was deleted (not moved to another namespace, which the device follows:
  // its events then come from there). Set before the last down event.
  bool deleted() const { return deleted_.load(std::memory_order_acquire); }
  // The TUN descriptor (queue 0's), for handing to a child process (wg-tun's daemon
  // mode, whose child attaches the other queues itself); -1 after close().
  int fd() const { return queues_[0]->fd.load(std::memory_order_relaxed); }

  // The TUNSETOFFLOAD bits the kernel accepted (TUN_F_*, kTunFUso4/6); 0 without a
  // virtio-net header. Never changes.
  unsigned offloads() const { return offloads_; }
  // Which GRO kinds write() still uses: what Options allowed, less any the kernel refused;
  // and whether it writes checksums as trusted (Options::csum, with a virtio-net header).
  GroOptions gro() const {
    return {tcp_gro_.load(std::memory_order_relaxed), udp_gro_.load(std::memory_order_relaxed), csum_trusted_};
  }

  struct Counters {
    uint64_t read_dropped = 0;     // bad virtio-net header or GSO packet, longer than the buffer
    uint64_t read_split = 0;       // super-packets split into segments
    uint64_t write_rejected = 0;   // refused by the kernel (EINVAL, ENOMEM, ENOBUFS) or timed out on EAGAIN
    uint64_t write_coalesced = 0;  // coalesced packets the kernel took
  };
  Counters counters() const;

private:
  // One receive queue: its descriptor and read state (read() and read_now() may run on
  // different threads, under read_mu): the super-packet still being split into calls.
  struct Queue {
    std::atomic<int> fd{-1};  // goes to -1 only under io_mu_'s unique lock
    int kick_fd = -1;  // eventfd: read_now() left segments behind for a waiting reader; -1 if none could be made
    std::mutex read_mu;
    std::unique_ptr<uint8_t[]> scratch;  // kMaxPacket + 1 spill byte
    GsoPacket pending;
    size_t pending_next = 0;  // next segment; == pending.segments when none
    bool drained = false;     // the last read() found the queue empty: poll first next time
  };
  class QueueDevice;  // queue(i) for i >= 1
  friend class QueueDevice;

  struct LinkState {
    bool up = false;
    int mtu = 0;
  };

  // Flags and MTU of interface `ifindex` in the namespace of the rtnetlink socket nl_fd;
  // ec = no_such_device once it is gone.
  static bool query_link(int nl_fd, int ifindex, LinkState& st, std::error_code& ec);
  // from_fd's work; link_fd < 0: a link socket of the caller's namespace.
  static std::unique_ptr<Tun> adopt(int fd, int link_fd, const Options& opts, std::error_code& ec);
  // Takes the descriptors in `fds` (one per queue) and link_fd (if >= 0) on success only.
  static std::unique_ptr<Tun> open_events(std::vector<wg::UniqueFd>& fds, std::string name, bool vnet_hdr,
                                          unsigned offloads, const Options& opts, int link_fd, std::error_code& ec);

  // tun::Device's reading, on queue q.
  size_t read_on(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                 std::error_code& ec);
  bool wait_readable_on(Queue& q, std::error_code& ec);
  size_t read_now_on(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                     std::error_code& ec);
  // Reads until `want` packets or the queue is empty (drained); under q.read_mu.
  size_t read_queued(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                     size_t want, std::error_code& ec);
  // One read() from the device into bufs (a plain packet) or the scratch buffer (a
  // super-packet, then split); 0 = nothing queued (EAGAIN), -1 = dropped packet,
  // otherwise the number of packets. Device gone or closed: sets ec.
  long read_one(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                std::error_code& ec);
  // More segments of the super-packet in q.scratch; -1 when it had to be dropped.
  long split_pending(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset);

  enum class Sent { ok, refused, dropped, failed };  // refused = EINVAL; failed sets ec
  // Writes one packet (plain or coalesced, `iov` from its virtio-net header on) on the
  // queue of its flow (flow_queue of `packet`, its IP header on).
  Sent send(std::span<const uint8_t> packet, const iovec* iov, int count, std::error_code& ec);
  // One packet behind plain_header()'s virtio-net header in its headroom.
  bool write_one(std::span<uint8_t> buf, size_t offset, std::error_code& ec);
  // Plans each chunk with Gro and sends its writes; false once ec is set.
  bool write_coalesced(std::span<const std::span<uint8_t>> bufs, size_t offset, GroOptions opts,
                       size_t& written, std::error_code& ec);
  // Waits for `events` on q's descriptor (for POLLIN, or a kick: segments left behind by
  // read_now); false once closing (ec set) or timed out.
  bool wait(Queue& q, short events, int timeout_ms, std::error_code& ec);

  // The event thread: rtnetlink link messages for ifindex_.
  void run_events();
  void handle_netlink(const uint8_t* msg, size_t len);
  // After lost messages (ENOBUFS): read the state with ioctls and report what changed.
  void resync();
  void apply(const LinkState& st);
  // Our interface left the namespace of nl_fd_ (RTM_DELLINK, or gone on resync): follow
  // it to its new namespace, or report the deletion and close.
  void link_gone();
  // Re-opens nl_fd_ in the interface's current namespace and reports its state there
  // (without CAP_SYS_ADMIN: reports it down, and waits in this namespace for its return);
  // false when the interface was deleted.
  bool follow_move();
  void emit(tun::Event e);
  // close() minus joining the event thread (which may be the caller).
  void shutdown();

  // Never change after construction (queue descriptors only go to -1 under io_mu_'s
  // unique lock).
  const std::string name_;
  std::atomic<int> ifindex_;  // in the interface's current namespace; set by the event thread
  const bool vnet_hdr_;
  const unsigned offloads_;
  const bool csum_trusted_;
  // The rtnetlink socket in the interface's namespace: replaced by the event thread when the
  // interface moves to another one, closed by the destructor.
  int nl_fd_;
  const int close_fd_, wake_fd_;  // close_fd_ is an eventfd that stays readable once closed
  std::vector<std::unique_ptr<Queue>> queues_;               // never resized
  std::vector<std::unique_ptr<QueueDevice>> queue_devices_;  // queue(1)...

  // read()/write() hold it shared while they use a queue's descriptor; shutdown() takes
  // it exclusively to close them once they have left.
  std::shared_mutex io_mu_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> deleted_{false};
  std::atomic<int> mtu_{0};
  std::atomic<bool> tcp_gro_, udp_gro_;  // only ever go from true to false
  ssize_t (*const readv_)(int, const iovec*, int);
  ssize_t (*const writev_)(int, const iovec*, int);
  std::atomic<uint64_t> read_dropped_{0}, read_split_{0}, write_rejected_{0}, write_coalesced_{0};

  // The largest packet a read can bring.
  static constexpr size_t kMaxPacket = 65536 + 64;
  static constexpr size_t kPlainSlack = 256;  // read_one: bytes past the MTU read into the caller's buffer

  std::mutex handler_mu_;
  std::function<void(tun::Event)> handler_;
  std::atomic<bool> report_pending_{false};

  // Event-thread state.
  bool up_ = false;

  std::mutex join_mu_;
  std::thread events_;
};

}  // namespace tunlinux

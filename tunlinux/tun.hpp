// tunlinux::Tun: the kernel TUN device (/dev/net/tun) behind tun::Device, opened with a
// virtio-net header in front of every packet so TSO/USO split and GRO can be added
// without a second code path, plus an rtnetlink thread that reports up/down/MTU events.
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

#include "tun/device.hpp"

namespace tunlinux {

// Bytes of the virtio-net header (struct virtio_net_hdr) the kernel puts in front of
// each packet on an IFF_VNET_HDR device; we keep the kernel's default size.
inline constexpr size_t kVirtioNetHdrLen = 10;

// From <linux/virtio_net.h>, which does not compile as C++ (a field named `class`).
inline constexpr uint8_t kVirtioNetHdrFNeedsCsum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
inline constexpr uint8_t kVirtioNetHdrGsoNone = 0;     // VIRTIO_NET_HDR_GSO_NONE

// A struct virtio_net_hdr as read from the device, fields in host order.
struct VirtioNetHdr {
  uint8_t flags = 0;
  uint8_t gso_type = 0;
  uint16_t hdr_len = 0;
  uint16_t gso_size = 0;
  uint16_t csum_start = 0;
  uint16_t csum_offset = 0;
};

// Turns one packet read behind `hdr` into a plain IP packet, in place: rejects GSO
// packets (no offload is negotiated yet) and completes a checksum the kernel left
// partial (VIRTIO_NET_HDR_F_NEEDS_CSUM). Returns false when the packet must be dropped.
bool finish_read(const VirtioNetHdr& hdr, std::span<uint8_t> packet);

class Tun final : public tun::Device {
  // Only create() and from_fd() can name it (explicit: `{}` does not make one).
  struct Private {
    explicit Private() = default;
  };

public:
  // Creates (or attaches to a free, persistent) TUN interface `name` ("" lets the
  // kernel pick tunN) with IFF_TUN | IFF_NO_PI | IFF_VNET_HDR and no offloads, sets its
  // MTU (0 keeps the kernel default) and starts the event thread. The descriptor is
  // non-blocking and close-on-exec. Errors: operation_not_permitted without
  // CAP_NET_ADMIN (permission_denied where /dev/net/tun is closed to the caller),
  // device_or_resource_busy when the name belongs to a device that is
  // not a free TUN, invalid_argument for a name of IFNAMSIZ bytes or more.
  static std::unique_ptr<Tun> create(const std::string& name, int mtu, std::error_code& ec);

  // Adopts an attached TUN descriptor (WG_TUN_FD from a parent process). Its flags are
  // kept: IFF_TUN and IFF_NO_PI are required, IFF_VNET_HDR is used when present (its
  // header size reset to 10 bytes and its offloads to none). On success the Tun owns `fd`; on failure the caller
  // still does.
  static std::unique_ptr<Tun> from_fd(int fd, std::error_code& ec);

  Tun(Private, int fd, std::string name, int ifindex, bool vnet_hdr, int nl_fd, int close_fd,
      int wake_fd);
  ~Tun() override;
  Tun(const Tun&) = delete;
  Tun& operator=(const Tun&) = delete;

  // read(): `offset` may be any value; each buffer holds offset + mtu() bytes at least
  // (a longer packet is dropped and counted, never truncated). Blocks until a packet
  // arrives, then returns every packet already queued, up to bufs.size(). Returns 0 with
  // operation_canceled after close() or once the interface is deleted.
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override;

  // write(): with a virtio-net header (every device create() makes) `offset` must be at
  // least kVirtioNetHdrLen: the header is written into the 10 bytes just before each
  // packet so header and packet leave in one write(). Packets the kernel refuses
  // (EINVAL: not IPv4/IPv6, malformed) are skipped and counted; the batch goes on.
  // Stops with io_error while the interface is down, operation_canceled after close().
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override;

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
  int ifindex() const { return ifindex_; }
  // The TUN descriptor, for handing to a child process (wg-tun's daemon mode); -1
  // after close().
  int fd() const { return fd_.load(std::memory_order_relaxed); }

  struct Counters {
    uint64_t read_dropped = 0;    // bad virtio-net header, GSO, or longer than the buffer
    uint64_t write_rejected = 0;  // refused by the kernel (EINVAL) or timed out on EAGAIN
  };
  Counters counters() const;

private:
  struct LinkState {
    bool up = false;
    int mtu = 0;
  };

  // Flags and MTU of interface `ifindex`; ec = no_such_device once it is gone.
  static bool query_link(int ifindex, LinkState& st, std::error_code& ec);
  static std::unique_ptr<Tun> open_events(int fd, std::string name, bool vnet_hdr, std::error_code& ec);

  // One packet into buf at offset; 0 = nothing queued (EAGAIN), -1 = dropped packet,
  // otherwise its length. Device gone or closed: sets ec.
  long read_one(std::span<uint8_t> buf, size_t offset, std::error_code& ec);
  bool write_one(std::span<uint8_t> buf, size_t offset, std::error_code& ec);
  // Waits for `events` on the TUN descriptor; false once closing (ec set) or timed out.
  bool wait(short events, int timeout_ms, std::error_code& ec);

  // The event thread: rtnetlink link messages for ifindex_.
  void run_events();
  void handle_netlink(const uint8_t* msg, size_t len);
  // After lost messages (ENOBUFS): read the state with ioctls and report what changed.
  void resync();
  void apply(const LinkState& st);
  void emit(tun::Event e);
  // close() minus joining the event thread (which may be the caller).
  void shutdown();

  // Never change after construction (fd_ only goes to -1 under io_mu_'s unique lock).
  const std::string name_;
  const int ifindex_;
  const bool vnet_hdr_;
  const int nl_fd_, close_fd_, wake_fd_;  // close_fd_ is an eventfd that stays readable once closed
  std::atomic<int> fd_;

  // read()/write() hold it shared while they use fd_; shutdown() takes it exclusively to
  // close fd_ once they have left.
  std::shared_mutex io_mu_;
  std::atomic<bool> closed_{false};
  std::atomic<int> mtu_{0};
  std::atomic<uint64_t> read_dropped_{0}, write_rejected_{0};

  std::mutex handler_mu_;
  std::function<void(tun::Event)> handler_;
  std::atomic<bool> report_pending_{false};

  // Event-thread state.
  bool up_ = false;

  std::mutex join_mu_;
  std::thread events_;
};

}  // namespace tunlinux

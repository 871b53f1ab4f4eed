// LinuxBind: batched UDP over an IPv4 and an IPv6 socket on one port, with sticky
// source addresses, UDP GSO on send and UDP GRO on receive.
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

// Fills ep's sticky source and gso_size (0 if absent) from one datagram's control data.
// Never reads outside [control, control + len), whatever the input.
void parse_control(const uint8_t* control, size_t len, Endpoint& ep, uint16_t& gso_size);

class LinuxBind final : public Bind {
public:
  static constexpr size_t kBatchSize = 128;
  // Limits of one UDP_SEGMENT message (older kernels allow 64 segments).
  static constexpr size_t kMaxGsoSegments = 64;
  static constexpr size_t kMaxGsoBytes4 = 65535 - 20 - 8;
  static constexpr size_t kMaxGsoBytes6 = 65535 - 8;
  // With GRO, buffers this large receive in place; smaller ones go through a scratch.
  static constexpr size_t kGroBufferSize = 65535;

  // Each offload is used only if the kernel accepts it at open().
  struct Options {
    // Send equal-size runs as one UDP_SEGMENT message.
    bool gso = true;
    // Receive with UDP_GRO.
    bool gro = true;
    // Per family, each with a ReceiveFn. Above 1, an SO_REUSEPORT group spreading
    // peers by hash; open() takes the port without it first, to join no other group.
    size_t sockets = 1;
    // Test seam: replaces ::sendmmsg.
    int (*sendmmsg)(int fd, ::mmsghdr* msgs, unsigned n, int flags) = nullptr;
  };
  // Every offload on. Reads no environment.
  LinuxBind();
  explicit LinuxBind(Options options);
  ~LinuxBind() override;  // close()s
  LinuxBind(const LinuxBind&) = delete;
  LinuxBind& operator=(const LinuxBind&) = delete;

  // A family the kernel lacks is skipped. ReceiveFns, IPv4's first, are for one thread
  // each, not after destruction; GRO datagrams past a batch wait for the next receive.
  std::vector<ReceiveFn> open(uint16_t port, uint16_t& actual_port, std::error_code& ec) override;
  // Wakes blocked receives and sends, waits for them to leave, closes the sockets.
  // This open's ReceiveFns then return 0 with errc::operation_canceled, even after a
  // later open(). Idempotent.
  void close() override;
  // Thread-safe. A sticky source the kernel refuses is cleared from ep. A refused GSO
  // message is resent unsegmented; EIO turns GSO off until open(). Waits up to 1 s for
  // buffer space. An oversized datagram is skipped and reported, the rest still go.
  // errc::not_connected when closed.
  void send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) override;
  // SO_MARK (needs CAP_NET_ADMIN); kept for later open()s.
  void set_mark(uint32_t mark, std::error_code& ec) override;
  size_t batch_size() const override { return kBatchSize; }
  // Reports ICMP destination or port unreachable with the datagram's destination.
  void set_unreachable(UnreachableFn fn) override;
  // 0 when closed.
  size_t receivers() const;

  // Whether sends use UDP_SEGMENT now.
  bool gso_enabled() const { return gso_.load(std::memory_order_relaxed); }
  // Whether receives use UDP_GRO.
  bool gro_enabled() const { return gro_.load(std::memory_order_relaxed); }

private:
  struct Socket;
  struct Sockets;

  void read_errors(Socket& s);
  size_t receive(Socket& s, uint64_t generation, std::span<const std::span<uint8_t>> bufs,
                 std::span<uint8_t*> at, std::span<size_t> sizes, std::span<Endpoint> eps,
                 std::error_code& ec);
  // Registers a user of sockets_ (false if closed or `generation` is stale, unless 0);
  // close() waits for leave().
  bool enter(uint64_t generation);
  void leave();

  const Options options_;  // never changes
  UnreachableFn unreachable_;  // changes only while closed
  // Set by open(); a send's EIO clears gso_.
  std::atomic<bool> gso_{false};
  std::atomic<bool> gro_{false};

  // Serializes open(), close(), set_mark(); guards mark_. sockets_ changes only under
  // it with no user registered, so registered users read it unlocked.
  mutable std::mutex lifecycle_mu_;
  std::unique_ptr<Sockets> sockets_;
  uint32_t mark_ = 0;

  // Guards the fields below.
  std::mutex mu_;
  std::condition_variable idle_cv_;
  bool open_ = false;
  uint64_t generation_ = 0;  // bumped by open()
  unsigned users_ = 0;
};

}  // namespace conn

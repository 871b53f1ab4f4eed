// tun::Device: the packet device under the WireGuard core, after wireguard-go's: batched
// reads and writes with `offset` bytes of headroom so the core encrypts in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <system_error>

namespace tun {

enum class Event { up, down, mtu_changed };

class Device {
public:
  virtual ~Device() = default;

  // Blocks for a packet, then returns n: packet i at bufs[i].data() + offset, sizes[i]
  // long. Buffers hold offset + mtu() (offset + 65535 with offloads). After close():
  // 0 with errc::operation_canceled. One thread at a time.
  virtual size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                      size_t offset, std::error_code& ec) = 0;

  // Packet i is bufs[i].subspan(offset); the device may write into bufs. Returns the
  // number written; rejected packets are dropped and counted. Thread-safe.
  virtual size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset,
                       std::error_code& ec) = 0;

  // queue(i) reads only receive queue i (in order; queues not among themselves); all
  // else acts on the whole device. queue(0) is the device; each lives as long.
  virtual size_t queues() const { return 1; }
  virtual Device& queue(size_t i) {
    (void)i;
    return *this;
  }

  virtual size_t batch_size() const = 0;
  virtual int mtu() const = 0;
  // Called on the device's thread; set before use.
  virtual void set_event_handler(std::function<void(Event)> handler) = 0;
  // Unblocks read() and releases the device. Idempotent.
  virtual void close() = 0;
};

// Moves packets from q into a read's buffers (cutting any too long), calling taken(p)
// before each leaves q. The caller holds q's lock.
template <class Queue, class Taken>
size_t read_from_queue(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                       Taken&& taken) {
  size_t n = 0;
  for (; n < bufs.size() && !q.empty(); ++n) {
    auto& p = q.front();
    const size_t len = std::min(p.size(), bufs[n].size() - offset);
    std::memcpy(bufs[n].data() + offset, p.data(), len);
    sizes[n] = len;
    taken(p);
    q.pop_front();
  }
  return n;
}

}  // namespace tun

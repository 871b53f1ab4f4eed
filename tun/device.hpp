// tun::Device: the packet device under the WireGuard core (kernel TUN or lwIP netstack).
// Shaped after wireguard-go's tun.Device: batched reads and writes with `offset` bytes of
// headroom in front of each packet so the core can encrypt in place.
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

  // Blocks until at least one packet is available, then fills up to bufs.size() packets:
  // packet i is written at bufs[i].data() + offset, its length stored in sizes[i].
  // Every buffer must be at least offset + mtu() bytes (offset + 65535 for devices with
  // offloads). Returns the number of packets. After close(): returns 0 with
  // errc::operation_canceled. Called from one thread at a time.
  virtual size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                      size_t offset, std::error_code& ec) = 0;

  // Writes a batch of packets; packet i is bufs[i].subspan(offset). The device may
  // modify the bytes in bufs (coalescing writes headers into the headroom). Returns the
  // number written; packets the device rejects are dropped and counted by it.
  // Thread-safe.
  virtual size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset,
                       std::error_code& ec) = 0;

  // Devices with several receive queues (the kernel TUN opened with IFF_MULTI_QUEUE,
  // where the kernel spreads what it sends over the queues by flow): queue(i), for
  // i < queues(), is a Device that reads only what waits on queue i, so a core runs one
  // reader per queue; each queue keeps its packets in order, queues do not among
  // themselves. Writes, batch size, MTU, events and close() are the whole device's,
  // through whichever queue they come. queue(0) is the device itself; it lives as long.
  virtual size_t queues() const { return 1; }
  virtual Device& queue(size_t i) {
    (void)i;
    return *this;
  }

  // Largest batch read() returns and write() takes at once.
  virtual size_t batch_size() const = 0;
  virtual int mtu() const = 0;
  // Called from the device's own thread on up/down/MTU events; set before use.
  virtual void set_event_handler(std::function<void(Event)> handler) = 0;
  // Unblocks read() and releases the device. Idempotent.
  virtual void close() = 0;
};

// For devices that queue whole packets (the in-memory device, the netstack): moves up to
// bufs.size() packets from the front of `q` into a read's buffers as Device::read
// places them (a packet longer than its buffer is cut), calling `taken(packet)` on each
// before it leaves the queue. Returns how many. The caller holds q's lock.
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

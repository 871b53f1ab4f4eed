// In-memory Bind for tests: binds on one MemoryNetwork exchange datagrams by port. Full
// receive queues drop, like UDP.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bind/bind.hpp"

namespace conn {

class MemoryBind;

class MemoryNetwork {
public:
  // False if no bind (*nobody set) or its queue is full.
  bool deliver(uint16_t from_port, uint16_t to_port, std::span<const uint8_t> data, bool* nobody = nullptr);
  // False drops the datagram. Called under the network's lock: must not send.
  using Filter = std::function<bool(uint16_t from_port, uint16_t to_port, std::span<const uint8_t> data)>;
  void set_filter(Filter f);

private:
  friend class MemoryBind;
  std::mutex mu_;
  std::map<uint16_t, MemoryBind*> binds_;
  Filter filter_;
  uint16_t next_port_ = 40000;
};

class MemoryBind final : public Bind {
public:
  explicit MemoryBind(MemoryNetwork& net, size_t queue_limit = 1 << 16)
      : net_(net), limit_(queue_limit) {}
  ~MemoryBind() override { close(); }

  std::vector<ReceiveFn> open(uint16_t port, uint16_t& actual_port, std::error_code& ec) override;
  void close() override;
  void send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) override;
  void set_mark(uint32_t mark, std::error_code& ec) override { mark_ = mark; ec.clear(); }
  size_t batch_size() const override { return 128; }
  // Reports datagrams to unbound ports as refused, as LinuxBind does.
  void set_unreachable(UnreachableFn fn) override {
    std::lock_guard lock(mu_);
    unreachable_ = std::move(fn);
  }

  // Up to n datagrams per buffer, as with UDP GRO.
  void set_pack(size_t n) {
    std::lock_guard lock(mu_);
    pack_ = std::max<size_t>(n, 1);
  }
  uint16_t port() const { return port_; }
  uint32_t mark() const { return mark_; }
  uint64_t dropped() const;
  static Endpoint endpoint_for(uint16_t port);

private:
  friend class MemoryNetwork;
  bool push(uint16_t from_port, std::span<const uint8_t> data);
  size_t receive(std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at, std::span<size_t> sizes,
                 std::span<Endpoint> eps, std::error_code& ec);

  MemoryNetwork& net_;
  const size_t limit_;
  uint32_t mark_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Datagram {
    uint16_t from;
    std::vector<uint8_t> data;
  };
  std::deque<Datagram> queue_;
  UnreachableFn unreachable_;
  std::deque<uint16_t> refused_;
  bool open_ = false;
  uint16_t port_ = 0;
  uint64_t dropped_ = 0;
  size_t pack_ = 1;
};

}  // namespace conn

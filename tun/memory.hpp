// In-memory tun::Device for tests. Both queues are bounded: inject() blocks when full,
// so nothing is lost.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "tun/device.hpp"

namespace tun {

class MemoryDevice final : public Device {
public:
  explicit MemoryDevice(int mtu = 1420, size_t queue_limit = 4096) : mtu_(mtu), limit_(queue_limit) {}
  ~MemoryDevice() override { close(); }

  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override;
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override;
  size_t batch_size() const override { return 128; }
  int mtu() const override { return mtu_; }
  void set_event_handler(std::function<void(Event)> handler) override;
  void close() override;

  // Test side. inject() returns false once closed.
  bool inject(std::vector<uint8_t> packet);
  // A zero timeout returns at once.
  std::optional<std::vector<uint8_t>> take(std::chrono::milliseconds timeout);

private:
  const int mtu_;
  const size_t limit_;
  std::mutex mu_;
  std::condition_variable in_cv_, out_cv_;
  std::deque<std::vector<uint8_t>> inbound_, outbound_;
  std::function<void(Event)> handler_;
  bool closed_ = false;
};

}  // namespace tun

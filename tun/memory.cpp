// In-memory tun::Device: two bounded queues and condition variables.
#include "tun/memory.hpp"

#include <algorithm>
#include <cstring>

namespace tun {

size_t MemoryDevice::read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                          size_t offset, std::error_code& ec) {
  std::unique_lock lock(mu_);
  in_cv_.wait(lock, [&] { return closed_ || !inbound_.empty(); });
  if (closed_) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  const size_t n = read_from_queue(inbound_, bufs, sizes, offset, [](auto&) {});
  lock.unlock();
  in_cv_.notify_all();  // wake injectors waiting for room
  ec.clear();
  return n;
}

size_t MemoryDevice::write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) {
  std::unique_lock lock(mu_);
  if (closed_) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  for (auto& b : bufs) outbound_.emplace_back(b.begin() + static_cast<std::ptrdiff_t>(offset), b.end());
  lock.unlock();
  out_cv_.notify_all();
  ec.clear();
  return bufs.size();
}

void MemoryDevice::set_event_handler(std::function<void(Event)> handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

void MemoryDevice::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  in_cv_.notify_all();
  out_cv_.notify_all();
}

bool MemoryDevice::inject(std::vector<uint8_t> packet) {
  std::unique_lock lock(mu_);
  in_cv_.wait(lock, [&] { return closed_ || inbound_.size() < limit_; });
  if (closed_) return false;
  inbound_.push_back(std::move(packet));
  lock.unlock();
  in_cv_.notify_all();
  return true;
}

std::optional<std::vector<uint8_t>> MemoryDevice::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  // A zero timeout only looks: a condition wait whose deadline has passed still makes a
  // futex call that puts the thread to sleep once (the receive fuzzer polls after every
  // batch and lost about a millisecond per input to it).
  if (outbound_.empty() &&
      (timeout <= timeout.zero() || !out_cv_.wait_for(lock, timeout, [&] { return !outbound_.empty(); })))
    return std::nullopt;
  auto p = std::move(outbound_.front());
  outbound_.pop_front();
  return p;
}

}  // namespace tun

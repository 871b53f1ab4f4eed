// The data path's buffer pool.
#include "wg/buffer_pool.hpp"

namespace wg {

size_t BufferPool::take_locked(uint8_t** out, size_t n) {
  size_t got = 0;
  while (got < n && !free_.empty()) {
    out[got++] = free_.back();
    free_.pop_back();
  }
  while (got < n && storage_.size() < limit_) {
    storage_.push_back(std::make_unique_for_overwrite<uint8_t[]>(kHeader + kBufferSize));
    uint8_t* raw = storage_.back().get();
    new (raw) std::atomic<uint32_t>(1);
    out[got++] = raw + kHeader;
  }
  return got;
}

BufferPool::~BufferPool() {
  for (auto& raw : storage_) std::launder(reinterpret_cast<std::atomic<uint32_t>*>(raw.get()))->~atomic();
}

size_t BufferPool::take(uint8_t** out, size_t n, const std::atomic<bool>* stop) {
  std::unique_lock lock(mu_);
  auto stopped = [&] { return closed_ || (stop && stop->load(std::memory_order_relaxed)); };
  cv_.wait(lock, [&] { return stopped() || !free_.empty() || storage_.size() < limit_; });
  if (stopped()) return 0;
  return take_locked(out, n);
}

size_t BufferPool::try_take(uint8_t** out, size_t n) {
  std::lock_guard lock(mu_);
  return take_locked(out, n);
}

void BufferPool::give(uint8_t* const* bufs, size_t n) {
  if (n == 0) return;
  {
    std::lock_guard lock(mu_);
    free_.insert(free_.end(), bufs, bufs + n);
  }
  cv_.notify_all();
}

void BufferPool::add_limit(std::ptrdiff_t n) {
  {
    std::lock_guard lock(mu_);
    limit_ = static_cast<size_t>(static_cast<std::ptrdiff_t>(limit_) + n);
  }
  cv_.notify_all();
}

void BufferPool::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

void BufferPool::wake() {
  { std::lock_guard lock(mu_); }  // a taker now either sees stop or is asleep
  cv_.notify_all();
}

size_t BufferPool::limit() const {
  std::lock_guard lock(mu_);
  return limit_;
}

size_t BufferPool::allocated() const {
  std::lock_guard lock(mu_);
  return storage_.size();
}

size_t BufferPool::idle() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

}  // namespace wg

// The data path's buffer pool.
#include "wg/buffer_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace wg {

size_t BufferPool::take_locked(uint8_t** out, size_t n) {
  size_t got = 0;
  while (got < n && !free_.empty()) {
    out[got++] = free_.back();
    free_.pop_back();
  }
  low_water_ = std::min(low_water_, free_.size());
  while (got < n && storage_.size() < limit_) {
    void* map = ::mmap(nullptr, kMapSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
      if (got == 0) throw std::bad_alloc();
      break;
    }
    auto* raw = static_cast<uint8_t*>(map);
    storage_.push_back(raw);
    new (raw) std::atomic<uint32_t>(1);
    out[got++] = raw + kHeader;
  }
  return got;
}

BufferPool::~BufferPool() {
  for (uint8_t* raw : storage_) {
    std::launder(reinterpret_cast<std::atomic<uint32_t>*>(raw))->~atomic();
    ::munmap(raw, kMapSize);
  }
}

size_t BufferPool::trim(std::chrono::steady_clock::time_point now, size_t keep,
                        std::chrono::steady_clock::duration interval) {
  std::lock_guard lock(mu_);
  if (now < next_trim_) return 0;
  next_trim_ = now + interval;
  const size_t spare = free_.size() > keep ? free_.size() - keep : 0;
  const size_t n = std::min(low_water_, spare);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* raw = free_[i] - kHeader;
    std::launder(reinterpret_cast<std::atomic<uint32_t>*>(raw))->~atomic();
    ::munmap(raw, kMapSize);
    *std::find(storage_.begin(), storage_.end(), raw) = storage_.back();
    storage_.pop_back();
  }
  free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
  low_water_ = free_.size();
  return n;
}

bool BufferPool::hold(uint8_t** bufs, size_t& have, size_t want, const std::atomic<bool>* stop) {
  if (have > want) {
    give(bufs + want, have - want);
    have = want;
  }
  while (have < want) {
    const size_t got = take(bufs + have, want - have, stop);
    if (got == 0) return false;
    have += got;
  }
  return true;
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

// The data path's packet buffers: a bounded pool, allocated lazily up to its limit and
// then reused. Taking blocks when the pool is exhausted, which is how the pipeline pushes
// back on its readers; no allocation once warmed up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "wg/messages.hpp"

namespace wg {

inline constexpr size_t kBufferSize = 65536 + 64;
// Headroom for the transport header in front of plaintext; tailroom for padding and tag.
inline constexpr size_t kHeadroom = kTransportHeaderSize;
inline constexpr size_t kTailroom = 32;

// Each buffer carries a share count, for a received buffer whose datagrams travel in
// several batch entries (zero-copy receive, conn::ReceiveFn): the receiver shares it
// among them before handing any on, and the entry that drops the last share returns it.
// Outside a sharing (in the pool, or held whole by one owner) a buffer's count is 1.
class BufferPool {
public:
  explicit BufferPool(size_t limit) : limit_(limit) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  // Takes up to n buffers, at least one: blocks while none is available, unless closed
  // (then returns 0) or, with `stop`, once *stop is true and wake() was called after it
  // was set (then returns 0 as well).
  size_t take(uint8_t** out, size_t n, const std::atomic<bool>* stop = nullptr);
  // Takes up to n without blocking.
  size_t try_take(uint8_t** out, size_t n);
  void give(uint8_t* const* bufs, size_t n);
  void give(uint8_t* buf) { give(&buf, 1); }
  // Sets the shares of buf, held whole by the caller, to n >= 1, before any holder of
  // one can drop it (handing the holders on publishes it).
  static void share(uint8_t* buf, uint32_t n) { shares(buf).store(n, std::memory_order_relaxed); }
  // Drops one share of buf; true when it was the last, and buf is the caller's to give
  // (its count back at 1).
  static bool drop(uint8_t* buf) {
    auto& s = shares(buf);
    if (s.load(std::memory_order_acquire) == 1) return true;  // not shared, or the others dropped theirs
    if (s.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    s.store(1, std::memory_order_relaxed);
    return true;
  }
  // Raises (or, negative, lowers) the number of buffers the pool may allocate. Lowered
  // below what it has allocated, it allocates no more (none are freed) until raised again.
  void add_limit(std::ptrdiff_t n);
  void close();
  // Wakes every take() so that it looks at its `stop` again.
  void wake();
  size_t allocated() const;
  size_t limit() const;
  size_t idle() const;  // in the pool now; allocated() when every buffer is back

private:
  // The share count sits in a header of its own cache line in front of the bytes.
  static constexpr size_t kHeader = 64;
  static std::atomic<uint32_t>& shares(uint8_t* buf) {
    return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(buf - kHeader));
  }
  size_t take_locked(uint8_t** out, size_t n);
  size_t limit_;  // under mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<uint8_t[]>> storage_;
  std::vector<uint8_t*> free_;
  bool closed_ = false;
};

}  // namespace wg

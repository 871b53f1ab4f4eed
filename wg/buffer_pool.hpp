// Packet buffers, allocated lazily up to a limit and reused. take() blocks when all are
// in use: the pipeline's back-pressure on its readers. Buffers idle through a whole trim
// interval go back to the kernel (each is its own mapping), so a burst's peak does not
// stay resident.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "wg/messages.hpp"

namespace wg {

inline constexpr size_t kBufferSize = 65536 + 64;
// Room for the transport header before plaintext, and for padding and tag after.
inline constexpr size_t kHeadroom = kTransportHeaderSize;
inline constexpr size_t kTailroom = 32;

// A buffer's share count lets several batch entries hold one received buffer; the last
// to drop its share returns it. Unshared, the count is 1.
class BufferPool {
public:
  explicit BufferPool(size_t limit) : limit_(limit) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  // Takes 1 to n buffers, blocking while none is free. Returns 0 once closed, or once
  // *stop is set and wake() called.
  size_t take(uint8_t** out, size_t n, const std::atomic<bool>* stop = nullptr);
  // Never blocks.
  size_t try_take(uint8_t** out, size_t n);
  void give(uint8_t* const* bufs, size_t n);
  void give(uint8_t* buf) { give(&buf, 1); }
  // buf is held whole by the caller and no share is handed on yet; n >= 1.
  static void share(uint8_t* buf, uint32_t n) { shares(buf).store(n, std::memory_order_relaxed); }
  // True when it was the last share: buf (count back at 1) is the caller's to give.
  static bool drop(uint8_t* buf) {
    auto& s = shares(buf);
    if (s.load(std::memory_order_acquire) == 1) return true;  // the others dropped theirs
    if (s.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    s.store(1, std::memory_order_relaxed);
    return true;
  }
  // Frees the buffers that stayed idle since the last trim, keeping `keep` idle ones;
  // does nothing before `interval` has passed since then. Returns how many it freed.
  size_t trim(std::chrono::steady_clock::time_point now, size_t keep,
              std::chrono::steady_clock::duration interval = std::chrono::seconds(10));
  // Changes the allocation limit by n. Lowering it frees nothing.
  void add_limit(std::ptrdiff_t n);
  void close();
  // Makes every take() check its `stop`.
  void wake();
  size_t allocated() const;
  size_t limit() const;
  size_t idle() const;  // in the pool now

private:
  // The share count sits in its own cache line before the bytes.
  static constexpr size_t kHeader = 64;
  static constexpr size_t kMapSize = kHeader + kBufferSize;
  static std::atomic<uint32_t>& shares(uint8_t* buf) {
    return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(buf - kHeader));
  }
  size_t take_locked(uint8_t** out, size_t n);
  size_t limit_;  // under mu_ with all below
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> storage_;  // every mapping
  std::vector<uint8_t*> free_;     // coldest first
  size_t low_water_ = 0;           // fewest in free_ since the last trim
  std::chrono::steady_clock::time_point next_trim_{};
  bool closed_ = false;
};

}  // namespace wg

// Packet buffers, allocated lazily up to a limit. take() blocks when all are in use:
// the pipeline's back-pressure. trim() returns idle ones to the kernel.
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
// Before plaintext, and for padding and tag after.
inline constexpr size_t kHeadroom = kTransportHeaderSize;
inline constexpr size_t kTailroom = 32;

// Several batch entries may share one buffer (count 1: unshared); the last to drop it
// gives it back.
class BufferPool {
public:
  explicit BufferPool(size_t limit) : limit_(limit) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  // Takes 1 to n, blocking while none is free. 0 once closed, or *stop set and wake().
  size_t take(uint8_t** out, size_t n, const std::atomic<bool>* stop = nullptr);
  // Never blocks.
  size_t try_take(uint8_t** out, size_t n);
  // Makes the `have` buffers a reader holds at bufs `want`: the surplus given back, the
  // rest taken as take() does. False (with `have` what it got) once take() returns 0.
  bool hold(uint8_t** bufs, size_t& have, size_t want, const std::atomic<bool>* stop = nullptr);
  void give(uint8_t* const* bufs, size_t n);
  void give(uint8_t* buf) { give(&buf, 1); }
  // Before any share is handed on; n >= 1.
  static void share(uint8_t* buf, uint32_t n) { shares(buf).store(n, std::memory_order_relaxed); }
  // True for the last share: the caller gives buf back.
  static bool drop(uint8_t* buf) {
    auto& s = shares(buf);
    if (s.load(std::memory_order_acquire) == 1) return true;  // the others dropped theirs
    if (s.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    s.store(1, std::memory_order_relaxed);
    return true;
  }
  // Frees buffers idle since the last trim, at most once per `interval`, keeping `keep`.
  size_t trim(std::chrono::steady_clock::time_point now, size_t keep,
              std::chrono::steady_clock::duration interval = std::chrono::seconds(10));
  // Lowering frees nothing.
  void add_limit(std::ptrdiff_t n);
  void close();
  void wake();
  size_t allocated() const;
  size_t limit() const;
  size_t idle() const;

private:
  // The share count's own cache line.
  static constexpr size_t kHeader = 64;
  static constexpr size_t kMapSize = kHeader + kBufferSize;
  static std::atomic<uint32_t>& shares(uint8_t* buf) {
    return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(buf - kHeader));
  }
  size_t take_locked(uint8_t** out, size_t n);
  size_t limit_;  // under mu_ with all below
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> storage_;
  std::vector<uint8_t*> free_;     // coldest first
  size_t low_water_ = 0;           // since the last trim
  std::chrono::steady_clock::time_point next_trim_{};
  bool closed_ = false;
};

}  // namespace wg

// Bounded pools for the data path: packet buffers (allocated lazily up to a limit, then
// reused) and batches. Taking blocks when the pool is exhausted, which is how the
// pipeline pushes back on its readers; no allocation once warmed up.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "bind/bind.hpp"
#include "wg/keypair.hpp"
#include "wg/messages.hpp"

namespace wg {

inline constexpr size_t kMaxBatch = 128;
inline constexpr size_t kBufferSize = 65536 + 64;
// Headroom for the transport header in front of plaintext; tailroom for padding and tag.
inline constexpr size_t kHeadroom = kTransportHeaderSize;
inline constexpr size_t kTailroom = 32;

class BufferPool {
public:
  explicit BufferPool(size_t limit) : limit_(limit) {}
  // Takes n buffers (blocks while fewer are available, unless closed: then returns 0).
  size_t take(uint8_t** out, size_t n);
  // Takes up to n without blocking.
  size_t try_take(uint8_t** out, size_t n);
  void give(uint8_t* const* bufs, size_t n);
  void give(uint8_t* buf) { give(&buf, 1); }
  void close();
  size_t allocated() const;

private:
  size_t take_locked(uint8_t** out, size_t n);
  const size_t limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<uint8_t[]>> storage_;
  std::vector<uint8_t*> free_;
  bool closed_ = false;
};

class Peer;

// A batch of packets of one peer under one keypair, moving through encryption or
// decryption and then the peer's in-order queue.
struct Batch {
  enum class Kind { outbound, inbound } kind = Kind::outbound;
  std::shared_ptr<Peer> peer;
  KeypairPtr keypair;
  size_t count = 0;
  bool done = false;  // guarded by the peer's queue mutex
  std::array<uint8_t*, kMaxBatch> bufs{};
  std::array<size_t, kMaxBatch> sizes{};      // datagram or plaintext size (see send/receive)
  std::array<uint64_t, kMaxBatch> counters{};
  std::array<bool, kMaxBatch> ok{};
  std::array<conn::Endpoint, kMaxBatch> sources{};  // inbound: where each came from

  void reset() {
    peer.reset();
    keypair.reset();
    count = 0;
    done = false;
  }
};

class BatchPool {
public:
  Batch* take();
  void give(Batch* b);

private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Batch>> storage_;
  std::vector<Batch*> free_;
};

}  // namespace wg

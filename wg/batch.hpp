// A batch: up to kMaxBatch packets of one peer under one keypair on their way through
// the AEAD and the peer's in-order queue; and the pool batches are reused from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "bind/bind.hpp"
#include "wg/keypair.hpp"

namespace wg {

inline constexpr size_t kMaxBatch = 128;

class Peer;

// A batch of packets of one peer under one keypair, moving through encryption or
// decryption and then the peer's in-order queue.
struct Batch {
  enum class Kind { outbound, inbound } kind = Kind::outbound;
  std::shared_ptr<Peer> peer;
  KeypairPtr keypair;
  size_t count = 0;
  bool done = false;  // guarded by the peer's queue mutex
  std::array<uint8_t*, kMaxBatch> bufs{};     // outbound: a pool buffer; inbound: the datagram
  std::array<uint8_t*, kMaxBatch> owners{};   // inbound: the pool buffer holding it (one share)
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

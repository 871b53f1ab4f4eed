// Batches of packets and their pool.
#pragma once

#include <algorithm>
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

// How many buffers a reader holds for its next read: twice as many (up to its batch)
// after a read that filled all it held; kMin again after kWindow reads in a row of at
// most kMin / 2 packets each. A reader waiting after a burst so pins a few buffers, not
// a batch of 64 KiB ones, while a busy one whose reads come up short keeps its batch.
class ReadDepth {
public:
  static constexpr size_t kMin = 8;
  static constexpr unsigned kWindow = 16;
  explicit ReadDepth(size_t batch) : max_(batch), want_(std::min(batch, kMin)) {}
  size_t want() const { return want_; }
  void used(size_t n, size_t held) {
    if (n >= held) want_ = std::min(want_ * 2, max_);
    if (n > kMin / 2) {
      sparse_ = 0;
    } else if (++sparse_ == kWindow) {
      want_ = std::min(kMin, max_);
      sparse_ = 0;
    }
  }

private:
  size_t max_, want_;
  unsigned sparse_ = 0;  // reads in a row of at most kMin / 2 packets
};

class Peer;

// Packets of one peer under one keypair, through the AEAD, then the peer's in-order queue.
struct Batch {
  // control: one message in bufs[0], to `peer`'s endpoint or else sources[0].
  enum class Kind { outbound, inbound, control } kind = Kind::outbound;
  std::shared_ptr<Peer> peer;
  KeypairPtr keypair;
  size_t count = 0;
  bool done = false;  // guarded by Peer::queue_mu_
  std::array<uint8_t*, kMaxBatch> bufs{};     // outbound: a pool buffer; inbound: the datagram
  std::array<uint8_t*, kMaxBatch> owners{};   // inbound: its pool buffer (one share)
  std::array<size_t, kMaxBatch> sizes{};      // datagram or plaintext size
  std::array<uint64_t, kMaxBatch> counters{};
  std::array<bool, kMaxBatch> ok{};
  std::array<conn::Endpoint, kMaxBatch> sources{};  // inbound

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

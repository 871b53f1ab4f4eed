// Batches of packets and their pool.
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

// Packets of one peer under one keypair, through the AEAD, then the peer's in-order queue.
struct Batch {
  // control: one handshake message or cookie reply in bufs[0], to `peer`'s endpoint or,
  // without a peer, to sources[0]; sent by a worker for the timer and handshake threads.
  enum class Kind { outbound, inbound, control } kind = Kind::outbound;
  std::shared_ptr<Peer> peer;
  KeypairPtr keypair;
  size_t count = 0;
  bool done = false;  // guarded by Peer::queue_mu_
  std::array<uint8_t*, kMaxBatch> bufs{};     // outbound: a pool buffer; inbound: the datagram
  std::array<uint8_t*, kMaxBatch> owners{};   // inbound: the pool buffer holding it (one share)
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

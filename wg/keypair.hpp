// A session's transport keys and counters, plus the key-age rules of the paper
// (rekey after 120 s / 2^60 messages, reject after 180 s / 2^64-2^13-1 messages).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "wg/crypto.hpp"
#include "wg/messages.hpp"
#include "wg/noise.hpp"
#include "wg/replay.hpp"
#include "wg/transport_aead.hpp"

namespace wg {

class Peer;

// A handshake's session keys and indices (noise::SessionKeys, never changed after
// creation) with what the data path keeps of the session.
struct Keypair : noise::SessionKeys {
  TimePoint created{};
  Peer* peer = nullptr;

  // Next send counter; taken by the send path in order.
  std::atomic<uint64_t> send_nonce{0};
  // Guarded by the peer's receive sequencing (one flush at a time).
  ReplayFilter replay;

  // The keys leave the AEAD's per-thread caches with it (the members wipe themselves).
  ~Keypair() {
    transport::forget(send.data());
    transport::forget(receive.data());
  }
};

using KeypairPtr = std::shared_ptr<Keypair>;

// May this keypair encrypt another message?
inline bool keypair_can_send(const Keypair& kp, uint64_t nonce, TimePoint now) {
  return nonce < kRejectAfterMessages && now - kp.created < kRejectAfterTime;
}

// May this keypair still decrypt (before the replay check)?
inline bool keypair_can_receive(const Keypair& kp, TimePoint now) {
  return now - kp.created < kRejectAfterTime;
}

// After sending with `nonce`: should we start a new handshake?
inline bool rekey_due_on_send(const Keypair& kp, uint64_t nonce, TimePoint now) {
  return nonce > kRekeyAfterMessages || (kp.initiator && now - kp.created > kRekeyAfterTime);
}

// After receiving: the initiator renews shortly before the responder would reject.
inline bool rekey_due_on_receive(const Keypair& kp, TimePoint now) {
  return kp.initiator && now - kp.created > kRejectAfterTime - kKeepaliveTimeout - kRekeyTimeout;
}

}  // namespace wg

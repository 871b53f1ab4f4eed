// A session's transport keys and counters, and the paper's key-age rules.
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

// The SessionKeys never change after creation.
struct Keypair : noise::SessionKeys {
  TimePoint created{};
  Peer* peer = nullptr;

  // Next send counter.
  std::atomic<uint64_t> send_nonce{0};
  // Only the peer's in-order receive path, one flush at a time, uses it.
  ReplayFilter replay;

  // Also wipes the keys from the AEAD's per-thread caches.
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

// May it still decrypt? Before the replay check.
inline bool keypair_can_receive(const Keypair& kp, TimePoint now) {
  return now - kp.created < kRejectAfterTime;
}

// After sending with `nonce`: is a new handshake due?
inline bool rekey_due_on_send(const Keypair& kp, uint64_t nonce, TimePoint now) {
  return nonce > kRekeyAfterMessages || (kp.initiator && now - kp.created > kRekeyAfterTime);
}

// After receiving: the initiator renews shortly before the responder would reject.
inline bool rekey_due_on_receive(const Keypair& kp, TimePoint now) {
  return kp.initiator && now - kp.created > kRejectAfterTime - kKeepaliveTimeout - kRekeyTimeout;
}

}  // namespace wg

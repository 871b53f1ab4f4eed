// A peer's state changes; the pipeline calling them is in device, send and receive.cpp.
#include "wg/peer.hpp"

#include <chrono>

namespace wg {
namespace {

int64_t ns_since_epoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Peer::Peer(const PublicKey& remote_static, PeerShared shared) : shared_(shared) {
  handshake_.remote_static = remote_static;
  cookies_.init(remote_static);
}

bool Peer::has_session_keys() const {
  std::lock_guard lock(keypairs_mu_);
  return previous_ || current_ || next_;
}

// --- sessions ---

void Peer::install_keypair(KeypairPtr kp) {
  shared_.indices.set_keypair(kp->local_index, kp);
  KeypairPtr drop1, drop2;
  {
    std::lock_guard lock(keypairs_mu_);
    if (kp->initiator) {
      if (next_) {
        // An unconfirmed responder session loses; it becomes the fallback.
        drop1 = std::move(current_);
        previous_.swap(next_);
        drop2 = std::move(next_);
      } else {
        drop1 = std::move(previous_);
        previous_ = std::move(current_);
      }
      current_ = std::move(kp);
    } else {
      drop1 = std::move(next_);
      drop2 = std::move(previous_);
      next_ = std::move(kp);
    }
  }
  for (auto* d : {&drop1, &drop2})
    if (*d) shared_.indices.remove((*d)->local_index);
}

bool Peer::confirm_session(const Keypair& kp) {
  KeypairPtr old;
  {
    std::lock_guard lock(keypairs_mu_);
    if (next_.get() != &kp) return false;
    old = std::move(previous_);
    previous_ = std::move(current_);
    current_ = std::move(next_);
  }
  if (old) shared_.indices.remove(old->local_index);
  return true;
}

KeypairPtr Peer::current_keypair() const {
  std::lock_guard lock(keypairs_mu_);
  return current_;
}

void Peer::expire_keypairs() {
  std::lock_guard lock(keypairs_mu_);
  for (auto* kp : {&current_, &next_})
    if (*kp) (*kp)->send_nonce.store(kRejectAfterMessages);
}

void Peer::expire_current_keypairs() {
  {
    std::lock_guard hl(handshake_mu_);
    if (handshake_.local_index) shared_.indices.remove(handshake_.local_index);
    handshake_.clear();
    last_sent_handshake_.reset();  // REKEY_TIMEOUT must not hold back the next initiation
  }
  expire_keypairs();
}

void Peer::zero_keys() {
  {
    std::lock_guard lock(keypairs_mu_);
    for (auto* kp : {&previous_, &current_, &next_}) {
      if (*kp) shared_.indices.remove((*kp)->local_index);
      kp->reset();
    }
  }
  std::lock_guard hl(handshake_mu_);
  if (handshake_.local_index) shared_.indices.remove(handshake_.local_index);
  handshake_.clear();
}

void Peer::record_handshake(std::chrono::system_clock::time_point at) {
  stats_.last_handshake_ns.store(ns_since_epoch(at));
  stats_.unanswered_since_ns.store(0);
}

void Peer::record_initiation(std::chrono::system_clock::time_point at) {
  int64_t none = 0;
  stats_.unanswered_since_ns.compare_exchange_strong(none, ns_since_epoch(at));
}

// --- staging ---

void Peer::stage(uint8_t* const* bufs, const size_t* sizes, size_t n, bool waits) {
  std::lock_guard lock(send_mu_);
  if (removed_) {  // raced with removal, which has emptied the queue or will
    shared_.buffers.give(bufs, n);
    return;
  }
  auto& staging = shared_.staging;
  if (!waits) {
    staging.total.fetch_add(n, std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) staged_.push_back({bufs[i], sizes[i]});
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    // Bounded per peer and in all, so silent peers cannot hold the pool's buffers and
    // stall the reader for everyone.
    const bool over_all = staging.total.load(std::memory_order_relaxed) >= staging.limit &&
                          staged_.size() >= kMinStagedPackets;
    if (staged_.size() >= kMaxStagedPackets || over_all) {
      shared_.buffers.give(staged_.front().buf);
      staged_.pop_front();
      staging.dropped.fetch_add(1, std::memory_order_relaxed);
    } else {
      staging.total.fetch_add(1, std::memory_order_relaxed);
    }
    staged_.push_back({bufs[i], sizes[i]});
  }
}

void Peer::stage_keepalive() {
  std::lock_guard lock(send_mu_);
  if (!staged_.empty() || removed_) return;
  uint8_t* buf;
  if (shared_.buffers.try_take(&buf, 1) == 1) {
    staged_.push_back({buf, 0});
    shared_.staging.total.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Peer::has_staged() {
  std::lock_guard lock(send_mu_);
  return !staged_.empty();
}

void Peer::clear_staged() {
  std::lock_guard lock(send_mu_);
  for (auto& s : staged_) shared_.buffers.give(s.buf);
  shared_.staging.total.fetch_sub(staged_.size(), std::memory_order_relaxed);
  staged_.clear();
}

}  // namespace wg

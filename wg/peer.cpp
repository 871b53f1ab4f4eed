// A peer's state changes; the pipeline calling them is in device, send and receive.cpp.
#include "wg/peer.hpp"

#include <chrono>

#include "wg/crypto.hpp"

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

// --- handshake ---

PresharedKey Peer::preshared_key() const {
  std::lock_guard lock(handshake_mu_);
  return handshake_.preshared_key;
}

bool Peer::set_preshared_key(PeerAccess access, const PresharedKey& psk) {
  {
    std::lock_guard lock(handshake_mu_);
    if (handshake_.preshared_key == psk) return false;
    handshake_.preshared_key = psk;
  }
  expire_current_keypairs(access);
  return true;
}

void Peer::invalidate_static_static(PeerAccess) {
  std::lock_guard lock(handshake_mu_);
  handshake_.invalidate_keys();
}

SymmetricKey Peer::static_static(PeerAccess, const noise::Identity& local) {
  std::lock_guard lock(handshake_mu_);
  return handshake_.static_static(local);
}

bool Peer::create_initiation(PeerAccess, const noise::Identity& local, TimePoint now,
                             const noise::Tai64n& timestamp, MessageInitiation& out) {
  {
    std::lock_guard lock(handshake_mu_);
    if (last_sent_handshake_ && now - *last_sent_handshake_ < initiation_gap_) return false;
    last_sent_handshake_ = now;
    initiation_gap_ = kRekeyTimeout;
    if (handshake_.local_index) shared_.indices.remove(handshake_.local_index);
    const uint32_t idx = shared_.indices.new_index(shared_from_this());
    if (!noise::create_initiation(handshake_, local, crypto::generate_private_key(), timestamp, idx, out)) {
      shared_.indices.remove(idx);
      handshake_.clear();
      return false;
    }
  }
  cookies_.add_macs(std::span(reinterpret_cast<uint8_t*>(&out), sizeof out), now);
  return true;
}

std::optional<TimePoint> Peer::last_initiation(PeerAccess) const {
  std::lock_guard lock(handshake_mu_);
  return last_sent_handshake_;
}

void Peer::allow_initiation_after(PeerAccess, TimePoint sent, Clock::duration gap) {
  std::lock_guard lock(handshake_mu_);
  if (last_sent_handshake_ == sent) initiation_gap_ = gap;
}

Peer::Answer Peer::answer_initiation(PeerAccess, const noise::ConsumedInitiation& in, TimePoint now,
                                     MessageResponse& out, noise::SessionKeys& keys) {
  {
    std::lock_guard lock(handshake_mu_);
    if (noise::accept_initiation(handshake_, in, now) != noise::AcceptResult::accepted) return Answer::refused;
    if (handshake_.local_index) shared_.indices.remove(handshake_.local_index);
    const uint32_t idx = shared_.indices.new_index(shared_from_this());
    if (!noise::create_response(handshake_, crypto::generate_private_key(), idx, out)) {
      shared_.indices.remove(idx);
      handshake_.clear();
      return Answer::failed;
    }
    auto derived = noise::derive_session(handshake_);
    if (!derived) return Answer::failed;
    keys = *derived;
  }
  cookies_.add_macs(std::span(reinterpret_cast<uint8_t*>(&out), sizeof out), now);
  return Answer::answered;
}

std::optional<noise::SessionKeys> Peer::consume_response(PeerAccess, const noise::Identity& local,
                                                         const MessageResponse& msg) {
  std::lock_guard lock(handshake_mu_);
  if (!noise::consume_response(handshake_, local, msg)) return std::nullopt;
  return noise::derive_session(handshake_);
}

bool Peer::consume_cookie_reply(PeerAccess, const MessageCookieReply& msg, TimePoint now) {
  return cookies_.consume_reply(msg, now);
}

// --- sessions ---

void Peer::install_keypair(PeerAccess, KeypairPtr kp) {
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

bool Peer::confirm_session(PeerAccess, const Keypair& kp) {
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

KeypairPtr Peer::current_keypair(PeerAccess) const {
  std::lock_guard lock(keypairs_mu_);
  return current_;
}

void Peer::expire_keypairs(PeerAccess) {
  std::lock_guard lock(keypairs_mu_);
  for (auto* kp : {&current_, &next_})
    if (*kp) (*kp)->send_nonce.store(kRejectAfterMessages);
}

void Peer::expire_current_keypairs(PeerAccess access) {
  {
    std::lock_guard hl(handshake_mu_);
    if (handshake_.local_index) shared_.indices.remove(handshake_.local_index);
    handshake_.clear();
    last_sent_handshake_.reset();  // REKEY_TIMEOUT must not hold back the next initiation
  }
  expire_keypairs(access);
}

void Peer::zero_keys(PeerAccess) {
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

void Peer::forget_secrets(PeerAccess) {
  std::lock_guard lock(handshake_mu_);
  handshake_.preshared_key.clear();
  handshake_.invalidate_keys();
}

void Peer::record_handshake(PeerAccess, std::chrono::system_clock::time_point at) {
  stats_.last_handshake_ns.store(ns_since_epoch(at));
  stats_.unanswered_since_ns.store(0);
}

void Peer::record_initiation(PeerAccess, std::chrono::system_clock::time_point at) {
  int64_t none = 0;
  stats_.unanswered_since_ns.compare_exchange_strong(none, ns_since_epoch(at));
}

// --- endpoint ---

void Peer::clear_endpoint_source(PeerAccess) {
  std::lock_guard lock(endpoint_mu_);
  if (endpoint_) endpoint_->clear_source();
}

void Peer::endpoint_source_failed(PeerAccess, const conn::Endpoint& sent) {
  std::lock_guard lock(endpoint_mu_);
  if (endpoint_ && endpoint_->same_destination(sent)) endpoint_->clear_source();
}

// --- timers ---

uint16_t Peer::persistent_keepalive() const {
  std::lock_guard lock(timers_mu_);
  return static_cast<uint16_t>(timers_.persistent_keepalive().count());
}

std::pair<TimerActions, std::optional<TimePoint>> Peer::run_timers(PeerAccess, TimePoint now) {
  std::lock_guard lock(timers_mu_);
  const TimerActions a = timers_.tick(now);
  std::optional<TimePoint> next = timers_.next_deadline();
  if (!next || removed_) {
    timer_listed_ = false;
    next.reset();
  }
  return {a, next};
}

// --- staging ---

void Peer::stage(PeerAccess, uint8_t* const* bufs, const size_t* sizes, size_t n, bool waits) {
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

void Peer::stage_keepalive(PeerAccess) {
  std::lock_guard lock(send_mu_);
  if (!staged_.empty() || removed_) return;
  uint8_t* buf;
  if (shared_.buffers.try_take(&buf, 1) == 1) {
    staged_.push_back({buf, 0});
    shared_.staging.total.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Peer::has_staged(PeerAccess) {
  std::lock_guard lock(send_mu_);
  return !staged_.empty();
}

void Peer::clear_staged(PeerAccess) {
  std::lock_guard lock(send_mu_);
  for (auto& s : staged_) shared_.buffers.give(s.buf);
  shared_.staging.total.fetch_sub(staged_.size(), std::memory_order_relaxed);
  staged_.clear();
}

}  // namespace wg

// A peer's handshake, sessions, endpoint, timers, staged packets and in-order queues,
// each behind a lock of its own. The Device drives it; programs read the getters.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "bind/bind.hpp"
#include "wg/cookie.hpp"
#include "wg/index_table.hpp"
#include "wg/keypair.hpp"
#include "wg/noise.hpp"
#include "wg/batch.hpp"
#include "wg/buffer_pool.hpp"
#include "wg/timers.hpp"

namespace wg {

inline constexpr size_t kMaxStagedPackets = 256;
inline constexpr size_t kMinStagedPackets = 16;  // per peer, even past the device's budget

struct PeerStats {
  std::atomic<uint64_t> tx_bytes{0};
  std::atomic<uint64_t> rx_bytes{0};
  // Wall-clock ns since the epoch; 0 = never.
  std::atomic<int64_t> last_handshake_ns{0};
  // Wall-clock ns of the first initiation since the last handshake; 0 = none.
  std::atomic<int64_t> unanswered_since_ns{0};
};

// Packets waiting for a session across a device's peers, and their bound.
struct StagingBudget {
  StagingBudget(size_t limit, std::atomic<uint64_t>& dropped) : limit(limit), dropped(dropped) {}
  const size_t limit;
  std::atomic<size_t> total{0};
  std::atomic<uint64_t>& dropped;  // DeviceStats::dropped_staged
};

// Shared by a device's peers.
struct PeerShared {
  IndexTable& indices;
  BufferPool& buffers;    // staged packets' buffers
  StagingBudget& staging;
};

class Peer : public std::enable_shared_from_this<Peer> {
public:
  Peer(const PublicKey& remote_static, PeerShared shared);
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  const PublicKey& public_key() const { return handshake_.remote_static; }

  // Safe from any thread.
  const PeerStats& stats() const { return stats_; }
  std::optional<conn::Endpoint> endpoint() const {
    std::lock_guard lock(endpoint_mu_);
    return endpoint_;
  }
  bool removed() const { return removed_.load(); }
  PresharedKey preshared_key() const;
  // Seconds; 0: off.
  uint16_t persistent_keepalive() const;
  // False before the first handshake and once zeroed.
  bool has_session_keys() const;

  // The Device drives the methods below; each takes the one lock of the state it moves.

  // --- handshake (handshake_mu_) ---
  // A new preshared key expires the sessions derived with the old one (the next packet
  // handshakes). False if it is the key already set: `wg setconf` repeats it.
  bool set_preshared_key(const PresharedKey& psk);
  // Our static key changed: the kept static-static secret is recomputed at its next use.
  void invalidate_static_static();
  // The static-static secret with `local`, for consuming an initiation from this peer.
  SymmetricKey static_static(const noise::Identity& local);
  // Initiator: a new initiation in `out` with its macs, under a fresh index. False (and
  // nothing sent) within REKEY_TIMEOUT of the last one (or the gap a refusal allowed)
  // or when the handshake fails.
  bool create_initiation(const noise::Identity& local, TimePoint now, const noise::Tai64n& timestamp,
                         MessageInitiation& out);
  std::optional<TimePoint> last_initiation() const;
  // The initiation sent at `sent` was refused: the next may go `gap` after it, if it is
  // still the last one.
  void allow_initiation_after(TimePoint sent, Clock::duration gap);
  // Responder: accepts `in` (refused: a replay or too soon) and writes the response with
  // its macs to `out` under a fresh index and the session's keys to `keys`.
  enum class Answer { answered, refused, failed };
  Answer answer_initiation(const noise::ConsumedInitiation& in, TimePoint now, MessageResponse& out,
                           noise::SessionKeys& keys);
  // Initiator: the session's keys, if `msg` answers our initiation.
  std::optional<noise::SessionKeys> consume_response(const noise::Identity& local, const MessageResponse& msg);
  // A cookie reply to our last message: true if it was valid and its cookie kept.
  bool consume_cookie_reply(const MessageCookieReply& msg, TimePoint now);

  // --- sessions (keypairs_mu_; dropping a keypair frees its index) ---
  // The initiator sends under a new session at once; the responder keeps it as `next`
  // until the initiator's first packet confirms it.
  void install_keypair(KeypairPtr kp);
  // Makes `kp` current if it is the unconfirmed next; true if it did.
  bool confirm_session(const Keypair& kp);
  KeypairPtr current_keypair() const;
  // Current and next stop sending but still decrypt packets in flight.
  void expire_keypairs();
  // After a key change, as the kernel's wg_noise_expire_current_peer_keypairs: the next
  // packet starts a handshake at once.
  void expire_current_keypairs();
  // Wipes every session and the handshake (REJECT_AFTER_TIME * 3, removal, give-up).
  void zero_keys();
  // A removed peer's secrets besides its sessions: the preshared key and the cached
  // static-static DH.
  void forget_secrets();
  void record_handshake(std::chrono::system_clock::time_point at);
  // Starts the unanswered_since_ns clock if it is not running.
  void record_initiation(std::chrono::system_clock::time_point at);

  // --- endpoint (endpoint_mu_) ---
  // Stores `ep` (null: none); `moved(before, after)` runs first under the same lock, so
  // that whoever counts endpoints sees every change once and in order.
  template <class Moved>
  void set_endpoint(const conn::Endpoint* ep, Moved&& moved) {
    std::lock_guard lock(endpoint_mu_);
    moved(endpoint_ ? &*endpoint_ : nullptr, ep);
    if (ep) endpoint_ = *ep;
    else endpoint_.reset();
  }
  // The sticky source address is forgotten; the next send picks one.
  void clear_endpoint_source();
  // The Bind found the source of `sent` invalid: clears it if the endpoint is still that.
  void endpoint_source_failed(const conn::Endpoint& sent);

  // --- counters and removal ---
  void count_sent(uint64_t bytes) { stats_.tx_bytes.fetch_add(bytes, std::memory_order_relaxed); }
  // Release: whoever reads the count sees the packet's effects (a test on a moved clock).
  void count_received(uint64_t bytes) { stats_.rx_bytes.fetch_add(bytes, std::memory_order_release); }
  void mark_removed() { removed_ = true; }

  // --- staging (send_mu_) ---
  // Appends n packets, taking their buffers. Only if `waits` (no session may take them
  // now) are they bounded: a full queue drops its oldest, and past the device's budget a
  // peer keeps kMinStagedPackets; so live peers never lose bursts to silent ones.
  void stage(uint8_t* const* bufs, const size_t* sizes, size_t n, bool waits);
  // Stages a keepalive if nothing is staged and a buffer is free.
  void stage_keepalive();
  void clear_staged();
  bool has_staged();
  // Moves staged packets into batches with kp's next nonces and queues each on the
  // outbound queue, in nonce order, under send_mu_; emit(Batch*) runs after the lock is
  // released (sealing and sending never hold it). Stops when nonces run out.
  struct Cut {
    bool nonces_exhausted = false;
    bool any = false;
    uint64_t last_nonce = 0;
  };
  template <class Emit>
  Cut cut_staged(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit);

  // --- in-order queues (queue_mu_) ---
  // A batch joins its direction's queue before its crypto starts.
  void queue_inbound(Batch* b) { queue(inbound_, b); }
  // Marks `done` finished and passes the queue's finished head batches to f in order,
  // without queue_mu_, unless another thread is already draining it.
  template <class F>
  void drain_outbound(Batch* done, F&& f) {
    drain_in_order(outbound_, flushing_out_, done, f);
  }
  template <class F>
  void drain_inbound(Batch* done, F&& f) {
    drain_in_order(inbound_, flushing_in_, done, f);
  }

  // --- timers (timers_mu_) ---
  template <class F>
  auto with_timers(F&& f) {
    std::lock_guard lock(timers_mu_);
    return f(timers_);
  }
  // Marks the peer as on its device's timer list; true if it was not (the caller lists it).
  bool list_for_timers() { return !timer_listed_.exchange(true); }
  bool listed_for_timers() const { return timer_listed_.load(); }
  // The timer thread's scan: what the timers due at `now` ask for, and the next deadline
  // while the peer stays listed; without one it is unlisted (whoever arms next lists it).
  std::pair<TimerActions, std::optional<TimePoint>> run_timers(TimePoint now);

private:
  friend struct PeerKeysAccess;  // tests of key zeroing

  // Up to N batches of cut_staged; send_mu_ held.
  template <size_t N>
  size_t cut_locked(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, std::array<Batch*, N>& out,
                    Cut& cut);
  void queue(std::deque<Batch*>& q, Batch* b) {
    std::lock_guard lock(queue_mu_);
    q.push_back(b);
  }
  template <class F>
  void drain_in_order(std::deque<Batch*>& q, bool& draining, Batch* done, F& f) {
    std::unique_lock lock(queue_mu_);
    done->done = true;
    if (draining) return;
    draining = true;
    while (!q.empty() && q.front()->done) {
      Batch* b = q.front();
      q.pop_front();
      lock.unlock();
      f(b);
      lock.lock();
    }
    draining = false;
  }

  // Lock order: send_mu_, then at most one of the others; they never nest.
  PeerShared shared_;

  // --- guarded by handshake_mu_ ---
  mutable std::mutex handshake_mu_;
  noise::Handshake handshake_;
  std::optional<TimePoint> last_sent_handshake_;
  Clock::duration initiation_gap_ = kRekeyTimeout;  // allowed after last_sent_handshake_

  // --- guarded by keypairs_mu_ ---
  mutable std::mutex keypairs_mu_;
  KeypairPtr previous_, current_, next_;

  // --- guarded by endpoint_mu_ ---
  mutable std::mutex endpoint_mu_;
  std::optional<conn::Endpoint> endpoint_;

  // --- guarded by timers_mu_ ---
  mutable std::mutex timers_mu_;
  Timers timers_;

  CookieGenerator cookies_;
  PeerStats stats_;

  // --- guarded by send_mu_: staged plaintext and nonce order ---
  std::mutex send_mu_;
  struct Staged {
    uint8_t* buf;
    size_t size;  // plaintext at buf + kHeadroom
  };
  std::deque<Staged> staged_;

  // --- in-order queues, guarded by queue_mu_ ---
  std::mutex queue_mu_;
  std::deque<Batch*> outbound_;
  std::deque<Batch*> inbound_;
  bool flushing_out_ = false;
  bool flushing_in_ = false;

  std::atomic<bool> removed_{false};
  // On the device's timer list: set after arming a timer, cleared by the timer thread
  // under timers_mu_ when nothing is armed.
  std::atomic<bool> timer_listed_{false};
};

using PeerPtr = std::shared_ptr<Peer>;

template <class Emit>
Peer::Cut Peer::cut_staged(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit) {
  Cut cut;
  std::array<Batch*, 16> cut_now;
  size_t n;
  do {
    n = 0;
    {
      std::lock_guard lock(send_mu_);
      n = cut_locked(kp, batches, batch_size, cut_now, cut);
    }
    for (size_t i = 0; i < n; ++i) emit(cut_now[i]);
  } while (n == cut_now.size());
  return cut;
}

template <size_t N>
size_t Peer::cut_locked(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, std::array<Batch*, N>& out,
                        Cut& cut) {
  size_t n = 0;
  while (n < N && !staged_.empty() && !cut.nonces_exhausted) {
    Batch* b = batches.take();
    b->kind = Batch::Kind::outbound;
    b->peer = shared_from_this();
    b->keypair = kp;
    while (b->count < batch_size && !staged_.empty()) {
      uint64_t nonce = kp->send_nonce.fetch_add(1);
      if (nonce >= kRejectAfterMessages) {
        kp->send_nonce.store(kRejectAfterMessages);
        cut.nonces_exhausted = true;
        break;
      }
      auto s = staged_.front();
      staged_.pop_front();
      shared_.staging.total.fetch_sub(1, std::memory_order_relaxed);
      b->bufs[b->count] = s.buf;
      b->sizes[b->count] = s.size;
      b->counters[b->count++] = nonce;
      cut.last_nonce = nonce;
      cut.any = true;
    }
    if (b->count == 0) {
      batches.give(b);
      break;
    }
    queue(outbound_, b);
    out[n++] = b;
  }
  return n;
}

}  // namespace wg

// Logs a peer as "peer(" and an 8-character prefix of its public key.
template <>
struct fmt::formatter<wg::Peer> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const wg::Peer& p, Context& ctx) const {
    return fmt::formatter<std::string_view>::format("peer(" + p.public_key().to_base64().substr(0, 8) + "…)", ctx);
  }
};

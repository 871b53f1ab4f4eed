// A WireGuard peer: its handshake, sessions (keypair rotation, expiry, zeroing), endpoint,
// timers, staged packets and the two in-order queues that keep its packets sequential
// while crypto runs in parallel. The Device's pipeline drives it; programs read it
// through stats(), endpoint() and removed().
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

class Device;

inline constexpr size_t kMaxStagedPackets = 256;
inline constexpr size_t kMinStagedPackets = 16;  // kept per peer even past the device's total

struct PeerStats {
  std::atomic<uint64_t> tx_bytes{0};
  std::atomic<uint64_t> rx_bytes{0};
  // Wall-clock time of the last completed handshake, in ns since the epoch (0 = never).
  std::atomic<int64_t> last_handshake_ns{0};
  // Wall-clock time of the first initiation sent since the last completed handshake, in ns
  // since the epoch (0 = none unanswered): how long the peer has not answered.
  std::atomic<int64_t> unanswered_since_ns{0};
};

// Packets staged (waiting for a session) across all peers of one device, and their bound.
struct StagingBudget {
  StagingBudget(size_t limit, std::atomic<uint64_t>& dropped) : limit(limit), dropped(dropped) {}
  const size_t limit;
  std::atomic<size_t> total{0};
  std::atomic<uint64_t>& dropped;  // waiting packets dropped for the bounds (DeviceStats::dropped_staged)
};

// What a peer shares with the other peers of its device.
struct PeerShared {
  IndexTable& indices;    // session and handshake indices
  BufferPool& buffers;    // staged packets' buffers come from here and go back here
  StagingBudget& staging;
};

class Peer : public std::enable_shared_from_this<Peer> {
public:
  Peer(const PublicKey& remote_static, PeerShared shared);
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  const PublicKey& public_key() const { return handshake_.remote_static; }

  // What programs read (wg show, metrics, health): the counters, the endpoint as it is
  // now, and whether the peer was removed from its device.
  const PeerStats& stats() const { return stats_; }
  std::optional<conn::Endpoint> endpoint() const {
    std::lock_guard lock(endpoint_mu_);
    return endpoint_;
  }
  bool removed() const { return removed_.load(); }
  // Whether it holds session keys (none before the first handshake, none once zeroed).
  bool has_session_keys() const;

private:
  // The pipeline, handshakes and timers are the Device's; the state they move is here.
  friend class Device;
  friend struct DeviceFuzzAccess;
  friend struct PeerKeysAccess;  // tests/unit/key_zeroing_test.cpp: which keys to look for

  // --- sessions (keypairs_mu_; a keypair's index is freed when it is dropped) ---
  // Installs a completed handshake's session. The initiator uses it at once (it holds the
  // responder's proof); the responder keeps it as `next` until the initiator's first
  // packet under it confirms it (confirm_session).
  void install_keypair(KeypairPtr kp);
  // If `kp` is the unconfirmed next session, it becomes current. True if it did.
  bool confirm_session(const Keypair& kp);
  KeypairPtr current_keypair() const;
  // Current and next stop sending; they still decrypt packets in flight.
  void expire_keypairs();
  // After a key change (ours or the preshared key), as the kernel's
  // wg_noise_expire_current_peer_keypairs: the handshake under way is forgotten, the
  // REKEY_TIMEOUT guard reset and the sessions expired, so the next packet handshakes.
  void expire_current_keypairs();
  // Every session and the handshake wiped (REJECT_AFTER_TIME * 3, removal, give-up).
  void zero_keys();
  // A completed handshake at wall-clock time `at`, for wg show and the health checks.
  void record_handshake(std::chrono::system_clock::time_point at);
  // An initiation sent at `at`: starts the "unanswered since" clock if it is not running.
  void record_initiation(std::chrono::system_clock::time_point at);

  // --- staging (send_mu_): packets on their way to a session, in order ---
  // Appends n packets; their buffers become the peer's. Packets that will wait (`waits`:
  // the device is down, or no session may send them now) are bounded: a full queue drops its own oldest, and
  // past the device's budget a peer keeps only kMinStagedPackets. Packets that a session
  // takes at once (send_staged, right after) are not: the budget is for waiting ones, and
  // a live peer must not lose a burst to peers that never answer. (Should the session end
  // between the two, at most the readers' batches wait unbounded, until the next stage.)
  void stage(uint8_t* const* bufs, const size_t* sizes, size_t n, bool waits);
  // An empty packet (a keepalive) if nothing is staged and a buffer is free at once.
  void stage_keepalive();
  // Gives every staged buffer back.
  void clear_staged();
  bool has_staged();
  // Takes staged packets into batches sealed under `kp`, oldest first, with kp's nonces
  // in order; each batch goes to `emit(Batch*)` under the staging lock, so batches reach
  // the in-order queue in nonce order. Stops when the nonces run out.
  struct Cut {
    bool nonces_exhausted = false;
    bool any = false;
    uint64_t last_nonce = 0;
  };
  template <class Emit>
  Cut cut_staged(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit);

  // The in-order queues: `done` has finished its crypto. Whoever finds the head of `q`
  // done hands it and every finished batch behind it to `f`, in order, without the queue
  // lock; one that finds another draining (`draining`) leaves its batch to that one.
  template <class F>
  void drain_in_order(std::deque<Batch*>& q, bool& draining, Batch* done, F&& f) {
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

  template <class F>
  auto with_timers(F&& f) {
    std::lock_guard lock(timers_mu_);
    return f(timers_);
  }

  PeerShared shared_;

  // --- guarded by handshake_mu_ ---
  std::mutex handshake_mu_;
  noise::Handshake handshake_;
  std::optional<TimePoint> last_sent_handshake_;

  // --- guarded by keypairs_mu_ ---
  mutable std::mutex keypairs_mu_;
  KeypairPtr previous_, current_, next_;

  // --- guarded by endpoint_mu_ ---
  mutable std::mutex endpoint_mu_;
  std::optional<conn::Endpoint> endpoint_;

  // --- guarded by timers_mu_ ---
  std::mutex timers_mu_;
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
  // On the device's timer list. Cleared only under timers_mu_ by the timer thread when it
  // finds nothing armed; set by whoever arms a timer, after arming it.
  std::atomic<bool> timer_listed_{false};
};

using PeerPtr = std::shared_ptr<Peer>;

template <class Emit>
Peer::Cut Peer::cut_staged(const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit) {
  Cut cut;
  std::lock_guard lock(send_mu_);
  while (!staged_.empty() && !cut.nonces_exhausted) {
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
    emit(b);
  }
  return cut;
}

}  // namespace wg

// A peer in a log line: "peer(" and a prefix of its public key (not secret; enough to tell
// peers apart), never more of it.
template <>
struct fmt::formatter<wg::Peer> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const wg::Peer& p, Context& ctx) const {
    return fmt::formatter<std::string_view>::format("peer(" + p.public_key().to_base64().substr(0, 8) + "…)", ctx);
  }
};

// A peer's protocol state, each part behind its own lock. The Device drives it;
// programs read the getters.
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
inline constexpr size_t kMinStagedPackets = 16;  // despite the device's budget

struct PeerStats {
  std::atomic<uint64_t> tx_bytes{0};
  std::atomic<uint64_t> rx_bytes{0};
  std::atomic<int64_t> last_handshake_ns{0};  // wall clock; 0 = never
  // First unanswered initiation; 0 = none.
  std::atomic<int64_t> unanswered_since_ns{0};
};

// Staged packets across a device's peers.
struct StagingBudget {
  StagingBudget(size_t limit, std::atomic<uint64_t>& dropped) : limit(limit), dropped(dropped) {}
  const size_t limit;
  std::atomic<size_t> total{0};
  std::atomic<uint64_t>& dropped;  // DeviceStats::dropped_staged
};

// Peer's pipeline methods take one. Only the library makes it, so a program holding a
// PeerPtr cannot drive a peer behind its device's back.
class PeerAccess {
  friend class Device;
  friend class TimerList;
  friend struct PeerTestAccess;  // tests
  PeerAccess() = default;
};

struct PeerShared {
  IndexTable& indices;
  BufferPool& buffers;
  StagingBudget& staging;
};

class Peer : public std::enable_shared_from_this<Peer> {
public:
  Peer(const PublicKey& remote_static, PeerShared shared);
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  const PublicKey& public_key() const { return handshake_.remote_static; }

  // Thread-safe.
  const PeerStats& stats() const { return stats_; }
  std::optional<conn::Endpoint> endpoint() const {
    std::lock_guard lock(endpoint_mu_);
    return endpoint_;
  }
  bool removed() const { return removed_.load(); }
  PresharedKey preshared_key() const;
  uint16_t persistent_keepalive() const;  // seconds; 0: off
  bool has_session_keys() const;

  // The pipeline: each takes its state's one lock.

  // --- handshake (handshake_mu_) ---
  // Expires sessions derived from the old key. False if unchanged.
  bool set_preshared_key(PeerAccess, const PresharedKey& psk);
  void invalidate_static_static(PeerAccess);  // our static key changed
  SymmetricKey static_static(PeerAccess, const noise::Identity& local);
  // False too soon after the last, or on failure.
  bool create_initiation(PeerAccess, const noise::Identity& local, TimePoint now, const noise::Tai64n& timestamp,
                         MessageInitiation& out);
  std::optional<TimePoint> last_initiation(PeerAccess) const;
  // If the refused initiation sent at `sent` is the last, the next may follow `gap` on.
  void allow_initiation_after(PeerAccess, TimePoint sent, Clock::duration gap);
  // refused: a replay or too soon.
  enum class Answer { answered, refused, failed };
  Answer answer_initiation(PeerAccess, const noise::ConsumedInitiation& in, TimePoint now, MessageResponse& out,
                           noise::SessionKeys& keys);
  std::optional<noise::SessionKeys> consume_response(PeerAccess, const noise::Identity& local,
                                                     const MessageResponse& msg);
  // True if valid.
  bool consume_cookie_reply(PeerAccess, const MessageCookieReply& msg, TimePoint now);

  // --- sessions (keypairs_mu_; dropping a keypair frees its index) ---
  // A responder's waits as `next` for the initiator's first packet.
  void install_keypair(PeerAccess, KeypairPtr kp);
  bool confirm_session(PeerAccess, const Keypair& kp);  // true if kp was next
  KeypairPtr current_keypair(PeerAccess) const;
  // Current and next stop sending; they still decrypt.
  void expire_keypairs(PeerAccess);
  // The next packet handshakes at once.
  void expire_current_keypairs(PeerAccess);
  // Wipes all sessions and the handshake.
  void zero_keys(PeerAccess);
  // A removed peer's preshared key and static-static secret.
  void forget_secrets(PeerAccess);
  void record_handshake(PeerAccess, std::chrono::system_clock::time_point at);
  // Starts unanswered_since_ns unless running.
  void record_initiation(PeerAccess, std::chrono::system_clock::time_point at);

  // --- endpoint (endpoint_mu_) ---
  // moved(before, after) runs under the lock: a counter sees each change once, in order.
  template <class Moved>
  void set_endpoint(PeerAccess, const conn::Endpoint* ep, Moved&& moved) {
    std::lock_guard lock(endpoint_mu_);
    moved(endpoint_ ? &*endpoint_ : nullptr, ep);
    if (ep) endpoint_ = *ep;
    else endpoint_.reset();
  }
  void clear_endpoint_source(PeerAccess);
  // Only if the endpoint is still `sent`.
  void endpoint_source_failed(PeerAccess, const conn::Endpoint& sent);

  // --- counters and removal ---
  void count_sent(PeerAccess, uint64_t bytes) { stats_.tx_bytes.fetch_add(bytes, std::memory_order_relaxed); }
  // Release: readers see the packet's effects.
  void count_received(PeerAccess, uint64_t bytes) { stats_.rx_bytes.fetch_add(bytes, std::memory_order_release); }
  void mark_removed(PeerAccess) { removed_ = true; }

  // --- staging (send_mu_) ---
  // Takes the buffers. If `waits`, drops the oldest past kMaxStagedPackets, or past
  // the device's budget down to kMinStagedPackets.
  void stage(PeerAccess, uint8_t* const* bufs, const size_t* sizes, size_t n, bool waits);
  // If nothing is staged and a buffer is free.
  void stage_keepalive(PeerAccess);
  void clear_staged(PeerAccess);
  bool has_staged(PeerAccess);
  // Queues batches in nonce order until nonces run out; emit(Batch*) runs without
  // send_mu_.
  struct Cut {
    bool nonces_exhausted = false;
    bool any = false;
    uint64_t last_nonce = 0;
  };
  template <class Emit>
  Cut cut_staged(PeerAccess, const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit);

  // --- in-order queues (queue_mu_) ---
  // A batch joins its queue before its crypto starts.
  void queue_inbound(PeerAccess, Batch* b) { queue(inbound_, b); }
  // Marks `done`; unless another thread drains, passes finished head batches to f unlocked.
  template <class F>
  void drain_outbound(PeerAccess, Batch* done, F&& f) {
    drain_in_order(outbound_, flushing_out_, done, f);
  }
  template <class F>
  void drain_inbound(PeerAccess, Batch* done, F&& f) {
    drain_in_order(inbound_, flushing_in_, done, f);
  }

  // --- timers (timers_mu_) ---
  template <class F>
  auto with_timers(PeerAccess, F&& f) {
    std::lock_guard lock(timers_mu_);
    return f(timers_);
  }
  // True if newly listed: the caller lists it.
  bool list_for_timers(PeerAccess) { return !timer_listed_.exchange(true); }
  bool listed_for_timers(PeerAccess) const { return timer_listed_.load(); }
  // Due timers' actions and the next deadline; none unlists the peer.
  std::pair<TimerActions, std::optional<TimePoint>> run_timers(PeerAccess, TimePoint now);

private:
  friend struct PeerKeysAccess;  // tests

  // send_mu_ held.
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
  Clock::duration initiation_gap_ = kRekeyTimeout;

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

  // --- guarded by send_mu_, which also orders nonces ---
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
  // Cleared by the timer thread under timers_mu_ when nothing is armed.
  std::atomic<bool> timer_listed_{false};
};

using PeerPtr = std::shared_ptr<Peer>;

template <class Emit>
Peer::Cut Peer::cut_staged(PeerAccess, const KeypairPtr& kp, BatchPool& batches, size_t batch_size, Emit&& emit) {
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

template <>
struct fmt::formatter<wg::Peer> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const wg::Peer& p, Context& ctx) const {
    return fmt::formatter<std::string_view>::format("peer(" + p.public_key().to_base64().substr(0, 8) + "…)", ctx);
  }
};

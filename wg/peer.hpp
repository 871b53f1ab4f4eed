// A WireGuard peer: its handshake, keypairs, endpoint, timers, staged packets and the
// two in-order queues that keep its packets sequential while crypto runs in parallel.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "bind/bind.hpp"
#include "wg/cookie.hpp"
#include "wg/keypair.hpp"
#include "wg/noise.hpp"
#include "wg/pool.hpp"
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

class Peer : public std::enable_shared_from_this<Peer> {
public:
  Peer(Device& device, const PublicKey& remote_static);

  const PublicKey& public_key() const { return handshake_.remote_static; }
  Device& device() const { return device_; }

  // What programs read (wg show, metrics, health): the counters, the endpoint as it is
  // now, and whether the peer was removed from its device.
  const PeerStats& stats() const { return stats_; }
  std::optional<conn::Endpoint> endpoint() const {
    std::lock_guard lock(endpoint_mu_);
    return endpoint_;
  }
  bool removed() const { return removed_.load(); }
  // Whether it holds session keys (none before the first handshake, none once zeroed).
  bool has_session_keys() const {
    std::lock_guard lock(keypairs_mu_);
    return previous_ || current_ || next_;
  }

private:
  // The state below is the Device's to keep (its pipeline, handshakes and timers).
  friend class Device;
  friend struct DeviceFuzzAccess;

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

  Device& device_;
};

using PeerPtr = std::shared_ptr<Peer>;

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


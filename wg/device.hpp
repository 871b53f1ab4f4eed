// wg::Device: peers, handshakes, crypto pipeline and timers between a tun::Device and
// a conn::Bind. Configuration is thread-safe while traffic flows.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bind/bind.hpp"
#include "tun/device.hpp"
#include "wg/allowed_ips.hpp"
#include "wg/handshake_admission.hpp"
#include "wg/index_table.hpp"
#include "wg/noise.hpp"
#include "wg/peer.hpp"
#include "wg/batch.hpp"
#include "wg/buffer_pool.hpp"
#include "wg/timer_list.hpp"
#include "wg/work_queue.hpp"

namespace wg {

// A TUN reader's, two receivers', one in flight.
inline constexpr size_t kMinBufferBatches = 4;

struct DeviceOptions {
  size_t workers = 0;                // 0 = one per core
  // The pipeline's back-pressure; extra reading threads add a batch each.
  size_t buffer_limit = 512;
  // 1/8 full is under load; when full, an eighth more for a valid mac2.
  size_t handshake_queue = 1024;
  // Batches this small are crypted on the reading thread. 0: auto.
  size_t inline_batch = 0;
  // Empty: Clock::now. Call clock_moved() after moving it.
  std::function<TimePoint()> clock;
  // For TAI64N and reported times. Empty: system_clock::now.
  std::function<std::chrono::system_clock::time_point()> wall_clock;
  // Waits between failing reads. Empty: a sleep ended by close.
  std::function<void(std::chrono::milliseconds wait)> error_backoff;
};

struct DeviceStats {
  std::atomic<uint64_t> dropped_no_route{0};
  std::atomic<uint64_t> dropped_invalid{0};
  std::atomic<uint64_t> dropped_decrypt{0};
  std::atomic<uint64_t> dropped_replay{0};
  std::atomic<uint64_t> dropped_source{0};        // inner source not allowed
  std::atomic<uint64_t> dropped_handshake{0};     // queue full, rate-limited or bad
  std::atomic<uint64_t> dropped_staged{0};
  std::atomic<uint64_t> handshakes_completed{0};
  std::atomic<uint64_t> cookie_replies_sent{0};
  std::atomic<uint64_t> cookie_replies_received{0};  // valid
  std::atomic<uint64_t> handshakes_computed{0};     // cost a DH
};

class Device {
public:
  Device(tun::Device& tun, conn::Bind& bind, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // --- lifecycle ---
  // Idempotent.
  std::error_code up();
  // Closes the bind, zeroes sessions, drops staged packets; peers stay. Idempotent.
  void down();
  bool is_up() const { return up_.load(); }
  // Joins every thread; the object is inert afterwards.
  void close();

  // --- configuration ---
  void set_private_key(const std::optional<PrivateKey>& key);
  std::optional<PrivateKey> private_key() const;
  // Rebinds if up; on errc::address_in_use the old port stays.
  std::error_code set_listen_port(uint16_t port);
  uint16_t listen_port() const;
  std::error_code set_fwmark(uint32_t mark);
  uint32_t fwmark() const;

  PeerPtr add_peer(const PublicKey& key);           // null for our own key
  PeerPtr lookup_peer(const PublicKey& key) const;
  void remove_peer(const PublicKey& key);
  void remove_all_peers();
  std::vector<PeerPtr> peers() const;

  void set_preshared_key(Peer& p, const PresharedKey& psk);
  void set_endpoint(Peer& p, const conn::Endpoint& ep);
  // At most one per REKEY_TIMEOUT.
  void initiate_handshake(Peer& p);
  void set_persistent_keepalive(Peer& p, uint16_t seconds);
  void add_allowed_ip(Peer& p, const IpPrefix& prefix);
  void remove_allowed_ip(Peer& p, const IpPrefix& prefix);
  void clear_allowed_ips(Peer& p);
  std::vector<IpPrefix> allowed_ips(Peer& p) const;
  bool routable(const IpAddress& a) const;

  const DeviceStats& stats() const { return stats_; }
  TimePoint now() const { return options_.clock ? options_.clock() : Clock::now(); }
  std::chrono::system_clock::time_point wall_now() const {
    return options_.wall_clock ? options_.wall_clock() : std::chrono::system_clock::now();
  }
  // Returns once the timers due now ran and their initiations reached the bind; false
  // once closing.
  bool clock_moved();
  size_t batch_size() const { return batch_; }
  const BufferPool& buffers() const { return buffers_; }

private:
  friend struct DeviceFuzzAccess;
  struct HandshakeJob {
    uint8_t data[kInitiationSize];
    size_t size;
    conn::Endpoint from;
  };

  // False when the reader must stop; else backs off. Zero `failures` after a good read.
  bool keep_reading_after(const std::error_code& ec, unsigned& failures, const char* what, bool loud);
  static constexpr std::chrono::milliseconds kErrorBackoffMax{250};
  // send.cpp
  void tun_reader(tun::Device& dev);
  // Returns k: the unrouted buffers, moved to bufs[0..k).
  size_t route_and_stage(uint8_t** bufs, const size_t* sizes, size_t n);
  void stage_packets(Peer& p, uint8_t* const* bufs, const size_t* sizes, size_t n);
  void send_staged(Peer& p);
  void send_initiation(Peer& p, bool retry);
  void endpoint_refused(const conn::Endpoint& destination);
  void send_keepalive(Peer& p);
  void encrypt_worker(Batch* b);
  void encrypt_batch(Batch& b);
  void flush_outbound(Peer& p, Batch* done);
  void send_to_peer(Peer& p, std::span<const std::span<const uint8_t>> datagrams);
  // To p's endpoint, or `to`. Control threads hand it to a worker.
  void send_message(Peer* p, const conn::Endpoint* to, std::span<const uint8_t> msg);
  void send_control(Batch* b);
  // receive.cpp
  void bind_receiver(conn::ReceiveFn receive);
  void release_inbound(Batch& b);
  void decrypt_worker(Batch* b);
  void decrypt_batch(Batch& b);
  void flush_inbound(Peer& p, Batch* done);
  void queue_handshake(const uint8_t* msg, size_t size, const conn::Endpoint& from);
  void handshake_worker();
  void handle_handshake(HandshakeJob& job, bool under_load);
  void consume_initiation_message(HandshakeJob& job);
  void consume_response_message(HandshakeJob& job);
  void consume_cookie_reply(HandshakeJob& job);
  // device.cpp
  void crypto_worker();
  void submit(Batch* b);
  void crypt(Batch* b);
  static constexpr size_t kInlineBatch = 4;
  // Keeps admission_'s known endpoints in step.
  void store_endpoint(Peer& p, const conn::Endpoint* ep);
  void install_keypair(Peer& p, const noise::SessionKeys& keys, bool initiator);
  void handshake_completed(Peer& p, const char* role);
  std::error_code open_bind_locked();
  void close_bind_locked();
  // timer_thread.cpp
  void run_timers(Peer& p, const TimerActions& a);

  // Lock order: bind_mu_, config_mu_, a peer's, then the queues', pools' and timer
  // list's, which call out under none.

  // --- set by the constructor, then only read ---
  tun::Device& tun_;
  conn::Bind& bind_;
  const DeviceOptions options_;
  const size_t batch_;
  const size_t buffer_bound_;
  const size_t inline_batch_;

  // --- atomic, or locked inside ---
  DeviceStats stats_;
  IndexTable index_table_;
  BufferPool buffers_;
  StagingBudget staging_;
  BatchPool batches_;
  WorkQueue<Batch*> jobs_{1024};
  WorkQueue<HandshakeJob> hs_jobs_;  // bounded by admission_
  HandshakeAdmission admission_;
  TimerList timer_list_;
  // By send_message; clock_moved waits for them to match.
  std::atomic<uint64_t> messages_queued_{0}, messages_sent_{0};
  // Set on the timer and handshake threads.
  static thread_local bool control_thread_;
  // Refusals later than REKEY_TIMEOUT after it are not looked up.
  std::atomic<Clock::rep> last_initiation_{std::numeric_limits<Clock::rep>::min()};
  std::atomic<bool> up_{false};
  std::atomic<bool> closing_{false};
  // Set while the bind closes: a receiver waiting for buffers gives up.
  std::atomic<bool> receivers_stop_{false};

  // --- guarded by config_mu_ (shared on the data path) ---
  mutable std::shared_mutex config_mu_;
  std::shared_ptr<const noise::Identity> identity_;  // secret memory; replaced, never changed
  std::unordered_map<PublicKey, PeerPtr, PublicKeyHash> peers_;
  AllowedIps<Peer*> allowed_ips_;
  uint16_t listen_port_ = 0;
  uint32_t fwmark_ = 0;

  // --- guarded by bind_mu_ ---
  std::mutex bind_mu_;
  std::vector<std::thread> receivers_;
  size_t receiver_buffers_ = 0;  // for receivers past two

  // --- started by the constructor, joined by close() ---
  std::vector<std::thread> tun_threads_;
  std::vector<std::thread> workers_;
  std::thread handshake_thread_;
  std::thread timer_thread_;
  std::once_flag close_once_;
};

}  // namespace wg

// wg::Device: peers, allowed IPs, handshakes, the parallel crypto pipeline and timers,
// between a tun::Device and a conn::Bind. Configuration methods are thread-safe and may
// run while traffic flows; uapi.cpp drives them for `wg`.
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

// The fewest batches a Device's pool holds: the TUN reader's, two receivers', one in flight.
inline constexpr size_t kMinBufferBatches = 4;

struct DeviceOptions {
  size_t workers = 0;                // AEAD worker threads; 0 = one per core
  // Pooled 64 KiB packet buffers, the pipeline's back-pressure. Each reading thread
  // past one TUN reader and two receivers adds a batch; at least kMinBufferBatches batches.
  size_t buffer_limit = 512;
  // Queued handshake messages. 1/8 full means under load (HandshakeLoad); when full,
  // an eighth more is taken for messages with a valid mac2.
  size_t handshake_queue = 1024;
  // Batches up to this size are sealed or opened on the reading thread, saving the
  // workers' two wake-ups. 0: every batch with at most 2 cores, else kInlineBatch.
  size_t inline_batch = 0;
  // The clock of every protocol decision (timers, ages, cookies, load). Empty: Clock::now.
  // A test that moves it calls Device::clock_moved() after each move.
  std::function<TimePoint()> clock;
  // The wall clock of TAI64N timestamps and reported handshake times. Empty:
  // system_clock::now. A test moving `clock` moves this one with it.
  std::function<std::chrono::system_clock::time_point()> wall_clock;
  // Called on a reading thread to wait between failing reads. Empty: a sleep that ends
  // when the device closes.
  std::function<void(std::chrono::milliseconds wait)> error_backoff;
};

struct DeviceStats {
  std::atomic<uint64_t> dropped_no_route{0};      // TUN packet with no peer for its destination
  std::atomic<uint64_t> dropped_invalid{0};       // malformed or unknown datagram
  std::atomic<uint64_t> dropped_decrypt{0};       // authentication failed
  std::atomic<uint64_t> dropped_replay{0};
  std::atomic<uint64_t> dropped_source{0};        // inner source not allowed for the peer
  std::atomic<uint64_t> dropped_handshake{0};     // handshake queue full, rate-limited or bad
  // Oldest staged packet dropped: past kMaxStagedPackets or the device's staging budget.
  std::atomic<uint64_t> dropped_staged{0};
  std::atomic<uint64_t> handshakes_completed{0};
  std::atomic<uint64_t> cookie_replies_sent{0};
  std::atomic<uint64_t> cookie_replies_received{0};  // valid ones, from a peer under load
  std::atomic<uint64_t> handshakes_computed{0};     // passed macs and load check: cost a DH
};

class Device {
public:
  Device(tun::Device& tun, conn::Bind& bind, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // --- lifecycle ---
  // Opens the bind on the listen port and starts receiving. Idempotent.
  std::error_code up();
  // Closes the bind, zeroes every session and handshake, drops staged packets; peers
  // and their configuration stay. Idempotent.
  void down();
  bool is_up() const { return up_.load(); }
  // Stops every thread and releases the devices; the object is inert afterwards.
  void close();

  // --- configuration ---
  void set_private_key(const std::optional<PrivateKey>& key);
  std::optional<PrivateKey> private_key() const;
  // Rebinds if up; on errc::address_in_use the device keeps its old port.
  std::error_code set_listen_port(uint16_t port);
  uint16_t listen_port() const;
  std::error_code set_fwmark(uint32_t mark);
  uint32_t fwmark() const;

  PeerPtr add_peer(const PublicKey& key);           // existing peer if present; null if it is our own key
  PeerPtr lookup_peer(const PublicKey& key) const;
  void remove_peer(const PublicKey& key);
  void remove_all_peers();
  std::vector<PeerPtr> peers() const;

  // Setters that reach the device (what the peer's getters read).
  void set_preshared_key(Peer& p, const PresharedKey& psk);
  void set_endpoint(Peer& p, const conn::Endpoint& ep);
  // Sends p a handshake initiation now (at most one per REKEY_TIMEOUT, as always).
  void initiate_handshake(Peer& p);
  void set_persistent_keepalive(Peer& p, uint16_t seconds);
  void add_allowed_ip(Peer& p, const IpPrefix& prefix);
  void remove_allowed_ip(Peer& p, const IpPrefix& prefix);
  void clear_allowed_ips(Peer& p);
  std::vector<IpPrefix> allowed_ips(Peer& p) const;
  // True if some peer's allowed IPs cover `a`.
  bool routable(const IpAddress& a) const;

  const DeviceStats& stats() const { return stats_; }
  // The device's time (DeviceOptions::clock).
  TimePoint now() const { return options_.clock ? options_.clock() : Clock::now(); }
  std::chrono::system_clock::time_point wall_now() const {
    return options_.wall_clock ? options_.wall_clock() : std::chrono::system_clock::now();
  }
  // After DeviceOptions::clock moved: returns once the timer thread ran its timers for
  // the new time and the initiations they sent are with the bind (keepalives may still be
  // in the pipeline). False once closing.
  bool clock_moved();
  size_t batch_size() const { return batch_; }
  const BufferPool& buffers() const { return buffers_; }

private:
  // The receive fuzz target runs the receive steps on its own thread.
  friend struct DeviceFuzzAccess;
  struct HandshakeJob {
    uint8_t data[kInitiationSize];
    size_t size;
    conn::Endpoint from;
  };

  // After a failed read: false when the reader must stop (its device or Bind closed, or
  // closing). Else logs the run's first failure and retries at once, then after a wait
  // doubling from 1 ms to kErrorBackoffMax. The caller zeroes `failures` after a good read.
  bool keep_reading_after(const std::error_code& ec, unsigned& failures, const char* what, bool loud);
  static constexpr std::chrono::milliseconds kErrorBackoffMax{250};
  // send.cpp
  // One per TUN queue.
  void tun_reader(tun::Device& dev);
  // Stages each packet with its peer; returns k, the unrouted buffers moved to bufs[0..k).
  size_t route_and_stage(uint8_t** bufs, const size_t* sizes, size_t n);
  void stage_packets(Peer& p, uint8_t* const* bufs, const size_t* sizes, size_t n);
  void send_staged(Peer& p);
  // A handshake initiation, at most one per REKEY_TIMEOUT; `retry`: a retransmission.
  void send_initiation(Peer& p, bool retry);
  // The Bind's report of a datagram to `destination` refused by the network.
  void endpoint_refused(const conn::Endpoint& destination);
  void send_keepalive(Peer& p);
  void encrypt_worker(Batch* b);
  void encrypt_batch(Batch& b);
  void flush_outbound(Peer& p, Batch* done);
  void send_to_peer(Peer& p, std::span<const std::span<const uint8_t>> datagrams);
  // A handshake message or cookie reply, to p's endpoint (p null: to `to`). The timer and
  // handshake threads hand it to a worker, so that no socket holds them up.
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
  void crypt(Batch* b);  // encrypt_worker or decrypt_worker by b's direction
  static constexpr size_t kInlineBatch = 4;
  // Sets p's endpoint (null: none), keeping admission_'s known endpoints in step.
  void store_endpoint(Peer& p, const conn::Endpoint* ep);
  void install_keypair(Peer& p, const noise::SessionKeys& keys, bool initiator);
  void handshake_completed(Peer& p, const char* role);
  std::error_code open_bind_locked();
  void close_bind_locked();
  // timer_thread.cpp: what p's due timers ask for.
  void run_timers(Peer& p, const TimerActions& a);

  // Lock order, outermost first: bind_mu_, config_mu_, a peer's locks (Peer's order),
  // then the locks inside the queues, pools and the timer list, which call out under none.

  // --- set by the constructor, then only read ---
  tun::Device& tun_;
  conn::Bind& bind_;
  const DeviceOptions options_;
  const size_t batch_;
  const size_t buffer_bound_;  // buffer_limit, at least kMinBufferBatches batches
  const size_t inline_batch_;  // DeviceOptions::inline_batch resolved

  // --- atomic, or locked inside ---
  DeviceStats stats_;
  IndexTable index_table_;
  BufferPool buffers_;
  StagingBudget staging_;  // packets staged across all peers
  BatchPool batches_;
  WorkQueue<Batch*> jobs_{1024};     // batches for the crypto workers
  WorkQueue<HandshakeJob> hs_jobs_;  // bounded by admission_
  HandshakeAdmission admission_;
  TimerList timer_list_;
  // Messages handed to workers by send_message, and those sent (clock_moved waits).
  std::atomic<uint64_t> messages_queued_{0}, messages_sent_{0};
  // Set on the timer and handshake threads: they hand sealing and sending to workers.
  static thread_local bool control_thread_;
  // When any peer last sent an initiation: refusals later than REKEY_TIMEOUT after it
  // concern no handshake, and are not looked up.
  std::atomic<Clock::rep> last_initiation_{std::numeric_limits<Clock::rep>::min()};
  std::atomic<bool> up_{false};
  std::atomic<bool> closing_{false};
  // Set while the bind closes, so a receiver waiting for buffers gives up.
  std::atomic<bool> receivers_stop_{false};

  // --- guarded by config_mu_ (shared on the data path) ---
  mutable std::shared_mutex config_mu_;
  std::shared_ptr<const noise::Identity> identity_;  // in secret memory; replaced, never changed
  std::unordered_map<PublicKey, PeerPtr, PublicKeyHash> peers_;
  AllowedIps<Peer*> allowed_ips_;
  uint16_t listen_port_ = 0;
  uint32_t fwmark_ = 0;

  // --- guarded by bind_mu_ ---
  std::mutex bind_mu_;
  std::vector<std::thread> receivers_;
  size_t receiver_buffers_ = 0;  // added to the buffer limit for receivers past two

  // --- started by the constructor, joined by close() ---
  std::vector<std::thread> tun_threads_;  // one per queue
  std::vector<std::thread> workers_;
  std::thread handshake_thread_;
  std::thread timer_thread_;
  std::once_flag close_once_;
};

}  // namespace wg

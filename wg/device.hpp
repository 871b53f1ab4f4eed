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
#include "wg/base/fd.hpp"
#include "wg/cookie.hpp"
#include "wg/handshake_load.hpp"
#include "wg/index_table.hpp"
#include "wg/noise.hpp"
#include "wg/peer.hpp"
#include "wg/batch.hpp"
#include "wg/buffer_pool.hpp"
#include "wg/ratelimiter.hpp"

namespace wg {

// The fewest batches of buffers a Device's pool holds: one for the TUN reader, one for
// each of the two receivers, one in flight (DeviceOptions::buffer_limit).
inline constexpr size_t kMinBufferBatches = 4;

struct DeviceOptions {
  size_t workers = 0;                // AEAD worker threads; 0 = one per core
  // Pooled packet buffers (64 KiB each, allocated lazily). The bound is the pipeline's
  // back-pressure: packets in flight between the readers and the writers. More only
  // queues (latency) and spreads the working set past the caches: in the netns pair,
  // 1024 carried 15 % more TCP than 8192 (RSS 67 MB against 150), and 512 as much as
  // 1024 in half the memory (34 MB). Every reading thread keeps a batch of buffers (128)
  // to read into: the bound counts those of one TUN reader and two receivers (one socket
  // per family); each further TUN queue or socket adds a batch to it, or the readers
  // would hold every buffer at rest and none could be had to read with. A bound below
  // kMinBufferBatches batches is raised to that: with less, a reader would wait for good
  // for a batch that the idle readers hold (nothing moved at all with 8).
  size_t buffer_limit = 512;
  // Queued handshake messages: 1/8 full starts a second under load (HandshakeLoad); a
  // full queue still takes an eighth more messages that carry a valid cookie (mac2).
  size_t handshake_queue = 1024;
  // Batches of up to this many packets are sealed or opened on the thread that read
  // them instead of going to the workers: a hand-off costs two thread wake-ups. 0 picks:
  // every batch on machines with at most 2 cores (the reading threads already keep both
  // busy; in the netns pair this carried 16 % more TCP with 40 % fewer context switches),
  // else batches of up to 4 (interactive traffic).
  size_t inline_batch = 0;
  // With a device that reads without blocking (the kernel TUN), a receiving thread that
  // handed on at most a few datagrams (light traffic) reads what the TUN holds right after
  // and sends it itself: the kernel's answer to what was just written (an echo reply, an
  // ACK) leaves without waking the TUN reader (answer_from_tun). Not with a device of
  // several queues (tun::Device::queues): its readers read one queue each, and a
  // receiving thread would not know which queue holds the answer.
  bool answer_from_tun = true;
  // One thread per side when traffic is light: with answer_from_tun, a device that can
  // be waited on among other descriptors (tun::Device::epoll_watch, the kernel TUN) and
  // a Bind whose receive can wait on one more (conn::Bind::also_wait_on, LinuxBind),
  // the TUN reader, after kLightReads light reads in a row spread over at least
  // kLightWindow, with no large receive pass meanwhile, hands the TUN to the receiving
  // thread that last had traffic and sleeps. That thread then waits on its socket and the
  // TUN at once and serves both, run to completion (read, seal, send; receive, open,
  // write, read the answer), until a pass or a read grows past kAnswerPass packets or
  // more than kLightBurst packets come within kLightWindow; then the reader takes the TUN
  // back. A ping's round trip then wakes one thread per side, not two; a stream keeps
  // both threads (one thread keeping up with small passes would otherwise serialise it).
  bool one_thread_when_light = true;
  // The clock of every protocol decision: rekey, reject and zeroing ages, keepalive and
  // handshake retry timers, cookies, handshake load. Empty: Clock::now. A test may give a
  // clock it moves by hand and call Device::clock_moved() after each move.
  std::function<TimePoint()> clock;
  // The wall clock of what leaves the device or is reported: initiations' TAI64N
  // timestamps (a responder takes only a later one from a peer) and the times of the last
  // handshake and of the first unanswered initiation. Empty: system_clock::now. A test on
  // a moved `clock` moves this one with it, so that handshakes far apart in device time
  // carry timestamps as far apart.
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
  // Waiting for a session (or for up()) past the peer's bound (kMaxStagedPackets) or the
  // device's budget (the buffer bound / 4): the oldest of the peer's packets goes.
  std::atomic<uint64_t> dropped_staged{0};
  std::atomic<uint64_t> handshakes_completed{0};
  std::atomic<uint64_t> cookie_replies_sent{0};
  std::atomic<uint64_t> cookie_replies_received{0};  // valid ones, from a peer under load
  // Initiations and responses that passed the macs and the load check and so cost a
  // Diffie-Hellman (whether or not they then decrypted).
  std::atomic<uint64_t> handshakes_computed{0};
  // Packets a receiving thread read from the TUN right after writing to it
  // (DeviceOptions::answer_from_tun): answers that left without waking the TUN reader.
  std::atomic<uint64_t> tun_answers{0};
  // One thread when light (DeviceOptions::one_thread_when_light): times the reader
  // handed the TUN to a receiving thread, times a receiving thread gave it back (traffic
  // grew, the TUN failed or closed; not counted when the bind closes), and packets that
  // thread read from the TUN while it served it.
  std::atomic<uint64_t> tun_handovers{0};
  std::atomic<uint64_t> tun_returns{0};
  std::atomic<uint64_t> tun_light_reads{0};
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
  // Closes the bind; keys and peers stay. Idempotent.
  void down();
  bool is_up() const { return up_.load(); }
  // Stops every thread and releases the devices; the object is inert afterwards.
  void close();

  // --- configuration ---
  void set_private_key(const std::optional<PrivateKey>& key);
  std::optional<PrivateKey> private_key() const;
  // Rebinds if up; a port that cannot be had (errc::address_in_use for either family)
  // leaves the device listening where it was.
  std::error_code set_listen_port(uint16_t port);
  uint16_t listen_port() const;
  std::error_code set_fwmark(uint32_t mark);
  uint32_t fwmark() const;

  PeerPtr add_peer(const PublicKey& key);           // existing peer if present; null if it is our own key
  PeerPtr lookup_peer(const PublicKey& key) const;
  void remove_peer(const PublicKey& key);
  void remove_all_peers();
  std::vector<PeerPtr> peers() const;

  void set_preshared_key(Peer& p, const PresharedKey& psk);
  PresharedKey preshared_key(Peer& p);
  void set_endpoint(Peer& p, const conn::Endpoint& ep);
  std::optional<conn::Endpoint> endpoint(Peer& p) const;
  // Sends p a handshake initiation now (at most one per REKEY_TIMEOUT, as always).
  void initiate_handshake(Peer& p);
  void set_persistent_keepalive(Peer& p, uint16_t seconds);
  uint16_t persistent_keepalive(Peer& p);
  void add_allowed_ip(Peer& p, const IpPrefix& prefix);
  void remove_allowed_ip(Peer& p, const IpPrefix& prefix);
  void clear_allowed_ips(Peer& p);
  std::vector<IpPrefix> allowed_ips(Peer& p) const;
  // Is there a peer whose allowed IPs cover `a`? (The netstack refuses to dial otherwise.)
  bool routable(const IpAddress& a) const;

  const DeviceStats& stats() const { return stats_; }
  // The device's time (DeviceOptions::clock).
  TimePoint now() const { return clock_ ? clock_() : Clock::now(); }
  std::chrono::system_clock::time_point wall_now() const {
    return options_.wall_clock ? options_.wall_clock() : std::chrono::system_clock::now();
  }
  // After DeviceOptions::clock moved: the timer thread runs its timers for the new time
  // before this returns (an initiation is then with the bind; a keepalive, like any
  // transport packet, may still be in the sending pipeline). The thread sleeps by the real
  // clock for what the device's clock says is left. False once closing.
  bool clock_moved();
  size_t batch_size() const { return batch_; }
  const BufferPool& buffers() const { return buffers_; }
  // DeviceOptions::one_thread_when_light: light reads in a row before the reader lends the
  // TUN (spread over at least kLightWindow), and the packets within kLightWindow past which
  // the receiving thread gives it back.
  static constexpr unsigned kLightReads = 8;
  static constexpr size_t kLightBurst = 32;
  static constexpr std::chrono::microseconds kLightWindow{1000};

  // --- used by peers and the pipeline (send.cpp, receive.cpp) ---
  void send_initiation(Peer& p, bool retry);
  void send_keepalive(Peer& p);

private:
  // The receive-path fuzz target (tests/fuzz/receive_fuzz.cpp) runs the receive steps
  // below on its own thread, so each input is processed whole before it returns.
  friend struct DeviceFuzzAccess;
  struct Job {
    Batch* batch;
  };
  struct HandshakeJob {
    uint8_t data[kInitiationSize];
    size_t size;
    conn::Endpoint from;
  };

  // After a failed read `ec` from the TUN or a socket: false when the reader must stop
  // (its device or Bind closed, or the Device closing). Else the first failure of a run is
  // logged (as an error if `loud`, else verbose) and retried at once, then the wait
  // doubles from 1 ms to kErrorBackoffMax while failures go on, so a device or socket
  // that fails every call cannot take a core or flood the log. `failures` counts them
  // (the caller zeroes it after a good read).
  bool keep_reading_after(const std::error_code& ec, unsigned& failures, const char* what, bool loud);
  static constexpr std::chrono::milliseconds kErrorBackoffMax{250};
  // send.cpp
  // One per queue of the TUN (tun::Device::queues), `dev` being tun_.queue(i).
  void tun_reader(tun::Device& dev);
  // Routes the n packets read into bufs and stages each peer's; the buffers of packets
  // with no peer are moved to bufs[0..k), k returned (the others are the peers' now).
  size_t route_and_stage(uint8_t** bufs, const size_t* sizes, size_t n);
  // On a receiving thread after a light pass (at most kAnswerPass datagrams), with a
  // device that reads without blocking: reads what the TUN holds now (the kernel's
  // answers to the packets just written, made while taking them) and sends it from here,
  // unless the reader holds tun_order_mu_. A ping's reply then leaves without waking the
  // reader thread: one thread wake-up less per round trip on the answering side.
  void answer_from_tun();
  // What the TUN holds now, read into up to kAnswerBuffers pooled buffers (tun_order_mu_
  // held) and staged, `counter` counting the packets: answer_from_tun and serve_tun.
  struct NowRead {
    size_t buffers = 0;  // taken from the pool (0: none free, nothing read)
    size_t packets = 0;  // read and staged
    std::error_code ec;
  };
  NowRead stage_from_tun_now(std::atomic<uint64_t>& counter);
  static constexpr size_t kAnswerPass = 4;
  static constexpr size_t kAnswerBuffers = 64;  // a 64 KB TSO packet at MSS >= 1024 fits
  // One thread when light (DeviceOptions::one_thread_when_light). On the reader, after
  // kLightReads reads of at most kAnswerPass packets, spread over at least kLightWindow,
  // with no larger receive pass between:
  // hands the TUN to the receiving thread that last handed on transport data and sleeps
  // until it comes back; false if it could not be handed (nothing done).
  bool lend_tun();
  // Packets a receiving thread served within the current kLightWindow.
  struct LightWindow {
    std::chrono::steady_clock::time_point start{};
    size_t packets = 0;
  };
  // On receiving thread `r` while it serves the TUN, after a pass of `n` datagrams:
  // reads what the TUN holds and sends it; gives the TUN back when the pass or the read
  // was larger than kAnswerPass, more than kLightBurst packets came within the window,
  // or the read failed.
  void serve_tun(size_t r, size_t n, LightWindow& window);
  void return_tun(size_t r);
  // light_mu_ held: the TUN back with the reader, out of the epoll set it was lent through.
  void take_back_tun_locked();
  void stage_packets(Peer& p, uint8_t* const* bufs, const size_t* sizes, size_t n);
  void send_staged(Peer& p);
  void encrypt_batch(Batch& b);
  void flush_outbound(Peer& p, Batch* done);
  void send_to_peer(Peer& p, std::span<const std::span<const uint8_t>> datagrams);
  // receive.cpp
  void bind_receiver(conn::ReceiveFn receive, size_t r);  // r: its index among the receivers
  void release_inbound(Batch& b);
  void decrypt_batch(Batch& b);
  void flush_inbound(Peer& p, Batch* done);
  void queue_handshake(const uint8_t* msg, size_t size, const conn::Endpoint& from);
  // Sets p.endpoint_ (p.endpoint_mu_ held) and keeps known_endpoints_ in step.
  void store_endpoint(Peer& p, const conn::Endpoint* ep);
  bool known_endpoint(std::span<const uint8_t> destination);
  void handshake_worker();
  void handle_handshake(HandshakeJob& job, bool under_load);
  void consume_initiation_message(HandshakeJob& job);
  void consume_response_message(HandshakeJob& job);
  void consume_cookie_reply(HandshakeJob& job);
  // device.cpp
  void crypto_worker();
  void submit(Batch* b);
  void run_job(Batch* b);
  static constexpr size_t kInlineBatch = 4;  // inline_batch on machines with more than 2 cores
  void timer_loop();
  void poke_timers();
  // After p's timers were armed: puts p on the timer thread's list (only peers with an
  // armed timer are scanned, so 65,536 idle peers cost the thread nothing) and wakes it.
  void poke_timers(Peer& p);
  // The same, but wakes the thread only if DEADLINE is earlier than the wake-up it
  // sleeps toward: the data path arms timers on every packet, and a thread wake-up per
  // packet costs more than the packet.
  void poke_timers_before(Peer& p, std::optional<TimePoint> deadline);
  void list_for_timers(Peer& p);  // timer_mu_ held
  // A completed handshake's session, dated by the device's clock, given to its peer.
  void install_keypair(Peer& p, const noise::SessionKeys& keys, bool initiator);
  // The counters and the event line of a completed handshake.
  void handshake_completed(Peer& p, const char* role);
  std::error_code open_bind_locked();
  void close_bind_locked();
  PeerPtr peer_for(Peer* raw) const;

  tun::Device& tun_;
  conn::Bind& bind_;
  const DeviceOptions options_;
  const size_t batch_;
  const size_t buffer_bound_;  // DeviceOptions::buffer_limit, at least kMinBufferBatches batches
  DeviceStats stats_;

  // --- guarded by config_mu_ (shared for lookups on the data path) ---
  mutable std::shared_mutex config_mu_;
  std::optional<noise::Identity> identity_;
  std::unordered_map<PublicKey, PeerPtr, PublicKeyHash> peers_;
  AllowedIps<Peer*> allowed_ips_;
  uint16_t listen_port_ = 0;
  uint32_t fwmark_ = 0;

  CookieChecker cookie_checker_;
  RateLimiter rate_limiter_;
  IndexTable index_table_;
  BufferPool buffers_;
  StagingBudget staging_;                   // packets staged across all peers
  const size_t inline_batch_;               // see DeviceOptions::inline_batch
  const bool answers_from_tun_;             // DeviceOptions::answer_from_tun and a device that can
  BatchPool batches_;

  // --- bind state, guarded by bind_mu_ ---
  // Held by whichever thread reads the TUN (tun_reader or answer_from_tun) from its read
  // until its packets are staged: packets keep their order across the two.
  std::mutex tun_order_mu_;
  std::mutex bind_mu_;
  std::vector<std::thread> receivers_;
  size_t receiver_buffers_ = 0;  // added to the buffer limit for receivers past two
  // Set while the bind closes: a receiver waiting for buffers stops waiting (BufferPool::wake).
  std::atomic<bool> receivers_stop_{false};
  std::atomic<bool> up_{false};

  // --- one thread when light (lend_tun, serve_tun) ---
  const bool light_possible_;  // one_thread_when_light, answer_from_tun and a device that can
  std::mutex light_mu_;
  std::condition_variable light_cv_;  // the reader waits on it while the TUN is lent
  // Per receiver of the open bind: the epoll instance its receive also waits on
  // (conn::Bind::also_wait_on); invalid where the Bind cannot. Under light_mu_.
  std::vector<UniqueFd> light_epolls_;
  std::atomic<int> tun_server_{-1};     // the receiver the TUN is lent to; -1: the reader's
  std::atomic<int> last_receiver_{-1};  // the receiver that last handed on transport data
  std::atomic<uint64_t> heavy_passes_{0};  // receive passes of more than kAnswerPass datagrams

  // --- crypto jobs ---
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_, jobs_space_cv_;
  std::deque<Batch*> jobs_;
  size_t jobs_limit_ = 1024;

  // --- handshake jobs ---
  std::mutex hs_mu_;
  std::condition_variable hs_cv_;
  std::deque<HandshakeJob> hs_jobs_;
  std::atomic<size_t> hs_queued_{0};  // hs_jobs_.size(), for the receivers without the lock
  HandshakeLoad hs_load_;             // the handshake thread's only
  // Peers' endpoints (Endpoint::destination_bytes), counted: several peers may share one.
  // Under load, an initiation from one of them may skip the cookie round trip
  // (HandshakeLoad::spend_known).
  std::mutex known_mu_;
  std::unordered_map<std::string, uint32_t> known_endpoints_;

  // --- timers ---
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_poked_ = false;
  // Peers whose timers may be armed (Peer::timer_listed_ says which are on it); the
  // timer thread drops those it finds with none.
  std::vector<PeerPtr> timer_peers_;
  std::function<TimePoint()> clock_;  // set before the threads start, then only read
  // Timer thread rounds, under timer_mu_: begun and ended (clock_moved waits on them).
  uint64_t timer_round_begun_ = 0, timer_round_done_ = 0;
  std::condition_variable timer_round_cv_;
  // When the timer thread will next wake on its own (device clock ticks); the maximum
  // while it is scanning peers, so that every deadline armed meanwhile pokes it.
  std::atomic<Clock::rep> timer_wake_at_{std::numeric_limits<Clock::rep>::max()};

  std::atomic<bool> closing_{false};
  std::vector<std::thread> tun_threads_;  // one per queue
  std::thread handshake_thread_;
  std::thread timer_thread_;
  std::vector<std::thread> workers_;
  std::once_flag close_once_;
};

}  // namespace wg

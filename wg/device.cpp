// Device lifecycle, configuration and the crypto worker pool. The data path is in
// send.cpp and receive.cpp, the timer thread in timer_thread.cpp.
#include "wg/device.hpp"

#include <pthread.h>

#include <algorithm>
#include <iterator>

#include "wg/base/log.hpp"
#include "wg/base/secret_memory.hpp"

namespace wg {

thread_local bool Device::control_thread_ = false;

namespace {

// Idle buffers the pool keeps through a trim: a burst after a quiet spell maps no more
// than the rest.
constexpr size_t kIdleBuffersKept = 16;

void name_thread(const char* name) { pthread_setname_np(pthread_self(), name); }  // at most 15 chars

}  // namespace

Device::Device(tun::Device& tun, conn::Bind& bind, DeviceOptions options)
    : tun_(tun),
      bind_(bind),
      options_(options),
      batch_(std::min({tun.batch_size(), bind.batch_size(), kMaxBatch})),
      buffer_bound_(std::max(options.buffer_limit, kMinBufferBatches * batch_)),
      inline_batch_(options.inline_batch              ? options.inline_batch
                    : std::thread::hardware_concurrency() <= 2 ? kMaxBatch
                                                              : kInlineBatch),
      buffers_(buffer_bound_ + batch_ * (tun.queues() - 1)),
      staging_(buffer_bound_ / 4, stats_.dropped_staged),
      hs_jobs_(options.handshake_queue),
      admission_(options.handshake_queue) {
  size_t n = options_.workers ? options_.workers : std::max(1u, std::thread::hardware_concurrency());
  // Named for ps, top -H, perf and gdb (a thread otherwise inherits its creator's name).
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] {
    name_thread("wg-crypto");
    crypto_worker();
  });
  handshake_thread_ = std::thread([this] {
    name_thread("wg-handshake");
    control_thread_ = true;
    handshake_worker();
  });
  bind_.set_unreachable([this](const conn::Endpoint& ep) { endpoint_refused(ep); });
  timer_thread_ = std::thread([this] {
    name_thread("wg-timers");
    control_thread_ = true;
    timer_list_.run([this] { return now(); }, [this](Peer& p, const TimerActions& a) { run_timers(p, a); },
                    [this](TimePoint t) { buffers_.trim(t, kIdleBuffersKept); });
  });
  for (size_t q = 0; q < tun.queues(); ++q) tun_threads_.emplace_back([this, &dev = tun.queue(q)] {
    name_thread("wg-tun-read");
    tun_reader(dev);
  });
}

Device::~Device() { close(); }

void Device::close() {
  std::call_once(close_once_, [this] {
    down();
    closing_ = true;
    tun_.close();
    buffers_.close();
    jobs_.close();
    hs_jobs_.close();
    timer_list_.close();
    for (auto& t : tun_threads_) t.join();
    for (auto& w : workers_) w.join();
    handshake_thread_.join();
    timer_thread_.join();
    bind_.set_unreachable({});
    // Return what is still queued (peers keep buffers in staged and in-order queues).
    std::unique_lock lock(config_mu_);
    for (auto& [key, p] : peers_) {
      p->mark_removed(PeerAccess{});
      p->clear_staged(PeerAccess{});
    }
  });
}

// --- lifecycle ---

std::error_code Device::open_bind_locked() {
  uint16_t port = 0;
  uint32_t mark = 0;
  {
    std::shared_lock lock(config_mu_);
    port = listen_port_;
    mark = fwmark_;
  }
  std::error_code ec;
  uint16_t actual = 0;
  auto fns = bind_.open(port, actual, ec);
  if (ec) return ec;
  if (mark) bind_.set_mark(mark, ec);
  if (ec) {
    bind_.close();
    return ec;
  }
  {
    std::unique_lock lock(config_mu_);
    listen_port_ = actual;
  }
  receiver_buffers_ = batch_ * (fns.size() > 2 ? fns.size() - 2 : 0);
  buffers_.add_limit(static_cast<std::ptrdiff_t>(receiver_buffers_));
  for (auto& fn : fns) receivers_.emplace_back([this, fn] {
    name_thread("wg-udp-recv");
    bind_receiver(fn);
  });
  return {};
}

void Device::close_bind_locked() {
  receivers_stop_ = true;
  bind_.close();
  buffers_.wake();
  for (auto& t : receivers_) t.join();
  receivers_.clear();
  receivers_stop_ = false;
  buffers_.add_limit(-static_cast<std::ptrdiff_t>(receiver_buffers_));
  receiver_buffers_ = 0;
}

bool Device::keep_reading_after(const std::error_code& ec, unsigned& failures, const char* what, bool loud) {
  if (ec == std::errc::operation_canceled || closing_) return false;
  if (failures == 0) {
    if (loud)
      log::error("{}: {}", what, ec.message());
    else
      log::verbose("{}: {}", what, ec.message());
  }
  ++failures;
  if (failures > 1) {
    // 1 ms, 2 ms, ... up to kErrorBackoffMax, in slices so that close() is not held up.
    auto wait = std::min(std::chrono::milliseconds(int64_t{1} << std::min(failures - 2, 16u)), kErrorBackoffMax);
    if (options_.error_backoff) {
      options_.error_backoff(wait);
      return !closing_;
    }
    const auto until = std::chrono::steady_clock::now() + wait;
    while (!closing_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now(),
                                                                               std::chrono::milliseconds(10)));
  }
  return !closing_;
}

std::error_code Device::up() {
  std::lock_guard lock(bind_mu_);
  if (up_ || closing_) return {};
  if (auto ec = open_bind_locked()) return ec;
  up_ = true;
  // Peers with persistent keepalive announce themselves at once.
  for (auto& p : peers())
    if (p->persistent_keepalive() > 0) send_keepalive(*p);
  return {};
}

void Device::down() {
  std::lock_guard lock(bind_mu_);
  if (!up_) return;
  up_ = false;
  close_bind_locked();
  // As the kernel's wg_stop: no session, handshake or staged packet outlives the
  // interface being up, and after up() the first packet may initiate at once.
  for (auto& p : peers()) {
    p->with_timers(PeerAccess{}, [](Timers& t) { t.stop(); });
    p->expire_current_keypairs(PeerAccess{});  // the handshake, and the REKEY_TIMEOUT hold-back
    p->zero_keys(PeerAccess{});
    p->clear_staged(PeerAccess{});
  }
}

// --- configuration ---

// As the kernel does (netlink.c set_device): a peer with our new public key goes first;
// then every peer's static-static secret is recomputed (lazily, at its next initiation)
// and its sessions expire, so the next packet handshakes under the new key at once
// instead of riding the old session until it ages out.
void Device::set_private_key(const std::optional<PrivateKey>& key) {
  std::shared_ptr<const noise::Identity> id;
  if (key) id = std::allocate_shared<noise::Identity>(SecretAllocator<noise::Identity>(), noise::Identity::from_private(*key));
  {
    std::shared_lock lock(config_mu_);
    if ((!key && !identity_) || (key && identity_ && identity_->private_key == *key)) return;
  }
  if (id) remove_peer(id->public_key);  // a peer cannot be ourselves
  std::vector<PeerPtr> renew;
  {
    std::unique_lock lock(config_mu_);
    identity_ = std::move(id);
    if (identity_) admission_.set_identity(identity_->public_key);  // mac1/cookie keys from our public key
    renew.reserve(peers_.size());
    for (auto& [k, p] : peers_) {
      p->invalidate_static_static(PeerAccess{});
      renew.push_back(p);
    }
  }
  for (auto& p : renew) {
    p->expire_current_keypairs(PeerAccess{});
    send_staged(*p);  // packets waiting for a session (if any) start the handshake
  }
}

std::optional<PrivateKey> Device::private_key() const {
  std::shared_lock lock(config_mu_);
  if (!identity_) return std::nullopt;
  return identity_->private_key;
}

// As the kernel does (socket.c wg_socket_init is called before the old sockets go): a
// port that cannot be had leaves the device on the port it had, both families, and
// reports why. One Bind holds one pair of sockets, so the old pair is closed, the new
// one tried, and on failure the old port opened again (it was ours a moment ago).
// While down, the port is tried and let go, so that `wg setconf` before `ip link set up`
// (wg-quick's order) is refused as wireguard-go refuses it, not accepted for a later
// up() to fail.
std::error_code Device::set_listen_port(uint16_t port) {
  std::lock_guard lock(bind_mu_);
  uint16_t old;
  {
    std::unique_lock cl(config_mu_);
    if (port == listen_port_ && (port != 0 || !up_)) return {};
    old = listen_port_;
  }
  if (!up_ && port != 0) {
    std::error_code ec;
    uint16_t actual = 0;
    bind_.open(port, actual, ec);
    bind_.close();
    if (ec) return ec;
  }
  {
    std::unique_lock cl(config_mu_);
    listen_port_ = port;
  }
  if (!up_) return {};
  close_bind_locked();
  auto ec = open_bind_locked();
  if (!ec) return {};
  {
    std::unique_lock cl(config_mu_);
    listen_port_ = old;
  }
  if (auto again = open_bind_locked()) {
    // Taken in that instant too: no sockets now. The device stays up so that the next
    // listen-port change (or down and up) opens them.
    log::error("listen port {}: {}; port {} cannot be had again: {}", port, ec.message(), old, again.message());
  }
  return ec;
}

uint16_t Device::listen_port() const {
  std::shared_lock lock(config_mu_);
  return listen_port_;
}

std::error_code Device::set_fwmark(uint32_t mark) {
  {
    std::unique_lock lock(config_mu_);
    fwmark_ = mark;
  }
  std::lock_guard lock(bind_mu_);
  std::error_code ec;
  if (up_) bind_.set_mark(mark, ec);
  return ec;
}

uint32_t Device::fwmark() const {
  std::shared_lock lock(config_mu_);
  return fwmark_;
}

PeerPtr Device::add_peer(const PublicKey& key) {
  std::unique_lock lock(config_mu_);
  if (identity_ && identity_->public_key == key) return nullptr;
  if (auto it = peers_.find(key); it != peers_.end()) return it->second;
  // The static-static DH is computed at its first initiation.
  auto p = std::allocate_shared<Peer>(SecretAllocator<Peer>(), key, PeerShared{index_table_, buffers_, staging_});
  peers_.emplace(key, p);
  return p;
}

PeerPtr Device::lookup_peer(const PublicKey& key) const {
  std::shared_lock lock(config_mu_);
  auto it = peers_.find(key);
  return it == peers_.end() ? nullptr : it->second;
}

void Device::remove_peer(const PublicKey& key) {
  PeerPtr p;
  {
    std::unique_lock lock(config_mu_);
    auto it = peers_.find(key);
    if (it == peers_.end()) return;
    p = it->second;
    peers_.erase(it);
    allowed_ips_.remove_by_peer(p.get());
  }
  p->mark_removed(PeerAccess{});
  store_endpoint(*p, nullptr);
  p->with_timers(PeerAccess{}, [](Timers& t) { t.stop(); });
  p->zero_keys(PeerAccess{});
  p->forget_secrets(PeerAccess{});  // the Peer may outlive this in a queue or a caller's PeerPtr
  p->clear_staged(PeerAccess{});
  timer_list_.poke();  // a round lets go of it now, not at the thread's next deadline
}

void Device::remove_all_peers() {
  for (auto& p : peers()) remove_peer(p->public_key());
}

std::vector<PeerPtr> Device::peers() const {
  std::shared_lock lock(config_mu_);
  std::vector<PeerPtr> out;
  out.reserve(peers_.size());
  for (auto& [k, p] : peers_) out.push_back(p);
  return out;
}

void Device::set_preshared_key(Peer& p, const PresharedKey& psk) {
  if (p.set_preshared_key(PeerAccess{}, psk)) send_staged(p);  // waiting packets handshake with the new key
}

void Device::set_endpoint(Peer& p, const conn::Endpoint& ep) { store_endpoint(p, &ep); }

void Device::initiate_handshake(Peer& p) { send_initiation(p, false); }

void Device::store_endpoint(Peer& p, const conn::Endpoint* ep) {
  p.set_endpoint(PeerAccess{}, ep, [&](const conn::Endpoint* from, const conn::Endpoint* to) {
    if ((from && to && from->same_destination(*to)) || (!from && !to)) return;
    // A handshake that raced with remove_peer may store an endpoint after remove_peer
    // took the peer's out: that one stays counted, which only lets its address skip the
    // cookie round trip within the known endpoints' budget.
    uint8_t before[18], after[18];
    std::optional<std::span<const uint8_t>> b, a;
    if (from) b = std::span<const uint8_t>(before, from->destination_bytes(before));
    if (to) a = std::span<const uint8_t>(after, to->destination_bytes(after));
    admission_.endpoint_moved(b, a);
  });
}

void Device::set_persistent_keepalive(Peer& p, uint16_t seconds) {
  const bool turned_on = p.with_timers(PeerAccess{}, [&](Timers& t) {
    const bool was_off = t.persistent_keepalive().count() == 0;
    t.set_persistent_keepalive(std::chrono::seconds(seconds));
    return was_off && seconds > 0;
  });
  timer_list_.poke(p);  // a shorter interval may be due sooner
  // Like wireguard-go: switching it on while up sends a keepalive at once.
  if (turned_on && up_) send_keepalive(p);
}

void Device::add_allowed_ip(Peer& p, const IpPrefix& prefix) {
  std::unique_lock lock(config_mu_);
  if (p.removed()) return;
  allowed_ips_.insert(prefix, &p);
}

void Device::remove_allowed_ip(Peer& p, const IpPrefix& prefix) {
  std::unique_lock lock(config_mu_);
  allowed_ips_.remove(prefix, &p);
}

void Device::clear_allowed_ips(Peer& p) {
  std::unique_lock lock(config_mu_);
  allowed_ips_.remove_by_peer(&p);
}

std::vector<IpPrefix> Device::allowed_ips(Peer& p) const {
  std::shared_lock lock(config_mu_);
  std::vector<IpPrefix> out;
  allowed_ips_.for_each(&p, [&](const IpPrefix& prefix) { out.push_back(prefix); });
  return out;
}

bool Device::routable(const IpAddress& a) const {
  std::shared_lock lock(config_mu_);
  return allowed_ips_.lookup(a) != nullptr;
}

// --- sessions ---

void Device::install_keypair(Peer& p, const noise::SessionKeys& keys, bool initiator) {
  auto kp = std::allocate_shared<Keypair>(SecretAllocator<Keypair>());
  static_cast<noise::SessionKeys&>(*kp) = keys;
  kp->initiator = initiator;
  kp->created = now();
  kp->peer = &p;
  p.install_keypair(PeerAccess{}, std::move(kp));
}

void Device::handshake_completed(Peer& p, const char* role) {
  p.record_handshake(PeerAccess{}, wall_now());
  stats_.handshakes_completed.fetch_add(1, std::memory_order_relaxed);
  log::event("{}: handshake completed ({})", p, role);
}

// --- crypto workers ---

void Device::submit(Batch* b) {
  // A small batch (interactive traffic, a ping), or any batch on a small machine, is
  // cheaper to seal or open right here than to hand to a worker: two thread wake-ups
  // cost more than the crypto (DeviceOptions::inline_batch). Order is kept by the peer's
  // queue either way. The timer and handshake threads never seal, send or wait here: one
  // peer's full socket must not hold up every other peer's timers and handshakes.
  if (control_thread_)
    jobs_.push(b);
  else if (b->count <= inline_batch_)
    crypt(b);
  else
    jobs_.push_wait(b);
}

void Device::crypto_worker() {
  while (const auto b = jobs_.pop()) crypt(*b);  // until closed and drained
}

void Device::crypt(Batch* b) {
  if (b->kind == Batch::Kind::outbound)
    encrypt_worker(b);
  else if (b->kind == Batch::Kind::inbound)
    decrypt_worker(b);
  else
    send_control(b);
}

}  // namespace wg

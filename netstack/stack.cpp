// The Stack: the netif that joins lwIP to the WireGuard device and the batched packet
// queues between the two; the Core: the process's one lwIP thread and its timers, which
// every Stack shares.
//
//   Stack A ─ netif A (index a) ─┐                         every pcb of A bound to netif a:
//   Stack B ─ netif B (index b) ─┼─ lwIP (globals) ─ Core   input matched, output routed,
//   ...                          ┘   one thread, timers     ports held per netif (0011)
#include <pthread.h>

#include <array>
#include <cstring>

#include "netstack/stack_impl.hpp"
#include "wg/base/log.hpp"

extern "C" {
#include "lwip/init.h"
#include "lwip/def.h"
#include "lwip/ip.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "lwip/priv/tcp_priv.h"

// lwIP's clock (LWIP_TIMERS with NO_SYS): milliseconds of a monotonic clock.
u32_t sys_now(void) {
  using namespace std::chrono;
  return static_cast<u32_t>(duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}
}

namespace netstack {
namespace detail {
namespace {

std::atomic<int> g_stacks{0};  // Stacks in the process
constexpr size_t kOutQueueLimit = 8192;  // packets lwIP produced that WireGuard has not read
constexpr size_t kInQueueLimit = 8192;
constexpr size_t kBatch = 128;  // Stack::batch_size()

}  // namespace

ip_addr_t to_lwip(const wg::IpAddress& a) {
  ip_addr_t out;
  std::memset(&out, 0, sizeof out);
  if (a.is_v4()) {
    IP_SET_TYPE_VAL(out, IPADDR_TYPE_V4);
    std::memcpy(&ip_2_ip4(&out)->addr, a.bytes.data(), 4);
  } else {
    IP_SET_TYPE_VAL(out, IPADDR_TYPE_V6);
    std::memcpy(ip_2_ip6(&out)->addr, a.bytes.data(), 16);
  }
  return out;
}

wg::IpAddress from_lwip(const ip_addr_t& a) {
  if (IP_IS_V4_VAL(a)) return wg::IpAddress::v4(reinterpret_cast<const uint8_t*>(&ip_2_ip4(&a)->addr));
  return wg::IpAddress::v6(reinterpret_cast<const uint8_t*>(ip_2_ip6(&a)->addr));
}

// --- Core ---

namespace {
std::mutex g_core_mu;      // held while a Core is made or ended
std::weak_ptr<Core> g_core;
thread_local Core* t_core = nullptr;  // on a Core's thread: that Core
}  // namespace

std::shared_ptr<Core> Core::acquire() {
  std::lock_guard lock(g_core_mu);
  if (auto c = g_core.lock()) return c;
  // Ended under the mutex: a Core made meanwhile would run lwIP beside the old thread.
  std::shared_ptr<Core> c(new Core, [](Core* c) {
    std::lock_guard lock(g_core_mu);
    delete c;
  });
  g_core = c;
  return c;
}

Core::Core() : work_(io.get_executor()), timer_(io) {
  // lwIP's globals (and its timer list) are initialised once per process.
  static std::once_flag lwip_once;
  std::call_once(lwip_once, [] { lwip_init(); });
  asio::post(io, [this] { schedule_timers(); });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "wg-netstack");  // for ps, top -H, perf, gdb
    t_core = this;
    io.run();
    t_core = nullptr;
  });
}

// The last Stack has ended: nothing of lwIP is left but its cyclic timers, which the next
// Core runs again.
Core::~Core() {
  asio::post(io, [this] { timer_.cancel(); });
  work_.reset();
  io.stop();
  if (thread_.joinable()) thread_.join();
}

// lwIP's timers (TCP, reassembly, ND) for every Stack: run them and sleep until the next
// one. A timeout armed later by activity wakes the thread sooner (timeout_first).
void Core::schedule_timers() {
  checking_ = true;
  sys_check_timeouts();
  checking_ = false;
  wait_timers(sys_timeouts_sleeptime());
}

void Core::wait_timers(u32_t ms) {
  // (Re-arming cancels the wait before: its handler sees operation_aborted.)
  if (ms == SYS_TIMEOUTS_SLEEPTIME_INFINITE) timer_.expires_at(asio::steady_timer::time_point::max());
  else timer_.expires_after(std::chrono::milliseconds(ms));
  timer_.async_wait([this](const error_code& ec) {
    if (!ec) schedule_timers();
  });
}

void Core::timeout_first() {
  if (checking_) return;
  const u32_t ms = sys_timeouts_sleeptime();
  if (asio::steady_timer::clock_type::now() + std::chrono::milliseconds(ms) < timer_.expiry()) wait_timers(ms);
}

// LWIP_HOOK_TIMEOUT_FIRST (the weak one in glue.c does nothing).
extern "C" void wgnet_lwip_timeout_first(void) {
  if (t_core) t_core->timeout_first();
}

// --- Stack ---

StackImpl::StackImpl(const StackOptions& o)
    : options(o), core_(Core::acquire()), io_(core_->io), dns_cache(o.dns_cache_size) {
  call([this] { add_netif(); });
}

void StackImpl::add_netif() {
  ip4_addr_t addr4{}, mask4{}, gw4{};
  for (auto& p : options.addresses) {
    if (!p.addr.is_v4()) continue;
    std::memcpy(&addr4.addr, p.addr.bytes.data(), 4);
    uint32_t m = p.bits == 0 ? 0 : lwip_htonl(~0u << (32 - p.bits));
    mask4.addr = m;
    break;
  }
  netif_add(&nif_, &addr4, &mask4, &gw4, this, &StackImpl::netif_init, ip_input);
  for (auto& p : options.addresses) {
    if (!p.addr.is_v6()) continue;
    ip6_addr_t a6;
    std::memcpy(a6.addr, p.addr.bytes.data(), 16);
    ip6_addr_clear_zone(&a6);
    s8_t idx = -1;
    if (netif_add_ip6_address(&nif_, &a6, &idx) == ERR_OK && idx >= 0)
      netif_ip6_addr_set_state(&nif_, idx, IP6_ADDR_PREFERRED);
  }
  // WireGuard authenticated every byte: skip inbound checksum checks, always generate.
  NETIF_SET_CHECKSUM_CTRL(&nif_, NETIF_CHECKSUM_GEN_IP | NETIF_CHECKSUM_GEN_UDP | NETIF_CHECKSUM_GEN_TCP |
                                     NETIF_CHECKSUM_GEN_ICMP | NETIF_CHECKSUM_GEN_ICMP6);
  // No default netif: every pcb is bound to its Stack's netif, and what lwIP sends
  // without one while handling input leaves where the input came in (lwipopts.h).
  netif_set_link_up(&nif_);
  netif_set_up(&nif_);
}

void StackImpl::use_options() {
  tcp_cc_default = options.tcp_congestion == StackOptions::Congestion::bbr ? TCP_CC_BBR : TCP_CC_CUBIC;
}

tcp_pcb* StackImpl::new_tcp(u8_t type) {
  use_options();
  tcp_pcb* p = tcp_new_ip_type(type);
  if (p) tcp_bind_netif(p, &nif_);
  return p;
}

udp_pcb* StackImpl::new_udp(u8_t type) {
  udp_pcb* p = udp_new_ip_type(type);
  if (p) udp_bind_netif(p, &nif_);
  return p;
}

raw_pcb* StackImpl::new_raw(u8_t type, u8_t proto) {
  raw_pcb* p = raw_new_ip_type(type, proto);
  if (p) raw_bind_netif(p, &nif_);
  return p;
}

// The end of a Stack with operations still pending: every connection reset, every
// listener and socket closed, every ping abandoned and every lookup and dial by name
// (spawn_cancellable) stopped, so that each pending operation completes with
// operation_aborted. Then the Stack waits on the shared thread until those coroutines
// have ended (they hold the Stack; kDrainTime is when it starts to complain), and one
// round more for their completions. Objects that outlive the Stack (streams, listeners,
// sockets the program still holds) do nothing: gone(). The other Stacks go on.
StackImpl::~StackImpl() {
  close();
  call([this] {
    alive.reset();  // before anything completes: what completes sees the Stack gone
    closing = true;
    abort_everything();
    netif_remove(&nif_);  // patch 0011: the other Stacks' connections on the same addresses stay
  });
  g_stacks.fetch_sub(1);
  bool warned = false;
  for (auto since = std::chrono::steady_clock::now(); spawned->load() > 0;) {
    call([] {});  // a round of what is queued on the thread
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!warned && std::chrono::steady_clock::now() - since > kDrainTime) {
      warned = true;
      wg::log::error("netstack: {} lookups or dials by name still running {} s after the Stack's end", spawned->load(),
                   kDrainTime.count());
    }
  }
  call([] {});
  // Frees a batch queued after the loop's final round (none is: write() refuses once
  // closed).
  std::lock_guard lock(in_mu_);
  for (pbuf* p : in_q_) pbuf_free(p);
  in_q_.clear();
}

// Every pcb of this Stack (bound to its netif), not the other Stacks'.
void StackImpl::abort_everything() {
  const u8_t idx = netif_get_index(&nif_);
  std::vector<std::shared_ptr<TcpConn>> conns;
  std::vector<std::shared_ptr<TcpListen>> listens;
  std::vector<std::shared_ptr<UdpConn>> udps;
  for (tcp_pcb* list : {tcp_active_pcbs, tcp_bound_pcbs})
    for (tcp_pcb* p = list; p; p = p->next)
      if (p->netif_idx == idx && p->callback_arg)
        conns.push_back(static_cast<TcpConn*>(p->callback_arg)->shared_from_this());
  for (tcp_pcb_listen* p = tcp_listen_pcbs.listen_pcbs; p; p = p->next)
    if (p->netif_idx == idx && p->callback_arg)
      listens.push_back(static_cast<TcpListen*>(p->callback_arg)->shared_from_this());
  for (udp_pcb* p = udp_pcbs; p; p = p->next)
    if (p->netif_idx == idx && p->recv_arg) udps.push_back(static_cast<UdpConn*>(p->recv_arg)->shared_from_this());
  for (auto& c : conns) {
    c->local_abort = true;
    c->close(true);
  }
  for (auto& l : listens) l->close();
  for (auto& u : udps) u->close();
  auto pending = std::move(abandon);
  for (auto& [id, f] : pending) f();
  // What lwIP still holds without us (TIME_WAIT, closing): freed (a reset it sends
  // goes into the closed device).
  std::vector<tcp_pcb*> left;
  for (tcp_pcb* list : {tcp_tw_pcbs, tcp_active_pcbs})
    for (tcp_pcb* p = list; p; p = p->next)
      if (p->netif_idx == idx) left.push_back(p);
  for (tcp_pcb* p : left) tcp_abort(p);
}

err_t StackImpl::netif_init(netif* n) {
  auto* self = static_cast<StackImpl*>(n->state);
  n->name[0] = 'w';
  n->name[1] = 'g';
  n->mtu = static_cast<u16_t>(self->options.mtu);
  n->output = &StackImpl::output4;
  n->output_ip6 = &StackImpl::output6;
  n->flags = NETIF_FLAG_LINK_UP;
  return ERR_OK;
}

err_t StackImpl::output4(netif* n, pbuf* p, const ip4_addr_t*) { return static_cast<StackImpl*>(n->state)->output(p); }
err_t StackImpl::output6(netif* n, pbuf* p, const ip6_addr_t*) { return static_cast<StackImpl*>(n->state)->output(p); }

// lwIP emits a packet: copy it out for WireGuard's reader.
err_t StackImpl::output(pbuf* p) {
  std::unique_lock lock(out_mu_);
  if (closed_) return ERR_IF;
  if (out_q_.size() >= kOutQueueLimit) {
    dropped.fetch_add(1, std::memory_order_relaxed);
    return ERR_OK;  // like a full NIC queue: TCP recovers
  }
  std::vector<uint8_t> pkt;
  if (!out_free_.empty()) {
    pkt = std::move(out_free_.back());
    out_free_.pop_back();
  }
  pkt.resize(p->tot_len);
  pbuf_copy_partial(p, pkt.data(), p->tot_len, 0);
  out_q_.push_back(std::move(pkt));
  lock.unlock();
  if (in_batch_)
    out_pending_ = true;
  else
    out_cv_.notify_one();
  packets_out.fetch_add(1, std::memory_order_relaxed);
  bytes_out.fetch_add(p->tot_len, std::memory_order_relaxed);
  return ERR_OK;
}

size_t StackImpl::read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                       std::error_code& ec) {
  std::unique_lock lock(out_mu_);
  out_cv_.wait(lock, [&] { return closed_ || !out_q_.empty(); });
  if (closed_) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  // Emptied packets' storage is kept for the next ones (up to 256).
  const size_t n = tun::read_from_queue(out_q_, bufs, sizes, offset, [&](auto& pkt) {
    if (out_free_.size() < 256) out_free_.push_back(std::move(pkt));
  });
  ec.clear();
  return n;
}

// Each packet is copied once, straight into a pbuf on the writer's (WireGuard's) thread.
// pbuf_alloc(PBUF_RAM) is then called off lwIP's thread: safe because with
// MEM_LIBC_MALLOC, MEMP_MEM_MALLOC and no LWIP_STATS it is malloc and a header written
// into memory nobody else sees (check_options.c requires all three); the pbuf is lwIP's
// only once the Stack's thread hands it to input.
size_t StackImpl::write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) {
  size_t accepted = 0;  // also what is not for lwIP: taken, and dropped as lwIP would
  // Copied outside the lock (the Stack's thread takes it to swap the queue), in chunks of
  // a batch so that the pbufs in hand need no allocation of their own.
  std::array<pbuf*, kBatch> made;
  for (size_t first = 0; first < bufs.size(); first += kBatch) {
    size_t n = 0;
    for (auto& b : bufs.subspan(first, std::min(kBatch, bufs.size() - first))) {
      const auto pkt = b.subspan(offset);
      if (pkt.empty() || pkt.size() > 0xffff || !for_us(pkt)) {
        ++accepted;
        continue;
      }
      pbuf* p = pbuf_alloc(PBUF_RAW, static_cast<u16_t>(pkt.size()), PBUF_RAM);
      if (!p) {
        dropped.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      std::memcpy(p->payload, pkt.data(), pkt.size());  // PBUF_RAM: one contiguous buffer
      made[n++] = p;
    }
    size_t queued = 0;
    bool closed;
    {
      std::lock_guard lock(in_mu_);
      closed = closed_;
      for (; !closed && queued < n && in_q_.size() < kInQueueLimit; ++queued) in_q_.push_back(made[queued]);
      // One hop to the Stack's thread per batch, not per packet; posted under the lock, so
      // that the Stack's end (close(), then a round on the thread) finds it queued.
      if (!in_scheduled_ && !in_q_.empty()) {
        in_scheduled_ = true;
        asio::post(io_, [this] { drain_inbound(); });
      }
    }
    for (size_t i = queued; i < n; ++i) pbuf_free(made[i]);  // queue full, or closed
    if (closed) {
      ec = std::make_error_code(std::errc::operation_canceled);
      return 0;
    }
    if (queued < n) dropped.fetch_add(n - queued, std::memory_order_relaxed);
    accepted += queued;
  }
  ec.clear();
  return accepted;
}

// Whether lwIP should see a packet: not when it is unicast to an address this Stack
// does not have. lwIP alone would take it for another Stack's netif with that address
// (it accepts a packet for any of its netifs); a single Stack dropped it the same way.
// What is too short to tell goes to lwIP, which drops it.
bool StackImpl::for_us(std::span<const uint8_t> pkt) const {
  const uint8_t version = pkt[0] >> 4;
  if (version == 4 && pkt.size() >= 20) {
    const uint8_t* dst = &pkt[16];
    if (dst[0] >= 224) return true;  // multicast, limited broadcast
    for (const auto& p : options.addresses) {
      if (!p.addr.is_v4()) continue;
      if (std::memcmp(dst, p.addr.bytes.data(), 4) == 0) return true;
      uint32_t a, d;
      std::memcpy(&a, p.addr.bytes.data(), 4);
      std::memcpy(&d, dst, 4);
      const uint32_t host = p.bits >= 31 ? 0 : lwip_htonl(~0u >> p.bits);
      if (host && (d & host) == host && (d & ~host) == (a & ~host)) return true;  // subnet broadcast
    }
    return false;
  }
  if (version == 6 && pkt.size() >= 40) {
    const uint8_t* dst = &pkt[24];
    if (dst[0] == 0xff) return true;  // multicast
    for (const auto& p : options.addresses)
      if (p.addr.is_v6() && std::memcmp(dst, p.addr.bytes.data(), 16) == 0) return true;
    return false;
  }
  return true;
}

void StackImpl::drain_inbound() {
  std::deque<pbuf*> batch;
  {
    std::lock_guard lock(in_mu_);
    batch.swap(in_q_);
    in_scheduled_ = false;
  }
  in_batch_ = true;
  use_options();  // for the connections the batch opens
  tcp_input_batch_begin();
  for (pbuf* p : batch) {
    packets_in.fetch_add(1, std::memory_order_relaxed);
    bytes_in.fetch_add(p->tot_len, std::memory_order_relaxed);
    if (nif_.input(p, &nif_) != ERR_OK) pbuf_free(p);
  }
  tcp_input_batch_end();
  in_batch_ = false;
  if (out_pending_) {
    out_pending_ = false;
    out_cv_.notify_one();
  }
}

void StackImpl::close() {
  {
    // Under both queues' locks: output() and read() read it under the one, write()
    // under the other (nothing holds both, so the order cannot deadlock).
    std::scoped_lock lock(out_mu_, in_mu_);
    closed_ = true;
  }
  out_cv_.notify_all();
}

bool StackImpl::routable(const wg::IpAddress& a) {
  std::lock_guard lock(config_mu);
  return !route_check || route_check(a);
}

}  // namespace detail

std::string Endpoint::to_string() const {
  std::string s = addr.is_v6() ? "[" : "";
  s += addr.to_string();
  s += addr.is_v6() ? "]:" : ":";
  s += std::to_string(port);
  return s;
}

std::unique_ptr<Stack> Stack::create(const StackOptions& options, std::error_code& ec) {
  if (options.mtu < 1280 || options.mtu > 65535 || options.dns_retry.count() <= 0 || options.dns_timeout.count() <= 0) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  // lwIP numbers netifs in a byte (and asserts past 255 of them).
  if (detail::g_stacks.fetch_add(1) >= kMaxStacks) {
    detail::g_stacks.fetch_sub(1);
    ec = std::make_error_code(std::errc::too_many_files_open);
    return nullptr;
  }
  ec.clear();
  return std::unique_ptr<Stack>(new Stack(std::make_unique<detail::StackImpl>(options)));
}

Stack::Stack(std::unique_ptr<detail::StackImpl> impl) : impl_(std::move(impl)) {}
Stack::~Stack() = default;

size_t Stack::read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                   std::error_code& ec) {
  return impl_->read(bufs, sizes, offset, ec);
}

size_t Stack::write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) {
  return impl_->write(bufs, offset, ec);
}

int Stack::mtu() const { return impl_->options.mtu; }

void Stack::set_event_handler(std::function<void(tun::Event)> handler) {
  {
    std::lock_guard lock(impl_->config_mu);
    impl_->event_handler = handler;
  }
  // The netstack is always up: said once, from the Stack's thread as tun::Device's
  // contract has it (never on the caller's, which may hold its own locks). Queued on that
  // thread before the Stack's end, so it runs before the Stack is gone.
  if (handler) asio::post(impl_->io_, [handler] { handler(tun::Event::up); });
}

void Stack::close() { impl_->close(); }
Executor Stack::get_executor() { return impl_->executor(); }
const StackOptions& Stack::options() const { return impl_->options; }

void Stack::set_route_check(std::function<bool(const wg::IpAddress&)> check) {
  std::lock_guard lock(impl_->config_mu);
  impl_->route_check = std::move(check);
}

Stack::Counters Stack::counters() const {
  Counters c;
  c.tcp_active = impl_->tcp_active.load();
  c.packets_in = impl_->packets_in.load();
  c.packets_out = impl_->packets_out.load();
  c.bytes_in = impl_->bytes_in.load();
  c.bytes_out = impl_->bytes_out.load();
  c.dropped = impl_->dropped.load();
  return c;
}

}  // namespace netstack

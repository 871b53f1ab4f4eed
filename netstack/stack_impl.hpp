// Internals of netstack::Stack. Everything runs on the Stack's thread unless marked.
#pragma once

#include <span>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <unordered_map>
#include <thread>

#include "netstack/dns_cache.hpp"
#include "netstack/stack.hpp"

extern "C" {
#include "lwip/ip_addr.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/raw.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
}

namespace netstack::detail {

struct DnsFlight;  // resolve.cpp

using ReadHandler = asio::any_completion_handler<void(error_code, size_t)>;
using WaitHandler = asio::any_completion_handler<void(error_code)>;

// Completes h on its executor, never inline: lwIP callbacks must not re-enter user
// code. Asio 1.26 cannot post to an any_completion_executor, hence post then dispatch.
template <class Handler, class... Args>
void complete(Executor stack, Handler&& h, Args&&... args) {
  asio::post(stack, [stack, h = std::forward<Handler>(h),
                     ... a = std::forward<Args>(args)]() mutable {
    auto ex = asio::get_associated_executor(h, stack);
    asio::dispatch(ex, asio::append(std::move(h), std::move(a)...));
  });
}

// For a closed object, which has no Stack to post to.
template <class Handler, class... Args>
void complete_now(Handler&& h, Args&&... args) {
  auto ex = asio::get_associated_executor(h);
  asio::dispatch(ex, asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
}

ip_addr_t to_lwip(const wg::IpAddress& a);
wg::IpAddress from_lwip(const ip_addr_t& a);

// The process's one lwIP thread and timers, from the first Stack to the last.
class Core {
public:
  static std::shared_ptr<Core> acquire();
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  asio::io_context io;

  // lwIP put a timeout first (LWIP_HOOK_TIMEOUT_FIRST): wake for it if it is sooner
  // than the wait. On the Core's thread.
  void timeout_first();

private:
  Core();
  void schedule_timers();
  void wait_timers(u32_t ms);

  asio::executor_work_guard<Executor> work_;
  asio::steady_timer timer_;
  bool checking_ = false;  // in sys_check_timeouts(): schedule_timers waits afterwards
  std::thread thread_;
};

class StackImpl {
public:
  explicit StackImpl(const StackOptions& o);
  ~StackImpl();

  Executor executor() { return io_.get_executor(); }
  bool on_stack_thread() { return io_.get_executor().running_in_this_thread(); }

  // Runs f on the Stack's thread and waits (inline if already there).
  template <class F>
  auto call(F&& f) -> decltype(f()) {
    if (on_stack_thread()) return f();
    std::packaged_task<decltype(f())()> task(std::forward<F>(f));
    auto fut = task.get_future();
    asio::post(io_, [&task] { task(); });
    return fut.get();
  }

  bool routable(const wg::IpAddress& a);
  // False if no free port was found in bounded tries.
  bool bind_local_port(tcp_pcb* pcb);
  // Bound to this Stack's netif first, which keeps Stacks' packets and ports apart.
  // Null when lwIP's pool is empty.
  tcp_pcb* new_tcp(u8_t type);
  udp_pcb* new_udp(u8_t type);
  raw_pcb* new_raw(u8_t type, u8_t proto);

  // --- tun::Device side (any thread) ---
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset, std::error_code& ec);
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec);
  void close();

  StackOptions options;
  std::shared_ptr<Core> core_;
  asio::io_context& io_;  // core_->io
  netif nif_{};
  std::atomic<uint64_t> tcp_active{0};
  std::atomic<uint64_t> packets_in{0}, packets_out{0}, bytes_in{0}, bytes_out{0}, dropped{0};

  std::mutex config_mu;
  std::function<bool(const wg::IpAddress&)> route_check;
  std::function<void(tun::Event)> event_handler;

  uint16_t next_port = 0;
  // Expires with the Stack, so late cancellations and outliving objects do nothing.
  std::shared_ptr<int> alive = std::make_shared<int>(0);
  bool closing = false;  // Stack thread
  // Operations no pcb list reaches at the end: id → abandon.
  std::unordered_map<uint64_t, std::function<void()>> abandon;  // Stack thread
  uint64_t next_abandon_id = 0;
  // Running spawn_cancellable coroutines; shared so they need not touch the Stack.
  std::shared_ptr<std::atomic<size_t>> spawned = std::make_shared<std::atomic<size_t>>(0);
  dns::Cache dns_cache;
  std::unordered_map<std::string, std::shared_ptr<DnsFlight>> dns_flights;

private:
  static err_t netif_init(netif* n);
  static err_t output4(netif* n, pbuf* p, const ip4_addr_t* dst);
  static err_t output6(netif* n, pbuf* p, const ip6_addr_t* dst);
  err_t output(pbuf* p);
  void add_netif();  // on the Stack's thread
  bool for_us(std::span<const uint8_t> pkt) const;
  void drain_inbound();
  // Before lwIP works for this Stack.
  void use_options();
  void abort_everything();

  static constexpr auto kDrainTime = std::chrono::seconds(2);

  // lwIP → WireGuard, bounded: dropped when full.
  std::mutex out_mu_;
  std::condition_variable out_cv_;
  std::deque<std::vector<uint8_t>> out_q_;
  std::vector<std::vector<uint8_t>> out_free_;
  bool closed_ = false;  // written under out_mu_ and in_mu_ both, read under either
  // Stack thread: output during an input batch wakes the reader once, at its end.
  bool in_batch_ = false;
  bool out_pending_ = false;

  // WireGuard → lwIP, copied into pbufs on the writer's thread.
  std::mutex in_mu_;
  std::deque<pbuf*> in_q_;
  bool in_scheduled_ = false;
};

// On the initiating thread: a cancellation of any type on h's slot posts `cancel` to
// the Stack's thread. The signal may come late or from any thread, so `cancel` must
// check by generation number that its operation is still pending.
template <class Handler, class F>
void on_cancel(StackImpl& s, Handler& h, F cancel) {
  auto slot = asio::get_associated_cancellation_slot(h);
  if (!slot.is_connected()) return;
  slot.assign([alive = std::weak_ptr<int>(s.alive), io = &s.io_, cancel = std::move(cancel)](asio::cancellation_type t) {
    using T = asio::cancellation_type;
    if ((t & (T::terminal | T::partial | T::total)) == T::none) return;
    if (alive.lock()) asio::post(*io, cancel);
  });
}

// nullopt after failing h (o closed or its Stack gone), else the operation's number,
// with cancel(*o, number) installed.
template <class Obj, class Handler, class Cancel, class... Zero>
std::optional<uint64_t> begin_op(const std::shared_ptr<Obj>& o, Handler& h, Cancel cancel, Zero... zero) {
  if (!o || o->gone()) {
    complete_now(std::move(h), error_code(o ? asio::error::operation_aborted : asio::error::bad_descriptor), std::move(zero)...);
    return std::nullopt;
  }
  const uint64_t gen = ++o->next_gen;
  on_cancel(o->s, h, [w = std::weak_ptr<Obj>(o), gen, cancel] {
    if (auto p = w.lock()) cancel(*p, gen);
  });
  return gen;
}

// Drops a handle's state, closing it on the Stack's thread unless the Stack did.
template <class Obj>
void close_on_stack(std::shared_ptr<Obj>& handle) {
  if (!handle) return;
  auto o = std::move(handle);
  if (o->gone()) return;
  asio::dispatch(o->s.io_, [o] { o->close(); });
}

// Runs coroutine op for h: h gets op's result, or operation_aborted at once on
// cancellation (op is then stopped and its result dropped).
template <class T, class Handler>
void spawn_cancellable(StackImpl& s, asio::awaitable<std::pair<error_code, T>> op, Handler h) {
  struct State {
    explicit State(Handler&& h) : h(std::move(h)) {}
    Handler h;
    asio::cancellation_signal stop;
    bool done = false;
  };
  auto st = std::make_shared<State>(std::move(h));
  const Executor ex = s.executor();
  s.spawned->fetch_add(1);
  on_cancel(s, st->h, [ex, w = std::weak_ptr<State>(st)] {
    auto st = w.lock();
    if (!st || st->done) return;
    st->done = true;
    complete(ex, std::move(st->h), error_code(asio::error::operation_aborted), T{});
    st->stop.emit(asio::cancellation_type::terminal);
  });
  // The Stack's end stops the coroutine and waits for it.
  asio::dispatch(ex, [&s, st, ex, op = std::move(op)]() mutable {
    if (st->done) {  // cancelled on the way here
      s.spawned->fetch_sub(1);
      return;
    }
    const uint64_t id = ++s.next_abandon_id;
    s.abandon.emplace(id, [w = std::weak_ptr<State>(st)] {
      if (auto st = w.lock()) st->stop.emit(asio::cancellation_type::terminal);
    });
    asio::co_spawn(ex, std::move(op),
                   asio::bind_cancellation_slot(st->stop.slot(), [ex, st, id, alive = std::weak_ptr<int>(s.alive),
                                                                  count = s.spawned, &s](std::exception_ptr e,
                                                                                         std::pair<error_code, T> r) {
                     const bool stack_ending = alive.expired();  // else s is there (this thread)
                     if (!stack_ending) s.abandon.erase(id);
                     count->fetch_sub(1);
                     if (st->done) return;
                     st->done = true;
                     if (e) r.first = asio::error::fault;
                     if (stack_ending) r = {asio::error::operation_aborted, T{}};
                     complete(ex, std::move(st->h), r.first, std::move(r.second));
                   }));
  });
}

// --- TCP (tcp.cpp) ---
struct TcpConn : std::enable_shared_from_this<TcpConn> {
  explicit TcpConn(StackImpl& s) : s(s), alive(s.alive), connect_timer(s.io_) {}
  ~TcpConn();

  void attach(tcp_pcb* p);  // takes the self-reference
  void start_read(asio::mutable_buffer b, ReadHandler h, uint64_t gen);
  void start_wait(WaitHandler h, uint64_t gen);
  bool readable() const { return !rx.empty() || rx_eof || error; }
  void start_write(asio::const_buffer b, ReadHandler h, uint64_t gen);
  void try_write();
  void cancel_read(uint64_t gen);   // if still pending
  void cancel_write(uint64_t gen);
  void cancel_connect();
  void fail(error_code ec);     // pcb gone
  void close(bool abort);

  static err_t on_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t err);
  static err_t on_sent(void* arg, tcp_pcb* pcb, u16_t len);
  static void on_err(void* arg, err_t err);
  static err_t on_connected(void* arg, tcp_pcb* pcb, err_t err);

  StackImpl& s;
  std::weak_ptr<int> alive;  // expired: s is gone and must not be touched
  bool gone() const { return alive.expired(); }
  tcp_pcb* pcb = nullptr;
  std::shared_ptr<TcpConn> self;  // held while lwIP has our pointer
  // Unread chains, never concatenated (tot_len is 16 bits); front read to rx_off.
  std::deque<pbuf*> rx;
  size_t rx_off = 0;
  bool rx_eof = false;
  error_code error;
  ReadHandler read_h;
  asio::mutable_buffer read_buf;
  WaitHandler wait_h;  // never pending with read_h
  ReadHandler write_h;
  asio::const_buffer write_buf;
  asio::any_completion_handler<void(error_code, TcpStream)> connect_h;
  asio::steady_timer connect_timer;
  bool connecting = false;
  bool local_abort = false;
  bool timed_out = false;
  bool dial_cancelled = false;
  Endpoint local, remote;
  std::atomic<uint64_t> next_gen{0};  // any thread
  uint64_t read_gen = 0, write_gen = 0;
};

struct TcpListen : std::enable_shared_from_this<TcpListen> {
  explicit TcpListen(StackImpl& s) : s(s), alive(s.alive) {}
  ~TcpListen();
  void close();
  static err_t on_accept(void* arg, tcp_pcb* newpcb, err_t err);
  void cancel_accept(uint64_t gen);

  StackImpl& s;
  std::weak_ptr<int> alive;
  bool gone() const { return alive.expired(); }
  tcp_pcb* pcb = nullptr;
  size_t backlog = 128;
  std::deque<std::shared_ptr<TcpConn>> pending;
  asio::any_completion_handler<void(error_code, TcpStream)> accept_h;
  Endpoint local;
  std::atomic<uint64_t> next_gen{0};  // any thread
  uint64_t accept_gen = 0;
};

// --- UDP (udp.cpp) ---
struct UdpConn : std::enable_shared_from_this<UdpConn> {
  explicit UdpConn(StackImpl& s) : s(s), alive(s.alive) {}
  ~UdpConn();
  void close();
  static void on_recv(void* arg, udp_pcb* pcb, pbuf* p, const ip_addr_t* addr, u16_t port);
  void cancel_recv(uint64_t gen);

  StackImpl& s;
  std::weak_ptr<int> alive;
  bool gone() const { return alive.expired(); }
  udp_pcb* pcb = nullptr;
  struct Datagram {
    Endpoint from;
    std::vector<uint8_t> data;
  };
  std::deque<Datagram> queue;
  ReadHandler recv_h;  // recv_from null: a wait
  asio::mutable_buffer recv_buf;
  Endpoint* recv_from = nullptr;
  Endpoint local;
  bool connected = false;
  std::atomic<uint64_t> next_gen{0};  // any thread
  uint64_t recv_gen = 0;
};

}  // namespace netstack::detail

// TCP over lwIP: connections with back-pressure in both directions, listeners, dialing.
// lwIP holds a raw pointer to each TcpConn (tcp_arg); the TcpConn keeps itself alive
// (`self`) until lwIP lets go: on close, or when lwIP reports the pcb gone (on_err).
#include <boost/asio/error.hpp>

#include <cstring>
#include <stdexcept>

#include "netstack/stack_impl.hpp"

namespace netstack {
namespace detail {
namespace {

constexpr size_t kChunk = 0xffff;  // lwIP's u16 lengths (tcp_write, tcp_recved)

// Local ports for dialing: IANA's dynamic range, as lwIP's own tcp_new_port. That one
// walks every pcb list for every port it tries and tries them all before it gives up:
// with the ports taken it held this thread for 1-2 s per dial. Ours gives up
// after kPortTries binds, each one walk.
constexpr uint32_t kFirstPort = 49152, kLastPort = 65535;
constexpr int kPortTries = 32;

Endpoint endpoint_of(const ip_addr_t& a, u16_t port) { return {from_lwip(a), port}; }

}  // namespace

TcpConn::~TcpConn() {
  for (pbuf* p : rx) pbuf_free(p);
}

void TcpConn::attach(tcp_pcb* p) {
  pcb = p;
  self = shared_from_this();
  s.tcp_active.fetch_add(1);
  tcp_arg(pcb, this);
  tcp_err(pcb, &TcpConn::on_err);
  tcp_recv(pcb, &TcpConn::on_recv);
  tcp_sent(pcb, &TcpConn::on_sent);
  tcp_nagle_disable(pcb);  // request/response traffic must not wait for an ACK
  if (const auto& o = s.options; o.tcp_keepalive.count() > 0) {
    const auto ms = static_cast<u32_t>(std::min<int64_t>(o.tcp_keepalive.count(), INT32_MAX));
    ip_set_option(pcb, SOF_KEEPALIVE);
    pcb->keep_idle = ms;
    pcb->keep_intvl = ms;
    pcb->keep_cnt = static_cast<u32_t>(std::max(1, o.tcp_keepalive_probes));
  }
  local = endpoint_of(pcb->local_ip, pcb->local_port);
  remote = endpoint_of(pcb->remote_ip, pcb->remote_port);
}

// Reads hand bytes to the application first, then open the window by as much.
void TcpConn::start_read(asio::mutable_buffer b, ReadHandler h, uint64_t gen) {
  if (read_h || wait_h) {
    complete(s.executor(), std::move(h), error_code(asio::error::in_progress), size_t{0});
    return;
  }
  if (b.size() == 0) {
    complete(s.executor(), std::move(h), error_code{}, size_t{0});
    return;
  }
  if (!rx.empty()) {
    auto* dst = static_cast<uint8_t*>(b.data());
    size_t n = 0;
    while (n < b.size() && !rx.empty()) {
      pbuf* p = rx.front();
      size_t take = std::min<size_t>(b.size() - n, p->tot_len - rx_off);
      pbuf_copy_partial(p, dst + n, static_cast<u16_t>(take), static_cast<u16_t>(rx_off));
      n += take;
      rx_off += take;
      if (rx_off == p->tot_len) {
        pbuf_free(p);
        rx.pop_front();
        rx_off = 0;
      }
    }
    for (size_t left = n; pcb && left > 0;) {
      size_t chunk = std::min(left, kChunk);
      tcp_recved(pcb, static_cast<u16_t>(chunk));
      left -= chunk;
    }
    complete(s.executor(), std::move(h), error_code{}, n);
    return;
  }
  if (error) {
    complete(s.executor(), std::move(h), error, size_t{0});
    return;
  }
  if (rx_eof) {
    complete(s.executor(), std::move(h), error_code(asio::error::eof), size_t{0});
    return;
  }
  if (!pcb) {
    complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
    return;
  }
  read_buf = b;
  read_gen = gen;
  read_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
}

void TcpConn::start_wait(WaitHandler h, uint64_t gen) {
  if (read_h || wait_h) {
    complete(s.executor(), std::move(h), error_code(asio::error::in_progress));
    return;
  }
  if (readable() || !pcb) {
    // A local close fails the wait; anything else is for the read to report.
    bool closed = !pcb && (!error || error == asio::error::operation_aborted);
    complete(s.executor(), std::move(h), closed ? error_code(asio::error::operation_aborted) : error_code{});
    return;
  }
  read_gen = gen;
  wait_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
}

void TcpConn::cancel_read(uint64_t gen) {
  if (gen != read_gen) return;
  if (read_h) {
    auto h = std::move(read_h);
    read_h = nullptr;
    complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
  }
  if (wait_h) {
    auto h = std::move(wait_h);
    wait_h = nullptr;
    complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted));
  }
}

// A pending write has handed lwIP nothing yet (try_write completes as soon as it has).
void TcpConn::cancel_write(uint64_t gen) {
  if (gen != write_gen || !write_h) return;
  auto h = std::move(write_h);
  write_h = nullptr;
  complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
}

void TcpConn::cancel_connect() {
  if (!connect_h) {
    dial_cancelled = true;  // not yet started (or done: then it is never read)
    return;
  }
  if (!connecting || !pcb) return;
  local_abort = true;
  close(true);  // fail() completes connect_h with operation_aborted
}

err_t TcpConn::on_recv(void* arg, tcp_pcb*, pbuf* p, err_t) {
  auto* c = static_cast<TcpConn*>(arg);
  if (!c) {
    if (p) pbuf_free(p);
    return ERR_OK;
  }
  if (!p) c->rx_eof = true;
  else c->rx.push_back(p);
  if (c->wait_h) {
    auto h = std::move(c->wait_h);
    c->wait_h = nullptr;
    complete(c->s.executor(), std::move(h), error_code{});
  }
  if (c->read_h) {
    auto h = std::move(c->read_h);
    c->read_h = nullptr;
    c->start_read(c->read_buf, std::move(h), c->read_gen);
  }
  return ERR_OK;
}

// Writes complete once lwIP has copied the bytes into its send buffer: when that buffer
// is full the write waits for ACKs (on_sent), so a slow peer slows the writer.
void TcpConn::start_write(asio::const_buffer b, ReadHandler h, uint64_t gen) {
  if (write_h) {
    complete(s.executor(), std::move(h), error_code(asio::error::in_progress), size_t{0});
    return;
  }
  if (error || !pcb) {
    complete(s.executor(), std::move(h), error ? error : error_code(asio::error::operation_aborted), size_t{0});
    return;
  }
  if (b.size() == 0) {
    complete(s.executor(), std::move(h), error_code{}, size_t{0});
    return;
  }
  write_buf = b;
  write_gen = gen;
  write_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
  try_write();
}

void TcpConn::try_write() {
  if (!write_h || !pcb) return;
  size_t room = pcb->snd_buf;  // tcp_sndbuf() clamps to 16 bits; the field is wider
  size_t n = std::min({write_buf.size(), room, kChunk});
  if (n == 0 || tcp_sndqueuelen(pcb) >= TCP_SND_QUEUELEN - 1) return;  // wait for on_sent
  err_t err = tcp_write(pcb, write_buf.data(), static_cast<u16_t>(n), TCP_WRITE_FLAG_COPY);
  if (err == ERR_MEM) return;  // queue full: on_sent retries
  if (err != ERR_OK) {
    auto h = std::move(write_h);
    write_h = nullptr;
    complete(s.executor(), std::move(h), error_code(asio::error::broken_pipe), size_t{0});
    return;
  }
  tcp_output(pcb);
  auto h = std::move(write_h);
  write_h = nullptr;
  complete(s.executor(), std::move(h), error_code{}, n);
}

err_t TcpConn::on_sent(void* arg, tcp_pcb*, u16_t) {
  if (auto* c = static_cast<TcpConn*>(arg)) c->try_write();
  return ERR_OK;
}

// lwIP freed the pcb (RST, retransmission timeout, or our abort).
void TcpConn::on_err(void* arg, err_t err) {
  auto* c = static_cast<TcpConn*>(arg);
  if (!c) return;
  auto keep = c->self;
  c->pcb = nullptr;
  error_code ec;
  if (c->connecting) {
    if (err == ERR_RST) ec = asio::error::connection_refused;
    else if (c->timed_out || !c->local_abort) ec = asio::error::timed_out;
    else ec = asio::error::operation_aborted;
  } else {
    if (err == ERR_RST) ec = asio::error::connection_reset;
    else if (err == ERR_ABRT && !c->local_abort) ec = asio::error::timed_out;
    else ec = asio::error::connection_aborted;
  }
  c->fail(ec);
}

void TcpConn::fail(error_code ec) {
  if (!error) error = ec;
  if (self) s.tcp_active.fetch_sub(1);
  connect_timer.cancel();
  if (connect_h) {
    connecting = false;
    auto h = std::move(connect_h);
    connect_h = nullptr;
    complete(s.executor(), std::move(h), ec, TcpStream{});
  }
  if (read_h) {
    auto h = std::move(read_h);
    read_h = nullptr;
    // Bytes already received are still delivered before the error.
    start_read(read_buf, std::move(h), read_gen);
  }
  if (wait_h) {
    auto h = std::move(wait_h);
    wait_h = nullptr;
    complete(s.executor(), std::move(h),
             ec == asio::error::operation_aborted ? ec : error_code{});  // else the read reports it
  }
  if (write_h) {
    auto h = std::move(write_h);
    write_h = nullptr;
    complete(s.executor(), std::move(h), ec, size_t{0});
  }
  self.reset();  // may destroy *this: nothing after
}

// A pcb whose FINs have crossed both ways (the usual end of a relayed connection: the
// client closed, we sent FIN, the server answered with its own) is in TIME_WAIT, where
// lwIP keeps it and its local port for 2 MSL = 120 s. At 500 new connections a second
// its 16,383 ephemeral ports were all in TIME_WAIT after 33 s and every dial failed. We
// release it now (tcp_abort frees a TIME_WAIT pcb and sends nothing). What TIME_WAIT
// guards against hardly applies in the tunnel: WireGuard's replay window drops duplicated
// packets, RFC 6528 ISNs start a later connection on the same ports far from the old
// sequence numbers, and a peer whose FIN is retransmitted (our last ACK lost) gets a
// RST instead of an ACK, after it has had every byte.
void TcpConn::close(bool abort) {
  if (!pcb) return;
  tcp_pcb* p = pcb;
  tcp_arg(p, nullptr);
  tcp_recv(p, nullptr);
  tcp_sent(p, nullptr);
  tcp_err(p, nullptr);
  pcb = nullptr;
  if (abort || p->state == TIME_WAIT || tcp_close(p) != ERR_OK) tcp_abort(p);
  fail(asio::error::operation_aborted);
}

err_t TcpConn::on_connected(void* arg, tcp_pcb*, err_t err) {
  auto* c = static_cast<TcpConn*>(arg);
  if (!c || !c->connect_h) return ERR_OK;
  c->connecting = false;
  c->connect_timer.cancel();
  auto h = std::move(c->connect_h);
  c->connect_h = nullptr;
  if (err != ERR_OK) {
    complete(c->s.executor(), std::move(h), error_code(asio::error::connection_refused), TcpStream{});
    return ERR_OK;
  }
  c->local = endpoint_of(c->pcb->local_ip, c->pcb->local_port);
  complete(c->s.executor(), std::move(h), error_code{}, TcpStream(c->shared_from_this()));
  return ERR_OK;
}

TcpListen::~TcpListen() { close(); }

void TcpListen::close() {
  if (pcb) {
    tcp_arg(pcb, nullptr);
    tcp_accept(pcb, nullptr);
    tcp_close(pcb);
    pcb = nullptr;
  }
  for (auto& c : pending) c->close(true);
  pending.clear();
  if (accept_h) {
    auto h = std::move(accept_h);
    accept_h = nullptr;
    complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), TcpStream{});
  }
}

void TcpListen::cancel_accept(uint64_t gen) {
  if (gen != accept_gen || !accept_h) return;
  auto h = std::move(accept_h);
  accept_h = nullptr;
  complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), TcpStream{});
}

err_t TcpListen::on_accept(void* arg, tcp_pcb* newpcb, err_t err) {
  auto* l = static_cast<TcpListen*>(arg);
  if (!l || err != ERR_OK || !newpcb) return ERR_VAL;
  if (l->pending.size() >= l->backlog || l->s.tcp_active.load() >= l->s.options.max_tcp_connections) {
    tcp_abort(newpcb);
    return ERR_ABRT;
  }
  auto c = std::make_shared<TcpConn>(l->s);
  c->attach(newpcb);
  if (l->accept_h) {
    auto h = std::move(l->accept_h);
    l->accept_h = nullptr;
    complete(l->s.executor(), std::move(h), error_code{}, TcpStream(c));
  } else {
    l->pending.push_back(std::move(c));
  }
  return ERR_OK;
}

bool StackImpl::bind_local_port(tcp_pcb* pcb) {
  constexpr uint32_t kRange = kLastPort - kFirstPort + 1;
  if (next_port < kFirstPort) next_port = static_cast<uint16_t>(kFirstPort + LWIP_RAND() % kRange);
  for (int i = 0; i < kPortTries; ++i) {
    const uint16_t port = next_port;
    next_port = static_cast<uint16_t>(port == kLastPort ? kFirstPort : port + 1);
    if (tcp_bind(pcb, &pcb->local_ip, port) == ERR_OK) return true;
    // Taken: ports are handed out in order, so its neighbours likely are too. Go on
    // from a random place.
    next_port = static_cast<uint16_t>(kFirstPort + LWIP_RAND() % kRange);
  }
  return false;
}

}  // namespace detail

// --- TcpStream ---

TcpStream::TcpStream(std::shared_ptr<detail::TcpConn> c) : conn_(std::move(c)) {
  if (conn_) executor_ = conn_->s.executor();
}

TcpStream& TcpStream::operator=(TcpStream&& o) noexcept {
  if (this != &o) {
    close();
    conn_ = std::move(o.conn_);
    executor_ = o.executor_;
  }
  return *this;
}

TcpStream::~TcpStream() { close(); }

Executor TcpStream::get_executor() const {
  if (!executor_) throw std::logic_error("TcpStream: a default-constructed stream has no executor");
  return *executor_;
}
Endpoint TcpStream::local_endpoint() const { return conn_ ? conn_->local : Endpoint{}; }
Endpoint TcpStream::remote_endpoint() const { return conn_ ? conn_->remote : Endpoint{}; }

void TcpStream::read_impl(asio::mutable_buffer b, asio::any_completion_handler<void(error_code, size_t)> h) {
  auto gen = detail::begin_op(conn_, h, [](detail::TcpConn& c, uint64_t g) { c.cancel_read(g); }, size_t{0});
  if (!gen) return;
  asio::dispatch(conn_->s.io_, [c = conn_, b, h = std::move(h), g = *gen]() mutable { c->start_read(b, std::move(h), g); });
}

void TcpStream::write_impl(asio::const_buffer b, asio::any_completion_handler<void(error_code, size_t)> h) {
  auto gen = detail::begin_op(conn_, h, [](detail::TcpConn& c, uint64_t g) { c.cancel_write(g); }, size_t{0});
  if (!gen) return;
  asio::dispatch(conn_->s.io_, [c = conn_, b, h = std::move(h), g = *gen]() mutable { c->start_write(b, std::move(h), g); });
}

void TcpStream::wait_impl(asio::any_completion_handler<void(error_code)> h) {
  auto gen = detail::begin_op(conn_, h, [](detail::TcpConn& c, uint64_t g) { c.cancel_read(g); });
  if (!gen) return;
  asio::dispatch(conn_->s.io_, [c = conn_, h = std::move(h), g = *gen]() mutable { c->start_wait(std::move(h), g); });
}

void TcpStream::shutdown_send() {
  if (!conn_ || conn_->gone()) return;
  asio::dispatch(conn_->s.io_, [c = conn_] {
    if (c->pcb) tcp_shutdown(c->pcb, 0, 1);
  });
}

void TcpStream::close() {
  if (!conn_) return;
  auto c = std::move(conn_);
  if (c->gone()) return;  // the Stack closed it at its end
  asio::dispatch(c->s.io_, [c] { c->close(false); });
}

void TcpStream::abort() {
  if (!conn_) return;
  auto c = std::move(conn_);
  if (c->gone()) return;
  asio::dispatch(c->s.io_, [c] {
    c->local_abort = true;
    c->close(true);
  });
}

size_t TcpStream::read_some(asio::mutable_buffer b, error_code& ec) {
  std::promise<std::pair<error_code, size_t>> done;
  auto fut = done.get_future();
  async_read_some(b, [&done](error_code e, size_t n) { done.set_value({e, n}); });
  auto [e, n] = fut.get();
  ec = e;
  return n;
}

size_t TcpStream::write_all(asio::const_buffer b, error_code& ec) {
  size_t total = 0;
  while (total < b.size()) {
    std::promise<std::pair<error_code, size_t>> done;
    auto fut = done.get_future();
    async_write_some(b + total, [&done](error_code e, size_t n) { done.set_value({e, n}); });
    auto [e, n] = fut.get();
    total += n;
    if (e) {
      ec = e;
      return total;
    }
  }
  ec.clear();
  return total;
}

// --- TcpListener ---

TcpListener::~TcpListener() { close(); }

void TcpListener::close() { detail::close_on_stack(l_); }

Endpoint TcpListener::local_endpoint() const { return l_ ? l_->local : Endpoint{}; }

void TcpListener::accept_impl(asio::any_completion_handler<void(error_code, TcpStream)> h) {
  auto gen = detail::begin_op(l_, h, [](detail::TcpListen& l, uint64_t g) { l.cancel_accept(g); }, TcpStream{});
  if (!gen) return;
  asio::dispatch(l_->s.io_, [l = l_, h = std::move(h), gen = *gen]() mutable {
    if (!l->pcb) {
      detail::complete(l->s.executor(), std::move(h), error_code(asio::error::operation_aborted), TcpStream{});
    } else if (!l->pending.empty()) {
      auto c = std::move(l->pending.front());
      l->pending.pop_front();
      detail::complete(l->s.executor(), std::move(h), error_code{}, TcpStream(std::move(c)));
    } else if (l->accept_h) {
      detail::complete(l->s.executor(), std::move(h), error_code(asio::error::in_progress), TcpStream{});
    } else {
      l->accept_gen = gen;
      l->accept_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
    }
  });
}

TcpStream TcpListener::accept(error_code& ec) {
  std::promise<std::pair<error_code, TcpStream>> done;
  auto fut = done.get_future();
  async_accept([&done](error_code e, TcpStream s) { done.set_value({e, std::move(s)}); });
  auto [e, s] = fut.get();
  ec = e;
  return std::move(s);
}

// --- Stack: dial and listen ---

void Stack::dial_tcp_impl(Endpoint to, asio::any_completion_handler<void(error_code, TcpStream)> h) {
  auto* s = impl_.get();
  auto c = std::make_shared<detail::TcpConn>(*s);
  detail::on_cancel(*s, h, [w = std::weak_ptr<detail::TcpConn>(c)] {
    if (auto c = w.lock()) c->cancel_connect();
  });
  asio::dispatch(s->io_, [s, c, to, h = std::move(h)]() mutable {
    if (c->dial_cancelled || s->closing) {
      detail::complete(s->executor(), std::move(h), error_code(asio::error::operation_aborted), TcpStream{});
      return;
    }
    if (to.addr.family == 0 || to.port == 0) {
      detail::complete(s->executor(), std::move(h), error_code(asio::error::invalid_argument), TcpStream{});
      return;
    }
    if (!s->routable(to.addr)) {
      detail::complete(s->executor(), std::move(h), error_code(asio::error::host_unreachable), TcpStream{});
      return;
    }
    if (s->tcp_active.load() >= s->options.max_tcp_connections) {
      detail::complete(s->executor(), std::move(h), error_code(asio::error::no_buffer_space), TcpStream{});
      return;
    }
    tcp_pcb* pcb = s->new_tcp(to.addr.is_v4() ? IPADDR_TYPE_V4 : IPADDR_TYPE_V6);
    if (!pcb) {
      detail::complete(s->executor(), std::move(h), error_code(asio::error::no_memory), TcpStream{});
      return;
    }
    if (!s->bind_local_port(pcb)) {
      tcp_abort(pcb);
      detail::complete(s->executor(), std::move(h),
                       make_error_code(boost::system::errc::address_not_available), TcpStream{});
      return;
    }
    c->attach(pcb);
    c->remote = to;
    c->connecting = true;
    c->connect_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
    ip_addr_t addr = detail::to_lwip(to.addr);
    if (tcp_connect(pcb, &addr, to.port, &detail::TcpConn::on_connected) != ERR_OK) {
      c->local_abort = true;
      c->close(true);
      return;
    }
    c->connect_timer.expires_after(s->options.dial_timeout);
    c->connect_timer.async_wait([w = std::weak_ptr<detail::TcpConn>(c)](const error_code& ec) {
      auto c = w.lock();
      if (ec || !c || !c->connecting || !c->pcb) return;
      c->timed_out = true;
      c->local_abort = true;
      tcp_abort(c->pcb);  // on_err reports timed_out
    });
  });
}

TcpStream Stack::dial_tcp(const Endpoint& to, error_code& ec) {
  std::promise<std::pair<error_code, TcpStream>> done;
  auto fut = done.get_future();
  async_dial_tcp(to, [&done](error_code e, TcpStream s) { done.set_value({e, std::move(s)}); });
  auto [e, s] = fut.get();
  ec = e;
  return std::move(s);
}

TcpListener Stack::listen_tcp(const Endpoint& local, error_code& ec, int backlog) {
  auto* s = impl_.get();
  return s->call([&]() -> TcpListener {
    auto l = std::make_shared<detail::TcpListen>(*s);
    if (s->closing) {
      ec = asio::error::operation_aborted;
      return {};
    }
    tcp_pcb* pcb = s->new_tcp(local.addr.family == 0 ? IPADDR_TYPE_ANY
                                   : local.addr.is_v4()    ? IPADDR_TYPE_V4
                                                           : IPADDR_TYPE_V6);
    if (!pcb) {
      ec = asio::error::no_memory;
      return {};
    }
    ip_addr_t addr = local.addr.family ? detail::to_lwip(local.addr) : *IP_ANY_TYPE;
    if (tcp_bind(pcb, &addr, local.port) != ERR_OK) {
      tcp_close(pcb);
      ec = asio::error::address_in_use;
      return {};
    }
    tcp_pcb* lpcb = tcp_listen_with_backlog(pcb, static_cast<u8_t>(std::min(backlog, 255)));
    if (!lpcb) {
      tcp_close(pcb);
      ec = asio::error::no_memory;
      return {};
    }
    l->pcb = lpcb;
    l->backlog = static_cast<size_t>(backlog);
    l->local = {local.addr, lpcb->local_port};
    tcp_arg(lpcb, l.get());
    tcp_accept(lpcb, &detail::TcpListen::on_accept);
    ec.clear();
    return TcpListener(l);
  });
}

}  // namespace netstack

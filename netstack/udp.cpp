// UDP sockets over lwIP (ping is netstack/ping.cpp).
#include <boost/asio/error.hpp>

#include <cstring>

#include "netstack/stack_impl.hpp"

namespace netstack {
namespace detail {

UdpConn::~UdpConn() { close(); }

void UdpConn::close() {
  if (pcb) {
    udp_recv(pcb, nullptr, nullptr);
    udp_remove(pcb);
    pcb = nullptr;
  }
  queue.clear();
  if (recv_h) {
    auto h = std::move(recv_h);
    recv_h = nullptr;
    complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
  }
}

void UdpConn::on_recv(void* arg, udp_pcb*, pbuf* p, const ip_addr_t* addr, u16_t port) {
  auto* u = static_cast<UdpConn*>(arg);
  if (!u || !p) {
    if (p) pbuf_free(p);
    return;
  }
  Endpoint from{from_lwip(*addr), port};
  if (u->recv_h && u->recv_from) {
    size_t n = pbuf_copy_partial(p, u->recv_buf.data(), static_cast<u16_t>(std::min<size_t>(u->recv_buf.size(), 0xffff)), 0);
    *u->recv_from = from;
    pbuf_free(p);
    auto h = std::move(u->recv_h);
    u->recv_h = nullptr;
    complete(u->s.executor(), std::move(h), error_code{}, n);
    return;
  }
  if (u->queue.size() >= u->s.options.udp_queue) {  // a reader that lags loses datagrams, as UDP does
    u->s.dropped.fetch_add(1, std::memory_order_relaxed);
    pbuf_free(p);
    return;
  }
  std::vector<uint8_t> data(p->tot_len);
  pbuf_copy_partial(p, data.data(), p->tot_len, 0);
  pbuf_free(p);
  u->queue.push_back({from, std::move(data)});
  if (u->recv_h) {  // a wait: the datagram stays queued for the receive that follows
    auto h = std::move(u->recv_h);
    u->recv_h = nullptr;
    complete(u->s.executor(), std::move(h), error_code{}, u->queue.back().data.size());
  }
}

void UdpConn::cancel_recv(uint64_t gen) {
  if (gen != recv_gen || !recv_h) return;
  auto h = std::move(recv_h);
  recv_h = nullptr;
  complete(s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
}

namespace {

std::shared_ptr<UdpConn> open_udp(StackImpl& s, const Endpoint& local, const Endpoint* remote, error_code& ec) {
  if (s.closing) {
    ec = asio::error::operation_aborted;
    return nullptr;
  }
  auto u = std::make_shared<UdpConn>(s);
  uint8_t type = IPADDR_TYPE_ANY;
  if (remote) type = remote->addr.is_v4() ? IPADDR_TYPE_V4 : IPADDR_TYPE_V6;
  else if (local.addr.family) type = local.addr.is_v4() ? IPADDR_TYPE_V4 : IPADDR_TYPE_V6;
  u->pcb = s.new_udp(type);
  if (!u->pcb) {
    ec = asio::error::no_memory;
    return nullptr;
  }
  ip_addr_t laddr = local.addr.family ? to_lwip(local.addr) : *IP_ANY_TYPE;
  if (udp_bind(u->pcb, &laddr, local.port) != ERR_OK) {
    ec = asio::error::address_in_use;
    return nullptr;
  }
  if (remote) {
    ip_addr_t raddr = to_lwip(remote->addr);
    if (udp_connect(u->pcb, &raddr, remote->port) != ERR_OK) {
      ec = asio::error::invalid_argument;
      return nullptr;
    }
    u->connected = true;
  }
  u->local = {local.addr, u->pcb->local_port};
  udp_recv(u->pcb, &UdpConn::on_recv, u.get());
  ec.clear();
  return u;
}

}  // namespace
}  // namespace detail

UdpSocket::~UdpSocket() { close(); }

void UdpSocket::close() { detail::close_on_stack(u_); }

Endpoint UdpSocket::local_endpoint() const { return u_ ? u_->local : Endpoint{}; }

void UdpSocket::send_impl(asio::const_buffer b, Endpoint to, asio::any_completion_handler<void(error_code, size_t)> h) {
  if (!u_) {
    detail::complete_now(std::move(h), error_code(asio::error::bad_descriptor), size_t{0});
    return;
  }
  if (u_->gone()) {
    detail::complete_now(std::move(h), error_code(asio::error::operation_aborted), size_t{0});
    return;
  }
  asio::dispatch(u_->s.io_, [u = u_, b, to, h = std::move(h)]() mutable {
    auto done = [&](error_code ec, size_t n) { detail::complete(u->s.executor(), std::move(h), ec, n); };
    if (!u->pcb) return done(asio::error::operation_aborted, 0);
    if (b.size() > 65507) return done(asio::error::message_size, 0);
    bool use_default = u->connected && to.addr.family == 0;
    if (!use_default && (to.addr.family == 0 || to.port == 0)) return done(asio::error::invalid_argument, 0);
    if (!use_default && !u->s.routable(to.addr)) return done(asio::error::host_unreachable, 0);
    pbuf* p = pbuf_alloc(PBUF_TRANSPORT, static_cast<u16_t>(b.size()), PBUF_RAM);
    if (!p) return done(asio::error::no_memory, 0);
    pbuf_take(p, b.data(), static_cast<u16_t>(b.size()));
    err_t err;
    if (use_default) {
      err = udp_send(u->pcb, p);
    } else {
      ip_addr_t addr = detail::to_lwip(to.addr);
      err = udp_sendto(u->pcb, p, &addr, to.port);
    }
    pbuf_free(p);
    if (err == ERR_RTE) return done(asio::error::host_unreachable, 0);
    if (err != ERR_OK) return done(asio::error::no_buffer_space, 0);
    done({}, b.size());
  });
}

void UdpSocket::receive_impl(asio::mutable_buffer b, Endpoint* from,
                             asio::any_completion_handler<void(error_code, size_t)> h) {
  auto gen = detail::begin_op(u_, h, [](detail::UdpConn& u, uint64_t g) { u.cancel_recv(g); }, size_t{0});
  if (!gen) return;
  asio::dispatch(u_->s.io_, [u = u_, b, from, h = std::move(h), gen = *gen]() mutable {
    if (!u->pcb) return detail::complete(u->s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
    if (u->recv_h) return detail::complete(u->s.executor(), std::move(h), error_code(asio::error::in_progress), size_t{0});
    if (!u->queue.empty()) {
      auto d = std::move(u->queue.front());
      u->queue.pop_front();
      size_t n = std::min(b.size(), d.data.size());
      std::memcpy(b.data(), d.data.data(), n);
      *from = d.from;
      return detail::complete(u->s.executor(), std::move(h), error_code{}, n);
    }
    u->recv_buf = b;
    u->recv_from = from;
    u->recv_gen = gen;
    u->recv_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
  });
}

void UdpSocket::wait_impl(asio::any_completion_handler<void(error_code, size_t)> h) {
  auto gen = detail::begin_op(u_, h, [](detail::UdpConn& u, uint64_t g) { u.cancel_recv(g); }, size_t{0});
  if (!gen) return;
  asio::dispatch(u_->s.io_, [u = u_, h = std::move(h), gen = *gen]() mutable {
    if (!u->pcb) return detail::complete(u->s.executor(), std::move(h), error_code(asio::error::operation_aborted), size_t{0});
    if (u->recv_h) return detail::complete(u->s.executor(), std::move(h), error_code(asio::error::in_progress), size_t{0});
    if (!u->queue.empty()) return detail::complete(u->s.executor(), std::move(h), error_code{}, u->queue.front().data.size());
    u->recv_buf = {};
    u->recv_from = nullptr;
    u->recv_gen = gen;
    u->recv_h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
  });
}

UdpSocket Stack::listen_udp(const Endpoint& local, error_code& ec) {
  auto* s = impl_.get();
  auto u = s->call([&] { return detail::open_udp(*s, local, nullptr, ec); });
  return u ? UdpSocket(std::move(u)) : UdpSocket{};
}

UdpSocket Stack::dial_udp(const Endpoint& remote, error_code& ec) {
  auto* s = impl_.get();
  if (remote.addr.family == 0 || remote.port == 0) {
    ec = asio::error::invalid_argument;
    return {};
  }
  if (!s->routable(remote.addr)) {
    ec = asio::error::host_unreachable;
    return {};
  }
  auto u = s->call([&] { return detail::open_udp(*s, Endpoint{}, &remote, ec); });
  return u ? UdpSocket(std::move(u)) : UdpSocket{};
}

}  // namespace netstack

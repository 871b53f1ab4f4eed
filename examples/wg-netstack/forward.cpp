// Forwards between local sockets and the tunnel. UDP forwards keep one flow per remote
// source, closed after 60 s without traffic.
#include "forward.hpp"

#include <unistd.h>

#include <boost/asio/steady_timer.hpp>

#include <map>
#include <stdexcept>

#include "accept_loop.hpp"
#include "dial.hpp"
#include "listener.hpp"
#include "wg/base/log.hpp"

namespace wgns {
namespace {


asio::ip::address local_address(const std::string& host) {
  if (host == "localhost") return asio::ip::address_v4::loopback();
  error_code ec;
  auto a = asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("not a local IP address: " + host);
  return a;
}

// --- forward: local → tunnel ---

awaitable<void> forward_one(Context& ctx, std::shared_ptr<const ForwardSpec> shared_spec, tcp::socket s) {
  const ForwardSpec& spec = *shared_spec;
  ctx.metrics.connections_total.fetch_add(1);
  auto [derr, stream] = co_await dial_host(ctx, spec.to_host, spec.to_port);
  if (derr) {
    ctx.metrics.connections_failed.fetch_add(1);
    wg::log::error("forward {}: {}", spec.text, derr.message());
    co_return;
  }
  ctx.metrics.connection_opened();
  co_await relay(s, stream);
  ctx.metrics.connection_closed();
}

awaitable<void> forward_tcp(Context& ctx, std::shared_ptr<tcp::acceptor> acc, ForwardSpec spec) {
  auto shared_spec = std::make_shared<const ForwardSpec>(std::move(spec));
  // Named, not temporaries of the co_await: g++ 12 destroys such temporaries twice.
  const std::string kind = "forward " + shared_spec->text;
  std::function<awaitable<void>(tcp::socket)> serve_one = [&ctx, shared_spec](tcp::socket s) {
    return forward_one(ctx, shared_spec, std::move(s));
  };
  co_await accept_loop(ctx, *acc, kind, std::move(serve_one));
}

// The replies of one UDP flow, back to where its datagrams came from, for as long as the
// flow lives (it holds no reference to the flow while it waits): `receive(flow, buffer)`
// starts a receive on the flow (asio::deferred), `reply(bytes)` sends what came back.
template <class Flow, class Receive, class Reply>
awaitable<void> relay_replies(std::weak_ptr<Flow> flow, Receive receive, Reply reply) {
  std::vector<uint8_t> rbuf(65535);
  for (;;) {
    auto f = flow.lock();
    if (!f) co_return;
    auto op = receive(*f, asio::buffer(rbuf));
    f.reset();  // do not keep the flow alive while waiting
    auto [e, m] = co_await std::move(op)(kTry);
    if (e) co_return;
    if (auto f2 = flow.lock()) f2->last = std::chrono::steady_clock::now();
    co_await reply(asio::buffer(rbuf.data(), m));
  }
}

struct UdpFlow {
  netstack::UdpSocket tunnel;
  std::chrono::steady_clock::time_point last;
};

awaitable<void> forward_udp(Context& ctx, std::shared_ptr<udp::socket> sock, ForwardSpec spec) {
  std::map<udp::endpoint, std::shared_ptr<UdpFlow>> flows;
  std::vector<uint8_t> buf(65535);
  for (;;) {
    udp::endpoint from;
    auto [ec, n] = co_await sock->async_receive_from(asio::buffer(buf), from, kTry);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    auto now = std::chrono::steady_clock::now();
    std::erase_if(flows, [&](auto& kv) {
      if (now - kv.second->last < spec.udp_idle) return false;
      kv.second->tunnel.close();
      return true;
    });
    auto& flow = flows[from];
    if (!flow) {
      auto [rerr, addrs] = co_await resolve_host(ctx, spec.to_host);
      if (rerr || addrs.empty()) {
        flows.erase(from);
        continue;
      }
      error_code derr;
      auto t = ctx.stack.dial_udp({addrs.front(), spec.to_port}, derr);
      if (derr) {
        flows.erase(from);
        continue;
      }
      flow = std::make_shared<UdpFlow>(UdpFlow{std::move(t), now});
      // Replies from the tunnel go back to this client.
      asio::co_spawn(sock->get_executor(),
                     relay_replies(
                         std::weak_ptr<UdpFlow>(flow),
                         [src = netstack::Endpoint{}](UdpFlow& f, asio::mutable_buffer b) mutable {
                           return f.tunnel.async_receive_from(b, src, asio::deferred);
                         },
                         [sock, from](asio::const_buffer b) { return sock->async_send_to(b, from, kTry); }),
                     asio::detached);
    }
    flow->last = now;
    ctx.metrics.udp_datagrams.fetch_add(1);
    co_await flow->tunnel.async_send_to(asio::buffer(buf.data(), n), netstack::Endpoint{}, kTry);
  }
}

// --- reverse: tunnel → local ---

// At most ctx.limits.max_connections relayed at once, as the local listeners: one more is
// reset at once (each its own descriptor here).
awaitable<void> reverse_tcp(Context& ctx, std::shared_ptr<netstack::TcpListener> l, ForwardSpec spec,
                            tcp::endpoint target) {
  programs::ConnectionCap cap("reverse " + spec.text, ctx.limits.max_connections);  // the stack's thread's
  for (;;) {
    auto [ec, stream] = co_await l->async_accept(kTry);
    if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
    if (ec) {  // (the stack out of memory): no busy loop
      asio::steady_timer pause(ctx.stack.get_executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(kTry);
      continue;
    }
    if (!cap.admit()) {
      ctx.metrics.connections_refused.fetch_add(1);
      stream.abort();
      continue;
    }
    asio::co_spawn(ctx.stack.get_executor(), [&ctx, spec, target, slot = cap.slot(), stream = std::move(stream)]() mutable -> awaitable<void> {
      ctx.metrics.connections_total.fetch_add(1);
      tcp::socket s(ctx.stack.get_executor());
      auto [cerr] = co_await s.async_connect(target, kTry);
      if (cerr) {
        ctx.metrics.connections_failed.fetch_add(1);
        wg::log::error("reverse {}: {}", spec.text, cerr.message());
        stream.abort();  // the remote side sees a reset, like a refused port
        co_return;
      }
      error_code ec;
      s.set_option(tcp::no_delay(true), ec);
      ctx.metrics.connection_opened();
      co_await relay(stream, s);
      ctx.metrics.connection_closed();
    }, asio::detached);
  }
}

awaitable<void> reverse_udp(Context& ctx, std::shared_ptr<netstack::UdpSocket> t, udp::endpoint target) {
  struct Flow {
    udp::socket sock;
    std::chrono::steady_clock::time_point last;
  };
  std::map<std::pair<std::string, uint16_t>, std::shared_ptr<Flow>> flows;
  std::vector<uint8_t> buf(65535);
  for (;;) {
    netstack::Endpoint from;
    auto [ec, n] = co_await t->async_receive_from(asio::buffer(buf), from, kTry);
    if (ec) co_return;
    auto now = std::chrono::steady_clock::now();
    std::erase_if(flows, [&](auto& kv) {
      if (now - kv.second->last < kUdpFlowIdle) return false;
      error_code e;
      kv.second->sock.close(e);
      return true;
    });
    auto key = std::pair{from.addr.to_string(), from.port};
    auto& flow = flows[key];
    if (!flow) {
      flow = std::make_shared<Flow>(Flow{udp::socket(ctx.stack.get_executor()), now});
      error_code e;
      flow->sock.open(target.protocol(), e);
      if (!e) flow->sock.connect(target, e);
      if (e) {
        flows.erase(key);
        continue;
      }
      asio::co_spawn(ctx.stack.get_executor(),
                     relay_replies(
                         std::weak_ptr<Flow>(flow),
                         [](Flow& f, asio::mutable_buffer b) { return f.sock.async_receive(b, asio::deferred); },
                         [t, from](asio::const_buffer b) { return t->async_send_to(b, from, kTry); }),
                     asio::detached);
    }
    flow->last = now;
    co_await flow->sock.async_send(asio::buffer(buf.data(), n), kTry);
  }
}

}  // namespace

ForwardSpec parse_forward(const std::string& s) {
  ForwardSpec f;
  f.text = s;
  auto colon = s.find(':');
  auto eq = s.find('=');
  if (colon == std::string::npos || eq == std::string::npos || eq < colon)
    throw std::invalid_argument("forward '" + s + "' must look like tcp:LOCAL_ADDR:PORT=REMOTE_ADDR:PORT");
  std::string proto = s.substr(0, colon);
  if (proto == "udp") f.udp = true;
  else if (proto != "tcp") throw std::invalid_argument("forward '" + s + "': protocol must be tcp or udp");
  if (!split_host_port(s.substr(colon + 1, eq - colon - 1), f.from_host, f.from_port) ||
      !split_host_port(s.substr(eq + 1), f.to_host, f.to_port) || f.to_port == 0)
    throw std::invalid_argument("forward '" + s + "': addresses must be ADDR:PORT with a port");
  return f;
}

void start_forward(Context& ctx, const ForwardSpec& spec) {
  auto ex = ctx.stack.get_executor();
  auto addr = local_address(spec.from_host);
  if (spec.udp) {
    auto sock = std::make_shared<udp::socket>(ex);
    error_code ec;
    sock->open(addr.is_v4() ? udp::v4() : udp::v6(), ec);
    if (!ec) sock->bind({addr, spec.from_port}, ec);
    if (ec) throw std::runtime_error("forward " + spec.text + ": cannot listen: " + ec.message());
    asio::co_spawn(ex, forward_udp(ctx, sock, spec), asio::detached);
    return;
  }
  auto acc = std::make_shared<tcp::acceptor>(ex);
  error_code ec;
  acc->open(addr.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (!ec) acc->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acc->bind({addr, spec.from_port}, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("forward " + spec.text + ": cannot listen: " + ec.message());
  asio::co_spawn(ex, forward_tcp(ctx, acc, spec), asio::detached);
}

void start_reverse(Context& ctx, const ForwardSpec& spec) {
  auto tunnel_addr = wg::IpAddress::parse(spec.from_host);
  if (!tunnel_addr) throw std::invalid_argument("reverse " + spec.text + ": the tunnel side must be an IP address");
  auto target_addr = local_address(spec.to_host);
  error_code ec;
  if (spec.udp) {
    auto t = std::make_shared<netstack::UdpSocket>(ctx.stack.listen_udp({*tunnel_addr, spec.from_port}, ec));
    if (ec) throw std::runtime_error("reverse " + spec.text + ": cannot listen in the tunnel: " + ec.message());
    asio::co_spawn(ctx.stack.get_executor(), reverse_udp(ctx, t, udp::endpoint(target_addr, spec.to_port)),
                   asio::detached);
    return;
  }
  auto l = std::make_shared<netstack::TcpListener>(ctx.stack.listen_tcp({*tunnel_addr, spec.from_port}, ec));
  if (ec) throw std::runtime_error("reverse " + spec.text + ": cannot listen in the tunnel: " + ec.message());
  asio::co_spawn(ctx.stack.get_executor(), reverse_tcp(ctx, l, spec, tcp::endpoint(target_addr, spec.to_port)),
                 asio::detached);
}

namespace {

// True once the connection was made (it has ended when this returns).
awaitable<bool> stdio_tunnel(Context& ctx, std::string host, uint16_t port) {
  auto [derr, stream] = co_await dial_host(ctx, host, port);
  if (derr) {
    wg::log::error("stdio tunnel: {}:{}: {}", host, port, derr.message());
    co_return false;
  }
  auto ex = co_await asio::this_coro::executor;
  asio::posix::stream_descriptor in(ex, ::dup(STDIN_FILENO)), out(ex, ::dup(STDOUT_FILENO));
  bool failed = false;
  using namespace asio::experimental::awaitable_operators;
  co_await (pump(in, stream, failed) && pump(stream, out, failed));
  close_stream(in);
  close_stream(out);
  stream.close();
  co_return true;
}

}  // namespace

void start_stdio_tunnel(Context& ctx, const std::string& host, uint16_t port, std::function<void(bool)> done) {
  asio::co_spawn(ctx.stack.get_executor(), stdio_tunnel(ctx, host, port),
                 [done = std::move(done)](std::exception_ptr e, bool connected) { done(!e && connected); });
}

}  // namespace wgns

// Shared pieces of wg-netstack: the context every service runs in, and the relay that
// copies bytes both ways between a local socket and a tunnel stream.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "netstack/stack.hpp"
#include "wg/device.hpp"

namespace wgns {

namespace asio = boost::asio;
using boost::system::error_code;
using asio::awaitable;
using asio::ip::tcp;
using asio::ip::udp;
inline constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

struct Metrics {
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> connections_active{0};
  std::atomic<uint64_t> connections_failed{0};
  std::atomic<uint64_t> udp_datagrams{0};
};

struct Context {
  netstack::Stack& stack;
  wg::Device& device;
  Metrics metrics;
  // SOCKS5 / HTTP proxy credentials (empty user: none required).
  std::string user, password;
};

// Counts a proxied connection as active for its lifetime.
struct ActiveConnection {
  explicit ActiveConnection(Metrics& m) : m(m) {
    m.connections_total.fetch_add(1);
    m.connections_active.fetch_add(1);
  }
  ~ActiveConnection() { m.connections_active.fetch_sub(1); }
  Metrics& m;
};

// Accepts on `acceptor` until it is closed, serving each client in its own coroutine.
template <class Serve>
awaitable<void> accept_loop(tcp::acceptor& acceptor, Serve serve) {
  for (;;) {
    auto [ec, s] = co_await acceptor.async_accept(kTry);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;
    s.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(acceptor.get_executor(), serve(std::move(s)), asio::detached);
  }
}

// Resolves host (a name through the tunnel's DNS, or a literal) and dials the first
// address that answers. Errors as the last attempt reported.
awaitable<std::pair<error_code, netstack::TcpStream>> dial_host(Context& ctx, const std::string& host,
                                                                uint16_t port);

inline void shutdown_send(tcp::socket& s) {
  error_code ec;
  s.shutdown(tcp::socket::shutdown_send, ec);
}
inline void shutdown_send(netstack::TcpStream& s) { s.shutdown_send(); }
inline void close_stream(tcp::socket& s) {
  error_code ec;
  s.close(ec);
}
inline void close_stream(netstack::TcpStream& s) { s.close(); }

// Copies one direction until EOF (then half-closes the other side) or an error (then
// closes both, which ends the other direction too).
template <class From, class To>
awaitable<void> pump(From& from, To& to, bool& failed) {
  std::vector<uint8_t> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), kTry);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), kTry);
      if (wec) {
        failed = true;
        break;
      }
    }
    if (ec) {
      if (ec != asio::error::eof) failed = true;
      break;
    }
  }
  if (failed) {
    close_stream(from);
    close_stream(to);
  } else {
    shutdown_send(to);
  }
}

template <class A, class B>
awaitable<void> relay(A& a, B& b) {
  using namespace asio::experimental::awaitable_operators;
  bool failed = false;
  co_await (pump(a, b, failed) && pump(b, a, failed));
  close_stream(a);
  close_stream(b);
}

// "ADDR:PORT" / "[v6]:PORT" → asio endpoint; throws std::invalid_argument.
tcp::endpoint parse_listen(const std::string& s);
// Splits "host:port" / "[v6]:port"; false if malformed.
bool split_host_port(const std::string& s, std::string& host, uint16_t& port);

}  // namespace wgns

// netstack::Stack: an in-process TCP/IP stack (lwIP) that is a tun::Device under the
// WireGuard core, with TCP, UDP, ping and DNS through the tunnel.
//
// lwIP state is global: all Stacks of a process share one lwIP thread (get_executor())
// and lwIP's memory pools. Operations complete on the handler's associated executor.
// Blocking helpers must not be called on that thread.
//
// Every async operation honours its handler's cancellation slot (any type, from any
// thread, even after completion, but not racing the Stack's destruction). A cancelled read, write, wait,
// accept or receive completes with operation_aborted having transferred nothing and
// leaves its object usable; a cancelled dial, ping or lookup is abandoned.
//
// Closing an object completes its pending operations with operation_aborted. The
// destructor does the same for every operation of the Stack before it returns; objects
// may outlive it and then fail with operation_aborted. Not safe: destroying the Stack
// while another thread starts operations on it, on the lwIP thread, or while a
// wg::Device still runs on it.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tun/device.hpp"
#include "wg/base/ip.hpp"

namespace netstack {

namespace asio = boost::asio;
using error_code = boost::system::error_code;
using Executor = asio::io_context::executor_type;

struct Endpoint {
  wg::IpAddress addr;
  uint16_t port = 0;
  std::string to_string() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

namespace detail {
struct TcpConn;
struct TcpListen;
struct UdpConn;
class StackImpl;
}  // namespace detail

// A TCP connection (AsyncReadStream, AsyncWriteStream). The window opens only as bytes
// are read and writes complete once lwIP took the bytes, so memory stays bounded.
// Errors: eof, connection_reset, connection_refused, timed_out, host_unreachable,
// operation_aborted (closed locally).
class TcpStream {
public:
  using executor_type = Executor;

  TcpStream() = default;
  explicit TcpStream(std::shared_ptr<detail::TcpConn> c);
  TcpStream(TcpStream&&) noexcept = default;
  TcpStream& operator=(TcpStream&&) noexcept;
  ~TcpStream();

  // Also after close() or a move; throws std::logic_error if default-constructed.
  executor_type get_executor() const;
  bool is_open() const { return conn_ != nullptr; }
  Endpoint local_endpoint() const;
  Endpoint remote_endpoint() const;

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this](auto handler, asio::mutable_buffer b) { read_impl(b, std::move(handler)); }, token,
        first_buffer(buffers));
  }
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this](auto handler, asio::const_buffer b) { write_impl(b, std::move(handler)); }, token,
        first_buffer(buffers));
  }
  // Waits until a read would complete at once, holding no buffer. Counts as a read.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>([this](auto handler) { wait_impl(std::move(handler)); },
                                                         token);
  }

  // Sends FIN after queued data; reading stays possible.
  void shutdown_send();
  // Closes gracefully (FIN); pending operations complete with operation_aborted.
  void close();
  // Resets the connection (RST).
  void abort();

  // Blocking helpers (not on the Stack's thread).
  size_t read_some(asio::mutable_buffer b, error_code& ec);
  size_t write_all(asio::const_buffer b, error_code& ec);

private:
  template <class Seq>
  static auto first_buffer(const Seq& s) {
    for (auto it = asio::buffer_sequence_begin(s); it != asio::buffer_sequence_end(s); ++it)
      if (asio::buffer_size(*it) > 0) return *it;
    return *asio::buffer_sequence_begin(s);
  }
  void read_impl(asio::mutable_buffer b, asio::any_completion_handler<void(error_code, size_t)> h);
  void write_impl(asio::const_buffer b, asio::any_completion_handler<void(error_code, size_t)> h);
  void wait_impl(asio::any_completion_handler<void(error_code)> h);

  std::shared_ptr<detail::TcpConn> conn_;
  std::optional<Executor> executor_;
};

class TcpListener {
public:
  TcpListener() = default;
  explicit TcpListener(std::shared_ptr<detail::TcpListen> l) : l_(std::move(l)) {}
  TcpListener(TcpListener&&) noexcept = default;
  TcpListener& operator=(TcpListener&&) noexcept = default;
  ~TcpListener();

  template <class Token>
  auto async_accept(Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler) { accept_impl(std::move(handler)); }, token);
  }
  TcpStream accept(error_code& ec);  // blocking
  Endpoint local_endpoint() const;
  void close();

private:
  void accept_impl(asio::any_completion_handler<void(error_code, TcpStream)> h);
  std::shared_ptr<detail::TcpListen> l_;
};

// A UDP socket; a dialed one has a default remote for send/receive.
class UdpSocket {
public:
  UdpSocket() = default;
  explicit UdpSocket(std::shared_ptr<detail::UdpConn> u) : u_(std::move(u)) {}
  UdpSocket(UdpSocket&&) noexcept = default;
  UdpSocket& operator=(UdpSocket&&) noexcept = default;
  ~UdpSocket();

  template <class Token>
  auto async_send_to(asio::const_buffer b, const Endpoint& to, Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this](auto handler, asio::const_buffer buf, Endpoint ep) { send_impl(buf, ep, std::move(handler)); },
        token, b, to);
  }
  // Receives one datagram (truncated to the buffer); `from` must outlive the operation.
  template <class Token>
  auto async_receive_from(asio::mutable_buffer b, Endpoint& from, Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this, &from](auto handler, asio::mutable_buffer buf) { receive_impl(buf, &from, std::move(handler)); },
        token, b);
  }
  // Completes with the next datagram's size, leaving it queued.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [this](auto handler) { wait_impl(std::move(handler)); }, token);
  }
  Endpoint local_endpoint() const;
  void close();
  bool is_open() const { return u_ != nullptr; }

private:
  void wait_impl(asio::any_completion_handler<void(error_code, size_t)> h);
  void send_impl(asio::const_buffer b, Endpoint to, asio::any_completion_handler<void(error_code, size_t)> h);
  void receive_impl(asio::mutable_buffer b, Endpoint* from,
                    asio::any_completion_handler<void(error_code, size_t)> h);
  std::shared_ptr<detail::UdpConn> u_;
};

struct StackOptions {
  std::vector<wg::IpPrefix> addresses;
  int mtu = 1420;
  std::vector<wg::IpAddress> dns_servers;  // reached through the tunnel
  // As glibc: retry on the next server after dns_retry, doubling per round.
  std::chrono::milliseconds dns_retry{1000};
  std::chrono::milliseconds dns_timeout{5000};
  // 0: no cache.
  size_t dns_cache_size = 256;
  size_t max_tcp_connections = 16384;
  size_t udp_queue = 512;                   // datagrams per socket
  std::chrono::milliseconds dial_timeout{30000};
  // BBR keeps its rate under random loss; CUBIC is RFC 9438.
  enum class Congestion { bbr, cubic };
  Congestion tcp_congestion = Congestion::bbr;
  // Idle time before each keepalive probe; after tcp_keepalive_probes unanswered ones,
  // timed_out. 0: off.
  std::chrono::milliseconds tcp_keepalive{0};
  int tcp_keepalive_probes = 9;
};

// How a name is dialed (Stack::async_dial_tcp/async_dial_udp with a host name).
struct DialOptions {
  enum class Family { any, ipv4, ipv6 };
  Family family = Family::any;  // a literal is always tried
  // RFC 8305's Connection Attempt Delay.
  std::chrono::milliseconds attempt_delay{250};
};

// Happy Eyeballs order (RFC 8305 §4): IPv6 first, then alternating families.
std::vector<wg::IpAddress> dial_order(const std::vector<wg::IpAddress>& addrs, DialOptions::Family family);

class Stack final : public tun::Device {
public:
  // Past kMaxStacks: errc::too_many_files_open (lwIP numbers netifs in a byte); bad
  // options: errc::invalid_argument.
  static constexpr int kMaxStacks = 250;
  static std::unique_ptr<Stack> create(const StackOptions& options, std::error_code& ec);
  ~Stack() override;

  // --- tun::Device (used by wg::Device) ---
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override;
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override;
  size_t batch_size() const override { return 128; }
  int mtu() const override;
  void set_event_handler(std::function<void(tun::Event)> handler) override;
  void close() override;

  Executor get_executor();
  const StackOptions& options() const;
  // Consulted before dialing: false fails at once with host_unreachable.
  void set_route_check(std::function<bool(const wg::IpAddress&)> check);

  // --- dialer ---
  template <class Token>
  auto async_dial_tcp(const Endpoint& to, Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler, Endpoint ep) { dial_tcp_impl(ep, std::move(handler)); }, token, to);
  }
  // Resolves, then Happy Eyeballs in dial_order. Fails with the lookup's error,
  // host_not_found if no address fits, else the last attempt's.
  template <class Token>
  auto async_dial_tcp(std::string host, uint16_t port, const DialOptions& options, Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler, std::string h, uint16_t p, DialOptions o) {
          dial_name_impl(std::move(h), p, o, std::move(handler));
        },
        token, std::move(host), port, options);
  }
  template <class Token>
  auto async_dial_tcp(std::string host, uint16_t port, Token&& token) {
    return async_dial_tcp(std::move(host), port, DialOptions{}, std::forward<Token>(token));
  }
  // Happy Eyeballs in the order given.
  template <class Token>
  auto async_dial_tcp(std::vector<Endpoint> candidates, const DialOptions& options, Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler, std::vector<Endpoint> c, DialOptions o) {
          dial_candidates_impl(std::move(c), o, std::move(handler));
        },
        token, std::move(candidates), options);
  }
  // Default remote: host's first address in dial_order.
  template <class Token>
  auto async_dial_udp(std::string host, uint16_t port, const DialOptions& options, Token&& token) {
    return asio::async_initiate<Token, void(error_code, UdpSocket)>(
        [this](auto handler, std::string h, uint16_t p, DialOptions o) {
          dial_udp_name_impl(std::move(h), p, o, std::move(handler));
        },
        token, std::move(host), port, options);
  }
  TcpListener listen_tcp(const Endpoint& local, error_code& ec, int backlog = 128);
  UdpSocket listen_udp(const Endpoint& local, error_code& ec);
  UdpSocket dial_udp(const Endpoint& remote, error_code& ec);
  // Completes with the round-trip time.
  template <class Token>
  auto async_ping(const wg::IpAddress& to, std::chrono::milliseconds timeout, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::chrono::nanoseconds)>(
        [this](auto handler, wg::IpAddress a, std::chrono::milliseconds t) { ping_impl(a, t, std::move(handler)); },
        token, to, timeout);
  }
  // A and AAAA through the tunnel, cached per TTL; a literal resolves to itself.
  // timed_out is temporary; host_not_found_try_again: the servers failed.
  template <class Token>
  auto async_resolve(const std::string& host, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::vector<wg::IpAddress>)>(
        [this](auto handler, std::string h) { resolve_impl(std::move(h), std::move(handler)); }, token, host);
  }

  // Blocking helpers (not on the Stack's thread).
  TcpStream dial_tcp(const Endpoint& to, error_code& ec);
  std::vector<wg::IpAddress> resolve(const std::string& host, error_code& ec);
  std::chrono::nanoseconds ping(const wg::IpAddress& to, std::chrono::milliseconds timeout, error_code& ec);

  struct Counters {
    uint64_t tcp_active = 0;
    uint64_t packets_in = 0, packets_out = 0, bytes_in = 0, bytes_out = 0, dropped = 0;
  };
  Counters counters() const;

private:
  explicit Stack(std::unique_ptr<detail::StackImpl> impl);
  void dial_tcp_impl(Endpoint to, asio::any_completion_handler<void(error_code, TcpStream)> h);
  void dial_name_impl(std::string host, uint16_t port, DialOptions o,
                      asio::any_completion_handler<void(error_code, TcpStream)> h);
  void dial_candidates_impl(std::vector<Endpoint> c, DialOptions o,
                            asio::any_completion_handler<void(error_code, TcpStream)> h);
  void dial_udp_name_impl(std::string host, uint16_t port, DialOptions o,
                          asio::any_completion_handler<void(error_code, UdpSocket)> h);
  void ping_impl(wg::IpAddress to, std::chrono::milliseconds timeout,
                 asio::any_completion_handler<void(error_code, std::chrono::nanoseconds)> h);
  void resolve_impl(std::string host,
                    asio::any_completion_handler<void(error_code, std::vector<wg::IpAddress>)> h);
  std::unique_ptr<detail::StackImpl> impl_;
};

}  // namespace netstack

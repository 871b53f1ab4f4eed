// netstack::Stack: an in-process TCP/IP stack (lwIP, with SACK and window scaling) that
// is a tun::Device under the WireGuard core, and the dialer API on top of it: TCP
// streams and listeners, UDP sockets, ping and DNS through the tunnel.
//
// Several Stacks may live in one process, each with its own netif, addresses (the same
// ones as another Stack's, if need be), connections, ports and wg::Device. lwIP keeps its
// state in globals, so all Stacks of a process share one lwIP thread, driven by an Asio
// io_context (get_executor(): the same executor for every Stack), and lwIP's memory
// pools (lwipopts.h: MEMP_NUM_TCP_PCB and the rest are for the process, not per Stack).
// Every socket operation runs there and completes on the handler's associated executor
// (the Stack's by default).
// Async operations take Asio completion tokens (callbacks, use_awaitable, use_future,
// deferred); blocking helpers exist for simple programs and must not be called from the
// Stack's thread.
//
// Every asynchronous operation honours the cancellation slot associated with its
// handler (terminal, partial and total alike): `co_await (s.async_read_some(b) ||
// timer.async_wait())`, experimental::make_parallel_group, bind_cancellation_slot, and
// Beast's algorithms under `||` all work. A cancelled read, write, wait, accept or UDP
// receive completes with operation_aborted having transferred nothing, and its stream,
// listener or socket stays usable; a cancelled dial, ping or lookup is abandoned. A
// signal may be emitted from any thread, and after the operation has completed (then it
// does nothing); it must not race the Stack's destruction.
//
// Lifetimes: closing a stream, listener or socket completes its pending operations with
// operation_aborted. Destroying the Stack aborts every connection and completes every
// pending operation, its own and the lookups' and dials' by name, with operation_aborted
// before the destructor returns (the completions run on their handlers' executors; the
// destructor waits for the lookups and dials it stopped). The other Stacks of the
// process go on untouched; the shared thread ends with the last Stack. Streams,
// listeners and sockets may outlive the Stack: their operations then fail with
// operation_aborted and close() does nothing. What is not safe: destroying the Stack on
// one thread while another starts operations on it or on its objects, destroying it on
// the lwIP thread itself (in a completion handler running on get_executor()), and
// destroying it while a wg::Device still runs on it (destroy the Device first;
// wgnet::Tunnel does).
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

// A TCP connection. Models Asio's AsyncReadStream and AsyncWriteStream. Reads hand the
// window back to the peer only as the application consumes bytes, and writes complete
// only when lwIP took the bytes: a slow side slows the other, memory stays bounded.
// Errors: asio::error::eof (peer closed), connection_reset, connection_refused,
// timed_out, host_unreachable, operation_aborted (closed locally); dialing also
// errc::address_not_available (no free local port).
class TcpStream {
public:
  using executor_type = Executor;

  TcpStream() = default;
  explicit TcpStream(std::shared_ptr<detail::TcpConn> c);
  TcpStream(TcpStream&&) noexcept = default;
  TcpStream& operator=(TcpStream&&) noexcept;
  ~TcpStream();

  // The Stack's executor, also after close() or a move; a default-constructed stream
  // has none and throws std::logic_error.
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
  // Waits until a read would complete at once: bytes or EOF have arrived, or the
  // connection failed (the read then says why). It holds no buffer, so a relay can wait
  // here while idle instead of in a read (an idle connection then costs no buffer).
  // Completes with operation_aborted if the stream is closed first, in_progress if a
  // read or another wait is pending. Like a read, it counts as the one read operation.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>([this](auto handler) { wait_impl(std::move(handler)); },
                                                         token);
  }

  // Sends FIN after queued data; reading stays possible.
  void shutdown_send();
  // Closes gracefully (FIN); pending operations complete with operation_aborted. A
  // connection whose FINs have already crossed both ways is released at once instead of
  // waiting out TIME_WAIT (2 MSL) in lwIP: see TcpConn::close in tcp.cpp.
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
  // Waits until a datagram is queued and completes with its size, leaving it for the next
  // async_receive_from: a buffer can be sized to it. One receive or wait at a time.
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
  std::vector<wg::IpPrefix> addresses;    // the tunnel addresses of this host (Address=)
  int mtu = 1420;
  std::vector<wg::IpAddress> dns_servers;  // DNS= of the config, reached through the tunnel
  // A lookup (async_resolve, a dial by name) as glibc's resolver makes it: A and AAAA at
  // once to the first server, the unanswered again after dns_retry to the next server (the
  // gap doubling after each round of the servers), the whole bounded by dns_timeout.
  std::chrono::milliseconds dns_retry{1000};
  std::chrono::milliseconds dns_timeout{5000};
  // Names whose answers are kept per their TTL (negative ones briefly); 0: no cache.
  size_t dns_cache_size = 256;
  size_t max_tcp_connections = 16384;
  size_t udp_queue = 512;                   // datagrams queued per UDP socket before dropping
  std::chrono::milliseconds dial_timeout{30000};
  // The TCP sender's congestion control (our lwIP patches 0004 and 0010): BBR keeps
  // its rate under random loss; CUBIC is the loss-based algorithm of RFC 9438.
  enum class Congestion { bbr, cubic };
  Congestion tcp_congestion = Congestion::bbr;
  // TCP keepalive on every connection (dialed and accepted): after this long without a
  // segment from the remote, a probe, then one every as long, and after
  // tcp_keepalive_probes unanswered ones the connection fails with timed_out. A peer
  // that lost the connection (it restarted) answers the first probe with a reset.
  // Zero: none, and a connection whose remote vanished while it sent nothing waits
  // forever, as a kernel socket without SO_KEEPALIVE does.
  std::chrono::milliseconds tcp_keepalive{0};
  int tcp_keepalive_probes = 9;
};

// How a name is dialed (Stack::async_dial_tcp/async_dial_udp with a host name).
struct DialOptions {
  enum class Family { any, ipv4, ipv6 };
  Family family = Family::any;  // which of a name's addresses are tried (a literal: always)
  // RFC 8305's Connection Attempt Delay: the next address is tried when the one before has
  // not connected within this long (or at once when it failed); the first to connect wins
  // and the others are abandoned.
  std::chrono::milliseconds attempt_delay{250};
};

// The order in which Happy Eyeballs (RFC 8305 §4) tries addresses: IPv6 first, then the
// families alternating, each family in the order given; filtered by `family`.
std::vector<wg::IpAddress> dial_order(const std::vector<wg::IpAddress>& addrs, DialOptions::Family family);

class Stack final : public tun::Device {
public:
  // At most kMaxStacks at once (lwIP numbers its netifs in a byte): past that
  // errc::too_many_files_open. An MTU outside 1280-65535, or a dns_retry or dns_timeout
  // not above zero: errc::invalid_argument.
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
  // A destination check consulted before dialing (wg-netstack passes the device's
  // allowed IPs): false → host_unreachable at once instead of a SYN into the void.
  void set_route_check(std::function<bool(const wg::IpAddress&)> check);

  // --- dialer ---
  template <class Token>
  auto async_dial_tcp(const Endpoint& to, Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler, Endpoint ep) { dial_tcp_impl(ep, std::move(handler)); }, token, to);
  }
  // By name: resolved through the tunnel's DNS (a literal is itself), then the addresses
  // tried in dial_order with Happy Eyeballs (RFC 8305): a new attempt every
  // attempt_delay, or as soon as one fails, each bounded by dial_timeout; the first to
  // connect wins. Errors: the lookup's (host_not_found, no_data, timed_out), host_not_found
  // if no address of the family is left, else the last attempt's.
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
  // Happy Eyeballs over given endpoints, tried in the order given.
  template <class Token>
  auto async_dial_tcp(std::vector<Endpoint> candidates, const DialOptions& options, Token&& token) {
    return asio::async_initiate<Token, void(error_code, TcpStream)>(
        [this](auto handler, std::vector<Endpoint> c, DialOptions o) {
          dial_candidates_impl(std::move(c), o, std::move(handler));
        },
        token, std::move(candidates), options);
  }
  // A UDP socket whose default remote is the first address of host in dial_order.
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
  // ICMP or ICMPv6 echo; completes with the round-trip time.
  template <class Token>
  auto async_ping(const wg::IpAddress& to, std::chrono::milliseconds timeout, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::chrono::nanoseconds)>(
        [this](auto handler, wg::IpAddress a, std::chrono::milliseconds t) { ping_impl(a, t, std::move(handler)); },
        token, to, timeout);
  }
  // A and AAAA at once through the tunnel to the configured DNS servers (UDP, TCP if
  // truncated), on StackOptions' dns_retry/dns_timeout schedule. Answers are cached per
  // their TTL, and lookups of a name already being looked up share its queries. Errors:
  // host_not_found (NXDOMAIN, or no DNS server), no_data (no A or AAAA record), timed_out
  // (no answer in time: temporary, also when the other family had no records),
  // host_not_found_try_again (the servers failed), host_unreachable (no server routed),
  // invalid_argument (not a host name). A literal address resolves to itself.
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

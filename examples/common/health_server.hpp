// What the programs' --health servers share (wg-netstack, wg-run, wg-tun): readiness from
// the WireGuard handshakes, the device's Prometheus metrics, the HTTP/1.1 server (Beast)
// that answers /readyz and /metrics, and the thread that runs it beside a device (wg-run,
// wg-tun). Never prints key material: peers go by index.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "listen_address.hpp"
#include "wg/device.hpp"

namespace programs {

// Ready while some peer's handshakes succeed: it has completed one, and the first
// initiation sent since then (if any) has gone unanswered for no longer than
// REKEY_TIMEOUT + 1 s. An idle tunnel whose last handshake is hours old stays ready (the
// next packet handshakes at once); a peer that stopped answering turns it unready about
// 6 s after the first attempt that needed it.
bool handshakes_healthy(wg::Device& device);

// The device's metric families in Prometheus text: bytes per peer, last handshakes,
// handshakes, handshake messages, dropped packets by reason; `more_drops` adds the
// program's own reasons to wgnet_dropped_packets_total (a family stays in one block).
std::string device_metrics(wg::Device& device,
                           std::initializer_list<std::pair<std::string_view, uint64_t>> more_drops = {});

// One answer of the health server.
struct HealthPage {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
// The page for a request target ("/readyz", "/metrics", anything else: 404), called on
// the acceptor's executor.
using HealthPages = std::function<HealthPage(std::string_view target)>;

// The pages of every --health listener: /readyz 200 when ready(), else 503 (the body
// ready_json() as JSON if given, else one line), /metrics metrics() as Prometheus text,
// anything else 404.
HealthPages standard_pages(std::function<bool()> ready, std::function<std::string()> metrics,
                           std::function<std::string()> ready_json = {});

inline constexpr size_t kDefaultHealthMaxConnections = 64;

struct HealthServerOptions {
  std::string server_name;  // the Server: header
  // Each request must arrive whole within this of the connection or of the previous
  // answer (an idle keep-alive connection is closed after as long): a client sending
  // half a request must not hold a connection.
  std::chrono::steady_clock::duration request_timeout = std::chrono::seconds(10);
  std::function<void()> on_timeout;  // a client was closed for it (may be empty)
  std::string name;                   // the listener in log lines: "health on 127.0.0.1:9090"
  // Clients served at once; a connection past it is reset (accept_loop.hpp). A scraper
  // and a probe need a few: the cap keeps the server's descriptors from starving the rest.
  size_t max_connections = kDefaultHealthMaxConnections;
  std::function<void()> on_refused;  // a connection was reset for the cap or for descriptors
};

// Accepts on `acceptor` until it is closed (programs::accept_loop), answering each client's
// requests (keep-alive honoured) with `pages`, each client in its own coroutine on the
// acceptor's executor.
boost::asio::awaitable<void> health_server(boost::asio::ip::tcp::acceptor& acceptor, HealthPages pages,
                                           HealthServerOptions options);

// --health of a program whose device runs on threads of its own (wg-run, wg-tun): /readyz
// (handshakes_healthy: 200, else 503) and /metrics (device_metrics) on a thread named
// "wg-health". The socket listens from construction on, so that a bad address or a port in
// use is a start error and a daemon can hand the socket to the process that keeps running;
// the thread runs from start() to stop().
class HealthThread {
public:
  // Listens on `address` (parse_listen's syntax), close-on-exec. Throws std::runtime_error
  // "--health ADDRESS: reason" when it is no address or cannot be bound.
  HealthThread(const std::string& address, std::string server_name);
  // Takes over `listening_fd`, a listening TCP socket (inherited from the process that made
  // it), and makes it close-on-exec. Throws std::runtime_error "WHAT: reason" when it is
  // none (the descriptor is then left open).
  HealthThread(int listening_fd, const std::string& what, std::string server_name);
  HealthThread(const HealthThread&) = delete;
  HealthThread& operator=(const HealthThread&) = delete;
  ~HealthThread();  // stop()

  // The listening socket, still owned here (to hand on across fork and exec).
  int native_handle() const;
  // Where it listens, "ADDR:PORT" (the port the kernel chose for port 0).
  std::string local_address() const;
  // Starts the thread; `device` must outlive stop(). Once only. The thread inherits the
  // caller's signal mask: block the signals the program waits for first.
  void start(wg::Device& device);
  // Stops accepting, stops answering and joins the thread (clients' connections close with
  // the object). Any thread but the server's own; calling it again does nothing.
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace programs

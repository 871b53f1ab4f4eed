// The --health server's shared parts: handshake readiness, device metrics, the Beast
// loop that serves them, and the thread that runs it beside a device.
#include "health_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "accept_loop.hpp"
#include "wg/base/host_port.hpp"

namespace programs {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

bool handshakes_healthy(wg::Device& device) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  for (auto& p : device.peers()) {
    if (p->stats().last_handshake_ns.load() <= 0) continue;
    // Retries do not restart this clock: it is the first unanswered initiation's time.
    const auto unanswered = std::chrono::nanoseconds(p->stats().unanswered_since_ns.load());
    if (unanswered.count() == 0 || now - unanswered < wg::kRekeyTimeout + std::chrono::seconds(1)) return true;
  }
  return false;
}

std::string device_metrics(wg::Device& device,
                           std::initializer_list<std::pair<std::string_view, uint64_t>> more_drops) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto peers = device.peers();
  metric("wgnet_peer_tx_bytes_total", "counter", "Bytes sent to the peer (UDP payload).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_tx_bytes_total{{peer=\"{}\"}} {}\n", i, peers[i]->stats().tx_bytes.load());
  metric("wgnet_peer_rx_bytes_total", "counter", "Bytes received from the peer (UDP payload).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_rx_bytes_total{{peer=\"{}\"}} {}\n", i, peers[i]->stats().rx_bytes.load());
  metric("wgnet_peer_last_handshake_seconds", "gauge", "Unix time of the last completed handshake (0: never).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_last_handshake_seconds{{peer=\"{}\"}} {}\n", i,
                       peers[i]->stats().last_handshake_ns.load() / 1000000000);
  auto& d = device.stats();
  metric("wgnet_handshakes_total", "counter", "Handshakes completed.");
  out += fmt::format("wgnet_handshakes_total {}\n", d.handshakes_completed.load());
  metric("wgnet_handshake_messages_total", "counter",
         "Handshake messages answered under load with a cookie reply, or given a Diffie-Hellman.");
  out += fmt::format("wgnet_handshake_messages_total{{outcome=\"cookie_reply\"}} {}\n", d.cookie_replies_sent.load());
  out += fmt::format("wgnet_handshake_messages_total{{outcome=\"computed\"}} {}\n", d.handshakes_computed.load());
  metric("wgnet_dropped_packets_total", "counter", "Packets dropped, by reason.");
  auto drop = [&](std::string_view reason, uint64_t n) {
    out += fmt::format("wgnet_dropped_packets_total{{reason=\"{}\"}} {}\n", reason, n);
  };
  drop("no_route", d.dropped_no_route.load());
  drop("invalid", d.dropped_invalid.load());
  drop("decrypt", d.dropped_decrypt.load());
  drop("replay", d.dropped_replay.load());
  drop("source", d.dropped_source.load());
  drop("handshake", d.dropped_handshake.load());
  drop("staged", d.dropped_staged.load());
  for (auto& [reason, n] : more_drops) drop(reason, n);
  return out;
}

namespace {

asio::awaitable<void> serve(tcp::socket socket, std::shared_ptr<HealthPages> pages,
                            std::shared_ptr<HealthServerOptions> options) {
  beast::tcp_stream s(std::move(socket));
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::empty_body> req;
    s.expires_after(options->request_timeout);
    auto [ec, n] = co_await http::async_read(s, buf, req, kTry);
    if (ec == beast::error::timeout && options->on_timeout) options->on_timeout();
    if (ec) co_return;
    s.expires_never();
    HealthPage page = (*pages)(req.target());
    http::response<http::string_body> res{static_cast<http::status>(page.status), req.version()};
    res.set(http::field::server, options->server_name);
    res.set(http::field::content_type, page.content_type);
    res.body() = std::move(page.body);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    // A client that stops reading the answer is closed after as long as a request may take.
    s.expires_after(options->request_timeout);
    auto [werr, wn] = co_await http::async_write(s, res, kTry);
    if (werr || !req.keep_alive()) co_return;
  }
}

}  // namespace

asio::awaitable<void> health_server(tcp::acceptor& acceptor, HealthPages pages, HealthServerOptions options) {
  auto shared_pages = std::make_shared<HealthPages>(std::move(pages));
  auto shared_options = std::make_shared<HealthServerOptions>(std::move(options));
  AcceptOptions accept{shared_options->name, shared_options->max_connections, shared_options->on_refused};
  // Named, not a temporary of the co_await: g++ 12 destroys such temporaries twice.
  std::function<asio::awaitable<void>(tcp::socket)> serve_one = [shared_pages, shared_options](tcp::socket s) {
    return serve(std::move(s), shared_pages, shared_options);
  };
  co_await accept_loop(acceptor, std::move(accept), std::move(serve_one));
}

// --- HealthThread ---

struct HealthThread::Impl {
  explicit Impl(std::string name) : server_name(std::move(name)) {}
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::string server_name;
  std::thread thread;
};

HealthThread::HealthThread(const std::string& address, std::string server_name)
    : impl_(std::make_unique<Impl>(std::move(server_name))) {
  tcp::endpoint ep;
  try {
    ep = parse_listen(address);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("--health {}: {}", address, e.what()));
  }
  auto& a = impl_->acceptor;
  boost::system::error_code ec;
  a.open(ep.protocol(), ec);
  if (!ec) ::fcntl(a.native_handle(), F_SETFD, FD_CLOEXEC);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("--health {}: {}", address, ec.message()));
}

HealthThread::HealthThread(int listening_fd, const std::string& what, std::string server_name)
    : impl_(std::make_unique<Impl>(std::move(server_name))) {
  int type = 0, listening = 0;
  socklen_t type_len = sizeof type, listening_len = sizeof listening;
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (::getsockopt(listening_fd, SOL_SOCKET, SO_TYPE, &type, &type_len) < 0 ||
      ::getsockopt(listening_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &listening_len) < 0 ||
      ::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&local), &local_len) < 0)
    throw std::runtime_error(fmt::format("{}: {}", what, std::strerror(errno)));
  if (type != SOCK_STREAM || !listening || (local.ss_family != AF_INET && local.ss_family != AF_INET6))
    throw std::runtime_error(what + ": not a listening TCP socket");
  boost::system::error_code ec;
  impl_->acceptor.assign(local.ss_family == AF_INET ? tcp::v4() : tcp::v6(), listening_fd, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: {}", what, ec.message()));
  ::fcntl(listening_fd, F_SETFD, FD_CLOEXEC);
}

HealthThread::~HealthThread() { stop(); }

int HealthThread::native_handle() const { return impl_->acceptor.native_handle(); }

std::string HealthThread::local_address() const {
  boost::system::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  if (ec) return "?";
  return ep.address().is_v6() ? fmt::format("[{}]:{}", ep.address().to_string(), ep.port())
                              : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

HealthPages standard_pages(std::function<bool()> ready, std::function<std::string()> metrics,
                           std::function<std::string()> ready_json) {
  return [ready = std::move(ready), metrics = std::move(metrics),
          ready_json = std::move(ready_json)](std::string_view target) {
    HealthPage page;
    if (target == "/readyz") {
      const bool ok = ready();
      page.status = ok ? 200 : 503;
      if (ready_json) {
        page.content_type = "application/json";
        page.body = ready_json();
      } else {
        page.body = ok ? "ready\n" : "no handshake with any peer succeeded lately\n";
      }
    } else if (target == "/metrics") {
      page.content_type = "text/plain; version=0.0.4";
      page.body = metrics();
    } else {
      page.status = 404;
      page.body = "not found\n";
    }
    return page;
  };
}

void HealthThread::start(wg::Device& device) {
  auto pages = standard_pages([&device] { return handshakes_healthy(device); },
                              [&device] { return device_metrics(device); });
  HealthServerOptions options;
  options.server_name = impl_->server_name;
  options.name = "health on " + local_address();
  asio::co_spawn(impl_->ioc, health_server(impl_->acceptor, pages, std::move(options)), asio::detached);
  impl_->thread = std::thread([this] {
    // For top -H, ps, gdb. By the thread itself: naming another thread opens its comm
    // file for writing, which the sandbox refuses.
    pthread_setname_np(pthread_self(), "wg-health");
    impl_->ioc.run();
  });
}

void HealthThread::stop() {
  if (!impl_->thread.joinable()) {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
    return;
  }
  asio::post(impl_->ioc, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
    impl_->ioc.stop();
  });
  impl_->thread.join();
}

}  // namespace programs

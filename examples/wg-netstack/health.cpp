// Health endpoints with Beast. Never prints key material: peers are labelled by index.
#include "health.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/core.h>

#include "handshake.hpp"

namespace wgns {
namespace http = boost::beast::http;

// Without CheckAlive: ready while some peer's handshakes succeed. A peer counts when it
// has completed a handshake and the first initiation sent since then (if any) has gone
// unanswered for no longer than REKEY_TIMEOUT (+1 s for the answer's way back; retries
// do not restart that clock). So an idle tunnel whose last handshake is hours old stays
// ready (the next request handshakes at once), and a peer that stopped answering makes it
// 503 about 6 s after the first attempt that needed it.
bool handshakes_healthy(Context& ctx) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  for (auto& p : ctx.device.peers()) {
    if (p->stats().last_handshake_ns.load() <= 0) continue;
    const auto unanswered = std::chrono::nanoseconds(p->stats().unanswered_since_ns.load());
    if (unanswered.count() == 0 || now - unanswered < wg::kRekeyTimeout + std::chrono::seconds(1)) return true;
  }
  return false;
}

// With CheckAlive (wireproxy's rule): ready when every address answered a ping within the
// last interval + 2 s.
bool checks_healthy(const CheckAlive& checks) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(checks.mu);
  for (auto& t : checks.targets)
    if (!t.last_pong || now - *t.last_pong > checks.interval + std::chrono::seconds(2)) return false;
  return true;
}

bool ready(Context& ctx) { return ctx.checks ? checks_healthy(*ctx.checks) : handshakes_healthy(ctx); }

// wireproxy's /readyz body with CheckAlive: {"ADDR":UNIX_SECONDS_OF_LAST_PONG,...} (0: none).
std::string checks_json(const CheckAlive& checks) {
  std::string out = "{";
  std::lock_guard lock(checks.mu);
  for (auto& t : checks.targets) {
    if (out.size() > 1) out += ",";
    out += fmt::format("\"{}\":{}", t.address.to_string(), t.last_pong_unix);
  }
  return out + "}";
}

std::string metrics_text(Context& ctx) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto peers = ctx.device.peers();
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
  auto& d = ctx.device.stats();
  metric("wgnet_handshakes_total", "counter", "Handshakes completed.");
  out += fmt::format("wgnet_handshakes_total {}\n", d.handshakes_completed.load());
  metric("wgnet_handshake_messages_total", "counter",
         "Handshake messages answered under load with a cookie reply, or given a Diffie-Hellman.");
  out += fmt::format("wgnet_handshake_messages_total{{outcome=\"cookie_reply\"}} {}\n", d.cookie_replies_sent.load());
  out += fmt::format("wgnet_handshake_messages_total{{outcome=\"computed\"}} {}\n", d.handshakes_computed.load());
  metric("wgnet_dropped_packets_total", "counter", "Packets dropped, by reason.");
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"no_route\"}} {}\n", d.dropped_no_route.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"invalid\"}} {}\n", d.dropped_invalid.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"decrypt\"}} {}\n", d.dropped_decrypt.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"replay\"}} {}\n", d.dropped_replay.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"source\"}} {}\n", d.dropped_source.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"handshake\"}} {}\n", d.dropped_handshake.load());
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"staged\"}} {}\n", d.dropped_staged.load());
  auto c = ctx.stack.counters();
  out += fmt::format("wgnet_dropped_packets_total{{reason=\"netstack_queue\"}} {}\n", c.dropped);
  metric("wgnet_netstack_packets_total", "counter", "IP packets between the netstack and the tunnel.");
  out += fmt::format("wgnet_netstack_packets_total{{direction=\"in\"}} {}\n", c.packets_in);
  out += fmt::format("wgnet_netstack_packets_total{{direction=\"out\"}} {}\n", c.packets_out);
  metric("wgnet_netstack_bytes_total", "counter", "IP bytes between the netstack and the tunnel.");
  out += fmt::format("wgnet_netstack_bytes_total{{direction=\"in\"}} {}\n", c.bytes_in);
  out += fmt::format("wgnet_netstack_bytes_total{{direction=\"out\"}} {}\n", c.bytes_out);
  metric("wgnet_tcp_connections_active", "gauge", "TCP connections open in the netstack.");
  out += fmt::format("wgnet_tcp_connections_active {}\n", c.tcp_active);
  metric("wgnet_proxy_connections_total", "counter", "Proxy and forward connections accepted.");
  out += fmt::format("wgnet_proxy_connections_total {}\n", ctx.metrics.connections_total.load());
  metric("wgnet_proxy_connections_active", "gauge", "Proxy and forward connections open.");
  out += fmt::format("wgnet_proxy_connections_active {}\n", ctx.metrics.connections_active.load());
  metric("wgnet_proxy_connections_failed_total", "counter", "Proxy connections whose target could not be reached.");
  out += fmt::format("wgnet_proxy_connections_failed_total {}\n", ctx.metrics.connections_failed.load());
  metric("wgnet_proxy_handshake_timeouts_total", "counter",
         "SOCKS5 / HTTP clients closed for not sending a whole request within --handshake-timeout.");
  out += fmt::format("wgnet_proxy_handshake_timeouts_total {}\n", ctx.metrics.handshake_timeouts.load());
  metric("wgnet_proxy_udp_datagrams_total", "counter", "UDP datagrams relayed.");
  out += fmt::format("wgnet_proxy_udp_datagrams_total {}\n", ctx.metrics.udp_datagrams.load());
  return out;
}

namespace {

// One client of /readyz and /metrics. Each request must arrive whole within
// --handshake-timeout of the connection or of the previous answer (an idle keep-alive
// connection is closed after as long), as for the proxies: a probe port must not be held
// open by clients that send half a request.
awaitable<void> serve(Context& ctx, tcp::socket s) {
  boost::beast::flat_buffer buf;
  for (;;) {
    http::request<http::empty_body> req;
    Deadline deadline(s, ctx.handshake_timeout);
    auto [ec, n] = co_await http::async_read(s, buf, req, kTry);
    deadline.disarm();
    if (deadline.expired()) ctx.metrics.handshake_timeouts.fetch_add(1);
    if (ec) co_return;
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "wg-netstack");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (req.target() == "/readyz") {
      bool ok = ready(ctx);
      res.result(ok ? http::status::ok : http::status::service_unavailable);
      if (ctx.checks) {
        res.set(http::field::content_type, "application/json");
        res.body() = checks_json(*ctx.checks);
      } else {
        res.body() = ok ? "ready\n" : "no handshake with any peer succeeded lately\n";
      }
    } else if (req.target() == "/metrics") {
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.body() = metrics_text(ctx);
    } else {
      res.result(http::status::not_found);
      res.body() = "not found\n";
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [werr, wn] = co_await http::async_write(s, res, kTry);
    if (werr || !req.keep_alive()) co_return;
  }
}

awaitable<void> ping_forever(Context& ctx, CheckAlive& checks, size_t i) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto interval = checks.interval;
  const auto address = checks.targets[i].address;
  for (;;) {
    const auto next = std::chrono::steady_clock::now() + interval;
    auto [ec, rtt] = co_await ctx.stack.async_ping(
        address, std::chrono::duration_cast<std::chrono::milliseconds>(interval), kTry);
    if (!ec) {
      std::lock_guard lock(checks.mu);
      checks.targets[i].last_pong = std::chrono::steady_clock::now();
      checks.targets[i].last_pong_unix =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    } else if (ec == asio::error::operation_aborted) {
      co_return;
    }
    timer.expires_at(next);
    auto [terr] = co_await timer.async_wait(kTry);
    if (terr) co_return;
  }
}

}  // namespace

void start_check_alive(Context& ctx, CheckAlive& checks) {
  for (size_t i = 0; i < checks.targets.size(); ++i)
    asio::co_spawn(ctx.stack.get_executor(), ping_forever(ctx, checks, i), asio::detached);
}

awaitable<void> health_server(Context& ctx, tcp::acceptor& acceptor) {
  return accept_loop(acceptor, [&ctx](tcp::socket s) { return serve(ctx, std::move(s)); });
}

}  // namespace wgns

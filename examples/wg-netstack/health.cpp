// Health endpoints with Beast. Never prints key material: peers are labelled by index.
#include "health.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/core.h>

#include "handshake.hpp"

namespace wgns {
namespace http = boost::beast::http;

bool ready(Context& ctx) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  for (auto& p : ctx.device.peers()) {
    auto last = std::chrono::nanoseconds(p->stats_.last_handshake_ns.load());
    if (last.count() > 0 && now - last < wg::kRejectAfterTime) return true;
  }
  return false;
}

std::string metrics_text(Context& ctx) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto peers = ctx.device.peers();
  metric("wgnet_peer_tx_bytes_total", "counter", "Bytes sent to the peer (UDP payload).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_tx_bytes_total{{peer=\"{}\"}} {}\n", i, peers[i]->stats_.tx_bytes.load());
  metric("wgnet_peer_rx_bytes_total", "counter", "Bytes received from the peer (UDP payload).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_rx_bytes_total{{peer=\"{}\"}} {}\n", i, peers[i]->stats_.rx_bytes.load());
  metric("wgnet_peer_last_handshake_seconds", "gauge", "Unix time of the last completed handshake (0: never).");
  for (size_t i = 0; i < peers.size(); ++i)
    out += fmt::format("wgnet_peer_last_handshake_seconds{{peer=\"{}\"}} {}\n", i,
                       peers[i]->stats_.last_handshake_ns.load() / 1000000000);
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
      res.body() = ok ? "ready\n" : "no fresh handshake\n";
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

}  // namespace

awaitable<void> health_server(Context& ctx, tcp::acceptor& acceptor) {
  return accept_loop(acceptor, [&ctx](tcp::socket s) { return serve(ctx, std::move(s)); });
}

}  // namespace wgns

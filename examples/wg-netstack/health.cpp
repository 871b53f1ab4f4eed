// wg-netstack's /readyz and /metrics pages (CheckAlive, the netstack's and the proxies' counters)
// on programs::health_server, and the CheckAlive pinger. Peers are labelled by index.
#include "health.hpp"

#include <boost/asio/steady_timer.hpp>
#include <fmt/core.h>

#include <functional>

#include "health_server.hpp"  // examples/common: the server and the device's part
#include "listener.hpp"

namespace wgns {

static_assert(Limits{}.health_max_connections == programs::kDefaultHealthMaxConnections);

// With CheckAlive (wireproxy's rule): ready when every address answered a ping within the
// last interval + 2 s.
bool checks_healthy(const CheckAlive& checks) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(checks.mu);
  for (auto& t : checks.targets)
    if (!t.last_pong || now - *t.last_pong > checks.interval + std::chrono::seconds(2)) return false;
  return true;
}

// Without CheckAlive: while some peer's handshakes succeed (programs::handshakes_healthy).
bool ready(Context& ctx) { return ctx.checks ? checks_healthy(*ctx.checks) : programs::handshakes_healthy(ctx.device); }

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
  auto c = ctx.stack.counters();
  std::string out = programs::device_metrics(ctx.device, {{"netstack_queue", c.dropped}});
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
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
  metric("wgnet_proxy_connections_refused_total", "counter",
         "Connections reset on accept: the listener was at --max-connections, or out of file descriptors.");
  out += fmt::format("wgnet_proxy_connections_refused_total {}\n", ctx.metrics.connections_refused.load());
  metric("wgnet_proxy_udp_associations_active", "gauge", "SOCKS5 UDP associations open.");
  out += fmt::format("wgnet_proxy_udp_associations_active {}\n", ctx.metrics.udp_associations_active.load());
  metric("wgnet_proxy_udp_associations_refused_total", "counter",
         "SOCKS5 UDP ASSOCIATE requests refused for a cap (--max-udp-associations[-per-client]).");
  out += fmt::format("wgnet_proxy_udp_associations_refused_total {}\n", ctx.metrics.udp_associations_refused.load());
  metric("wgnet_proxy_udp_associations_idle_total", "counter",
         "SOCKS5 UDP associations closed after --udp-associate-timeout without a datagram.");
  out += fmt::format("wgnet_proxy_udp_associations_idle_total {}\n", ctx.metrics.udp_associations_idle.load());
  return out;
}

namespace {

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

// /readyz and /metrics; a client that does not send a whole request within
// --handshake-timeout is closed, as for the proxies (programs::health_server).
awaitable<void> health_server(Context& ctx, tcp::acceptor& acceptor) {
  programs::HealthServerOptions options{"wg-netstack", ctx.handshake_timeout,
                                        [&ctx] { ctx.metrics.handshake_timeouts.fetch_add(1); },
                                        listener_name("health", acceptor), ctx.limits.health_max_connections,
                                        [&ctx] { ctx.metrics.connections_refused.fetch_add(1); }};
  std::function<std::string()> json;
  if (ctx.checks) json = [&ctx] { return checks_json(*ctx.checks); };
  return programs::health_server(acceptor,
                                 programs::standard_pages([&ctx] { return ready(ctx); },
                                                          [&ctx] { return metrics_text(ctx); }, std::move(json)),
                                 std::move(options));
}

}  // namespace wgns

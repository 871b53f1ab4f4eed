// The accept loop of wg-netstack's listeners: programs::accept_loop with the Context's
// caps and counters. Apart from context.hpp, which the parsers' library includes too.
#pragma once

#include <string>
#include <string_view>

#include "accept_loop.hpp"  // examples/common
#include "context.hpp"

namespace wgns {

// "SOCKS5 on 127.0.0.1:1080", for log lines.
inline std::string listener_name(std::string_view kind, const tcp::acceptor& acceptor) {
  error_code ec;
  auto ep = acceptor.local_endpoint(ec);
  if (ec) return std::string(kind);
  auto addr = ep.address().to_string();
  return ep.address().is_v6() ? std::string(kind) + " on [" + addr + "]:" + std::to_string(ep.port())
                              : std::string(kind) + " on " + addr + ":" + std::to_string(ep.port());
}

// Accepts on `acceptor` until it is closed, serving each client in its own coroutine, at
// most ctx.limits.max_connections at once (programs::accept_loop: past them, and when out
// of descriptors, a client is reset and counted). `kind` names the listener in log lines.
template <class Serve>
awaitable<void> accept_loop(Context& ctx, tcp::acceptor& acceptor, std::string_view kind, Serve serve) {
  return programs::accept_loop(
      acceptor, {listener_name(kind, acceptor), ctx.limits.max_connections, [&ctx] { ctx.metrics.connections_refused.fetch_add(1); }},
      std::move(serve));
}

}  // namespace wgns

// --health: /readyz (handshakes succeed, or every CheckAlive address answers) and
// /metrics (Prometheus text); the CheckAlive pinger.
#pragma once

#include "context.hpp"

namespace wgns {
awaitable<void> health_server(Context& ctx, tcp::acceptor& acceptor);
// The /metrics body, for tests.
std::string metrics_text(Context& ctx);
bool ready(Context& ctx);
// Pings every address of `checks` through the tunnel every checks.interval (each ping
// waits up to the interval), recording the answers, until the Stack stops. ctx.checks
// must point to `checks`, which outlives the Stack's executor.
void start_check_alive(Context& ctx, CheckAlive& checks);
}  // namespace wgns

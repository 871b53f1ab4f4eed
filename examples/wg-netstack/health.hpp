// --health: /readyz (200 once a handshake is fresh) and /metrics (Prometheus text).
#pragma once

#include "common.hpp"

namespace wgns {
awaitable<void> health_server(Context& ctx, tcp::acceptor& acceptor);
// The /metrics body, for tests.
std::string metrics_text(Context& ctx);
bool ready(Context& ctx);
}  // namespace wgns

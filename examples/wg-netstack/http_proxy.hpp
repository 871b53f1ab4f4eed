// HTTP CONNECT proxy into the tunnel (Boost.Beast for the HTTP parts).
#pragma once

#include "common.hpp"

namespace wgns {
awaitable<void> http_proxy_server(Context& ctx, tcp::acceptor& acceptor);
}

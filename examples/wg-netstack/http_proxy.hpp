// HTTP CONNECT proxy into the tunnel (Boost.Beast for the HTTP parts).
#pragma once

#include "context.hpp"

namespace wgns {
class TlsServerContext;
// tls: null for plain HTTP; else every connection is TLS first (an HTTPS proxy).
awaitable<void> http_proxy_server(Context& ctx, tcp::acceptor& acceptor, const TlsServerContext* tls = nullptr);
}

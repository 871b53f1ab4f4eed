// [SNI] (wireproxy's): a transparent TLS proxy. Each client's ClientHello names the server
// (RFC 6066 server_name); that name, port 443, is dialed through the tunnel and the
// client's bytes, ClientHello first, are relayed unchanged both ways. No certificate and
// no decryption: the TLS session is between the client and the server.
#pragma once

#include "context.hpp"

namespace wgns {

// The port every [SNI] connection is dialed to, as in wireproxy.
inline constexpr uint16_t kSniTargetPort = 443;

// Accepts on `acceptor` until it is closed. Per client: the ClientHello within
// ctx.handshake_timeout (else closed, counted as a handshake timeout), then a dial of its
// server name (dial_host: the tunnel's DNS, ResolveStrategy, our own address refused);
// a ClientHello without a usable name, or a dial that fails, closes the connection.
awaitable<void> sni_server(Context& ctx, tcp::acceptor& acceptor);

}  // namespace wgns

// How the proxies and forwards reach a host through the tunnel: its name resolved by the
// tunnel's DNS, our own addresses refused, the rest dialed with Happy Eyeballs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "context.hpp"

namespace wgns {

// True if a is one of the netstack's own tunnel addresses (Address= of the config).
bool is_own_address(const Context& ctx, const wg::IpAddress& a);

// Resolves host through the tunnel's DNS, keeping the addresses of the family
// ctx.resolve asks for (host_not_found if none is left); a literal address is itself,
// whatever its family.
awaitable<std::pair<error_code, std::vector<wg::IpAddress>>> resolve_host(Context& ctx, const std::string& host);

// Resolves host (resolve_host) and dials its addresses but the netstack's own with Happy
// Eyeballs (Stack::async_dial_tcp over candidates, in netstack::dial_order). Errors as the
// last attempt reported; ProxyError::own_address if every address was our own.
awaitable<std::pair<error_code, netstack::TcpStream>> dial_host(Context& ctx, const std::string& host,
                                                                uint16_t port);

}  // namespace wgns

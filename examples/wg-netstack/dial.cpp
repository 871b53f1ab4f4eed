#include "dial.hpp"

#include <algorithm>

#include "proxy_client.hpp"

namespace wgns {

bool is_own_address(const Context& ctx, const wg::IpAddress& a) {
  const auto& own = ctx.stack.options().addresses;
  return std::any_of(own.begin(), own.end(), [&a](const wg::IpPrefix& p) { return p.addr == a; });
}

awaitable<std::pair<error_code, std::vector<wg::IpAddress>>> resolve_host(Context& ctx, const std::string& host) {
  auto [ec, addrs] = co_await ctx.stack.async_resolve(host, kTry);
  if (ec || ctx.resolve == ResolveStrategy::automatic || wg::IpAddress::parse(host)) co_return std::pair{ec, addrs};
  const bool want_v4 = ctx.resolve == ResolveStrategy::ipv4;
  std::erase_if(addrs, [want_v4](const wg::IpAddress& a) { return a.is_v4() != want_v4; });
  if (addrs.empty()) ec = asio::error::host_not_found;
  co_return std::pair{ec, addrs};
}

awaitable<std::pair<error_code, netstack::TcpStream>> dial_host(Context& ctx, const std::string& host,
                                                                uint16_t port) {
  auto [rerr, addrs] = co_await resolve_host(ctx, host);
  if (rerr) co_return std::pair{rerr, netstack::TcpStream{}};
  // A SYN to our own address would leave through the tunnel, reach no peer and time out
  // after the dial timeout: refused at once.
  std::vector<netstack::Endpoint> targets;
  for (auto& a : netstack::dial_order(addrs, netstack::DialOptions::Family::any))
    if (!is_own_address(ctx, a)) targets.push_back({a, port});
  if (targets.empty()) co_return std::pair{error_code(ProxyError::own_address), netstack::TcpStream{}};
  // Happy Eyeballs (RFC 8305) over the rest: Stack::async_dial_tcp.
  auto [ec, s] = co_await ctx.stack.async_dial_tcp(std::move(targets), netstack::DialOptions{}, kTry);
  co_return std::pair{ec, std::move(s)};
}

}  // namespace wgns

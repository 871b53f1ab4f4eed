// Config → Device, and endpoint name resolution on the underlay.
#include "wg/apply.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "wg/base/host_port.hpp"

namespace wg {

std::optional<conn::Endpoint> resolve_endpoint(const std::string& text, std::string& error) {
  if (auto ep = conn::Endpoint::parse(text)) return ep;
  std::string host;
  uint16_t port_number = 0;
  if (!split_host_port(text, host, port_number)) {
    error = text.find(':') == std::string::npos ? "endpoint '" + text + "' has no port"
                                                 : "endpoint '" + text + "' is not HOST:PORT";
    return std::nullopt;
  }
  const std::string port = std::to_string(port_number);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    error = "cannot resolve endpoint '" + text + "': " + gai_strerror(rc);
    return std::nullopt;
  }
  std::optional<conn::Endpoint> best;
  for (auto* ai = res; ai; ai = ai->ai_next) {
    conn::Endpoint ep;
    if (ai->ai_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
      ep.family = 4;
      std::memcpy(ep.addr.data(), &sa->sin_addr, 4);
      ep.port = ntohs(sa->sin_port);
      best = ep;
      break;  // IPv4 preferred, as wg(8) does
    }
    if (ai->ai_family == AF_INET6 && !best) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
      ep.family = 6;
      std::memcpy(ep.addr.data(), &sa->sin6_addr, 16);
      ep.port = ntohs(sa->sin6_port);
      ep.scope_id = sa->sin6_scope_id;
      best = ep;
    }
  }
  freeaddrinfo(res);
  if (!best || best->port == 0) error = "cannot resolve endpoint '" + text + "'";
  return best && best->port ? best : std::nullopt;
}

void apply_config(Device& dev, const Config& cfg) {
  if (cfg.iface.private_key) dev.set_private_key(*cfg.iface.private_key);
  if (cfg.iface.listen_port) {
    if (auto ec = dev.set_listen_port(*cfg.iface.listen_port))
      throw std::runtime_error("cannot listen on UDP port " + std::to_string(*cfg.iface.listen_port) + ": " +
                               ec.message());
  }
  if (cfg.iface.fwmark) dev.set_fwmark(*cfg.iface.fwmark);
  for (auto& pc : cfg.peers) {
    auto p = dev.add_peer(pc.public_key);
    if (!p) continue;  // our own public key
    if (pc.preshared_key) dev.set_preshared_key(*p, *pc.preshared_key);
    if (pc.endpoint) {
      std::string err;
      auto ep = resolve_endpoint(*pc.endpoint, err);
      if (!ep) throw std::runtime_error(err);
      dev.set_endpoint(*p, *ep);
    }
    for (auto& prefix : pc.allowed_ips) dev.add_allowed_ip(*p, prefix);
    dev.set_persistent_keepalive(*p, pc.persistent_keepalive);
  }
}

void sync_config(Device& dev, const Config& cfg) {
  if (cfg.iface.private_key) {
    const auto current = dev.private_key();
    if (!current || !(*current == *cfg.iface.private_key)) dev.set_private_key(*cfg.iface.private_key);
  }
  if (cfg.iface.listen_port && *cfg.iface.listen_port != dev.listen_port()) {
    if (auto ec = dev.set_listen_port(*cfg.iface.listen_port))
      throw std::runtime_error("cannot listen on UDP port " + std::to_string(*cfg.iface.listen_port) + ": " +
                               ec.message());
  }
  if (cfg.iface.fwmark) dev.set_fwmark(*cfg.iface.fwmark);

  for (auto& p : dev.peers()) {
    const bool kept = std::any_of(cfg.peers.begin(), cfg.peers.end(),
                                  [&p](const PeerConfig& pc) { return pc.public_key == p->public_key(); });
    if (!kept) dev.remove_peer(p->public_key());
  }
  for (auto& pc : cfg.peers) {
    auto p = dev.add_peer(pc.public_key);
    if (!p) continue;  // our own public key
    const PresharedKey psk = pc.preshared_key.value_or(PresharedKey{});
    if (!(dev.preshared_key(*p) == psk)) dev.set_preshared_key(*p, psk);
    if (pc.endpoint) {
      std::string err;
      auto ep = resolve_endpoint(*pc.endpoint, err);
      if (!ep) throw std::runtime_error(err);
      auto cur = dev.endpoint(*p);
      if (!cur || !cur->same_destination(*ep)) dev.set_endpoint(*p, *ep);
    }
    // Compared as sets (the device lists them in trie order).
    std::set<std::string> want, have;
    for (auto& prefix : pc.allowed_ips) want.insert(prefix.masked().to_string());
    for (auto& prefix : dev.allowed_ips(*p)) have.insert(prefix.to_string());
    if (want != have) {
      dev.clear_allowed_ips(*p);
      for (auto& prefix : pc.allowed_ips) dev.add_allowed_ip(*p, prefix);
    }
    if (dev.persistent_keepalive(*p) != pc.persistent_keepalive)
      dev.set_persistent_keepalive(*p, pc.persistent_keepalive);
  }
}

}  // namespace wg

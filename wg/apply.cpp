// Config → Device.
#include "wg/apply.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace wg {

std::optional<conn::Endpoint> numeric_endpoint(const std::string& text, std::string& error) {
  if (auto ep = conn::Endpoint::parse(text)) return ep;
  error = "endpoint '" + text + "' is not a numeric ADDRESS:PORT (host names need a resolver)";
  return std::nullopt;
}

void apply_config(Device& dev, const Config& cfg, const EndpointResolver& resolve) {
  if (cfg.iface.private_key) dev.set_private_key(*cfg.iface.private_key);
  if (cfg.iface.listen_port) {
    if (auto ec = dev.set_listen_port(*cfg.iface.listen_port))
      throw std::runtime_error("cannot open UDP port " + std::to_string(*cfg.iface.listen_port) + ": " +
                               ec.message());
  }
  if (cfg.iface.fwmark) dev.set_fwmark(*cfg.iface.fwmark);
  for (auto& pc : cfg.peers) {
    auto p = dev.add_peer(pc.public_key);
    if (!p) continue;  // our own public key
    if (pc.preshared_key) dev.set_preshared_key(*p, *pc.preshared_key);
    if (pc.endpoint) {
      std::string err;
      auto ep = resolve(*pc.endpoint, err);
      if (!ep) throw std::runtime_error(err);
      dev.set_endpoint(*p, *ep);
    }
    for (auto& prefix : pc.allowed_ips) dev.add_allowed_ip(*p, prefix);
    dev.set_persistent_keepalive(*p, pc.persistent_keepalive);
  }
}

void sync_config(Device& dev, const Config& cfg, const EndpointResolver& resolve) {
  if (cfg.iface.private_key) {
    const auto current = dev.private_key();
    if (!current || !(*current == *cfg.iface.private_key)) dev.set_private_key(*cfg.iface.private_key);
  }
  if (cfg.iface.listen_port && *cfg.iface.listen_port != dev.listen_port()) {
    if (auto ec = dev.set_listen_port(*cfg.iface.listen_port))
      throw std::runtime_error("cannot open UDP port " + std::to_string(*cfg.iface.listen_port) + ": " +
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
    if (!(p->preshared_key() == psk)) dev.set_preshared_key(*p, psk);
    if (pc.endpoint) {
      std::string err;
      auto ep = resolve(*pc.endpoint, err);
      if (!ep) throw std::runtime_error(err);
      auto cur = p->endpoint();
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
    if (p->persistent_keepalive() != pc.persistent_keepalive)
      dev.set_persistent_keepalive(*p, pc.persistent_keepalive);
  }
}

}  // namespace wg

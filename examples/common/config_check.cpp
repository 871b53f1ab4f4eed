#include "config_check.hpp"

#include <stdexcept>

namespace programs {

std::vector<std::string> warning_lines(const std::vector<std::string>& warnings) {
  std::vector<std::string> lines;
  lines.reserve(warnings.size());
  for (const auto& w : warnings) lines.push_back(w.rfind("warning: ", 0) == 0 ? w : "warning: " + w);
  return lines;
}

void require_interface(const wg::Config& cfg, const std::string& path, bool address_needed,
                       std::string_view address_hint) {
  const auto& i = cfg.iface;
  const bool nothing = !i.private_key && !i.listen_port && !i.fwmark && i.addresses.empty() &&
                       i.dns_servers.empty() && !i.mtu && cfg.peers.empty();
  if (nothing)
    throw std::runtime_error(path + ": no [Interface] and no [Peer]: a WireGuard config starts with [Interface] "
                                    "and its PrivateKey");
  if (!i.private_key) throw std::runtime_error(path + ": [Interface] has no PrivateKey");
  if (address_needed && i.addresses.empty())
    throw std::runtime_error(path + ": [Interface] has no Address" +
                             (address_hint.empty() ? "" : " (" + std::string(address_hint) + ")"));
}

}  // namespace programs

// The wg-quick `.conf` format, parsed by wg(8) and wg-quick(8)'s rules. Errors name the
// line and never contain key material.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wg/base/ascii.hpp"
#include "wg/crypto.hpp"
#include "wg/base/ip.hpp"

namespace wg {

struct InterfaceConfig {
  std::optional<PrivateKey> private_key;
  std::optional<uint16_t> listen_port;
  std::optional<uint32_t> fwmark;             // "off" is 0
  std::vector<IpPrefix> addresses;            // host bits kept
  std::vector<IpAddress> dns_servers;
  std::vector<std::string> dns_search;        // DNS entries that are not addresses
  std::optional<uint32_t> mtu;                // 576..65535
  // wg-quick's own keys, verbatim, in file order.
  std::vector<std::pair<std::string, std::string>> wg_quick_extras;
};

struct PeerConfig {
  PublicKey public_key;
  std::optional<PresharedKey> preshared_key;
  // Text: host names resolve later.
  std::optional<std::string> endpoint;
  std::vector<IpPrefix> allowed_ips;          // host bits cleared, as wg does
  uint16_t persistent_keepalive = 0;          // seconds; 0 = off
};

struct Config {
  InterfaceConfig iface;
  std::vector<PeerConfig> peers;
  // Never key material.
  std::vector<std::string> warnings;
};

// what() is "line N: <message>"; line() 0 = no line.
class ConfigError : public std::runtime_error {
public:
  ConfigError(size_t line, const std::string& message);
  explicit ConfigError(const std::string& what, size_t line = 0)
      : std::runtime_error(what), line_(line) {}
  size_t line() const { return line_; }

private:
  size_t line_ = 0;
};

// Throws ConfigError on the first problem.
Config parse_config(std::string_view text);

// Warns if a file holding a key has a loose mode. Wipes the file's buffer.
Config load_config(const std::string& path);

// Wipes the private and preshared keys, keeping the rest: for a program that has
// applied the config and holds it on.
void forget_keys(Config& config);

// Trims ASCII whitespace from both ends.
std::string_view trim_blanks(std::string_view s);
using wg::ascii_iequals;

// st_mode lets group or others read or write.
constexpr bool config_mode_is_loose(uint32_t mode) { return (mode & 0066) != 0; }

}  // namespace wg

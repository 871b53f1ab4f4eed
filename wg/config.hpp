// The wg-quick `.conf` format: an [Interface] section and any number of [Peer] sections,
// parsed into plain values with the same rules as wg(8) and wg-quick(8). Errors name the
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
  std::optional<uint32_t> fwmark;             // "off" is stored as 0 (set, and cleared)
  std::vector<IpPrefix> addresses;            // as written: host bits kept (198.19.0.2/24)
  std::vector<IpAddress> dns_servers;
  std::vector<std::string> dns_search;        // DNS entries that are not IP addresses
  std::optional<uint32_t> mtu;                // 576..65535
  // wg-quick-only keys, accepted and kept in file order with the value verbatim:
  // Table, PreUp, PostUp, PreDown, PostDown, SaveConfig (key in that canonical spelling).
  std::vector<std::pair<std::string, std::string>> wg_quick_extras;
};

struct PeerConfig {
  PublicKey public_key;
  std::optional<PresharedKey> preshared_key;
  // Kept as text so host names resolve later: "host:port", "[v6]:port",
  // "[fe80::1%eth0]:port". Checked for shape only; the port is always 1-65535.
  std::optional<std::string> endpoint;
  std::vector<IpPrefix> allowed_ips;          // host bits cleared, as wg does
  uint16_t persistent_keepalive = 0;          // seconds; 0 = off
};

struct Config {
  InterfaceConfig iface;
  std::vector<PeerConfig> peers;
  // What the caller should tell its user (load_config's "readable by others"), one line
  // each, never key material. The library prints nothing itself.
  std::vector<std::string> warnings;
};

// what() is "line N: <message>" from parse_config, and "<path>: line N: <message>" or
// "<path>: <message>" from load_config. line() is 0 when the error has no line.
class ConfigError : public std::runtime_error {
public:
  ConfigError(size_t line, const std::string& message);
  // what is used as is (load_config prefixes the path this way).
  explicit ConfigError(const std::string& what, size_t line = 0)
      : std::runtime_error(what), line_(line) {}
  size_t line() const { return line_; }

private:
  size_t line_ = 0;
};

// Parses the text of a .conf file. Throws ConfigError on the first problem.
Config parse_config(std::string_view text);

// Reads and parses the file at path. Throws ConfigError naming the file. When the file
// holds a PrivateKey and config_mode_is_loose(its mode), adds one line to `warnings`.
// The buffer that held the file is wiped before returning.
Config load_config(const std::string& path);

// The syntax both config readers share (this one and wg-netstack's wireproxy reader):
// blanks (space, tab, CR, FF, VT) trimmed from both ends, and names compared without
// regard to ASCII case.
std::string_view trim_blanks(std::string_view s);
using wg::ascii_iequals;  // wg/base/ascii.hpp

// True when a file mode (st_mode) lets group or others read or write the file.
constexpr bool config_mode_is_loose(uint32_t mode) { return (mode & 0066) != 0; }

}  // namespace wg

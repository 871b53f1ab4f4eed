// wireproxy's configuration format, read as is: [Interface]/[Peer] inline (or WGConfig = a
// wg-quick file) with wg::parse_config's rules, plus wireproxy's proxy, tunnel, health-check
// and resolver settings. A plain wg-quick file gives exactly what wg::load_config gives.
//
// The dialect (go-ini as wireproxy configures it, where it matters):
// - section and key names are case-insensitive; every section but [Interface] may repeat
//   (ResolveStrategy stands once in the file); a key stands once in its section, except
//   the lists (Address, DNS, AllowedIPs, CheckAlive), which add up as in wg-quick, where
//   go-ini would keep only the first;
// - a line starting with '#' or ';' is a comment, and so is the rest of a value from its
//   first '#' or ';' (a password holding one of them is written in backquotes:
//   Password = `p#ss;word`); a value in matching "..." or '...' loses the quotes;
//   not supported: "Key: value", line continuation with '\', multi-line values;
// - a value that is exactly $NAME is the environment variable NAME's value (used verbatim:
//   no comments, no quotes), $$... is the literal $...; this holds for every value, not
//   only for wireproxy's list (Address, PrivateKey, DNS, CheckAlive, PublicKey,
//   AllowedIPs, the proxies' and tunnels' strings), except the wg-quick hooks, which
//   are ignored anyway (PostUp = $HOME/up.sh stays a plain wg-quick line);
// - WGConfig = PATH may stand only before the first section; a relative PATH is taken
//   from the current directory (as wireproxy does), nothing else is tried. That file
//   holds [Interface] (with CheckAlive/CheckAliveInterval, as in wireproxy) and [Peer];
//   the wireproxy file then holds neither.
// Errors are wg::ConfigError with what() "<file>: line N: <message>" (or "<file>: ..."
// without a line); they never contain a PrivateKey, PresharedKey or Password value.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wg/config.hpp"
#include "wg/base/ip.hpp"

namespace wgns {

// Looks an environment variable up: its value, or nullopt when it is unset.
using Env = std::function<std::optional<std::string>(const std::string& name)>;

// The process's environment (getenv).
std::optional<std::string> process_env(const std::string& name);

// A string that is wiped when dropped or moved from (passwords). Never formatted.
class SecretString {
public:
  SecretString() = default;
  explicit SecretString(std::string_view s) : s_(s) {}
  SecretString(const SecretString& o) : s_(o.s_) {}
  SecretString(SecretString&& o) noexcept : s_(o.s_) { o.wipe(); }
  SecretString& operator=(const SecretString& o);
  SecretString& operator=(SecretString&& o) noexcept;
  ~SecretString() { wipe(); }

  const std::string& str() const { return s_; }
  bool empty() const { return s_.empty(); }

private:
  void wipe() noexcept;
  std::string s_;
};

// A local address to listen on: "IP:PORT", "[IPv6]:PORT" or "localhost:PORT" (127.0.0.1,
// as wg-netstack's --socks5/--http take it). wireproxy's ":PORT" (every interface) is
// refused with a hint to write 0.0.0.0:PORT or [::]:PORT: wg-netstack binds to loopback
// unless told so in so many words.
struct ListenAddress {
  wg::IpAddress ip;
  uint16_t port = 0;  // 1-65535
  std::string text;   // as written (after $NAME), for messages
};

// A destination in the tunnel, resolved later through the tunnel's DNS: a host name or an
// IP literal (no brackets) and a port of 1-65535.
struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string text;  // as written
};

// `line` is the line of the section's header, for the caller's messages.
struct Socks5Section {
  size_t line = 0;
  ListenAddress bind;
  std::string username;  // empty: no authentication
  SecretString password; // only with a Username
};

struct HttpSection {
  size_t line = 0;
  ListenAddress bind;
  std::string username;
  SecretString password;
  // Both or neither (wireproxy silently serves plain HTTP when one is missing; here it is
  // an error). Paths as written, relative to the current directory.
  std::string cert_file, key_file;
};

struct TcpClientTunnel {
  size_t line = 0;
  ListenAddress bind;
  HostPort target;
};

struct TcpServerTunnel {
  size_t line = 0;
  uint16_t listen_port = 0;  // 1-65535, on the tunnel addresses
  HostPort target;           // a local destination
};

struct UdpProxyTunnel {
  size_t line = 0;
  ListenAddress bind;
  HostPort target;
  // 0 (the default, as in wireproxy): a client's session never expires. Otherwise a
  // session idle this long is closed.
  std::chrono::seconds inactivity_timeout{0};
};

struct StdioTunnel {
  size_t line = 0;
  HostPort target;
};

// [SNI]: a transparent TLS proxy, routed by each ClientHello's server name (sni.hpp). No
// credentials (wireproxy has none for it): a BindAddress off loopback is allowed, since
// all it does is relay TLS to port 443 of names the tunnel's DNS knows.
struct SniSection {
  size_t line = 0;
  ListenAddress bind;
};

// [Resolve] ResolveStrategy: which addresses of a resolved name are dialed.
enum class ResolveStrategy {
  automatic,  // "auto" (default): every address, as resolved
  ipv4,       // "ipv4": IPv4 addresses only
  ipv6,       // "ipv6": IPv6 addresses only
};

inline constexpr std::chrono::seconds kDefaultCheckAliveInterval{5};

struct ProxyConfig {
  wg::Config wg;
  // Lines the caller prints as they are: "<file>: line N: PostUp is a wg-quick key and is
  // ignored", and a config file with secrets readable by group or others.
  std::vector<std::string> warnings;
  std::string wg_config_path;  // WGConfig as written; empty when [Interface] is inline
  std::vector<Socks5Section> socks5;
  std::vector<HttpSection> http;
  std::vector<TcpClientTunnel> tcp_client_tunnels;
  std::vector<TcpServerTunnel> tcp_server_tunnels;
  std::vector<UdpProxyTunnel> udp_proxy_tunnels;
  std::vector<StdioTunnel> stdio_tunnels;
  std::vector<SniSection> sni;
  ResolveStrategy resolve = ResolveStrategy::automatic;
  std::vector<wg::IpAddress> check_alive;  // [Interface] CheckAlive, in file order
  // [Interface] CheckAliveInterval: 1 s or more; given only together with CheckAlive.
  std::chrono::seconds check_alive_interval = kDefaultCheckAliveInterval;
};

// Parses the text of a wireproxy (or wg-quick) config; path_for_errors names it in
// errors and warnings. A WGConfig line makes it read that file. Throws wg::ConfigError on
// the first problem. Buffers that held secrets are wiped before returning.
ProxyConfig parse_proxy_config(std::string_view text, const std::string& path_for_errors,
                               const Env& env = process_env);

// Reads the file at path (at most 1 MiB) and parses it as above.
ProxyConfig load_proxy_config(const std::string& path, const Env& env = process_env);

}  // namespace wgns

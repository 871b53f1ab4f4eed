// The `.conf` parser, by wg(8)'s rules. Errors never quote key material (shown.hpp).
#include "wg/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "wg/base/fd.hpp"
#include "wg/base/shown.hpp"

namespace wg {

std::string_view trim_blanks(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\f\v";
  auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

ConfigError::ConfigError(size_t line, const std::string& message)
    : std::runtime_error(fmt::format("line {}: {}", line, message)), line_(line) {}

namespace {

constexpr uint32_t kMinMtu = 576;
constexpr uint32_t kMaxMtu = 65535;


// The whole string as a number; nullopt on anything else or overflow.
std::optional<uint64_t> parse_uint(std::string_view s, int base = 10) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// f(item) for each trimmed, non-empty item.
template <class F>
void for_each_item(std::string_view list, F&& f) {
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = trim_blanks(list.substr(0, comma));
    if (!item.empty()) f(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// Letters, digits, '-', '_' and '.', as resolv.conf takes them.
bool is_search_domain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Empty for "host:port", "[v6]:port" or "[v6%zone]:port" with port 1-65535; else why not.
std::string endpoint_problem(std::string_view ep) {
  std::string_view host, port;
  if (ep.front() == '[') {
    auto close = ep.find(']');
    if (close == std::string_view::npos) return "missing ']'";
    host = ep.substr(1, close - 1);
    auto rest = ep.substr(close + 1);
    if (rest.empty()) return "missing port";
    if (rest.front() != ':') return "expected ':' after ']'";
    port = rest.substr(1);
    auto zone = host.find('%');
    auto addr = IpAddress::parse(host.substr(0, zone));
    if (!addr || !addr->is_v6()) return "not an IPv6 address inside [ ]";
    if (zone != std::string_view::npos && zone + 1 == host.size()) return "empty zone after '%'";
  } else {
    auto colon = ep.rfind(':');
    if (colon == std::string_view::npos) return "missing port";
    host = ep.substr(0, colon);
    port = ep.substr(colon + 1);
    if (host.empty()) return "missing host";
    if (host.find(':') != std::string_view::npos)
      return "IPv6 addresses need brackets, as in [::1]:51820";
    if (host.find_first_of(" \t[]") != std::string_view::npos) return "invalid host";
  }
  if (port.empty()) return "missing port";
  auto p = parse_uint(port);
  if (!p || *p < 1 || *p > 65535) return "port must be 1-65535";
  return {};
}

enum class Section { none, interface, peer };

// Scalar keys may appear once per section; list keys accumulate.
class Parser {
public:
  Config run(std::string_view text) {
    for (;;) {
      ++line_;
      auto nl = text.find('\n');
      consume_line(text.substr(0, nl));
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
    end_section();
    return std::move(config_);
  }

private:
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(line_, message); }

  void consume_line(std::string_view line) {
    line = trim_blanks(line.substr(0, line.find('#')));
    if (line.empty()) return;
    if (line.front() == '[') {
      if (line.back() != ']') fail("malformed section header");
      begin_section(trim_blanks(line.substr(1, line.size() - 2)));
      return;
    }
    auto eq = line.find('=');
    if (eq == std::string_view::npos) fail("expected 'Key = Value'");
    auto key = trim_blanks(line.substr(0, eq));
    auto value = trim_blanks(line.substr(eq + 1));
    if (key.empty()) fail("missing key before '='");
    switch (section_) {
      case Section::none: fail("key outside of a section");
      case Section::interface: interface_key(key, value); break;
      case Section::peer: peer_key(key, value); break;
    }
  }

  void begin_section(std::string_view name) {
    end_section();
    section_line_ = line_;
    seen_.clear();
    if (ascii_iequals(name, "Interface")) {
      if (interface_line_ != 0)
        fail(fmt::format("second [Interface] section (first at line {})", interface_line_));
      interface_line_ = line_;
      section_ = Section::interface;
    } else if (ascii_iequals(name, "Peer")) {
      config_.peers.emplace_back();
      peer_has_key_ = false;
      section_ = Section::peer;
    } else {
      fail(fmt::format("unknown section {}", shown(fmt::format("[{}]", name))));
    }
  }

  // A [Peer] without PublicKey is reported at its header.
  void end_section() {
    if (section_ == Section::peer && !peer_has_key_)
      throw ConfigError(section_line_, "[Peer] without PublicKey");
  }

  // Rejects a repeated scalar key; `canonical` names it in messages.
  void once(std::string_view canonical) {
    auto [it, fresh] = seen_.try_emplace(std::string(canonical), line_);
    if (!fresh)
      fail(fmt::format("duplicate {} in this section (first at line {})", canonical, it->second));
  }

  void require_value(std::string_view canonical, std::string_view value) const {
    if (value.empty()) fail(fmt::format("missing value for {}", canonical));
  }

  template <class K>
  K parse_key(std::string_view canonical, std::string_view value) const {
    require_value(canonical, value);
    auto k = K::from_base64(value);
    if (k) return *k;
    if (value.size() != 44)
      fail(fmt::format("invalid key in {}: wrong length (want 44 base64 characters)", canonical));
    fail(fmt::format("invalid key in {}: not base64 of 32 bytes", canonical));
  }

  void interface_key(std::string_view key, std::string_view value) {
    auto& iface = config_.iface;
    if (ascii_iequals(key, "PrivateKey")) {
      once("PrivateKey");
      iface.private_key = parse_key<PrivateKey>("PrivateKey", value);
    } else if (ascii_iequals(key, "ListenPort")) {
      once("ListenPort");
      auto v = parse_uint(value);
      if (!v || *v > 65535) fail(fmt::format("invalid ListenPort {} (0-65535)", shown(value)));
      iface.listen_port = static_cast<uint16_t>(*v);
    } else if (ascii_iequals(key, "FwMark")) {
      once("FwMark");
      iface.fwmark = parse_fwmark(value);
    } else if (ascii_iequals(key, "MTU")) {
      once("MTU");
      auto v = parse_uint(value);
      if (!v) fail(fmt::format("invalid MTU {}", shown(value)));
      if (*v < kMinMtu || *v > kMaxMtu)
        fail(fmt::format("MTU {} out of range ({}-{})", *v, kMinMtu, kMaxMtu));
      iface.mtu = static_cast<uint32_t>(*v);
    } else if (ascii_iequals(key, "Address")) {
      for_each_item(value, [&](std::string_view item) {
        auto p = IpPrefix::parse(item);
        if (!p) fail(fmt::format("invalid Address {}", shown(item)));
        iface.addresses.push_back(*p);
      });
    } else if (ascii_iequals(key, "DNS")) {
      for_each_item(value, [&](std::string_view item) {
        if (auto a = IpAddress::parse(item)) iface.dns_servers.push_back(*a);
        else if (is_search_domain(item)) iface.dns_search.emplace_back(item);
        else fail(fmt::format("invalid DNS entry {}", shown(item)));
      });
    } else if (auto extra = wg_quick_key(key)) {
      // Hooks may repeat; Table and SaveConfig may not.
      if (*extra == "Table" || *extra == "SaveConfig") once(*extra);
      iface.wg_quick_extras.emplace_back(*extra, value);
    } else {
      fail(fmt::format("unknown key {} in [Interface]", shown(key)));
    }
  }

  void peer_key(std::string_view key, std::string_view value) {
    auto& peer = config_.peers.back();
    if (ascii_iequals(key, "PublicKey")) {
      once("PublicKey");
      peer.public_key = parse_key<PublicKey>("PublicKey", value);
      auto [it, fresh] = peer_lines_.try_emplace(peer.public_key, section_line_);
      if (!fresh)
        fail(fmt::format("duplicate PublicKey: same peer as the [Peer] at line {}", it->second));
      peer_has_key_ = true;
    } else if (ascii_iequals(key, "PresharedKey")) {
      once("PresharedKey");
      peer.preshared_key = parse_key<PresharedKey>("PresharedKey", value);
    } else if (ascii_iequals(key, "Endpoint")) {
      once("Endpoint");
      require_value("Endpoint", value);
      if (auto why = endpoint_problem(value); !why.empty())
        fail(fmt::format("invalid Endpoint {}: {}", shown(value), why));
      peer.endpoint = std::string(value);
    } else if (ascii_iequals(key, "AllowedIPs")) {
      for_each_item(value, [&](std::string_view item) {
        auto p = IpPrefix::parse(item);
        if (!p) fail(fmt::format("invalid AllowedIPs entry {}", shown(item)));
        peer.allowed_ips.push_back(p->masked());
      });
    } else if (ascii_iequals(key, "PersistentKeepalive")) {
      once("PersistentKeepalive");
      if (ascii_iequals(value, "off")) {
        peer.persistent_keepalive = 0;
        return;
      }
      auto v = parse_uint(value);
      if (!v || *v > 65535)
        fail(fmt::format("invalid PersistentKeepalive {} (0-65535 or off)", shown(value)));
      peer.persistent_keepalive = static_cast<uint16_t>(*v);
    } else {
      fail(fmt::format("unknown key {} in [Peer]", shown(key)));
    }
  }

  // Decimal, 0x hex, or "off" (0), like wg(8).
  uint32_t parse_fwmark(std::string_view value) const {
    if (ascii_iequals(value, "off")) return 0;
    std::optional<uint64_t> v;
    if (value.size() > 2 && value[0] == '0' && (value[1] == 'x' || value[1] == 'X'))
      v = parse_uint(value.substr(2), 16);
    else
      v = parse_uint(value);
    if (!v || *v > 0xffffffffu)
      fail(fmt::format("invalid FwMark {} (number, 0x hex or off)", shown(value)));
    return static_cast<uint32_t>(*v);
  }

  static std::optional<std::string> wg_quick_key(std::string_view key) {
    for (std::string_view name : {"Table", "PreUp", "PostUp", "PreDown", "PostDown", "SaveConfig"})
      if (ascii_iequals(key, name)) return std::string(name);
    return std::nullopt;
  }

  Config config_;
  Section section_ = Section::none;
  size_t line_ = 0;
  size_t section_line_ = 0;
  size_t interface_line_ = 0;
  bool peer_has_key_ = false;
  std::unordered_map<std::string, size_t> seen_;                      // this section's key -> line
  std::unordered_map<PublicKey, size_t, PublicKeyHash> peer_lines_;   // -> [Peer] line
};

// Wipes a buffer of key material on every path.
struct WipeOnExit {
  std::string& s;
  ~WipeOnExit() { secure_wipe(s.data(), s.size()); }
};

}  // namespace

Config parse_config(std::string_view text) { return Parser().run(text); }

Config load_config(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ConfigError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  UniqueFd closer(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0)
    throw ConfigError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));

  std::string text;
  WipeOnExit wipe{text};
  text.reserve(st.st_size > 0 ? static_cast<size_t>(st.st_size) : 4096);
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      secure_wipe(buf, sizeof buf);
      throw ConfigError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  secure_wipe(buf, sizeof buf);

  Config config;
  try {
    config = parse_config(text);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", path, e.what()), e.line());
  }
  if (config.iface.private_key && config_mode_is_loose(st.st_mode))
    config.warnings.push_back(
        fmt::format("warning: {} is readable by group or others; private keys should be mode 0600", path));
  return config;
}

void forget_keys(Config& config) {
  config.iface.private_key.reset();  // ~Key wipes
  for (auto& peer : config.peers) peer.preshared_key.reset();
}

}  // namespace wg

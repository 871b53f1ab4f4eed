// Fuzzes wgns::parse_proxy_config (wireproxy's config format) with the input as the file's
// text and a fixed environment. An error names the file and a line of the text and never
// quotes a secret (a PrivateKey, PresharedKey or Password written in the text or taken
// from the environment); what is accepted keeps the reader's promises; and a text without
// wireproxy's extra syntax (; ` $ " ' and WGConfig) that wg::parse_config accepts gives
// exactly wg::parse_config's values. WGConfig inputs are skipped: no file is opened.
//   cmake --preset fuzz && cmake --build build-fuzz --target proxy_config_fuzz
//   build-fuzz/bin/proxy_config_fuzz -max_total_time=60 tests/fuzz/corpus/proxy_config
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "proxy_config.hpp"
#include "wg/base/shown.hpp"

namespace {

constexpr std::string_view kPath = "fuzz.conf";
// Values of the environment; SECRET is a valid key and a password at once.
constexpr const char* kSecret = "8KxyZrTLgHvr1xyi7Qv2YPa5lWOAAOdlv7DcvQoDvE0=";

const std::map<std::string, std::string>& environment() {
  static const std::map<std::string, std::string> vars = {
      {"SECRET", kSecret},
      {"PUB", "YEuBz+mBGWhZ+CGdmyGWfAw9dUQjeA0vJwSkImdoV18="},
      {"ADDR", "198.19.0.2/32, fd00:19::2/128"},
      {"BIND", "127.0.0.1:1080"},
      {"TARGET", "host.test:22"},
      {"EMPTY", ""},
      {"NL", "198.19.0.2/32\nPrivateKey = x"},
  };
  return vars;
}

std::optional<std::string> lookup(const std::string& name) {
  auto it = environment().find(name);
  if (it == environment().end()) return std::nullopt;
  return it->second;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\f\v";
  auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

bool is_secret_key(const std::string& key) {
  return key == "privatekey" || key == "presharedkey" || key == "password";
}

// Line n (1-based) of the text.
std::string_view line_of(std::string_view text, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return {};
    text.remove_prefix(nl + 1);
  }
  return text.substr(0, text.find('\n'));
}

std::string key_of(std::string_view line) {
  auto eq = line.find('=');
  return eq == std::string_view::npos ? std::string() : lower(trim(line.substr(0, eq)));
}

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
         c == '=';
}

// The message quotes a secret of the text only if the text also holds it outside of the
// secret lines (as an Address, say, raw or escaped) or in the environment. Checked on every 16 characters of a run of base64
// characters in a secret's value: the messages' own words have no such run, so one there
// was quoted from a line.
void check_secrets(std::string_view text, std::string_view what, size_t line) {
  // The environment's values count as held elsewhere: checked on their own below.
  std::string rest;
  for (auto& [name, value] : environment()) (rest += value) += '\n';
  std::vector<std::string> secrets;
  std::string_view t = text;
  while (!t.empty()) {
    auto nl = t.find('\n');
    auto l = t.substr(0, nl);
    t = nl == std::string_view::npos ? std::string_view{} : t.substr(nl + 1);
    auto eq = l.find('=');
    if (eq != std::string_view::npos && is_secret_key(key_of(l))) {
      // "$NAME" (also quoted) is a reference, not a secret: errors may name the variable.
      auto v = trim(l.substr(eq + 1));
      auto unquoted = v.substr(std::min(v.find_first_not_of("`\"'"), v.size()));
      if (unquoted.substr(0, 1) == "$" && unquoted.substr(0, 2) != "$$") {
        (rest += l) += '\n';
        continue;
      }
      for (size_t i = 0; i + 16 <= v.size(); ++i) {
        auto window = v.substr(i, 16);
        if (std::all_of(window.begin(), window.end(), is_base64_char)) secrets.emplace_back(window);
      }
    } else {
      // Messages quote a value escaped, and escaping can spell a secret's run ("\xb0...").
      (rest += l) += '\n';
      (rest += wg::escaped(l)) += '\n';
    }
  }
  for (auto& s : secrets)
    if (what.find(s) != std::string_view::npos && rest.find(s) == std::string::npos) __builtin_trap();
  // SECRET from the environment shows only in an error about a key that is no secret.
  if (what.find(kSecret) != std::string_view::npos && is_secret_key(key_of(line_of(text, line))))
    __builtin_trap();
}

bool same(const wg::Config& a, const wg::Config& b) {
  const auto &x = a.iface, &y = b.iface;
  if (x.private_key != y.private_key || x.listen_port != y.listen_port || x.fwmark != y.fwmark ||
      x.mtu != y.mtu || x.addresses != y.addresses || x.dns_servers != y.dns_servers ||
      x.dns_search != y.dns_search || x.wg_quick_extras != y.wg_quick_extras || a.peers.size() != b.peers.size())
    return false;
  for (size_t k = 0; k < a.peers.size(); ++k) {
    const auto &p = a.peers[k], &q = b.peers[k];
    if (p.public_key != q.public_key || p.preshared_key != q.preshared_key || p.endpoint != q.endpoint ||
        p.allowed_ips != q.allowed_ips || p.persistent_keepalive != q.persistent_keepalive)
      return false;
  }
  return true;
}

void check_listen(const wgns::ListenAddress& a) {
  if (a.port == 0 || a.ip.family == 0 || a.text.empty()) __builtin_trap();
}

void check_target(const wgns::HostPort& t) {
  if (t.port == 0 || t.host.empty() || t.text.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (lower(text).find("wgconfig") != std::string::npos) return 0;
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  const bool plain_syntax = text.find_first_of(";`$\"'") == std::string_view::npos;

  wgns::ProxyConfig c;
  try {
    c = wgns::parse_proxy_config(text, std::string(kPath), lookup);
  } catch (const wg::ConfigError& e) {
    std::string_view what = e.what();
    if (e.line() < 1 || e.line() > lines) __builtin_trap();  // every error here has a line
    if (what.rfind(std::string(kPath) + ": line " + std::to_string(e.line()) + ": ", 0) != 0) __builtin_trap();
    check_secrets(text, what, e.line());
    // What wg::parse_config accepts in wg-quick's syntax is accepted here too.
    if (plain_syntax) {
      try {
        wg::parse_config(text);
      } catch (const wg::ConfigError&) {
        return 0;
      }
      __builtin_trap();
    }
    return 0;
  }

  for (auto& s : c.socks5) {
    check_listen(s.bind);
    if (!s.password.empty() && s.username.empty()) __builtin_trap();
  }
  for (auto& h : c.http) {
    check_listen(h.bind);
    if (h.cert_file.empty() != h.key_file.empty()) __builtin_trap();
    if (!h.password.empty() && h.username.empty()) __builtin_trap();
  }
  for (auto& t : c.tcp_client_tunnels) check_listen(t.bind), check_target(t.target);
  for (auto& t : c.tcp_server_tunnels)
    if (t.listen_port == 0) __builtin_trap();
    else check_target(t.target);
  for (auto& t : c.udp_proxy_tunnels) check_listen(t.bind), check_target(t.target);
  for (auto& t : c.stdio_tunnels) check_target(t.target);
  if (c.check_alive_interval < std::chrono::seconds(1)) __builtin_trap();
  if (c.check_alive_interval != wgns::kDefaultCheckAliveInterval && c.check_alive.empty()) __builtin_trap();
  for (auto& w : c.warnings)
    if (w.rfind(std::string(kPath) + ": line ", 0) != 0) __builtin_trap();
  if (c.warnings.size() != c.wg.iface.wg_quick_extras.size()) __builtin_trap();

  // Plain wg-quick text: the same values as wg::parse_config.
  if (plain_syntax) {
    try {
      auto plain = wg::parse_config(text);
      if (!same(plain, c.wg)) __builtin_trap();
    } catch (const wg::ConfigError&) {
      // wireproxy's own sections and keys: wg::parse_config refuses them.
    }
  }
  return 0;
}

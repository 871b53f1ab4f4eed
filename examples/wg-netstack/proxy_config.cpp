// Reader of wireproxy's config format. One pass per file classifies each line: [Interface]
// and [Peer] lines go, with $NAME resolved and comments cut, into a text of the same line
// count that wg::parse_config reads (so its rules, messages and line numbers hold); the
// other lines are blanked there and read here.
#include "proxy_config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>

#include "wg/base/host_port.hpp"
#include "wg/base/shown.hpp"
#include "wg/base/fd.hpp"
#include "wg/crypto.hpp"

namespace wgns {

using wg::split_host_port;

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

SecretString& SecretString::operator=(const SecretString& o) {
  if (this != &o) {
    wipe();
    s_ = o.s_;
  }
  return *this;
}

SecretString& SecretString::operator=(SecretString&& o) noexcept {
  if (this != &o) {
    wipe();
    s_ = o.s_;
    o.wipe();
  }
  return *this;
}

// Copies instead of moving: a moved-from short string keeps its bytes in place.
void SecretString::wipe() noexcept {
  wg::secure_wipe(s_.data(), s_.size());
  s_.clear();
}

namespace {

constexpr size_t kMaxFileSize = 1 << 20;

using wg::ascii_iequals;
using wg::trim_blanks;

std::optional<uint64_t> parse_uint(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Wipes a string that held a value on every path.
struct WipeOnExit {
  std::string& s;
  ~WipeOnExit() { wg::secure_wipe(s.data(), s.size()); }
};

bool is_host_name(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  return true;
}

// Why host:port is not a tunnel destination (empty when it is one).
std::string target_problem(const std::string& value, HostPort& out) {
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(value, host, port)) return "expected HOST:PORT or [IPv6]:PORT";
  if (value.front() == '[') {
    auto a = wg::IpAddress::parse(host);
    if (!a || !a->is_v6()) return "not an IPv6 address inside [ ]";
  } else if (!wg::IpAddress::parse(host) && !is_host_name(host)) {
    return "not a host name or IP address";
  }
  if (port == 0) return "port must be 1-65535";
  out = {host, port, value};
  return {};
}

// Why ADDR:PORT is not a local listen address (empty when it is one).
std::string listen_problem(const std::string& value, ListenAddress& out) {
  if (value.size() > 1 && value.front() == ':' && value.find_first_not_of("0123456789", 1) == std::string::npos)
    return "no address: write 0.0.0.0" + value + " or [::]" + value + " to listen on every interface";
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(value, host, port)) return "expected ADDR:PORT or [IPv6]:PORT";
  std::optional<wg::IpAddress> ip;
  if (ascii_iequals(host, "localhost")) ip = wg::IpAddress::parse("127.0.0.1");
  else ip = wg::IpAddress::parse(host);
  if (!ip) return "not an IP address or localhost";
  if ((value.front() == '[') != ip->is_v6()) return "only IPv6 addresses go inside [ ]";
  if (port == 0) return "port must be 1-65535";
  out = {*ip, port, value};
  return {};
}

enum class Section { none, interface, peer, socks5, http, tcp_client, tcp_server, udp_proxy, stdio, sni, resolve };

struct SectionName {
  std::string_view name;
  Section section;
};

constexpr SectionName kSections[] = {
    {"Interface", Section::interface},     {"Peer", Section::peer},
    {"Socks5", Section::socks5},           {"http", Section::http},
    {"TCPClientTunnel", Section::tcp_client}, {"TCPServerTunnel", Section::tcp_server},
    {"UDPProxyTunnel", Section::udp_proxy}, {"STDIOTunnel", Section::stdio},
    {"SNI", Section::sni},                 {"Resolve", Section::resolve},
};

// wg-quick's own keys: handed to wg::parse_config verbatim (their values are shell
// commands, where ';' and '$' mean something) and reported as ignored.
std::optional<std::string_view> wg_quick_key(std::string_view key) {
  for (std::string_view k : {"Table", "PreUp", "PostUp", "PreDown", "PostDown", "SaveConfig"})
    if (ascii_iequals(key, k)) return k;
  return std::nullopt;
}

// The value as go-ini reads it: backquoted (or """-quoted) verbatim, else cut at the first
// '#' or ';' and stripped of one pair of surrounding quotes.
std::optional<std::string> ini_value(std::string_view raw, std::string& why) {
  for (std::string_view q : {"\"\"\"", "`"}) {
    if (raw.substr(0, q.size()) != q) continue;
    auto close = raw.find(q, q.size());
    if (close == std::string_view::npos) {
      why = fmt::format("no closing {} (values cannot span lines)", q);
      return std::nullopt;
    }
    auto rest = trim_blanks(raw.substr(close + q.size()));
    if (!rest.empty() && rest.front() != '#' && rest.front() != ';') {
      why = fmt::format("text after the closing {}", q);
      return std::nullopt;
    }
    return std::string(raw.substr(q.size(), close - q.size()));
  }
  auto v = trim_blanks(raw.substr(0, raw.find_first_of("#;")));
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front() &&
      v.find(v.front(), 1) == v.size() - 1)
    v = v.substr(1, v.size() - 2);
  return std::string(v);
}

bool is_env_name(std::string_view s) {
  if (s.empty() || (s.front() >= '0' && s.front() <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// Appends to a string that may hold secrets: when it must grow, the old buffer is wiped
// (a plain append would free it with its bytes in place).
void append_wiping(std::string& s, std::string_view more) {
  if (s.size() + more.size() > s.capacity()) {
    std::string bigger;
    bigger.reserve(std::max(s.capacity() * 2, s.size() + more.size()));
    bigger = s;
    wg::secure_wipe(s.data(), s.size());
    s.swap(bigger);
  }
  s.append(more);
}

// Reads a file of at most kMaxFileSize bytes; `what` prefixes errors. st receives its stat.
std::string read_file(const std::string& path, const std::string& what, struct stat& st) {
  wg::UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) throw wg::ConfigError(fmt::format("{}: cannot open: {}", what, std::strerror(errno)));
  const int fd = file.get();
  if (::fstat(fd, &st) != 0) throw wg::ConfigError(fmt::format("{}: cannot stat: {}", what, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw wg::ConfigError(fmt::format("{}: not a regular file", what));
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || text.size() + static_cast<size_t>(std::max<ssize_t>(n, 0)) > kMaxFileSize) {
      int err = errno;
      wg::secure_wipe(buf, sizeof buf);
      wg::secure_wipe(text.data(), text.size());
      if (n < 0) throw wg::ConfigError(fmt::format("{}: cannot read: {}", what, std::strerror(err)));
      throw wg::ConfigError(fmt::format("{}: larger than {} bytes", what, kMaxFileSize));
    }
    if (n == 0) break;
    append_wiping(text, std::string_view(buf, static_cast<size_t>(n)));
  }
  wg::secure_wipe(buf, sizeof buf);
  return text;
}

// One file's pass. The wireproxy file may hold everything (WGConfig only before the first
// section); a WGConfig file only [Interface] and [Peer].
class Reader {
public:
  Reader(ProxyConfig& out, const std::string& path, const Env& env, bool wg_file)
      : out_(out), path_(path), env_(env), wg_file_(wg_file) {}

  void run(std::string_view text) {
    WipeOnExit wipe{wg_text_};
    wg_text_.reserve(text.size() + 64);
    for (;;) {
      ++line_;
      auto nl = text.find('\n');
      consume_line(text.substr(0, nl));
      append_wiping(wg_text_, "\n");
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
    end_section();
    if (interval_line_ != 0 && out_.check_alive.empty())
      fail_at(interval_line_, "CheckAliveInterval without CheckAlive (it sets how often those addresses are pinged)");
    if (has_wg_sections_) parse_wg();
  }

  // True when a PrivateKey, PresharedKey or Password was written in this file itself.
  bool holds_secrets() const { return secrets_in_file_; }

private:
  [[noreturn]] void fail_at(size_t line, const std::string& message) const {
    throw wg::ConfigError(fmt::format("{}: line {}: {}", path_, line, message), line);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(line_, message); }

  void consume_line(std::string_view raw) {
    auto line = trim_blanks(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') return;
    if (line.front() == '[') {
      auto close = line.find(']');
      auto rest = close == std::string_view::npos ? std::string_view{} : trim_blanks(line.substr(close + 1));
      if (close == std::string_view::npos || (!rest.empty() && rest.front() != '#' && rest.front() != ';'))
        fail("malformed section header");
      begin_section(trim_blanks(line.substr(1, close - 1)));
      return;
    }
    auto eq = line.find('=');
    if (eq == std::string_view::npos) fail("expected 'Key = Value'");
    auto key = trim_blanks(line.substr(0, eq));
    if (key.empty()) fail("missing key before '='");
    auto raw_value = trim_blanks(line.substr(eq + 1));
    switch (section_) {
      case Section::none: return top_level_key(key, raw_value);
      case Section::interface:
      case Section::peer: return wg_key(line, key, raw_value);
      default: return proxy_key(key, raw_value);
    }
  }

  void begin_section(std::string_view name) {
    end_section();
    section_line_ = line_;
    seen_.clear();
    for (auto& s : kSections) {
      if (!ascii_iequals(name, s.name)) continue;
      bool wg_section = s.section == Section::interface || s.section == Section::peer;
      if (!wg_section && wg_file_)
        fail(fmt::format("[{}] belongs in the wireproxy file, not in a WGConfig file", name));
      if (wg_section && !wg_file_ && !out_.wg_config_path.empty())
        fail(fmt::format("[{}] and WGConfig (line {}) both given: [Interface] and [Peer] go in "
                         "the WGConfig file",
                         name, wg_config_line_));
      section_ = s.section;
      if (wg_section) {
        has_wg_sections_ = true;
        append_wiping(wg_text_, s.section == Section::interface ? "[Interface]" : "[Peer]");
      }
      open_section();
      return;
    }
    fail(fmt::format("unknown section {}", wg::shown(fmt::format("[{}]", name))));
  }

  void open_section() {
    switch (section_) {
      case Section::socks5: out_.socks5.emplace_back().line = line_; break;
      case Section::http: out_.http.emplace_back().line = line_; break;
      case Section::tcp_client: out_.tcp_client_tunnels.emplace_back().line = line_; break;
      case Section::tcp_server: out_.tcp_server_tunnels.emplace_back().line = line_; break;
      case Section::udp_proxy: out_.udp_proxy_tunnels.emplace_back().line = line_; break;
      case Section::stdio: out_.stdio_tunnels.emplace_back().line = line_; break;
      case Section::sni: out_.sni.emplace_back().line = line_; break;
      default: break;
    }
  }

  bool seen(std::string_view canonical) const { return seen_.count(std::string(canonical)) != 0; }

  // Checks the finished section's required keys, reported at its header like wg's
  // "[Peer] without PublicKey".
  void end_section() {
    auto require = [&](std::string_view section, std::string_view key) {
      if (!seen(key)) fail_at(section_line_, fmt::format("[{}] without {}", section, key));
    };
    switch (section_) {
      case Section::socks5:
        require("Socks5", "BindAddress");
        if (!out_.socks5.back().password.empty() && out_.socks5.back().username.empty())
          fail_at(seen_["Password"], "Password without Username");
        break;
      case Section::http: {
        require("http", "BindAddress");
        auto& h = out_.http.back();
        if (!h.password.empty() && h.username.empty()) fail_at(seen_["Password"], "Password without Username");
        if (h.cert_file.empty() != h.key_file.empty())
          fail_at(section_line_, "[http] needs both CertFile and KeyFile for TLS, or neither");
        break;
      }
      case Section::tcp_client: require("TCPClientTunnel", "BindAddress"); require("TCPClientTunnel", "Target"); break;
      case Section::tcp_server: require("TCPServerTunnel", "ListenPort"); require("TCPServerTunnel", "Target"); break;
      case Section::udp_proxy: require("UDPProxyTunnel", "BindAddress"); require("UDPProxyTunnel", "Target"); break;
      case Section::stdio: require("STDIOTunnel", "Target"); break;
      case Section::sni: require("SNI", "BindAddress"); break;
      default: break;
    }
  }

  void once(std::string_view canonical) {
    auto [it, fresh] = seen_.try_emplace(std::string(canonical), line_);
    if (!fresh) fail(fmt::format("duplicate {} in this section (first at line {})", canonical, it->second));
  }

  // The value with comments, quotes and $NAME resolved. A secret's value never appears in a
  // message; `from_env` receives the variable's name when one was used.
  std::string value_of(std::string_view canonical, std::string_view raw, std::string* from_env = nullptr) {
    std::string why;
    auto v = ini_value(raw, why);
    if (!v) fail(fmt::format("malformed value of {}: {}", canonical, why));
    // No guard on `value`: it is the result (the caller wipes its copy).
    std::string value = *v;
    wg::secure_wipe(v->data(), v->size());
    if (value.empty() || value.front() != '$') return value;
    std::string rest = value.substr(1);
    wg::secure_wipe(value.data(), value.size());
    if (!rest.empty() && rest.front() == '$') return rest;  // $$... is the literal $...
    const std::string& name = rest;
    if (!is_env_name(name)) {
      wg::secure_wipe(rest.data(), rest.size());  // "$ecret": a password that needed $$
      fail(fmt::format("{}: '$' must be followed by an environment variable name (write $$ for a literal '$')",
                       canonical));
    }
    auto found = env_ ? env_(name) : std::nullopt;
    if (!found) fail(fmt::format("{} references unset environment variable {}", canonical, name));
    if (from_env) *from_env = name;
    std::string result = *found;
    wg::secure_wipe(found->data(), found->size());
    return result;
  }

  void top_level_key(std::string_view key, std::string_view raw) {
    if (wg_file_ || !ascii_iequals(key, "WGConfig"))
      fail(fmt::format("key {} outside of a section{}", wg::shown(key),
                       wg_file_ ? "" : " (only WGConfig may come before the first section)"));
    if (wg_config_line_ != 0) fail(fmt::format("duplicate WGConfig (first at line {})", wg_config_line_));
    auto path = value_of("WGConfig", raw);
    if (path.empty()) fail("missing value for WGConfig");
    out_.wg_config_path = path;
    wg_config_line_ = line_;
  }

  // [Interface]/[Peer]: CheckAlive and CheckAliveInterval are read here, the rest is
  // written for wg::parse_config.
  void wg_key(std::string_view line, std::string_view key, std::string_view raw) {
    if (auto hook = wg_quick_key(key)) {
      append_wiping(wg_text_, line);
      warnings_.push_back(fmt::format("{}: line {}: {} is a wg-quick key and is ignored", path_, line_, *hook));
      return;
    }
    if (section_ == Section::interface && ascii_iequals(key, "CheckAlive")) {
      auto value = value_of("CheckAlive", raw);
      std::string_view list = value;
      while (!list.empty()) {
        auto comma = list.find(',');
        auto item = trim_blanks(list.substr(0, comma));
        if (!item.empty()) {
          auto a = wg::IpAddress::parse(item);
          if (!a) fail(fmt::format("invalid CheckAlive entry {} (IP addresses only)", wg::shown(item)));
          out_.check_alive.push_back(*a);
        }
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
      return;
    }
    if (section_ == Section::interface && ascii_iequals(key, "CheckAliveInterval")) {
      once("CheckAliveInterval");
      auto value = value_of("CheckAliveInterval", raw);
      auto v = parse_uint(value);
      if (!v || *v < 1 || *v > 0xffffffffu)
        fail(fmt::format("invalid CheckAliveInterval {} (seconds, 1 or more)", wg::shown(value)));
      out_.check_alive_interval = std::chrono::seconds(*v);
      interval_line_ = line_;
      return;
    }
    bool secret = ascii_iequals(key, "PrivateKey") || ascii_iequals(key, "PresharedKey");
    std::string env_name;
    auto value = value_of(secret ? (ascii_iequals(key, "PrivateKey") ? "PrivateKey" : "PresharedKey") : key, raw, &env_name);
    WipeOnExit wipe{value};
    if (secret && env_name.empty()) secrets_in_file_ = true;
    // The value stands on its line in the text for wg::parse_config: a '\n' would start
    // a new line there and a '#' would cut it.
    if (value.find_first_of("#\n") != std::string::npos)
      fail(fmt::format("the value of {}{} holds a '#' or a line break", wg::shown(key),
                       env_name.empty() ? std::string() : " (from environment variable " + env_name + ")"));
    if (!env_name.empty()) env_lines_[line_] = env_name;
    append_wiping(wg_text_, key);
    append_wiping(wg_text_, " = ");
    append_wiping(wg_text_, value);
  }

  void parse_wg() {
    try {
      out_.wg = wg::parse_config(wg_text_);
    } catch (const wg::ConfigError& e) {
      auto it = env_lines_.find(e.line());
      throw wg::ConfigError(
          fmt::format("{}: {}{}", path_, e.what(),
                      it == env_lines_.end() ? "" : " (the value came from environment variable " + it->second + ")"),
          e.line());
    }
    for (auto& w : warnings_) out_.warnings.push_back(std::move(w));
  }

  ListenAddress listen_value(std::string_view canonical, std::string_view raw) {
    auto value = value_of(canonical, raw);
    ListenAddress a;
    if (value.empty()) fail(fmt::format("missing value for {}", canonical));
    if (auto why = listen_problem(value, a); !why.empty())
      fail(fmt::format("invalid {} {}: {}", canonical, wg::shown(value), why));
    return a;
  }

  HostPort target_value(std::string_view raw) {
    auto value = value_of("Target", raw);
    HostPort t;
    if (value.empty()) fail("missing value for Target");
    if (auto why = target_problem(value, t); !why.empty()) fail(fmt::format("invalid Target {}: {}", wg::shown(value), why));
    return t;
  }

  // Matches key against the section's keys; the canonical name, or fails.
  std::string_view match(std::string_view key, std::initializer_list<std::string_view> keys, std::string_view section) {
    for (auto k : keys)
      if (ascii_iequals(key, k)) {
        once(k);
        return k;
      }
    fail(fmt::format("unknown key {} in [{}]", wg::shown(key), section));
  }

  void proxy_key(std::string_view key, std::string_view raw) {
    switch (section_) {
      case Section::socks5: {
        auto& s = out_.socks5.back();
        auto k = match(key, {"BindAddress", "Username", "Password"}, "Socks5");
        if (k == "BindAddress") s.bind = listen_value(k, raw);
        else credential(k, raw, s.username, s.password);
        break;
      }
      case Section::http: {
        auto& h = out_.http.back();
        auto k = match(key, {"BindAddress", "Username", "Password", "CertFile", "KeyFile"}, "http");
        if (k == "BindAddress") h.bind = listen_value(k, raw);
        else if (k == "CertFile") h.cert_file = value_of(k, raw);
        else if (k == "KeyFile") h.key_file = value_of(k, raw);
        else credential(k, raw, h.username, h.password);
        break;
      }
      case Section::tcp_client: {
        auto& t = out_.tcp_client_tunnels.back();
        auto k = match(key, {"BindAddress", "Target"}, "TCPClientTunnel");
        if (k == "BindAddress") t.bind = listen_value(k, raw);
        else t.target = target_value(raw);
        break;
      }
      case Section::tcp_server: {
        auto& t = out_.tcp_server_tunnels.back();
        auto k = match(key, {"ListenPort", "Target"}, "TCPServerTunnel");
        if (k == "Target") {
          t.target = target_value(raw);
          break;
        }
        auto value = value_of(k, raw);
        auto v = parse_uint(value);
        if (!v || *v < 1 || *v > 65535) fail(fmt::format("invalid ListenPort {} (1-65535)", wg::shown(value)));
        t.listen_port = static_cast<uint16_t>(*v);
        break;
      }
      case Section::udp_proxy: {
        auto& t = out_.udp_proxy_tunnels.back();
        auto k = match(key, {"BindAddress", "Target", "InactivityTimeout"}, "UDPProxyTunnel");
        if (k == "BindAddress") {
          t.bind = listen_value(k, raw);
        } else if (k == "Target") {
          t.target = target_value(raw);
        } else {
          auto value = value_of(k, raw);
          auto v = parse_uint(value);
          if (!v || *v > 0xffffffffu)
            fail(fmt::format("invalid InactivityTimeout {} (seconds, 0 or more; 0: never)", wg::shown(value)));
          t.inactivity_timeout = std::chrono::seconds(*v);
        }
        break;
      }
      case Section::stdio:
        match(key, {"Target"}, "STDIOTunnel");
        out_.stdio_tunnels.back().target = target_value(raw);
        break;
      case Section::sni:
        match(key, {"BindAddress"}, "SNI");
        out_.sni.back().bind = listen_value("BindAddress", raw);
        break;
      case Section::resolve: {
        match(key, {"ResolveStrategy"}, "Resolve");
        if (resolve_line_ != 0) fail(fmt::format("duplicate ResolveStrategy (first at line {})", resolve_line_));
        resolve_line_ = line_;
        auto value = value_of("ResolveStrategy", raw);
        if (ascii_iequals(value, "auto")) out_.resolve = ResolveStrategy::automatic;
        else if (ascii_iequals(value, "ipv4")) out_.resolve = ResolveStrategy::ipv4;
        else if (ascii_iequals(value, "ipv6")) out_.resolve = ResolveStrategy::ipv6;
        else fail(fmt::format("invalid ResolveStrategy {} (auto, ipv4 or ipv6)", wg::shown(value)));
        break;
      }
      default: break;
    }
  }

  void credential(std::string_view k, std::string_view raw, std::string& user, SecretString& password) {
    std::string env_name;
    auto value = value_of(k, raw, &env_name);
    WipeOnExit wipe{value};
    if (k == "Username") {
      user = value;
      return;
    }
    if (env_name.empty() && !value.empty()) secrets_in_file_ = true;
    password = SecretString(value);
  }

  ProxyConfig& out_;
  const std::string& path_;
  const Env& env_;
  const bool wg_file_;
  Section section_ = Section::none;
  size_t line_ = 0;
  size_t section_line_ = 0;
  size_t wg_config_line_ = 0;
  size_t interval_line_ = 0;
  size_t resolve_line_ = 0;
  bool has_wg_sections_ = false;
  bool secrets_in_file_ = false;
  std::string wg_text_;                      // the [Interface]/[Peer] lines, same line count
  std::map<std::string, size_t> seen_;       // key -> line, this section
  std::map<size_t, std::string> env_lines_;  // line -> variable, in wg_text_
  std::vector<std::string> warnings_;
};

void warn_if_loose(ProxyConfig& out, const std::string& path, const struct stat& st, bool secrets) {
  if (secrets && wg::config_mode_is_loose(st.st_mode))
    out.warnings.push_back(fmt::format(
        "warning: {} is readable by group or others; files with keys or passwords should be mode 0600", path));
}

ProxyConfig parse(std::string_view text, const std::string& path, const Env& env, const struct stat* st) {
  ProxyConfig out;
  Reader main(out, path, env, false);
  main.run(text);
  if (st) warn_if_loose(out, path, *st, main.holds_secrets());
  if (out.wg_config_path.empty()) return out;

  const std::string& wg_path = out.wg_config_path;
  struct stat wst{};
  std::string wg_text = read_file(wg_path, fmt::format("{}: WGConfig {}", path, wg_path), wst);
  WipeOnExit wipe{wg_text};
  Reader wg(out, wg_path, env, true);
  wg.run(wg_text);
  warn_if_loose(out, wg_path, wst, wg.holds_secrets());
  return out;
}

}  // namespace

ProxyConfig parse_proxy_config(std::string_view text, const std::string& path_for_errors, const Env& env) {
  return parse(text, path_for_errors, env, nullptr);
}

ProxyConfig load_proxy_config(const std::string& path, const Env& env) {
  struct stat st{};
  std::string text = read_file(path, path, st);
  WipeOnExit wipe{text};
  return parse(text, path, env, &st);
}

}  // namespace wgns

// wg-netstack: a SOCKS5 / HTTP CONNECT proxy and port forwarder into a WireGuard network,
// with no root and no TUN: WireGuard's core over UDP, lwIP as the TCP/IP stack, all in
// one process.
//
//   wg-netstack -c wg0.conf [--socks5 127.0.0.1:1080] [--http ADDR:PORT]
//               [--forward tcp|udp:LOCAL:PORT=TUNNEL:PORT]... [--reverse tcp|udp:TUNNEL:PORT=LOCAL:PORT]...
//               [--health ADDR:PORT] [--auth-file FILE] [--handshake-timeout SECONDS]
//               [--tcp-keepalive SECONDS] [--log-level verbose|error|silent]
#include <CLI/CLI.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/core.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "bind/linux.hpp"
#include "bind/resolve.hpp"
#include "context.hpp"
#include "confine.hpp"
#include "daemon.hpp"
#include "forward.hpp"
#include "proxy_client.hpp"
#include "health.hpp"
#include "proxy_config.hpp"
#include "http_proxy.hpp"
#include "offload_switches.hpp"
#include "listen_address.hpp"
#include "process.hpp"
#include "reload.hpp"
#include "sni.hpp"
#include "socks5.hpp"
#include "tls_stream.hpp"
#include "uapi_socket.hpp"
#include "wg/apply.hpp"
#include "wg/base/fd.hpp"
#include "wg/base/log.hpp"
#include "wg/uapi_server.hpp"

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
  // after the dial timeout ("TTL expired" after 18 s): refused at once.
  std::vector<netstack::Endpoint> targets;
  for (auto& a : netstack::dial_order(addrs, netstack::DialOptions::Family::any))
    if (!is_own_address(ctx, a)) targets.push_back({a, port});
  if (targets.empty()) co_return std::pair{error_code(ProxyError::own_address), netstack::TcpStream{}};
  // Happy Eyeballs (RFC 8305) over the rest: Stack::async_dial_tcp.
  auto [ec, s] = co_await ctx.stack.async_dial_tcp(std::move(targets), netstack::DialOptions{}, kTry);
  co_return std::pair{ec, std::move(s)};
}

}  // namespace wgns

namespace {

using namespace wgns;

std::shared_ptr<tcp::acceptor> listen_on(netstack::Executor ex, const std::string& what, const std::string& addr) {
  auto ep = programs::parse_listen(addr);
  auto acc = std::make_shared<tcp::acceptor>(ex);
  error_code ec;
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("{} on {}: {}", what, addr, ec.message()));
  return acc;
}

bool is_loopback(const std::string& addr) { return programs::parse_listen(addr).address().is_loopback(); }

// Host-name endpoints are looked up again while their peer has no fresh handshake.
void watch_endpoints(Context& ctx, std::shared_ptr<asio::steady_timer> timer,
                     std::vector<std::pair<wg::PublicKey, std::string>> named) {
  timer->expires_after(std::chrono::seconds(15));
  timer->async_wait([&ctx, timer, named](const error_code& ec) {
    if (ec) return;
    auto now = std::chrono::system_clock::now().time_since_epoch();
    for (auto& [key, text] : named) {
      auto p = ctx.device.lookup_peer(key);
      if (!p) continue;
      auto last = std::chrono::nanoseconds(p->stats().last_handshake_ns.load());
      if (last.count() > 0 && now - last < wg::kRekeyAfterTime + wg::kRekeyTimeout) continue;
      std::string err;
      if (auto ep = conn::resolve_endpoint(text, err)) {
        auto cur = p->endpoint();
        if (!cur || !cur->same_destination(*ep)) {
          wg::log::event("endpoint {} now resolves to {}", text, ep->to_string());
          ctx.device.set_endpoint(*p, *ep);
        }
      }
    }
    watch_endpoints(ctx, timer, named);
  });
}

// Program policy, not the library's: glibc keeps the heap memory of closed connections
// in the process, so RSS would stay at its peak after many connections closed
// (docs/benchmarks.md). Once a second this looks at the slack: resident memory beyond
// what the allocator has handed out (mallinfo2's in-use and mmapped bytes). When the
// slack has grown by kTrimSlackGrowth since the last trim, malloc_trim(0) hands the free
// pages back (milliseconds on this thread) and the slack left after it (pages that hold
// some live data, the top of thread arenas, code and stacks) is the new base.
// Free bytes alone cannot tell: pages a trim released and a later load touched again
// still count as free. Steady churn reuses the same pages and does not grow the slack.
constexpr size_t kTrimSlackGrowth = 16 << 20;

// Resident bytes of this process (/proc/self/statm, second field); 0 if unreadable.
// The file stays open from the first call on, which comes before the sandbox.
size_t resident_bytes() {
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  char text[128];
  const ssize_t n = fd < 0 ? -1 : ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = 0;
  size_t pages_total = 0, pages_resident = 0;
  if (std::sscanf(text, "%zu %zu", &pages_total, &pages_resident) != 2) return 0;
  return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Resident memory beyond what the allocator has handed out (0 if RSS is unreadable).
size_t heap_slack() {
  const struct mallinfo2 info = mallinfo2();
  const size_t in_use = info.uordblks + info.hblkhd;
  const size_t resident = resident_bytes();
  return resident > in_use ? resident - in_use : 0;
}

void trim_when_slack_grows(std::shared_ptr<asio::steady_timer> timer, size_t base_slack) {
  timer->expires_after(std::chrono::seconds(1));
  timer->async_wait([timer, base_slack](const error_code& ec) mutable {
    if (ec) return;
    const size_t slack = heap_slack();
    if (slack >= base_slack + kTrimSlackGrowth) {
      const auto start = std::chrono::steady_clock::now();
      malloc_trim(0);
      base_slack = heap_slack();
      wg::log::verbose("memory: {} MiB resident beyond the heap's use, {} MiB after malloc_trim ({} ms)",
                       slack >> 20, base_slack >> 20,
                       std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    } else {
      base_slack = std::min(base_slack, slack);
    }
    trim_when_slack_grows(timer, base_slack);
  });
}

// A proxy listener and the credentials it asks for.
struct Listener {
  std::string address;
  Credentials creds;
  std::string cert_file, key_file;  // [http] CertFile/KeyFile: an HTTPS proxy
};

// A [Socks5] or [http] section: its Username/Password, else those of --auth-file.
template <class Section>
Listener section_listener(const Section& sec, const std::string& user, const std::string& password) {
  Listener l{sec.bind.text, {user, password}, {}, {}};
  if (!sec.username.empty()) l.creds = {sec.username, sec.password.str()};
  if constexpr (requires { sec.cert_file; }) {
    l.cert_file = sec.cert_file;
    l.key_file = sec.key_file;
  }
  return l;
}

// The proxies of one kind share their credentials (Context holds one pair per kind).
Credentials one_credential(const char* kind, const std::vector<Listener>& ls) {
  for (auto& l : ls)
    if (l.creds.user != ls.front().creds.user || l.creds.password.size() != ls.front().creds.password.size() ||
        !wg::ct_equal(l.creds.password.data(), ls.front().creds.password.data(), l.creds.password.size()))
      throw std::runtime_error(std::string("several ") + kind + " sections must share Username and Password");
  return ls.empty() ? Credentials{} : ls.front().creds;
}

ForwardSpec tunnel_spec(bool udp, const ListenAddress& bind, const HostPort& target) {
  ForwardSpec f;
  f.udp = udp;
  f.from_host = bind.ip.to_string();
  f.from_port = bind.port;
  f.to_host = target.host;
  f.to_port = target.port;
  f.text = bind.text + "=" + target.text;
  return f;
}

// [TCPServerTunnel]: ListenPort on a tunnel address → Target on this side.
ForwardSpec server_tunnel_spec(const wg::IpAddress& tunnel_address, uint16_t port, const HostPort& target) {
  ForwardSpec f;
  f.from_host = tunnel_address.to_string();
  f.from_port = port;
  f.to_host = target.host;
  f.to_port = target.port;
  f.text = tunnel_address.to_string() + ":" + std::to_string(port) + "=" + target.text;
  return f;
}

// wireproxy settings wg-netstack does not carry out yet: refused, never ignored.
void refuse_unsupported(const ProxyConfig& pc, const std::string& path) {
  auto no = [&path](size_t line, const std::string& what) {
    throw std::runtime_error(path + (line ? ": line " + std::to_string(line) : std::string()) + ": " + what +
                             " is not supported by wg-netstack yet");
  };
  if (pc.stdio_tunnels.size() > 1) no(pc.stdio_tunnels[1].line, "a second [STDIOTunnel] (there is one stdin)");
}

// A usage error: one line on stderr, exit status 1 (wg-tun's too, and wireguard-go's).
[[noreturn]] void usage_error(std::string what) { programs::usage_error("wg-netstack", std::move(what)); }

// wireproxy's default config paths, when -c is not given: the first that exists.
std::string default_config_path() {
  std::vector<std::string> paths{"/etc/wireproxy/wireproxy.conf"};
  if (const char* home = std::getenv("HOME"); home && *home) paths.push_back(std::string(home) + "/.config/wireproxy.conf");
  for (auto& p : paths)
    if (::access(p.c_str(), F_OK) == 0) return p;
  return {};
}

// SIGHUP: the config file again, its WireGuard part applied as `wg syncconf` would (peers
// added, changed and removed; unchanged ones keep their sessions, and the proxies their
// connections). What cannot change at run time (Address, DNS, MTU, the proxies' and
// forwards' options) stays as started. A file that does not parse changes nothing.
// Under the sandbox, a file it does not allow cannot be opened (EACCES): said so.
void reload(wg::Device& device, const std::string& path, bool sandboxed) {
  auto r = programs::reload(device, path, [](const std::string& p) { return load_proxy_config(p).wg; }, "wg-netstack");
  if (r.ok) {
    wg::log::event("{}", r.message);
  } else if (sandboxed && r.message.find(std::strerror(EACCES)) != std::string::npos) {
    wg::log::error("{} (the sandbox lets wg-netstack read only files beneath the directories of the files it "
                   "started with: restart it to take new ones, or run it with --no-sandbox)",
                   r.message);
  } else {
    wg::log::error("{}", r.message);
  }
}

// After the config is read and before any thread starts: the files wg-netstack may still
// use (its config files' directories, for SIGHUP; the system resolver's, for endpoint
// names; removing its UAPI socket), then the rest of the file system is out of reach.
void confine_files(const std::string& config_path, const ProxyConfig& pc, const std::string& uapi_path) {
  programs::FileRules rules;
  for (auto& f : {config_path, pc.wg_config_path})
    if (!f.empty()) rules.read_beneath.push_back(std::filesystem::absolute(f).parent_path().string());
  programs::add_resolver_files(rules);
  if (!uapi_path.empty()) rules.remove_in.push_back(std::filesystem::absolute(uapi_path).parent_path().string());
  // What libraries would otherwise open later: OpenSSL's configuration.
  OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, nullptr);
  auto c = programs::restrict_files(rules);
  if (c.abi > 0) wg::log::verbose("{}", c.message);
  else wg::log::error("warning: {}", c.message);
}

std::pair<std::string, std::string> read_auth(const std::string& file) {
  std::string line;
  if (const char* env = std::getenv("WG_NETSTACK_AUTH"); env && file.empty()) {
    line = env;
  } else if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read auth file " + file);
    std::getline(in, line);
  } else {
    return {};
  }
  auto colon = line.find(':');
  if (colon == std::string::npos || colon == 0)
    throw std::runtime_error("credentials must be USER:PASSWORD");
  auto out = std::pair{line.substr(0, colon), line.substr(colon + 1)};
  wg::secure_wipe(line.data(), line.size());
  return out;
}

// A [STDIOTunnel] could not connect and nothing else runs: exit status 1.
std::atomic<bool> stdio_failed{false};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wg-netstack: a SOCKS5/HTTP proxy into a WireGuard network, no root needed"};
  std::string config_path, socks = "127.0.0.1:1080", http_addr, health_addr, auth_file, level = "error";
  std::string congestion = "bbr";
  bool no_socks = false;
  std::vector<std::string> forwards, reverses;
  bool silent = false, daemon_mode = false, config_test = false, no_sandbox = false, sandbox_log = false;
  app.set_version_flag("-v,--version", std::string("wg-netstack ") + WGNET_VERSION + " (wgnet)");
  app.add_option("-c,--config", config_path,
                 "config file: wg-quick style ([Interface] Address= required) or wireproxy's format; default: "
                 "the first of /etc/wireproxy/wireproxy.conf and $HOME/.config/wireproxy.conf that exists");
  app.add_flag("-n,--configtest", config_test, "only check the config file: print 'Config OK' or its error");
  app.add_flag("-d,--daemon", daemon_mode, "run in the background once up (the exit status says whether it came up)");
  app.add_flag("-s,--silent", silent, "log nothing (--log-level silent)");
  app.add_option("--socks5", socks, "SOCKS5 listen address")->capture_default_str();
  app.add_flag("--no-socks5", no_socks, "do not run the SOCKS5 proxy");
  app.add_option("--http", http_addr,
                 "HTTP proxy listen address: CONNECT, and plain requests with an absolute http:// URI");
  app.add_option("--forward", forwards, "tcp|udp:LOCAL_ADDR:PORT=TUNNEL_HOST:PORT (repeatable)");
  app.add_option("--reverse", reverses, "tcp|udp:TUNNEL_ADDR:PORT=LOCAL_ADDR:PORT (repeatable)");
  app.add_option("--health,-i,--info", health_addr, "serve /readyz and /metrics on this address");
  app.add_option("--auth-file", auth_file,
                 "file with one line USER:PASSWORD for the proxies (or env WG_NETSTACK_AUTH)");
  double handshake_seconds = std::chrono::duration<double>(kDefaultHandshakeTimeout).count();
  app.add_option("--handshake-timeout", handshake_seconds,
                 "seconds a SOCKS5 / HTTP client may take to send its whole greeting and request; "
                 "slower ones are closed")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  double keepalive_seconds = 30;
  app.add_option("--tcp-keepalive", keepalive_seconds,
                 "seconds a tunnel TCP connection may be silent before a keepalive probe, and between probes; "
                 "after 9 unanswered it fails, and a peer that restarted answers the first with a reset (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  std::vector<std::string> check_alive;
  unsigned check_alive_interval = 5;
  app.add_option("--check-alive", check_alive,
                 "ping this tunnel address every --check-alive-interval; /readyz is 200 while every one answers "
                 "(wireproxy's CheckAlive; repeatable)");
  app.add_option("--check-alive-interval", check_alive_interval, "seconds between CheckAlive pings")
      ->check(CLI::Range(1u, 86400u))
      ->capture_default_str();
  std::string iface_name, uapi_path;
  app.add_option("--interface", iface_name,
                 std::string("serve the UAPI as interface NAME, so that wg(8) drives it: ") + wg::uapi::kSocketDir +
                     "/NAME.sock")
      ->check([](const std::string& n) -> std::string {
        if (n.empty() || n.size() >= IFNAMSIZ || n == "." || n == ".." ||
            n.find_first_of("/ \t\n") != std::string::npos)
          return "an interface name is 1-15 characters without '/' or spaces";
        return {};
      });
  app.add_option("--uapi", uapi_path, "serve the UAPI on this Unix socket path instead (wg(8) cannot find it there)");
  app.add_option("--log-level", level, "verbose (or debug), error or silent")
      ->check([](const std::string& v) -> std::string {
        return programs::parse_log_level(v) ? "" : "verbose, debug, error or silent, not '" + v + "'";
      })
      ->capture_default_str();
  app.add_flag("--no-sandbox", no_sandbox,
               "do not confine the process (Landlock, system-call allow-list): for debugging");
  app.add_flag("--sandbox-log", sandbox_log,
               "log system calls the allow-list denies to the kernel log (they still fail with EPERM)");
  app.add_option("--tcp-congestion", congestion,
                 "congestion control of the tunnel's TCP senders: bbr (keeps its rate under random loss) or cubic")
      ->check(CLI::IsMember({"bbr", "cubic"}))
      ->capture_default_str();
  app.footer(
      "Environment:\n"
      "  WG_NETSTACK_AUTH    USER:PASSWORD for the proxies when --auth-file is not given\n"
      "  HOME                where the default config $HOME/.config/wireproxy.conf is looked for\n"
      "  WG_DISABLE_UDP_GSO  set to anything but \"\" or \"0\": no UDP_SEGMENT sends on the UDP sockets\n"
      "  WG_DISABLE_UDP_GRO  set to anything but \"\" or \"0\": no UDP_GRO receives on the UDP sockets\n"
      "A config value that is exactly $NAME is the value of the variable NAME.\n"
      "\n"
      "Signals:\n"
      "  SIGHUP           re-read the config file and apply its WireGuard part as `wg syncconf` does\n"
      "  SIGINT, SIGTERM  stop, remove the UAPI socket and exit 0\n"
      "\n"
      "The manual: man 8 wg-netstack");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    usage_error(e.what());
  }
  if (config_path.empty()) config_path = default_config_path();
  if (config_path.empty())
    usage_error("no config file: -c FILE (or /etc/wireproxy/wireproxy.conf, $HOME/.config/wireproxy.conf)");
  if (silent) level = "silent";

  wg::log::set_level(*programs::parse_log_level(level));
  const programs::WaitedSignals signals{SIGINT, SIGTERM, SIGHUP};

  try {
    ProxyConfig pc = load_proxy_config(config_path);
    // With [STDIOTunnel], stderr is the terminal of the program that runs us (ssh's
    // ProxyCommand): log nothing there unless asked for.
    if (!pc.stdio_tunnels.empty() && !app.count("--log-level") && !silent)
      wg::log::set_level(wg::log::Level::silent);
    for (auto& w : pc.warnings) wg::log::error("{}{}", w.rfind("warning: ", 0) == 0 ? "" : "warning: ", w);
    refuse_unsupported(pc, config_path);
    wg::Config& cfg = pc.wg;
    if (!cfg.iface.private_key) throw std::runtime_error(config_path + ": [Interface] has no PrivateKey");
    if (cfg.iface.addresses.empty()) throw std::runtime_error(config_path + ": [Interface] has no Address");
    auto [user, password] = read_auth(auth_file);
    // Listeners: a flag on the command line wins over the file's sections of its kind. A
    // file in wireproxy's style (any proxy or tunnel section) says what runs, as it does
    // for wireproxy: then the default SOCKS5 listener runs only if asked for.
    const bool wireproxy_style = !pc.socks5.empty() || !pc.http.empty() || !pc.tcp_client_tunnels.empty() ||
                                 !pc.tcp_server_tunnels.empty() || !pc.udp_proxy_tunnels.empty() ||
                                 !pc.stdio_tunnels.empty() || !pc.sni.empty();
    std::vector<Listener> socks_listeners, http_listeners;
    if (no_socks) {
    } else if (app.count("--socks5") || (pc.socks5.empty() && !wireproxy_style)) {
      socks_listeners.push_back({socks, {user, password}, {}, {}});
    } else {
      for (auto& sec : pc.socks5) socks_listeners.push_back(section_listener(sec, user, password));
    }
    if (app.count("--http") || pc.http.empty()) {
      if (!http_addr.empty()) http_listeners.push_back({http_addr, {user, password}, {}, {}});
    } else {
      for (auto& sec : pc.http) http_listeners.push_back(section_listener(sec, user, password));
    }
    const Credentials socks_creds = one_credential("[Socks5]", socks_listeners);
    const Credentials http_creds = one_credential("[http]", http_listeners);
    // [SNI] has no credentials (nor has wireproxy's): it may listen off loopback, since it
    // only relays TLS to port 443 of the names its clients' ClientHellos carry.
    for (auto* ls : {&socks_listeners, &http_listeners})
      for (auto& l : *ls)
        if (!is_loopback(l.address) && l.creds.user.empty())
          throw std::runtime_error("listening on " + l.address +
                                   " (not loopback) needs credentials: --auth-file, or Username/Password");
    for (auto& a : pc.check_alive) check_alive.push_back(a.to_string());
    if (!app.count("--check-alive-interval")) check_alive_interval = static_cast<unsigned>(pc.check_alive_interval.count());
    std::vector<ForwardSpec> tunnel_forwards, tunnel_reverses;
    for (auto& t : pc.tcp_client_tunnels) tunnel_forwards.push_back(tunnel_spec(false, t.bind, t.target));
    for (auto& t : pc.udp_proxy_tunnels) {
      tunnel_forwards.push_back(tunnel_spec(true, t.bind, t.target));
      // wireproxy's 0 (the default) keeps a flow forever; here it means the --forward
      // default, 60 s, so that memory stays bounded.
      if (t.inactivity_timeout.count() > 0) tunnel_forwards.back().udp_idle = t.inactivity_timeout;
    }
    for (auto& t : pc.tcp_server_tunnels)
      for (auto& a : cfg.iface.addresses)
        tunnel_reverses.push_back(server_tunnel_spec(a.addr, t.listen_port, t.target));
    if (daemon_mode && !pc.stdio_tunnels.empty())
      throw std::runtime_error("-d and [STDIOTunnel] exclude each other: the tunnel is this process's stdin and stdout");
    // The HTTPS proxies' certificates, loaded before anything starts (and by -n).
    std::vector<std::unique_ptr<TlsServerContext>> tls;
    for (auto& l : http_listeners)
      tls.push_back(l.cert_file.empty() ? nullptr : std::make_unique<TlsServerContext>(l.cert_file, l.key_file));
    if (config_test) {
      fmt::print("Config OK\n");
      return 0;
    }
    const int ready_fd = daemon_mode ? programs::fork_daemon() : -1;
    const int null_fd = daemon_mode ? ::open("/dev/null", O_RDWR | O_CLOEXEC) : -1;
    (void)resident_bytes();
    if (uapi_path.empty() && !iface_name.empty()) uapi_path = std::string(wg::uapi::kSocketDir) + "/" + iface_name + ".sock";
    programs::UapiSocket uapi_socket;
    if (!uapi_path.empty()) uapi_socket = programs::UapiSocket::listen(uapi_path);
    if (!no_sandbox) confine_files(config_path, pc, uapi_path);

    CheckAlive checks;  // outlives the Stack, whose executor runs the pingers
    checks.interval = std::chrono::seconds(check_alive_interval);
    for (auto& a : check_alive) {
      auto addr = wg::IpAddress::parse(a);
      if (!addr) throw std::runtime_error("--check-alive: '" + a + "' is not an IP address");
      checks.targets.push_back({*addr, std::nullopt, 0});
    }
    netstack::StackOptions so;
    so.addresses = cfg.iface.addresses;
    so.mtu = static_cast<int>(cfg.iface.mtu.value_or(wg::kDefaultMtu));
    so.dns_servers = cfg.iface.dns_servers;
    so.tcp_congestion =
        congestion == "cubic" ? netstack::StackOptions::Congestion::cubic : netstack::StackOptions::Congestion::bbr;
    so.tcp_keepalive = std::chrono::milliseconds(std::llround(keepalive_seconds * 1000));
    std::error_code sec;
    auto stack = netstack::Stack::create(so, sec);
    if (!stack) throw std::runtime_error("cannot create the network stack: " + sec.message());

    // WG_DISABLE_UDP_GSO / WG_DISABLE_UDP_GRO, as for wg-tun (the library reads no environment).
    conn::LinuxBind bind(programs::offloads_from_environment(false).bind);
    wg::Device device(*stack, bind);
    wg::apply_config(device, cfg, conn::resolve_endpoint);
    if (auto ec = device.up())
      throw std::runtime_error(fmt::format("cannot open UDP port {}: {}", cfg.iface.listen_port.value_or(0), ec.message()));
    stack->set_route_check([&device](const wg::IpAddress& a) { return device.routable(a); });
    std::unique_ptr<wg::uapi::Server> uapi;
    if (uapi_socket) uapi = std::make_unique<wg::uapi::Server>(device, uapi_socket.release());

    Context ctx{*stack, device, {}, socks_creds, http_creds,
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(handshake_seconds))};
    ctx.resolve = pc.resolve;
    if (!checks.targets.empty()) {
      ctx.checks = &checks;
      start_check_alive(ctx, checks);
    }
    // A first handshake with every peer that has an endpoint, so that /readyz (and the
    // first request) need not wait for traffic to start one.
    for (auto& p : device.peers())
      if (p->endpoint()) device.initiate_handshake(*p);
    auto ex = stack->get_executor();
    std::vector<std::shared_ptr<tcp::acceptor>> acceptors;
    std::string listening;
    for (auto& l : socks_listeners) {
      auto a = listen_on(ex, "SOCKS5", l.address);
      acceptors.push_back(a);
      asio::co_spawn(ex, socks5_server(ctx, *a), asio::detached);
      listening += ", SOCKS5 on " + l.address;
    }
    for (size_t i = 0; i < http_listeners.size(); ++i) {
      auto& l = http_listeners[i];
      auto a = listen_on(ex, tls[i] ? "HTTPS proxy" : "HTTP proxy", l.address);
      acceptors.push_back(a);
      asio::co_spawn(ex, http_proxy_server(ctx, *a, tls[i].get()), asio::detached);
      listening += (tls[i] ? ", HTTPS on " : ", HTTP on ") + l.address;
    }
    for (auto& sec : pc.sni) {
      auto a = listen_on(ex, "SNI proxy", sec.bind.text);
      acceptors.push_back(a);
      asio::co_spawn(ex, sni_server(ctx, *a), asio::detached);
      listening += ", SNI on " + sec.bind.text;
    }
    if (!health_addr.empty()) {
      auto a = listen_on(ex, "health", health_addr);
      acceptors.push_back(a);
      asio::co_spawn(ex, health_server(ctx, *a), asio::detached);
    }
    for (auto& f : forwards) start_forward(ctx, parse_forward(f));
    for (auto& r : reverses) start_reverse(ctx, parse_forward(r));
    for (auto& f : tunnel_forwards) start_forward(ctx, f);
    for (auto& r : tunnel_reverses) start_reverse(ctx, r);
    // [STDIOTunnel]: when its connection has ended, so has wg-netstack (as wireproxy). A
    // dial that fails ends it with status 1 (ssh's ProxyCommand then says so), unless other
    // services run: those go on, as wireproxy's do.
    const bool other_services = !acceptors.empty() || !forwards.empty() || !reverses.empty() ||
                                !tunnel_forwards.empty() || !tunnel_reverses.empty();
    for (auto& t : pc.stdio_tunnels)
      start_stdio_tunnel(ctx, t.target.host, t.target.port, [other_services](bool connected) {
        if (connected || !other_services) {
          if (!connected) stdio_failed = true;
          kill(getpid(), SIGTERM);
        }
      });

    std::vector<std::pair<wg::PublicKey, std::string>> named;
    for (auto& p : cfg.peers)
      if (p.endpoint && !conn::Endpoint::parse(*p.endpoint)) named.emplace_back(p.public_key, *p.endpoint);
    auto timer = std::make_shared<asio::steady_timer>(ex);
    if (!named.empty()) watch_endpoints(ctx, timer, named);
    auto trim_timer = std::make_shared<asio::steady_timer>(ex);
    trim_when_slack_grows(trim_timer, heap_slack());

    wg::log::event("wg-netstack: up, UDP port {}{}{}{}", device.listen_port(), listening,
                   health_addr.empty() ? "" : ", health on " + health_addr,
                   uapi_path.empty() ? "" : ", UAPI on " + uapi_path);
    if (!no_sandbox)
      programs::restrict_syscalls({}, sandbox_log ? programs::SyscallDenial::log : programs::default_denial());
    if (ready_fd >= 0) programs::daemon_ready(ready_fd, null_fd);
    while (signals.wait() == SIGHUP) reload(device, config_path, !no_sandbox);
    wg::log::event("wg-netstack: shutting down");
    if (uapi) uapi->stop();
    // Stop accepting on the Stack's thread, then take the tunnel down.
    std::promise<void> stopped;
    asio::post(ex, [&] {
      error_code ec;
      for (auto& a : acceptors) a->close(ec);
      timer->cancel();
      trim_timer->cancel();
      stopped.set_value();
    });
    stopped.get_future().wait();
    device.close();
    return stdio_failed ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-netstack: {}\n", e.what());
    return 1;
  }
}

// wg-netstack: a SOCKS5 / HTTP CONNECT proxy and port forwarder into a WireGuard network,
// with no root and no TUN: WireGuard's core over UDP, lwIP as the TCP/IP stack, all in
// one process. main() composes the parts: options.hpp (the command line), services.hpp
// (what runs over the tunnel), wgnet::Tunnel (stack, UDP socket, device), the UAPI socket,
// the sandbox and the background start.
//
//   wg-netstack -c wg0.conf [--socks5 127.0.0.1:1080] [--http ADDR:PORT]
//               [--forward tcp|udp:LOCAL:PORT=TUNNEL:PORT]... [--reverse tcp|udp:TUNNEL:PORT=LOCAL:PORT]...
//               [--health ADDR:PORT] [--auth-file FILE] [--handshake-timeout SECONDS]
//               [--tcp-keepalive SECONDS] [--log-level verbose|error|silent] [--user NAME]
#include <fmt/core.h>
#include <openssl/crypto.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "config_check.hpp"
#include "confine.hpp"
#include "context.hpp"
#include "daemon.hpp"
#include "forward.hpp"
#include "memory_trim.hpp"
#include "offload_switches.hpp"
#include "options.hpp"
#include "process.hpp"
#include "proxy_config.hpp"
#include "reload.hpp"
#include "services.hpp"
#include "uapi_socket.hpp"
#include "wg/base/log.hpp"
#include "wg/crypto.hpp"
#include "wg/uapi_server.hpp"
#include "wgnet/netstack.hpp"

namespace {

using namespace wgns;

// wireproxy settings wg-netstack does not carry out yet: refused, never ignored.
void refuse_unsupported(const ProxyConfig& pc, const std::string& path) {
  auto no = [&path](size_t line, const std::string& what) {
    throw std::runtime_error(path + (line ? ": line " + std::to_string(line) : std::string()) + ": " + what +
                             " is not supported by wg-netstack yet");
  };
  if (pc.stdio_tunnels.size() > 1) no(pc.stdio_tunnels[1].line, "a second [STDIOTunnel] (there is one stdin)");
}

// The config file, its warnings printed, what wg-netstack cannot run refused.
ProxyConfig load_config(const Options& o) {
  ProxyConfig pc = load_proxy_config(o.config_path);
  // With [STDIOTunnel], stderr is the terminal of the program that runs us (ssh's
  // ProxyCommand): log nothing there unless asked for.
  if (!pc.stdio_tunnels.empty() && !o.level_given && !o.silent) wg::log::set_level(wg::log::Level::silent);
  for (auto& w : programs::warning_lines(pc.warnings)) wg::log::error("{}", w);
  refuse_unsupported(pc, o.config_path);
  programs::require_interface(pc.wg, o.config_path, true);
  return pc;
}

// The tunnel with the options' TCP settings; its failures in wg-netstack's words.
std::unique_ptr<wgnet::Tunnel> open_tunnel(const wg::Config& cfg, const Options& o) {
  wgnet::TunnelOptions to;
  to.tcp_congestion =
      o.congestion == "cubic" ? netstack::StackOptions::Congestion::cubic : netstack::StackOptions::Congestion::bbr;
  to.tcp_keepalive = std::chrono::milliseconds(std::llround(o.keepalive_seconds * 1000));
  // WG_DISABLE_UDP_GSO / WG_DISABLE_UDP_GRO, as for wg-tun (the library reads no environment).
  to.bind = programs::offloads_from_environment(false).bind;
  try {
    return wgnet::Tunnel::open(cfg, to);
  } catch (const wgnet::TunnelError& e) {
    if (e.step() == wgnet::TunnelError::Step::stack)
      throw std::runtime_error("cannot create the network stack: " + e.code().message());
    throw std::runtime_error(fmt::format("cannot open UDP port {}: {}", e.port(), e.code().message()));
  }
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
    wg::log::error("{} (the sandbox lets wg-netstack read only the files it started with, edited in place: "
                   "restart it to take a new or renamed file, or run it with --no-sandbox)",
                   r.message);
  } else {
    wg::log::error("{}", r.message);
  }
}

// After the config is read and before any thread starts: the files wg-netstack may still
// use (its config files themselves, for SIGHUP, never their directories, which may hold
// other daemons' keys; the system resolver's, for endpoint names; removing its UAPI
// socket), then the rest of the file system is out of reach.
void confine_files(const std::string& config_path, const ProxyConfig& pc, const std::string& uapi_path) {
  programs::FileRules rules;
  for (auto& f : {config_path, pc.wg_config_path})
    if (!f.empty()) rules.read_files.push_back(std::filesystem::absolute(f).string());
  programs::add_resolver_files(rules);
  if (!uapi_path.empty()) rules.remove_in.push_back(std::filesystem::absolute(uapi_path).parent_path().string());
  // What libraries would otherwise open later: OpenSSL's configuration.
  OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, nullptr);
  auto c = programs::restrict_files(rules);
  if (c.abi > 0) wg::log::verbose("{}", c.message);
  else wg::log::error("warning: {}", c.message);
}

// The port of "HOST:PORT" or "[V6]:PORT", 0 if there is none.
uint16_t port_of(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  unsigned long v = std::strtoul(address.c_str() + colon + 1, nullptr, 10);
  return v > 65535 ? 0 : static_cast<uint16_t>(v);
}

// Will a socket of ours bind a port below 1024 (which needs CAP_NET_BIND_SERVICE)?
bool binds_low_port(const Options& o, const ServicePlan& plan, const ProxyConfig& pc) {
  std::vector<uint16_t> ports{pc.wg.iface.listen_port.value_or(0), port_of(o.health_addr)};
  for (auto* ls : {&plan.socks, &plan.http})
    for (auto& l : *ls) ports.push_back(port_of(l.address));
  for (auto& f : plan.tunnel_forwards) ports.push_back(f.from_port);
  for (auto& sni : pc.sni) ports.push_back(sni.bind.port);
  for (auto& f : o.forwards) {
    try {
      ports.push_back(parse_forward(f).from_port);
    } catch (const std::exception&) {
    }  // Services says what is wrong with it
  }
  return std::any_of(ports.begin(), ports.end(), [](uint16_t p) { return p > 0 && p < 1024; });
}

// Started as root (for the UAPI socket under /var/run/wireguard): once that exists,
// nothing of root is needed but binding a port below 1024. Before the first thread, which
// inherits what is kept; the securebits (or the new user) keep the rest out of reach.
void drop_root(const std::optional<programs::User>& user, const Options& o, const ServicePlan& plan,
               const ProxyConfig& pc) {
  const bool low = binds_low_port(o, plan, pc);
  if (user) {
    low ? programs::become_user(*user, {CAP_NET_BIND_SERVICE}) : programs::become_user(*user, {});
  } else {
    low ? programs::drop_capabilities({CAP_NET_BIND_SERVICE}) : programs::drop_capabilities({});
  }
  programs::make_undumpable();  // a change of user resets it
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  wg::log::set_level(*programs::parse_log_level(o.level));
  const programs::WaitedSignals signals{SIGINT, SIGTERM, SIGHUP};
  try {
    programs::make_undumpable();
    ProxyConfig pc = load_config(o);
    wg::scrub_stack();  // the keys' text, parsed
    const ServicePlan plan = plan_services(o, pc);
    if (o.config_test) {
      fmt::print("Config OK\n");
      return 0;
    }
    // Looked up before anything is made (a bad name leaves nothing behind) and while
    // the sandbox still lets /etc/passwd be read.
    std::optional<programs::User> user;
    if (!o.user.empty()) user = programs::find_user(o.user);
    const int ready_fd = o.daemon_mode ? programs::fork_daemon("wg-netstack") : -1;
    const int null_fd = o.daemon_mode ? ::open("/dev/null", O_RDWR | O_CLOEXEC) : -1;
    if (o.daemon_mode && null_fd < 0) throw std::system_error(errno, std::generic_category(), "/dev/null");
    (void)resident_bytes();  // opens /proc/self/statm before the sandbox
    programs::UapiSocket uapi_socket;
    if (!o.uapi_path.empty()) uapi_socket = programs::UapiSocket::listen(o.uapi_path);
    if (!o.no_sandbox) confine_files(o.config_path, pc, o.uapi_path);
    if (::geteuid() == 0) drop_root(user, o, plan, pc);
    // Before the tunnel's first packet and the listeners' first client.
    if (!o.no_sandbox)
      programs::restrict_syscalls(programs::Program::wg_netstack,
                                  o.sandbox_log ? programs::SyscallDenial::log : programs::default_denial());
    CheckAlive checks;  // outlives the Stack, whose executor runs the pingers
    set_check_alive(checks, plan);

    auto tunnel = open_tunnel(pc.wg, o);
    wg::forget_keys(pc.wg);  // the device holds them; a UAPI rotation leaves no old copy here
    wg::scrub_stack();
    std::unique_ptr<wg::uapi::Server> uapi;
    if (uapi_socket) uapi = std::make_unique<wg::uapi::Server>(tunnel->device(), uapi_socket.release());
    Context ctx{tunnel->stack(), tunnel->device(), {}, plan.socks_creds, plan.http_creds,
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(o.handshake_seconds))};
    ctx.resolve = pc.resolve;
    ctx.limits = o.limits;
    if (!checks.targets.empty()) ctx.checks = &checks;
    Services services(ctx, plan, o, pc);

    wg::log::event("wg-netstack: up, UDP port {}{}{}{}", tunnel->device().listen_port(), services.listening(),
                   o.health_addr.empty() ? "" : ", health on " + o.health_addr,
                   o.uapi_path.empty() ? "" : ", UAPI on " + o.uapi_path);
    if (ready_fd >= 0) programs::daemon_ready(ready_fd, null_fd);
    while (signals.wait() == SIGHUP) reload(tunnel->device(), o.config_path, !o.no_sandbox);
    wg::log::event("wg-netstack: shutting down");
    if (uapi) uapi->stop();
    services.stop();  // then the tunnel goes down
    tunnel->device().close();
    return services.stdio_failed() ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-netstack: {}\n", e.what());
    return 1;
  }
}

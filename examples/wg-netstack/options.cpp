#include "options.hpp"

#include <CLI/CLI.hpp>
#include <net/if.h>
#include <unistd.h>

#include <cstdlib>

#include "context.hpp"
#include "listen_address.hpp"
#include "process.hpp"
#include "uapi_socket.hpp"
#include "wg/uapi_server.hpp"

namespace wgns {

namespace {

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

// A listen address's check for CLI11, which puts the flag in front of its message.
std::string listen_address_error(const std::string& v) {
  try {
    programs::parse_listen(v);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app{"wg-netstack: a SOCKS5/HTTP proxy into a WireGuard network, no root needed"};
  app.set_version_flag("-v,--version", std::string("wg-netstack ") + WGNET_VERSION + " (wgnet)");
  app.add_option("-c,--config", o.config_path,
                 "config file: wg-quick style ([Interface] Address= required) or wireproxy's format; default: "
                 "the first of /etc/wireproxy/wireproxy.conf and $HOME/.config/wireproxy.conf that exists");
  app.add_flag("-n,--configtest", o.config_test, "only check the config file: print 'Config OK' or its error");
  app.add_flag("-d,--daemon", o.daemon_mode, "run in the background once up (the exit status says whether it came up)");
  app.add_flag("-s,--silent", o.silent, "log nothing (--log-level silent)");
  app.add_option("--socks5", o.socks, "SOCKS5 listen address")->capture_default_str()->check(listen_address_error);
  app.add_flag("--no-socks5", o.no_socks, "do not run the SOCKS5 proxy");
  app.add_option("--http", o.http_addr,
                 "HTTP proxy listen address: CONNECT, and plain requests with an absolute http:// URI")
      ->check(listen_address_error);
  app.add_option("--forward", o.forwards, "tcp|udp:LOCAL_ADDR:PORT=TUNNEL_HOST:PORT (repeatable)");
  app.add_option("--reverse", o.reverses, "tcp|udp:TUNNEL_ADDR:PORT=LOCAL_ADDR:PORT (repeatable)");
  app.add_option("--health,-i,--info", o.health_addr, "serve /readyz and /metrics on this address")
      ->check(listen_address_error);
  app.add_option("--auth-file", o.auth_file,
                 "file with one line USER:PASSWORD for the proxies (or env WG_NETSTACK_AUTH)");
  o.handshake_seconds = std::chrono::duration<double>(kDefaultHandshakeTimeout).count();
  app.add_option("--handshake-timeout", o.handshake_seconds,
                 "seconds a SOCKS5 / HTTP client may take to send its whole greeting and request; "
                 "slower ones are closed")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--max-connections", o.limits.max_connections,
                 "clients each SOCKS5, HTTP, SNI, --forward tcp and --reverse tcp listener serves at once; "
                 "one more is accepted and reset at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--health-max-connections", o.limits.health_max_connections,
                 "clients the --health listener serves at once; one more is accepted and reset at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--max-udp-associations", o.limits.udp_associations,
                 "SOCKS5 UDP associations open at once on each SOCKS5 listener; one more is answered "
                 "'not allowed'")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--max-udp-associations-per-client", o.limits.udp_associations_per_client,
                 "the same for each client IP address")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  double udp_timeout = std::chrono::duration<double>(o.limits.udp_associate_timeout).count();
  app.add_option("--udp-associate-timeout", udp_timeout,
                 "seconds a SOCKS5 UDP association may go without a datagram either way before it and its "
                 "control connection are closed")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--tcp-keepalive", o.keepalive_seconds,
                 "seconds a tunnel TCP connection may be silent before a keepalive probe, and between probes; "
                 "after 9 unanswered it fails, and a peer that restarted answers the first with a reset (0: none, "
                 "as wireproxy and a kernel socket)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--check-alive", o.check_alive,
                 "ping this tunnel address every --check-alive-interval; /readyz is 200 while every one answers "
                 "(wireproxy's CheckAlive; repeatable)");
  app.add_option("--check-alive-interval", o.check_alive_interval, "seconds between CheckAlive pings")
      ->check(CLI::Range(1u, 86400u))
      ->capture_default_str();
  std::string iface_name;
  app.add_option("--interface", iface_name,
                 std::string("serve the UAPI as interface NAME, so that wg(8) drives it: ") + wg::uapi::kSocketDir +
                     "/NAME.sock")
      ->check([](const std::string& n) -> std::string {
        return programs::valid_interface_name(n) ? "" : programs::kInterfaceNameRule;
      });
  app.add_option("--uapi", o.uapi_path, "serve the UAPI on this Unix socket path instead (wg(8) cannot find it there)");
  app.add_option("--user", o.user,
                 "started as root: once the UAPI socket is open, run as user NAME with no capabilities "
                 "(CAP_NET_BIND_SERVICE only if a port below 1024 is listened on)")
      ->check([](const std::string& v) -> std::string { return v.empty() || v[0] == '-' ? "a user name" : ""; });
  app.add_option("--log-level", o.level, "verbose (or debug), error or silent")
      ->check([](const std::string& v) -> std::string {
        return programs::parse_log_level(v) ? "" : "verbose, debug, error or silent, not '" + v + "'";
      })
      ->capture_default_str();
  app.add_flag("--no-sandbox", o.no_sandbox,
               "do not confine the process (Landlock, system-call allow-list): for debugging");
  app.add_flag("--sandbox-log", o.sandbox_log,
               "log system calls the allow-list denies to the kernel log (they still fail with EPERM)");
  app.add_option("--tcp-congestion", o.congestion,
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
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help, --version
    usage_error(e.what());
  }
  if (o.config_path.empty()) o.config_path = default_config_path();
  if (o.config_path.empty())
    usage_error("no config file: -c FILE (or /etc/wireproxy/wireproxy.conf, $HOME/.config/wireproxy.conf)");
  if (o.silent) o.level = "silent";
  if (!o.user.empty() && ::geteuid() != 0) usage_error("--user " + o.user + ": only root can change user");
  if (o.uapi_path.empty() && !iface_name.empty())
    o.uapi_path = std::string(wg::uapi::kSocketDir) + "/" + iface_name + ".sock";
  o.limits.udp_associate_timeout =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(udp_timeout));
  o.socks_given = app.count("--socks5") > 0;
  o.http_given = app.count("--http") > 0;
  o.level_given = app.count("--log-level") > 0;
  o.check_alive_interval_given = app.count("--check-alive-interval") > 0;
  return o;
}

}  // namespace wgns

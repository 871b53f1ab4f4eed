// wg-run: one program's whole network through WireGuard, without root. COMMAND runs in
// new user, PID, network and mount namespaces whose only interface besides lo is a TUN
// made there; wg-run runs the WireGuard core over that TUN and a UDP socket of the
// user's own namespace, then exits with COMMAND's status (sandbox.hpp draws the
// processes).
//
//   wg-run -c wg0.conf [options] -- COMMAND [ARGS...]
//   wg-run -c wg0.conf [options] --netns PATH        (serve a namespace someone else made)
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <linux/capability.h>
#include <net/if.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "bind/linux.hpp"
#include "bind/resolve.hpp"
#include "config_check.hpp"
#include "confine.hpp"
#include "diagnose.hpp"
#include "health_server.hpp"
#include "offload_switches.hpp"
#include "process.hpp"
#include "reload.hpp"
#include "sandbox.hpp"
#include "uapi_socket.hpp"
#include "wg/apply.hpp"
#include "wg/base/log.hpp"
#include "wg/config.hpp"
#include "wg/uapi_server.hpp"

namespace {

enum class Verbosity { quiet, normal, verbose };
Verbosity verbosity = Verbosity::normal;

// wg-run's own lines: a start-up error (always shown), or what a user should know while
// COMMAND runs (a warning, a reload, the tunnel failing: hidden by -q). The WireGuard
// core's own log (handshakes, dropped packets) shows only with --verbose: it shares COMMAND's
// terminal.
template <class... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  if (verbosity != Verbosity::quiet) fmt::print(stderr, "wg-run: {}\n", fmt::format(f, std::forward<Args>(args)...));
}

struct StartError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A usage error: one line on stderr, exit status 1 (as the other programs).
[[noreturn]] void usage_error(std::string what) { programs::usage_error("wg-run", std::move(what)); }

// wg-quick's rule: the interface is named after the config file (wg0.conf: wg0).
std::string interface_from_config(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.ends_with(".conf")) base.resize(base.size() - 5);
  else return "wg0";
  const bool plain = std::all_of(base.begin(), base.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '=' || c == '+' || c == '.' || c == '-';
  });
  return plain && programs::valid_interface_name(base) ? base : "wg0";
}

// The exit status a shell would give for a wait status.
int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Waits for the child (retrying on EINTR); its exit status as a shell gives it.
int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 1;
  return exit_status(status);
}

struct Options {
  std::string config_path, netns, interface, uapi_path, health;
  std::vector<std::string> command;
  bool share_host_sockets = false, no_sandbox = false;
  programs::OffloadOptions offloads;
};

int run(const Options& o, const programs::WaitedSignals& signals) {
  wg::Config cfg = wg::load_config(o.config_path);
  wg::scrub_stack();  // the keys' text, parsed: the child gets a copy of this stack
  for (auto& w : programs::warning_lines(cfg.warnings)) say("{}", w);
  programs::require_interface(cfg, o.config_path, true,
                              "wg-run gives the namespace these addresses; add Address = 198.19.0.1/24, say");
  if (!cfg.iface.wg_quick_extras.empty()) {
    std::string keys;
    for (auto& [k, v] : cfg.iface.wg_quick_extras)
      if (keys.find(k) == std::string::npos) keys += (keys.empty() ? "" : ", ") + k;
    say("warning: {}: {} (wg-quick's) ignored", o.config_path, keys);
  }
  const bool command_mode = o.netns.empty();
  if (command_mode && cfg.iface.dns_servers.empty())
    say("warning: {} has no DNS=: names will not resolve inside (only /etc/hosts); add DNS = a resolver's "
        "address in the tunnel",
        o.config_path);
  if (!command_mode && (!cfg.iface.dns_servers.empty() || !cfg.iface.dns_search.empty()))
    say("warning: DNS= is not applied with --netns (the namespace's own /etc/resolv.conf stays)");
  // /dev/net/tun closed to the user: said here, where the owner and uid are the real ones.
  if (::access("/dev/net/tun", R_OK | W_OK) < 0)
    throw StartError(wgrun::tun_failure(std::error_code(errno, std::system_category())));

  std::string socket_path = o.uapi_path;
  if (socket_path.empty() && !o.interface.empty())
    socket_path = std::string(wg::uapi::kSocketDir) + "/" + o.interface + ".sock";
  // Close-on-exec (listen_unix's): COMMAND never holds it.
  programs::UapiSocket uapi_socket;
  if (!socket_path.empty()) uapi_socket = programs::UapiSocket::listen(socket_path);
  std::optional<programs::HealthThread> health;
  if (!o.health.empty()) health.emplace(o.health, "wg-run");

  // --- the child: namespaces and the TUN ---
  wgrun::SandboxSpec spec;
  spec.interface = o.interface.empty() ? interface_from_config(o.config_path) : o.interface;
  spec.mtu = static_cast<int>(cfg.iface.mtu.value_or(wg::kDefaultMtu));
  spec.addresses = cfg.iface.addresses;
  spec.tun = o.offloads.tun;
  spec.dns = cfg.iface.dns_servers;
  spec.dns_search = cfg.iface.dns_search;
  spec.command = o.command;
  spec.netns_path = o.netns;
  spec.share_host_sockets = o.share_host_sockets;
  spec.restore_mask = signals.original_mask();
  spec.restore_sigpipe_default = signals.sigpipe_was_default();
  spec.forget_secrets = [&cfg] { wg::forget_keys(cfg); };
  wgrun::Child child = wgrun::spawn(spec);
  // From here on, a failure ends the child before wg-run exits.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        reap(pid);
      }
    }
  } reaper{child.pid};

  wg::UniqueFd tun_fd, link_fd;
  if (!wgrun::receive_devices(child.control.get(), tun_fd, link_fd)) {
    reaper.pid = -1;
    const int status = reap(child.pid);  // the child said why
    return status ? status : 1;
  }
  if (!command_mode) {  // it has handed the TUN out and exits
    reaper.pid = -1;
    reap(child.pid);
  }
  // Root (--netns, or a COMMAND run as root) made the child; the rest needs at most a
  // port below 1024 and fwmark. Before the first thread, which inherits what is kept.
  if (::geteuid() == 0) {
    std::vector<int> keep;
    if (cfg.iface.listen_port.value_or(0) > 0 && *cfg.iface.listen_port < 1024) keep.push_back(CAP_NET_BIND_SERVICE);
    if (cfg.iface.fwmark.value_or(0) != 0) keep.push_back(CAP_NET_ADMIN);
    programs::drop_capabilities(keep);
  }
  // Only now: the child, a fork of ours, wrote its own uid_map, which a non-dumpable
  // process's /proc files (root's) would not have let it.
  programs::make_undumpable();
  // Before the first thread: the config file itself (SIGHUP), the resolver's files
  // (endpoint names), removing the UAPI socket; signals may still reach COMMAND.
  if (!o.no_sandbox) {
    programs::FileRules rules;
    rules.read_files.push_back(std::filesystem::absolute(o.config_path).string());
    programs::add_resolver_files(rules);
    if (!socket_path.empty())
      rules.remove_in.push_back(std::filesystem::absolute(socket_path).parent_path().string());
    rules.signal_others = true;
    auto c = programs::restrict_files(rules);
    if (c.abi > 0) wg::log::verbose("wg-run: {}", c.message);
    else say("warning: {}", c.message);
  }

  // --- the WireGuard core over the TUN, in the user's own network namespace ---
  std::error_code ec;
  auto tun = tunlinux::Tun::from_fd(tun_fd.get(), link_fd.get(), o.offloads.tun, ec);
  if (!tun) throw StartError("cannot use the TUN of the namespace: " + ec.message());
  tun_fd.release();
  link_fd.release();
  const std::string name = tun->name();
  conn::LinuxBind bind(o.offloads.bind);
  wg::Device device(*tun, bind);
  wg::apply_config(device, cfg, conn::resolve_endpoint);
  wg::forget_keys(cfg);  // the device holds them
  wg::scrub_stack();
  // Before the first packet (the TUN's up event opens the UDP socket).
  if (!o.no_sandbox)
    programs::restrict_syscalls(programs::Program::wg_run, programs::default_denial(), command_mode ? child.pid : 0);

  std::promise<std::error_code> first_up;
  std::once_flag first;
  tun->set_event_handler([&](tun::Event e) {
    switch (e) {
      case tun::Event::up: {
        auto err = device.up();
        bool reported = false;
        std::call_once(first, [&] {
          first_up.set_value(err);
          reported = true;
        });
        if (err && !reported) say("{}: cannot open the UDP socket: {}; no traffic", name, err.message());
        else if (!err) wg::log::verbose("{}: up, UDP port {}", name, device.listen_port());
        break;
      }
      case tun::Event::down:
        device.down();
        if (tun->deleted()) say("{} was deleted: no traffic from now on", name);
        else say("{} is down: no traffic until it is up again", name);
        break;
      case tun::Event::mtu_changed:
        wg::log::verbose("{}: MTU {}", name, tun->mtu());
        break;
    }
  });
  // The handler uses the device and the promise: the Tun's event thread stops before
  // they go, on every way out.
  struct CloseTun {
    tunlinux::Tun& tun;
    ~CloseTun() { tun.close(); }
  } close_tun{*tun};
  auto up = first_up.get_future();
  if (up.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    throw StartError(name + " did not come up");
  if (auto err = up.get())
    throw StartError(fmt::format("cannot open UDP port {}: {}", cfg.iface.listen_port.value_or(0), err.message()));
  std::unique_ptr<wg::uapi::Server> uapi;
  if (uapi_socket) uapi = std::make_unique<wg::uapi::Server>(device, uapi_socket.release());
  if (health) health->start(device);
  // A first handshake with every peer that has an endpoint, so the first connection of
  // COMMAND need not wait for one.
  for (auto& p : device.peers())
    if (p->endpoint()) device.initiate_handshake(*p);
  wg::log::verbose("wg-run: {} up in the namespace, UDP port {}{}", name, device.listen_port(),
                   socket_path.empty() ? "" : ", UAPI on " + socket_path);

  // --- COMMAND runs; wg-run passes signals on and waits ---
  if (command_mode) wgrun::release(child.control.get());
  child.control.reset();
  int status = 0;
  for (;;) {
    siginfo_t info{};
    const int sig = signals.wait(&info);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      if (!command_mode) continue;
      int ws = 0;
      const pid_t r = ::waitpid(child.pid, &ws, WNOHANG);
      if (r == child.pid) {
        reaper.pid = -1;
        status = exit_status(ws);
        break;
      }
      continue;
    }
    if (sig == SIGHUP || sig == SIGUSR1) {
      auto r = programs::reload(device, o.config_path, wg::load_config, "wg-run");
      say("{}", r.message.substr(r.message.find(' ') + 1));  // "wg-run: " is say()'s
      if (sig == SIGUSR1) continue;
    }
    if (!command_mode) {
      if (sig == SIGINT || sig == SIGTERM || sig == SIGQUIT) break;
      continue;
    }
    // A signal from the terminal (Ctrl-C, Ctrl-\, hang-up) reached COMMAND already when it
    // shares wg-run's foreground process group: only a sent one is passed on.
    if (info.si_code != SI_KERNEL) ::kill(child.pid, sig);
  }

  // --- the tunnel torn down, then COMMAND's status ---
  if (uapi) uapi->stop();
  if (health) health->stop();
  device.close();
  return status;
}

// CLI11's help with wg-run's two forms as its usage lines.
class Usage : public CLI::Formatter {
 public:
  explicit Usage(std::string lines) : lines_(std::move(lines)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return lines_; }

 private:
  std::string lines_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wg-run: run a program with its whole network through WireGuard, without root"};
  app.formatter(std::make_shared<Usage>(
      "Usage:\n"
      "  wg-run -c FILE [OPTIONS] [--] COMMAND [ARGS...]\n"
      "  wg-run -c FILE [OPTIONS] --netns PATH\n"));
  Options o;
  bool quiet = false, verbose = false;
  app.set_version_flag("-v,--version", std::string("wg-run ") + WGNET_VERSION + " (wgnet)");
  // COMMAND starts at the first argument that is neither an option of wg-run's nor its
  // value, or after the first "--".
  app.prefix_command();
  app.add_option("-c,--config", o.config_path,
                 "wg-quick config: [Interface] with PrivateKey and Address (DNS, MTU, ListenPort used), [Peer]s")
      ->required()
      ->type_name("FILE");
  app.add_option("--netns", o.netns,
                 "serve this network namespace (a file such as /run/user/UID/netns/NAME or /proc/PID/ns/net) "
                 "instead of running COMMAND: its TUN is made there, wg-run runs until SIGINT or SIGTERM")
      ->type_name("PATH");
  app.add_option("--interface", o.interface,
                 std::string("name the TUN NAME and serve the UAPI as interface NAME, so that wg(8) drives it: ") +
                     wg::uapi::kSocketDir + "/NAME.sock (default TUN name: the config file's, as wg-quick)")
      ->check([](const std::string& n) -> std::string {
        return programs::valid_interface_name(n) ? "" : programs::kInterfaceNameRule;
      })
      ->type_name("NAME");
  app.add_option("--uapi", o.uapi_path, "serve the UAPI on this Unix socket path instead (wg(8) cannot find it there)")
      ->type_name("PATH");
  app.add_option("--health", o.health, "serve /readyz and /metrics on this address (in the user's own namespace)")
      ->type_name("ADDR:PORT");
  app.add_flag("--no-sandbox", o.no_sandbox,
               "do not confine wg-run's own process (Landlock, system-call allow-list): for debugging");
  app.add_flag("--share-host-sockets", o.share_host_sockets,
               "keep the host's /tmp and /run inside, with the Unix sockets there (X11, audio, the session bus, "
               "proxies): each is a way around the tunnel; by default COMMAND gets empty ones");
  app.add_flag("--verbose", verbose, "also log the WireGuard core's events (handshakes) and details");
  app.add_flag("-q,--quiet", quiet, "log only the errors that stop wg-run");
  std::vector<bool> disabled(std::size(programs::kOffloadSwitches));
  for (size_t i = 0; i < disabled.size(); ++i) {
    const auto& s = programs::kOffloadSwitches[i];
    app.add_flag_callback(s.flag, [i, &disabled] { disabled[i] = true; }, std::string("turn off ") + s.what);
  }
  std::string environment =
      "Environment:\n"
      "  TMPDIR              with --share-host-sockets, where the namespace's resolv.conf is written before it\n"
      "                      is mounted (default /tmp)\n";
  for (const auto& s : programs::kOffloadSwitches)
    environment += fmt::format("  {:<19} {}the same as {}\n", s.env,
                               &s == programs::kOffloadSwitches ? "set to anything but \"\" or \"0\": " : "", s.flag);
  app.footer(
      "COMMAND runs in new user, PID, network and mount namespaces as the same user, with lo and the TUN as\n"
      "its only interfaces, its own /proc and /sys, and (without --share-host-sockets) empty /tmp and /run;\n"
      "/etc/resolv.conf there names the config's DNS= servers. wg-run exits with COMMAND's status (128+N\n"
      "when a signal N ended it; 127: no such command, 126: it cannot be run; 1: wg-run failed); processes\n"
      "COMMAND leaves running end with it.\n"
      "\n" +
      environment +
      "\n"
      "Signals:\n"
      "  SIGINT, SIGTERM, SIGQUIT, SIGUSR2  passed on to COMMAND (unless the terminal sent them to both);\n"
      "                   with --netns, INT, TERM and QUIT stop wg-run\n"
      "  SIGHUP           re-read the config and apply its WireGuard part as `wg syncconf` does, and pass\n"
      "                   SIGHUP on to COMMAND\n"
      "  SIGUSR1          re-read and apply the config only (COMMAND does not see it)\n"
      "\n"
      "The manual: man 8 wg-run");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    usage_error(e.what());
  }
  if (quiet && verbose) usage_error("-q and --verbose exclude each other");
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  else if (!command.empty() && command.front().size() > 1 && command.front()[0] == '-')
    usage_error("unknown option '" + command.front() + "'");
  verbosity = quiet ? Verbosity::quiet : verbose ? Verbosity::verbose : Verbosity::normal;
  wg::log::set_level(verbose ? wg::log::Level::verbose : wg::log::Level::silent);
  o.command = std::move(command);
  if (o.command.empty() && o.netns.empty()) usage_error("no COMMAND: wg-run -c FILE -- COMMAND [ARGS...]");
  if (!o.command.empty() && !o.netns.empty()) usage_error("--netns serves a namespace and runs no COMMAND");
  if (o.share_host_sockets && !o.netns.empty()) usage_error("--share-host-sockets is for COMMAND, not --netns");
  o.offloads = programs::offloads_from_environment();
  for (size_t i = 0; i < disabled.size(); ++i)
    if (disabled[i]) programs::turn_off(programs::kOffloadSwitches[i], o.offloads);

  // Signals are waited for, not handled: blocked before any thread starts (and the child
  // restores the mask for COMMAND).
  // The signals passed on to COMMAND, reloads, and wg-run's end.
  const programs::WaitedSignals signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
  try {
    return run(o, signals);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-run: {}\n", e.what());
    return 1;
  }
}

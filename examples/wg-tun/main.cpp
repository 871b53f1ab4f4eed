// wg-tun: the root-mode daemon. A kernel TUN interface driven by `wg` and `wg-quick`
// over the UAPI socket, command-line compatible with wireguard-go:
//
//   wg-tun [-f|--foreground] [--queues N] [--health ADDR:PORT] [--disable-OFFLOAD]... INTERFACE
//   wg-tun --version
//   LOG_LEVEL=verbose|error|silent  WG_TUN_FD=N  WG_UAPI_FD=N  WG_HEALTH_FD=N  WG_READY_FD=N
//   WG_PROCESS_FOREGROUND=1
//
// Each offload can be turned off by a flag or by its environment switch (either one is
// enough; the table is programs::kOffloadSwitches): --disable-tso (WG_TUN_DISABLE_TSO),
// --disable-uso (WG_TUN_DISABLE_USO), --disable-tun-gro (WG_TUN_DISABLE_GRO),
// --disable-tun-csum (WG_TUN_DISABLE_CSUM), --disable-udp-gso (WG_DISABLE_UDP_GSO), --disable-udp-gro (WG_DISABLE_UDP_GRO).
//
// --queues N (1 to kMaxQueues = 16, default 1): N TUN queues (IFF_MULTI_QUEUE) with a reader
// thread each and N UDP sockets per family (SO_REUSEPORT) with a receiver each, for
// machines with more cores than the two threads of one queue keep busy.
//
// --health ADDR:PORT: /readyz and /metrics (programs::HealthThread, as wg-run's).
//
// Once the interface and the UAPI socket are open, the daemon re-executes itself with
// them as descriptors and, before its first thread, confines itself: Landlock (no file
// but /dev/net/tun and removing its UAPI socket; not with --no-sandbox), and only
// CAP_NET_ADMIN, CAP_NET_BIND_SERVICE and (as root, to follow the interface into another
// namespace) CAP_SYS_ADMIN; with --user NAME (or WG_TUN_USER) it becomes NAME keeping
// the first two. Unless --no-sandbox, a system-call allow-list (wg-tun's table)
// holds from before its first packet.
//
// Without -f the parent opens the interface and the UAPI socket (so start-up errors are
// reported where the user is), then re-executes itself in the background with both as
// inherited descriptors, exactly as wireguard-go does, and exits once the background
// process is up (it writes to the pipe WG_READY_FD; exit 1 if it ends first). The --health
// socket goes the same way (WG_HEALTH_FD); its thread starts only in the process that stays.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "bind/linux.hpp"
#include "confine.hpp"
#include "daemon.hpp"
#include "health_server.hpp"
#include "offload_switches.hpp"
#include "process.hpp"
#include "tunlinux/tun.hpp"
#include "uapi_socket.hpp"
#include "wg/device.hpp"
#include "wg/base/log.hpp"
#include "wg/uapi_server.hpp"

namespace {

constexpr const char* kVersion = WGNET_VERSION;
// Each queue's reader and each socket's receiver keep a batch of 128 buffers of 64 KiB
// (8 MiB each once used): 16 queues can hold about 400 MiB at rest.
constexpr unsigned kMaxQueues = 16;
using wg::uapi::kSocketDir;

using programs::kOffloadSwitches;
using programs::OffloadSwitch;
// The off-switches the command line gave (each once), entries of kOffloadSwitches.
using Disabled = std::vector<const OffloadSwitch*>;

// A usage error: one line on stderr with the usage, exit status 1 (as wireguard-go's).
[[noreturn]] void usage_error(const char* argv0, const std::string& what) {
  programs::usage_error("wg-tun", fmt::format("{}; usage: {} [-f/--foreground] [--queues N] [--health ADDR:PORT] "
                                              "[--user NAME] [--no-sandbox] [--sandbox-log] [--disable-OFFLOAD]... "
                                              "INTERFACE-NAME",
                                              what, argv0));
}

[[noreturn]] void usage(const char* argv0, int code) {
  std::FILE* out = code ? stderr : stdout;
  fmt::print(out,
             "Usage: {} [-f/--foreground] [--queues N] [--health ADDR:PORT] [--user NAME] [--no-sandbox] [--sandbox-log]\n"
             "       [--disable-OFFLOAD]... INTERFACE-NAME\n",
             argv0);
  fmt::print(out, "       {} --version\n\n", argv0);
  fmt::print(out, "  -f, --foreground    stay in the foreground (without it: start in the background and return)\n");
  fmt::print(out, "  --queues N          N TUN queues and N UDP sockets per family, a thread each (1 to {}, default 1)\n",
             kMaxQueues);
  fmt::print(out, "  --health ADDR:PORT  serve /readyz (200 while a peer's handshakes succeed, else 503) and /metrics\n"
                  "                      (Prometheus text) over HTTP on this address, in wg-tun's network namespace\n");
  fmt::print(out, "  --user NAME         once the interface is open, run as user NAME with only CAP_NET_ADMIN and\n"
                  "                      CAP_NET_BIND_SERVICE (default: stay root, as wireguard-go does)\n");
  fmt::print(out, "  --no-sandbox        no system-call allow-list (for debugging)\n");
  fmt::print(out, "  --sandbox-log       the kernel logs the system calls the allow-list denies (they fail with EPERM)\n");
  fmt::print(out, "  -v, --version       print the version\n");
  fmt::print(out, "  -h, --help          print this help\n\n");
  fmt::print(out, "Each offload is on by default; its flag or its environment variable turns it off:\n");
  for (const auto& f : kOffloadSwitches) fmt::print(out, "  {:<18}  {}\n", f.flag, f.what);
  fmt::print(out, "\nEnvironment:\n");
  fmt::print(out, "  LOG_LEVEL=verbose|error|silent  what to log (default error); in the background, output is kept\n"
                  "                                  only when it is set and not silent\n");
  fmt::print(out, "  WG_TUN_FD=N                     use this open TUN descriptor instead of creating the interface\n");
  fmt::print(out, "  WG_UAPI_FD=N                    serve the UAPI on this listening socket instead of {}/NAME.sock\n",
             kSocketDir);
  fmt::print(out, "  WG_HEALTH_FD=N                  serve --health on this listening TCP socket instead of binding\n"
                  "                                  ADDR:PORT (how the background process gets it)\n");
  fmt::print(out, "  WG_READY_FD=N                   write one byte to this pipe once up (how the background process\n"
                  "                                  tells the one started that it is up)\n");
  fmt::print(out, "  WG_PROCESS_FOREGROUND=1         the same as -f\n");
  fmt::print(out, "  WG_TUN_USER=user                the same as --user user (for wg-quick, which passes no flags)\n");
  for (const auto& f : kOffloadSwitches)
    fmt::print(out, "  {:<30}  the same as {} (set to anything but \"\" or \"0\")\n", f.env, f.flag);
  fmt::print(out, "\nSignals:\n");
  fmt::print(out, "  SIGINT, SIGTERM  close the device, remove the UAPI socket and exit 0 (so does deleting the interface)\n");
  fmt::print(out, "  SIGUSR1          internal (the interface was deleted): stops the daemon as SIGTERM does\n");
  fmt::print(out, "\nThe manual: man 8 wg-tun\n");
  std::exit(code);
}

std::optional<int> env_fd(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long fd = std::strtol(v, &end, 10);
  if (*end || fd < 0 || fd > 65535) {
    fmt::print(stderr, "wg-tun: {} is not a file descriptor: '{}'\n", name, v);
    std::exit(1);
  }
  return static_cast<int>(fd);
}

// LOG_LEVEL as wireguard-go reads it: any other value is "error".
wg::log::Level level_from_env() {
  const char* v = std::getenv("LOG_LEVEL");
  return programs::parse_log_level(v ? v : "").value_or(wg::log::Level::error);
}

// The flags a re-executed wg-tun gets beyond the interface and its descriptors.
struct Passed {
  const Disabled& disabled;
  unsigned queues;
  const std::string& health_address;
  const std::string& user;  // as WG_TUN_USER
  const char* sandbox_flag;  // "--no-sandbox", "--sandbox-log" or nullptr
};

// Re-executes this program with the TUN and UAPI descriptors as 3 and 4 (and the --health
// socket, if any, as 5). In the background (programs::fork_daemon, the readiness pipe
// as descriptor 6 and WG_READY_FD, passed on to `ready_fd`; its stderr the pipe until
// it is up, unless LOG_LEVEL keeps the output), or in place (`background` false: in the
// foreground, so that the new image confines itself before its first thread). The new
// image gets the same flags (after the interface name, so `wg-tun -f NAME` still starts
// its command line).
int daemonize(bool background, const std::string& iface, const Passed& passed, int tun_fd, int uapi_fd,
              const std::string& socket_path, int health_fd, std::optional<int> ready_fd) {
  int ready_write = -1;
  if (background) {
    const bool keep_output = std::getenv("LOG_LEVEL") && level_from_env() != wg::log::Level::silent;
    try {
      // The socket, root's directory's, is removed by the parent when the child fails as
      // another user.
      const int w = programs::fork_daemon("wg-tun", ready_fd.value_or(-1), keep_output, socket_path.c_str());
      ready_write = fcntl(w, F_DUPFD_CLOEXEC, 10);  // above 3 to 6, which are moved below
      ::close(w);
    } catch (const std::exception& e) {
      fmt::print(stderr, "wg-tun: {}\n", e.what());
      return 1;
    }
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    dup2(devnull, 0);
    if (!keep_output) dup2(devnull, 1);
    ::close(devnull);
  }
  // Move the descriptors to 3, 4 and 5 without clobbering each other; the copies above 10
  // close at exec (dup2 clears close-on-exec on 3, 4 and 5).
  int t = fcntl(tun_fd, F_DUPFD_CLOEXEC, 10), u = fcntl(uapi_fd, F_DUPFD_CLOEXEC, 10);
  int h = health_fd >= 0 ? fcntl(health_fd, F_DUPFD_CLOEXEC, 10) : -1;
  dup2(t, 3);
  dup2(u, 4);
  setenv("WG_TUN_FD", "3", 1);
  setenv("WG_UAPI_FD", "4", 1);
  if (h >= 0) {
    dup2(h, 5);
    setenv("WG_HEALTH_FD", "5", 1);
  }
  if (ready_write >= 0) {
    dup2(ready_write, 6);
    setenv("WG_READY_FD", "6", 1);
  }
  setenv("WG_PROCESS_FOREGROUND", "1", 1);
  if (!passed.user.empty()) setenv("WG_TUN_USER", passed.user.c_str(), 1);
  const std::string queue_count = std::to_string(passed.queues);
  std::vector<const char*> args{program_invocation_name, "-f", iface.c_str()};
  if (passed.queues > 1) {  // the child attaches the queues beyond the inherited one
    args.push_back("--queues");
    args.push_back(queue_count.c_str());
  }
  if (!passed.health_address.empty()) {  // for ps and the log; the child serves on descriptor 5
    args.push_back("--health");
    args.push_back(passed.health_address.c_str());
  }
  if (passed.sandbox_flag) args.push_back(passed.sandbox_flag);
  for (const OffloadSwitch* f : passed.disabled) args.push_back(f->flag);
  args.push_back(nullptr);
  execv("/proc/self/exe", const_cast<char* const*>(args.data()));
  fmt::print(stderr, "wg-tun: re-executing /proc/self/exe: {}\n", std::strerror(errno));
  return 127;
}

// The command line as given: flags, the offloads it turns off, the interface name.
struct CommandLine {
  bool foreground = false, no_sandbox = false, sandbox_log = false;
  unsigned queues = 1;
  Disabled disabled;
  std::string iface, health_address, user;
};

// wireguard-go's command line on CLI11, with its messages: --help and --version print
// and exit 0; a usage error exits 1 (usage_error). Each option's value is checked as it
// is met; an option nobody knows is reported once the rest is read.
CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  const char* argv0 = argc > 0 ? argv[0] : "wg-tun";
  CLI::App app;
  app.set_help_flag();  // usage() is the help
  app.add_flag_callback("-h,--help", [argv0] { usage(argv0, 0); })->trigger_on_parse();
  app.add_flag_callback("-v,--version", [] {
       fmt::print("wg-tun v{} (wgnet)\n\nUserspace WireGuard daemon for linux.\n", kVersion);
       std::exit(0);
     })->trigger_on_parse();
  app.add_flag("-f,--foreground", cl.foreground);
  app.add_flag("--no-sandbox", cl.no_sandbox);
  app.add_flag("--sandbox-log", cl.sandbox_log);
  for (const OffloadSwitch& f : kOffloadSwitches)
    app.add_flag_callback(f.flag, [&cl, &f] {
         if (std::find(cl.disabled.begin(), cl.disabled.end(), &f) == cl.disabled.end()) cl.disabled.push_back(&f);
       })->trigger_on_parse();
  // A value is the next argument whatever it looks like: one starting with '-' is refused.
  app.add_option_function<std::string>("--user", [&cl, argv0](const std::string& v) {
       if (v.empty() || v[0] == '-') usage_error(argv0, "--user takes a user name");
       cl.user = v;
     })->trigger_on_parse();
  app.add_option_function<std::string>("--queues", [&cl, argv0](const std::string& v) {
       char* end = nullptr;
       const unsigned long n = v.empty() || v[0] == '-' ? 0 : std::strtoul(v.c_str(), &end, 10);
       if (n < 1 || n > kMaxQueues || *end) usage_error(argv0, fmt::format("--queues takes 1 to {}, not '{}'", kMaxQueues, v));
       cl.queues = static_cast<unsigned>(n);
     })->trigger_on_parse();
  app.add_option_function<std::string>("--health", [&cl, argv0](const std::string& v) {
       if (v.empty() || v[0] == '-') usage_error(argv0, "--health takes ADDR:PORT");
       cl.health_address = v;
     })->trigger_on_parse();
  std::vector<std::string> names;
  app.add_option("INTERFACE", names);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ArgumentMismatch& e) {  // an option's value missing at the end
    const std::string what = e.what();
    if (what.rfind("--user", 0) == 0) usage_error(argv0, "--user takes a user name");
    if (what.rfind("--health", 0) == 0) usage_error(argv0, "--health takes ADDR:PORT");
    if (what.rfind("--queues", 0) == 0) usage_error(argv0, fmt::format("--queues takes 1 to {}, not ''", kMaxQueues));
    usage_error(argv0, what);
  } catch (const CLI::ExtrasError&) {
    usage_error(argv0, "unknown option '" + app.remaining().front() + "'");
  } catch (const CLI::ParseError& e) {
    usage_error(argv0, e.what());
  }
  for (const std::string& n : names) {
    if (cl.iface.empty() && !n.empty() && n[0] != '-') cl.iface = n;
    else if (n.empty() || n[0] == '-') usage_error(argv0, "unknown option '" + n + "'");
    else usage_error(argv0, "one interface name only ('" + cl.iface + "', then '" + n + "')");
  }
  return cl;
}

// One verbose line with the offloads in use: what the options allowed and the kernel
// took (TUN: TUNSETOFFLOAD bits and the GRO kinds still on; UDP: after the bind opened).
void log_offloads(const std::string& name, const tunlinux::Tun& tun, const conn::LinuxBind& bind) {
  const unsigned off = tun.offloads();
  auto on = [](bool b) { return b ? "on" : "off"; };
  const tunlinux::GroOptions gro = tun.gro();
  wg::log::verbose("interface {}: offloads: tun tso {} uso {} gro-tcp {} gro-udp {} csum {}; udp gso {} gro {}",
                   name, on(off & TUN_F_TSO4), on(off & tunlinux::kTunFUso4), on(gro.tcp), on(gro.udp),
                   on(gro.trusted), on(bind.gso_enabled()), on(bind.gro_enabled()));
}

}  // namespace

// What main does not catch itself (a thread that cannot be made, memory) ends it with
// one line, which a background start passes on.
int main(int argc, char** argv) try {
  // The background child is exec'd from /proc/self/exe, which would name it "exe": it
  // takes the name it was started by, so `pgrep -x wg-tun` and `ps -C wg-tun` find it.
  if (argc > 0) {
    const char* slash = std::strrchr(argv[0], '/');
    prctl(PR_SET_NAME, slash ? slash + 1 : argv[0]);
  }
  CommandLine cl = parse_command_line(argc, argv);
  if (cl.iface.empty()) usage_error(argv[0], "no interface name");
  if (!programs::valid_interface_name(cl.iface))
    usage_error(argv[0], fmt::format("'{}': {}", cl.iface, programs::kInterfaceNameRule));
  if (const char* f = std::getenv("WG_PROCESS_FOREGROUND"); f && std::string(f) == "1") cl.foreground = true;
  if (const char* u = std::getenv("WG_TUN_USER"); u && *u && cl.user.empty()) cl.user = u;
  if (cl.no_sandbox && cl.sandbox_log) usage_error(argv[0], "--no-sandbox and --sandbox-log exclude each other");
  wg::log::set_level(level_from_env());
  try {
    programs::make_undumpable();
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-tun: {}\n", e.what());
    return 1;
  }

  const programs::WaitedSignals signals{SIGINT, SIGTERM, SIGUSR1};  // SIGUSR1: the interface was deleted

  // --- the --health socket: before the interface, so that a port in use leaves nothing behind ---
  std::optional<programs::HealthThread> health;
  try {
    if (auto fd = env_fd("WG_HEALTH_FD")) health.emplace(*fd, fmt::format("WG_HEALTH_FD={}", *fd), "wg-tun");
    else if (!cl.health_address.empty()) health.emplace(cl.health_address, "wg-tun");
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-tun: {}\n", e.what());
    return 1;
  }

  // --- the interface ---
  // A flag or the environment variable turns an offload off.
  programs::OffloadOptions offloads = programs::offloads_from_environment();
  for (const OffloadSwitch* f : cl.disabled) programs::turn_off(*f, offloads);
  offloads.tun.queues = cl.queues;
  offloads.bind.sockets = cl.queues;
  const tunlinux::Tun::Options& tun_opts = offloads.tun;
  const conn::LinuxBind::Options& bind_opts = offloads.bind;

  const std::optional<int> inherited_tun = env_fd("WG_TUN_FD");
  const std::optional<int> ready_fd = env_fd("WG_READY_FD");
  if (!inherited_tun && !cl.user.empty()) {  // before anything is made: a bad name leaves nothing behind
    try {
      programs::find_user(cl.user);
    } catch (const std::exception& e) {
      fmt::print(stderr, "wg-tun: {}\n", e.what());
      return 1;
    }
  }
  int null_fd = -1;  // /dev/null for stderr once up, when stderr is the readiness pipe
  if (inherited_tun) {
    // Before the first thread: Landlock and capabilities hold for the thread that sets
    // them and the threads it makes later. Files: none but /dev/net/tun (the queues
    // beyond the inherited one) and removing the UAPI socket. Capabilities: CAP_NET_ADMIN
    // for fwmark and the TUN, CAP_NET_BIND_SERVICE for a listen port below 1024 that
    // `wg set` may give at any time; as root also CAP_SYS_ADMIN, to follow the interface
    // into another namespace (setns).
    try {
      if (ready_fd) null_fd = programs::null_if_stderr_is(*ready_fd);
      std::optional<programs::User> as;
      if (!cl.user.empty()) as = programs::find_user(cl.user);  // while /etc/passwd can be read
      if (!cl.no_sandbox) {
        programs::FileRules rules;
        rules.devices.push_back("/dev/net/tun");
        rules.remove_in.push_back(kSocketDir);
        auto c = programs::restrict_files(rules);
        if (c.abi > 0) wg::log::verbose("{}", c.message);
        else wg::log::error("warning: {}", c.message);
      }
      if (as) programs::become_user(*as, {CAP_NET_ADMIN, CAP_NET_BIND_SERVICE});
      else if (::geteuid() == 0) programs::drop_capabilities({CAP_NET_ADMIN, CAP_NET_BIND_SERVICE, CAP_SYS_ADMIN});
      programs::make_undumpable();  // a change of user resets it
    } catch (const std::exception& e) {
      fmt::print(stderr, "wg-tun: {}\n", e.what());
      return 1;
    }
  }
  std::error_code ec;
  std::unique_ptr<tunlinux::Tun> tun;
  if (inherited_tun) tun = tunlinux::Tun::from_fd(*inherited_tun, tun_opts, ec);
  else tun = tunlinux::Tun::create(cl.iface, wg::kDefaultMtu, tun_opts, ec);
  if (!tun) {
    // EBUSY: the name is another device's, or a TUN another process holds.
    fmt::print(stderr, "wg-tun: cannot create interface {}: {}\n", cl.iface,
               ec == std::errc::device_or_resource_busy ? "an interface of that name exists already" : ec.message());
    return 1;
  }
  std::string name = tun->name();

  // --- the UAPI socket ---
  // The file is this process's to remove: it made it, or its parent did before daemonizing.
  programs::UapiSocket uapi;
  const std::string socket_path = std::string(kSocketDir) + "/" + name + ".sock";
  try {
    if (auto fd = env_fd("WG_UAPI_FD")) uapi = programs::UapiSocket::adopt(*fd, socket_path);
    else uapi = programs::UapiSocket::listen(socket_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wg-tun: {}\n", e.what());
    return 1;
  }

  // Re-executed with the descriptors (in place with -f), so that the new image confines
  // itself before its first thread.
  if (!cl.foreground || !inherited_tun) {
    const Passed passed{cl.disabled, cl.queues, cl.health_address, cl.user,
                        cl.no_sandbox ? "--no-sandbox" : cl.sandbox_log ? "--sandbox-log" : nullptr};
    // Returns only if it failed before a fork or an exec: the socket file is still ours.
    return daemonize(!cl.foreground, name, passed, tun->fd(), uapi.fd(), socket_path,
                     health ? health->native_handle() : -1,
                     ready_fd);
  }

  // Before the UDP sockets, the UAPI and --health threads and the TUN's readers: nothing
  // from a peer, a client or the UAPI is read unconfined.
  if (!cl.no_sandbox) {
    try {
      programs::restrict_syscalls(programs::Program::wg_tun,
                                  cl.sandbox_log ? programs::SyscallDenial::log : programs::default_denial());
    } catch (const std::exception& e) {
      wg::log::error("wg-tun: {}", e.what());
      uapi.close();
      return 1;
    }
  }

  conn::LinuxBind bind(bind_opts);
  wg::Device device(*tun, bind);
  // The device follows the interface: bind opened when up, closed when down.
  tun->set_event_handler([&](tun::Event e) {
    switch (e) {
      case tun::Event::up:
        if (auto err = device.up()) wg::log::error("interface {}: cannot open UDP sockets: {}", name, err.message());
        else {
          wg::log::event("interface {} is up (listen port {})", name, device.listen_port());
          log_offloads(name, *tun, bind);
          if (tun->queues() > 1)
            wg::log::verbose("interface {}: {} TUN queues and {} UDP sockets, a thread each", name, tun->queues(),
                             bind.receivers());
        }
        break;
      case tun::Event::down:
        device.down();
        // Deleted, not moved to another namespace (the device follows a move).
        if (tun->deleted()) kill(getpid(), SIGUSR1);
        else wg::log::event("interface {} is down", name);
        break;
      case tun::Event::mtu_changed:
        wg::log::verbose("interface {}: MTU {}", name, tun->mtu());
        break;
    }
  });
  wg::uapi::Server server(device, uapi.release());
  if (health) health->start(device);  // the signals are blocked: its thread inherits that
  wg::log::event("wg-tun {} started on {}{}{}", kVersion, name,
                 health ? "; /readyz and /metrics on " + health->local_address() : "",
                 cl.user.empty() ? "" : "; as user " + cl.user);
  if (ready_fd) programs::daemon_ready(*ready_fd, null_fd);

  const int sig = signals.wait();
  wg::log::event("interface {}: {}, shutting down", name, sig == SIGUSR1 ? "deleted" : "signal received");
  server.stop();
  if (health) health->stop();  // before the device it reads goes
  // As --user, the directory is root's: the socket stays, and the next `wg` or wg-tun
  // that finds nothing answering on it removes it.
  uapi.close();
  device.close();
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "wg-tun: {}\n", e.what());
  return 1;
}

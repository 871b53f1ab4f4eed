// wg-tun: the root-mode daemon. A kernel TUN interface driven by `wg` and `wg-quick`
// over the UAPI socket, command-line compatible with wireguard-go:
//
//   wg-tun [-f|--foreground] INTERFACE        wg-tun --version
//   LOG_LEVEL=verbose|error|silent  WG_TUN_FD=N  WG_UAPI_FD=N  WG_PROCESS_FOREGROUND=1
//
// Without -f the parent opens the interface and the UAPI socket (so start-up errors are
// reported where the user is), then re-executes itself in the background with both as
// inherited descriptors, exactly as wireguard-go does, and exits.
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "bind/linux.hpp"
#include "tunlinux/tun.hpp"
#include "wg/device.hpp"
#include "wg/log.hpp"
#include "wg/uapi.hpp"

namespace {

constexpr const char* kVersion = "0.1.0";
constexpr const char* kSocketDir = "/var/run/wireguard";

[[noreturn]] void usage(const char* argv0, int code) {
  fmt::print(code ? stderr : stdout, "Usage: {} [-f/--foreground] INTERFACE-NAME\n", argv0);
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

wg::log::Level level_from_env() {
  const char* v = std::getenv("LOG_LEVEL");
  std::string s = v ? v : "";
  if (s == "verbose" || s == "debug") return wg::log::Level::verbose;
  if (s == "silent") return wg::log::Level::silent;
  return wg::log::Level::error;
}

// Re-executes this program in the background with the TUN and UAPI descriptors as 3
// and 4, then returns in the parent. The child is not waited for: like wireguard-go's.
int daemonize(const char* self, const std::string& iface, int tun_fd, int uapi_fd) {
  bool keep_output = std::getenv("LOG_LEVEL") && level_from_env() != wg::log::Level::silent;
  pid_t pid = fork();
  if (pid < 0) {
    fmt::print(stderr, "wg-tun: fork: {}\n", std::strerror(errno));
    return 1;
  }
  if (pid > 0) return 0;
  setsid();
  int devnull = ::open("/dev/null", O_RDWR);
  dup2(devnull, 0);
  if (!keep_output) {
    dup2(devnull, 1);
    dup2(devnull, 2);
  }
  // Move the descriptors to 3 and 4 without clobbering each other.
  int t = fcntl(tun_fd, F_DUPFD, 10), u = fcntl(uapi_fd, F_DUPFD, 10);
  dup2(t, 3);
  dup2(u, 4);
  fcntl(3, F_SETFD, 0);
  fcntl(4, F_SETFD, 0);
  setenv("WG_TUN_FD", "3", 1);
  setenv("WG_UAPI_FD", "4", 1);
  setenv("WG_PROCESS_FOREGROUND", "1", 1);
  execl("/proc/self/exe", self, "-f", iface.c_str(), static_cast<char*>(nullptr));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  bool foreground = false;
  std::string iface;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--version" || a == "-v") {
      fmt::print("wg-tun v{} (wgnet)\n\nUserspace WireGuard daemon for linux.\n", kVersion);
      return 0;
    }
    if (a == "-h" || a == "--help") usage(argv[0], 0);
    if (a == "-f" || a == "--foreground") foreground = true;
    else if (iface.empty() && !a.empty() && a[0] != '-') iface = a;
    else usage(argv[0], 1);
  }
  if (iface.empty()) usage(argv[0], 1);
  if (iface.size() >= IFNAMSIZ) {
    fmt::print(stderr, "wg-tun: interface name too long: {}\n", iface);
    return 1;
  }
  if (const char* f = std::getenv("WG_PROCESS_FOREGROUND"); f && std::string(f) == "1") foreground = true;
  wg::log::set_level(level_from_env());

  // Block the signals we wait for before any thread starts, so every thread inherits it.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);  // internal: the interface was deleted
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // --- the interface ---
  std::error_code ec;
  std::unique_ptr<tunlinux::Tun> tun;
  if (auto fd = env_fd("WG_TUN_FD")) tun = tunlinux::Tun::from_fd(*fd, ec);
  else tun = tunlinux::Tun::create(iface, wg::kDefaultMtu, ec);
  if (!tun) {
    fmt::print(stderr, "wg-tun: cannot create interface {}: {}\n", iface, ec.message());
    return 1;
  }
  std::string name = tun->name();

  // --- the UAPI socket ---
  std::string socket_path = std::string(kSocketDir) + "/" + name + ".sock";
  int uapi_fd;
  bool own_socket_file = true;
  if (auto fd = env_fd("WG_UAPI_FD")) {
    uapi_fd = *fd;
  } else {
    std::string err;
    uapi_fd = wg::uapi::listen_unix(socket_path, err);
    if (uapi_fd < 0) {
      fmt::print(stderr, "wg-tun: {}\n", err);
      return 1;
    }
  }

  if (!foreground) return daemonize(argv[0], name, tun->fd(), uapi_fd);

  conn::LinuxBind bind;
  wg::Device device(*tun, bind);
  // The device follows the interface: bind opened when up, closed when down.
  tun->set_event_handler([&](tun::Event e) {
    switch (e) {
      case tun::Event::up:
        if (auto err = device.up()) wg::log::error("interface {}: cannot open UDP sockets: {}", name, err.message());
        else wg::log::event("interface {} is up (listen port {})", name, device.listen_port());
        break;
      case tun::Event::down:
        device.down();
        if (if_nametoindex(name.c_str()) == 0) kill(getpid(), SIGUSR1);
        else wg::log::event("interface {} is down", name);
        break;
      case tun::Event::mtu_changed:
        wg::log::verbose("interface {}: MTU {}", name, tun->mtu());
        break;
    }
  });
  wg::uapi::Server server(device, uapi_fd);
  wg::log::event("wg-tun {} started on {}", kVersion, name);

  int sig = 0;
  sigwait(&sigs, &sig);
  wg::log::event("interface {}: {}, shutting down", name, sig == SIGUSR1 ? "deleted" : "signal received");
  server.stop();
  if (own_socket_file) ::unlink(socket_path.c_str());
  device.close();
  return 0;
}

// The child of wg-run, in the order it runs (see the drawing in sandbox.hpp):
//   1. namespaces: made with the child, a new user namespace mapping the user to itself
//      and a PID namespace whose init the child is, then new network and mount
//      namespaces (or, with --netns, the given one and the user namespace owning it)
//   2. network: lo up; the TUN (tunlinux::Tun::create: IFF_VNET_HDR, offloads, MTU,
//      queue length); its addresses, the link up, a default route per family
//   3. COMMAND mode only, the host hidden: a fresh /proc and /sys; unless host sockets
//      are shared, fresh /tmp and /run; resolv.conf and the name-service sockets
//      covered; unprivileged ping allowed for the user's group
//   4. the TUN and an rtnetlink socket of the namespace handed out; wait for 'G'
//   5. capabilities dropped; COMMAND forked and executed with the signal mask restored;
//      the child stays its init: passes signals on, reaps, exits with COMMAND's status
#include "sandbox.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "diagnose.hpp"
#include "netlink.hpp"

namespace wgrun {
namespace {

// Name services that answer over a Unix socket, which no network namespace separates: a
// lookup through them would be made outside, in the user's network. Covered (a bind mount
// of a regular file makes connect() fail), so the C library falls back to DNS= through
// the tunnel.
constexpr const char* kNameServiceSockets[] = {
    "/run/systemd/resolve/io.systemd.Resolve",  // nss-resolve
    "/run/nscd/socket",                         // nscd
    "/var/run/nscd/socket",
};

// One line on stderr and the exit of the child; the parent says nothing more.
[[noreturn]] void die(const std::string& message, int status = 1) {
  fmt::print(stderr, "wg-run: {}\n", message);
  _exit(status);
}

// Writes `text` to a file that exists (a /proc or /proc/sys entry); errno on failure.
int write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

// --- 1. namespaces ---

// The child is made in new user and PID namespaces (spawn); the user (uid and gid
// outside) mapped to itself there, then new network and mount namespaces.
void make_namespaces(uid_t uid, gid_t gid) {
  // The user mapped to itself (files keep their owners, `id` shows the same user). A
  // gid_map written without CAP_SETGID outside needs setgroups denied first.
  if (int err = write_file("/proc/self/setgroups", "deny"); err && err != ENOENT)
    die(userns_failure("deny setgroups in the user namespace", err));
  if (int err = write_file("/proc/self/uid_map", fmt::format("{} {} 1\n", uid, uid)))
    die(userns_failure(fmt::format("map uid {} into the user namespace", uid), err));
  if (int err = write_file("/proc/self/gid_map", fmt::format("{} {} 1\n", gid, gid)))
    die(userns_failure(fmt::format("map gid {} into the user namespace", gid), err));
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) < 0)
    die(userns_failure("create network and mount namespaces", errno));
  // Mounts made here (resolv.conf) must not propagate back to the user's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
    die(fmt::format("cannot make the mounts of the new mount namespace private: {}", std::strerror(errno)));
}

// The same device and inode: the same namespace.
bool same_file(int a, int b) {
  struct stat sa{}, sb{};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void enter_netns(const std::string& path) {
  wg::UniqueFd net(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!net) die(fmt::format("cannot open network namespace {}: {}", path, std::strerror(errno)));
  // setns(CLONE_NEWNET) needs CAP_SYS_ADMIN over the namespace: a user has it in a user
  // namespace of their own (a rootless container's), so that one is entered first.
  wg::UniqueFd owner(::ioctl(net.get(), NS_GET_USERNS));
  wg::UniqueFd mine(::open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC));
  if (owner && mine && !same_file(owner.get(), mine.get()) && ::setns(owner.get(), CLONE_NEWUSER) < 0)
    die(fmt::format("cannot enter the user namespace that owns {}: {} (wg-run enters namespaces of a user "
                    "namespace you own, such as a rootless container's)",
                    path, std::strerror(errno)));
  if (::setns(net.get(), CLONE_NEWNET) < 0)
    die(fmt::format("cannot enter network namespace {}: {} ({})", path, std::strerror(errno),
                    errno == EINVAL ? "not a network namespace"
                                    : "it must belong to a user namespace you own, such as a rootless container's"));
}

// --- 2. network ---

void build_network(const SandboxSpec& spec, std::unique_ptr<tunlinux::Tun>& tun) {
  if (const unsigned lo = if_nametoindex("lo"); lo != 0) {
    if (auto ec = netlink::set_link_up(static_cast<int>(lo)))
      die(fmt::format("cannot bring lo up: {}", ec.message()));
  }
  // The queue length is set below through rtnetlink (Tun::create's ioctl is refused in
  // a user namespace).
  tunlinux::Tun::Options opts = spec.tun;
  opts.queue_len = 0;
  std::error_code ec;
  tun = tunlinux::Tun::create(spec.interface, spec.mtu, opts, ec);
  if (!tun) {
    if (ec == std::errc::device_or_resource_busy)
      die(fmt::format("cannot create the TUN interface: {} exists in the namespace already", spec.interface));
    die(tun_failure(ec));
  }
  const int index = tun->ifindex();
  if (spec.tun.queue_len > 0)
    if (auto qec = netlink::set_txqueuelen(index, spec.tun.queue_len))
      die(fmt::format("cannot set the queue length of {}: {}", spec.interface, qec.message()));
  for (const auto& a : spec.addresses)
    if (auto aec = netlink::add_address(index, a))
      die(fmt::format("cannot add address {} to {}: {}", a.to_string(), spec.interface, aec.message()));
  if (auto uec = netlink::set_link_up(index)) die(fmt::format("cannot bring {} up: {}", spec.interface, uec.message()));
  std::set<int> families;
  for (const auto& a : spec.addresses) families.insert(a.addr.is_v4() ? 4 : 6);
  for (int family : families) {
    if (auto rec = netlink::add_default_route(index, family)) {
      if (rec == std::errc::file_exists)
        die(fmt::format("the network namespace has an IPv{} default route already: remove it, or traffic would "
                        "not all go through {}",
                        family, spec.interface));
      die(fmt::format("cannot add the IPv{} default route through {}: {}", family, spec.interface, rec.message()));
    }
  }
}

// --- 3. the host hidden ---

// Directories whose host content holds daemons' Unix sockets (X11, the session bus,
// audio, container runtimes, proxies): each replaced by an empty tmpfs.
struct PrivateDir {
  const char* path;
  const char* options;
};
constexpr PrivateDir kPrivateDirs[] = {
    {"/tmp", "mode=1777"},
    {"/run", "mode=0755"},  // /var/run is a link to it
};

// `path` is `dir` or below it.
bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// The private directory that holds `path` (a real path), or nullptr.
const char* private_dir_of(const std::string& path) {
  for (const auto& d : kPrivateDirs)
    if (is_under(path, d.path)) return d.path;
  return nullptr;
}

// Makes the directory `path` with `mode` and those above it that are missing with 0755
// (umask aside).
void make_dirs(const std::string& path, mode_t mode) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    const mode_t m = slash == std::string::npos ? mode : 0755;
    if (::mkdir(dir.c_str(), m) == 0) (void)::chmod(dir.c_str(), m);
    if (slash == std::string::npos) return;
  }
}

// The network namespace's sysfs (its interfaces only) and the PID namespace's proc (its
// processes only, and their network: this namespace's).
void mount_proc_and_sys() {
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("proc", "/proc", "proc", kFlags, nullptr) < 0)
    die(fmt::format("cannot mount a /proc of the PID namespace: {}", std::strerror(errno)));
  if (::mount("sysfs", "/sys", "sysfs", kFlags, nullptr) < 0)
    die(fmt::format("cannot mount a /sys of the network namespace: {}", std::strerror(errno)));
}

// Fresh /tmp and /run: the host's sockets there cannot be reached. Kept, empty: the
// user's runtime directory, /run/lock, the file /etc/resolv.conf links to (filled by
// set_up_names), and TMPDIR and XDG_RUNTIME_DIR when they are below them.
void hide_host_sockets() {
  // A working directory below them would stay the host's, its sockets reachable by
  // relative paths (and by ".." from one that was removed).
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) die(fmt::format("cannot tell the working directory: {}", std::strerror(errno)));
  if (const char* dir = private_dir_of(cwd))
    die(fmt::format("the working directory {} is under {}, which is private inside: start wg-run elsewhere, or "
                    "give --share-host-sockets",
                    cwd, dir));
  char real[PATH_MAX];
  const std::string resolv = ::realpath("/etc/resolv.conf", real) ? real : "";
  for (const auto& d : kPrivateDirs)
    if (::mount("tmpfs", d.path, "tmpfs", MS_NOSUID | MS_NODEV, d.options) < 0)
      die(fmt::format("cannot mount a fresh {}: {}", d.path, std::strerror(errno)));
  make_dirs("/run/lock", 01777);
  make_dirs(fmt::format("/run/user/{}", ::geteuid()), 0700);
  for (const char* name : {"TMPDIR", "XDG_RUNTIME_DIR"})
    if (const char* dir = std::getenv(name); dir && *dir == '/' && private_dir_of(dir)) make_dirs(dir, 0700);
  if (!resolv.empty() && private_dir_of(resolv)) {
    make_dirs(resolv.substr(0, resolv.rfind('/')), 0755);
    if (const int fd = ::open(resolv.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644); fd >= 0) ::close(fd);
  }
}

// --- names and ping ---

std::string resolv_conf(const SandboxSpec& spec) {
  std::string text = "# wg-run: DNS= of the config, reached through the tunnel\n";
  for (const auto& a : spec.dns) text += "nameserver " + a.to_string() + "\n";
  if (!spec.dns_search.empty()) {
    text += "search";
    for (const auto& s : spec.dns_search) text += " " + s;
    text += "\n";
  }
  return text;
}

// A bind mount of `file` over `target`, read-only where the kernel allows it.
int bind_over(const std::string& file, const char* target) {
  if (::mount(file.c_str(), target, nullptr, MS_BIND, nullptr) < 0) return errno;
  // A remount must keep the flags the source mount locks (nosuid, nodev, noexec).
  struct statvfs sv{};
  unsigned long keep = 0;
  if (::statvfs(target, &sv) == 0) {
    if (sv.f_flag & ST_NOSUID) keep |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV) keep |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC) keep |= MS_NOEXEC;
  }
  (void)::mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, nullptr);
  return 0;
}

void set_up_names(const SandboxSpec& spec) {
  // With a fresh /tmp, the file is written there, inside.
  const char* tmpdir = spec.share_host_sockets ? std::getenv("TMPDIR") : nullptr;
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/wg-run-resolv.XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) die(fmt::format("cannot write a resolv.conf in {}: {}", path, std::strerror(errno)));
  const std::string text = resolv_conf(spec);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fchmod(fd, 0644) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    die(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  // The mounts hold the file; its name can go at once, so nothing is left behind.
  const int err = bind_over(path, "/etc/resolv.conf");
  std::set<std::string> covered;
  for (const char* sock : kNameServiceSockets) {
    char real[PATH_MAX];
    struct stat st{};
    if (::realpath(sock, real) && ::stat(real, &st) == 0 && S_ISSOCK(st.st_mode) && covered.insert(real).second)
      if (int serr = bind_over(path, real)) {
        ::unlink(path.c_str());
        die(fmt::format("cannot cover {} (name lookups through it would leave outside the tunnel): {}", real,
                        std::strerror(serr)));
      }
  }
  ::unlink(path.c_str());
  // Without /etc/resolv.conf the C library asks 127.0.0.1: here, this namespace's own lo.
  if (err == ENOENT)
    fmt::print(stderr, "wg-run: warning: there is no /etc/resolv.conf to replace: DNS= is not used inside\n");
  else if (err) die(fmt::format("cannot replace /etc/resolv.conf: {}", std::strerror(err)));
}

// ICMP echo sockets (ping without privileges) for the user's group, in this namespace only.
void allow_ping() {
  const gid_t gid = ::getegid();
  (void)write_file("/proc/sys/net/ipv4/ping_group_range", fmt::format("{} {}", gid, gid));
}

// --- 4. hand-off ---

void send_devices(int control, int tun_fd, int link_fd) {
  char tag = 'T';
  iovec iov{&tag, 1};
  alignas(cmsghdr) char space[CMSG_SPACE(2 * sizeof(int))]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = sizeof space;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int fds[2] = {tun_fd, link_fd};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t n;
  do n = ::sendmsg(control, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) _exit(1);  // the parent is gone
}

// --- 5. COMMAND ---

// Every set emptied. Nothing COMMAND executes regains CAP_SYS_ADMIN, which could
// unmount what hides the host: uid 0 gains no capabilities at exec (root's COMMAND would
// otherwise hold them all in the namespace), and none is granted by a file's
// capabilities (a program with others, ping's CAP_NET_RAW, still runs).
void drop_capabilities() {
  if (::prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) < 0 ||
      ::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0)
    die(fmt::format("cannot keep capabilities from COMMAND: {}", std::strerror(errno)));
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capset, &header, data) < 0)
    die(fmt::format("cannot drop the namespace's capabilities: {}", std::strerror(errno)));
}

// COMMAND's file in $PATH as a shell finds it: the first executable regular file, else
// the first that exists (its exec then says why it cannot run); directories of PATH that
// the user cannot search are passed over (execvp would report EACCES for them, and a
// command found nowhere as "Permission denied"). "" when there is none.
std::string search_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  const std::string dirs = env ? env : "/usr/local/bin:/usr/bin:/bin";
  std::string first_existing;
  for (size_t start = 0;;) {
    const size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string path = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0) return path;
      if (first_existing.empty()) first_existing = path;
    }
    if (end == std::string::npos) return first_existing;
    start = end + 1;
  }
}

[[noreturn]] void exec_command(const SandboxSpec& spec) {
  if (spec.restore_sigpipe_default) ::signal(SIGPIPE, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &spec.restore_mask, nullptr);
  std::vector<char*> argv;
  for (const auto& a : spec.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string& name = spec.command[0];
  const std::string path = name.find('/') == std::string::npos ? search_path(name) : name;
  // As a shell says it: 127 when there is no such command, 126 when it cannot be run.
  if (path.empty()) die(fmt::format("{}: command not found", name), 127);
  ::execvp(path.c_str(), argv.data());  // a path: no search; a script without #! runs in sh
  die(fmt::format("{}: {}", name, std::strerror(errno)), errno == ENOENT ? 127 : 126);
}

// The exit status a shell would give for a wait status.
int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The PID namespace's init: COMMAND (PID 2) is forked, the signals below that reach
// init are passed on to it, every process that ends in the namespace is reaped, and
// COMMAND's end is init's, with COMMAND's status (128+N for signal N). The kernel then
// kills what is left in the namespace. The signals are blocked (as in wg-run since
// before spawn): a blocked signal reaches an init even with no handler.
[[noreturn]] void run_init(const SandboxSpec& spec) {
  sigset_t waited;
  ::sigemptyset(&waited);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) ::sigaddset(&waited, sig);
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);
  const pid_t command = ::fork();
  if (command < 0) die(fmt::format("cannot start COMMAND: {}", std::strerror(errno)));
  if (command == 0) exec_command(spec);
  ::close_range(3, ~0U, 0);  // init keeps nothing of wg-run's
  for (;;) {
    siginfo_t info{};
    const int sig = ::sigwaitinfo(&waited, &info);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      int status = 0;
      for (pid_t p; (p = ::waitpid(-1, &status, WNOHANG)) > 0;)
        if (p == command) _exit(exit_status(status));
      continue;
    }
    // The terminal's own (Ctrl-C, Ctrl-\, hang-up) reached COMMAND already, in the same
    // process group. SIGTERM never comes from a terminal: with SI_KERNEL it is the
    // parent-death signal, wg-run gone.
    if (info.si_code != SI_KERNEL || sig == SIGTERM) ::kill(command, sig);
  }
}

[[noreturn]] void child_main(const SandboxSpec& spec, int control, uid_t uid, gid_t gid) {
  if (spec.forget_secrets) spec.forget_secrets();
  const bool command_mode = spec.netns_path.empty();
  if (command_mode) {
    // wg-run gone: COMMAND is told (run_init); before 'G', the control socket says it.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    make_namespaces(uid, gid);
  } else {
    enter_netns(spec.netns_path);
  }

  std::unique_ptr<tunlinux::Tun> tun;
  build_network(spec, tun);
  if (command_mode) {
    mount_proc_and_sys();
    if (!spec.share_host_sockets) hide_host_sockets();
    set_up_names(spec);
    allow_ping();
  }
  std::error_code ec;
  wg::UniqueFd link = tunlinux::Tun::link_socket(ec);
  if (!link) die(fmt::format("cannot open an rtnetlink socket: {}", ec.message()));
  // Our own descriptor of the TUN: the Tun closes its own, and stops its thread.
  wg::UniqueFd tun_fd(::fcntl(tun->fd(), F_DUPFD_CLOEXEC, 3));
  if (!tun_fd) die(fmt::format("cannot duplicate the TUN descriptor: {}", std::strerror(errno)));
  tun.reset();
  send_devices(control, tun_fd.get(), link.get());
  tun_fd.reset();
  link.reset();
  if (!command_mode) _exit(0);

  char go = 0;
  ssize_t n;
  do n = ::read(control, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'G') _exit(1);  // wg-run failed after the hand-off (and said why)
  ::close(control);
  drop_capabilities();
  // COMMAND, the same user, may not read this process's memory (a copy of wg-run's).
  // Only now: its own /proc files become root's, and it wrote its uid_map there.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die(fmt::format("PR_SET_DUMPABLE: {}", std::strerror(errno)));
  run_init(spec);
}

}  // namespace

Child spawn(const SandboxSpec& spec) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    throw std::runtime_error(fmt::format("socketpair: {}", std::strerror(errno)));
  // COMMAND mode: the child is made in a new user namespace (which owns the PID
  // namespace) and a new PID namespace, as its init. A raw clone without a stack returns
  // in the child as fork does.
  const unsigned long flags = spec.netns_path.empty() ? CLONE_NEWUSER | CLONE_NEWPID : 0;
  const uid_t uid = ::geteuid();  // the child's own are unmapped until it maps them
  const gid_t gid = ::getegid();
  const pid_t pid =
      flags ? static_cast<pid_t>(::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr)) : ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    if (flags) throw std::runtime_error(userns_failure("create a user namespace", err));
    throw std::runtime_error(fmt::format("fork: {}", std::strerror(err)));
  }
  if (pid == 0) {
    ::close(sv[0]);
    child_main(spec, sv[1], uid, gid);
  }
  ::close(sv[1]);
  return Child{pid, wg::UniqueFd(sv[0])};
}

bool receive_devices(int control, wg::UniqueFd& tun, wg::UniqueFd& link) {
  char tag = 0;
  iovec iov{&tag, 1};
  alignas(cmsghdr) char space[CMSG_SPACE(2 * sizeof(int))]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = sizeof space;
  ssize_t n;
  do n = ::recvmsg(control, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1 || tag != 'T') return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
      continue;
    int fds[2];
    std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    tun.reset(fds[0]);
    link.reset(fds[1]);
  }
  return tun && link;
}

void release(int control) {
  const char go = 'G';
  (void)!::send(control, &go, 1, MSG_NOSIGNAL);
}

}  // namespace wgrun

// seccomp_probe: reads the seccomp filters of a running daemon (PTRACE_SECCOMP_GET_FILTER,
// root), loads them into children of its own and tries, one child per call, what the
// daemon's table must refuse and what the daemon needs. For tests/netns/seccomp_probe_test.sh.
//
//   seccomp_probe --program wg-netstack|wg-tun|wg-run [--refusal sigsys|eperm] --scratch DIR PID
//
// --refusal: how the filter refuses, sigsys (the call raises SIGSYS with si_code
// SYS_SECCOMP and the call's number: the WGNET_SANDBOX_KILL build, the default there) or
// eperm (the call fails with EPERM: the other builds, and --sandbox-log). DIR: an empty
// directory of the caller's, where the file calls act. Prints one line per call; exits 0
// when every call met its expectation, 1 when one did not, 2 on a usage or set-up error.
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int kSysSeccomp = 1;  // si_code of a SIGSYS raised by SECCOMP_RET_TRAP

using Filter = std::vector<sock_filter>;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "seccomp_probe: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(2);
}

// The filters of `pid`, oldest first. The main thread is stopped for the read
// (PTRACE_INTERRUPT); a wait it was in returns EINTR, which the daemons retry.
std::vector<Filter> read_filters(pid_t pid) {
  if (::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) die("PTRACE_SEIZE " + std::to_string(pid));
  if (::ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) != 0) die("PTRACE_INTERRUPT");
  int status = 0;
  if (::waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status)) die("waiting for the stop");
  // A signal-delivery stop holds a signal meant for the daemon: passed on at detach.
  const int pending = (status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP ? WSTOPSIG(status) : 0;
  std::vector<Filter> filters;
  for (unsigned long i = 0;; ++i) {
    const long n = ::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), nullptr);
    if (n < 0 && errno == ENOENT) break;
    if (n <= 0) die("PTRACE_SECCOMP_GET_FILTER");
    Filter f(static_cast<size_t>(n));
    if (::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), f.data()) != n)
      die("PTRACE_SECCOMP_GET_FILTER");
    filters.insert(filters.begin(), std::move(f));  // index 0 is the newest
  }
  if (::ptrace(PTRACE_DETACH, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(pending))) != 0)
    die("PTRACE_DETACH");
  return filters;
}

// What a child reports through its pipe.
struct Report {
  enum Kind : int { returned, trapped } kind;
  long value;  // returned: the call's result; trapped: si_syscall
  int err;     // returned: errno; trapped: si_code
};

int g_report_fd = -1;
cpu_set_t g_own_mask;  // the probe's CPUs: setting them again changes nothing

extern "C" void on_sigsys(int, siginfo_t* info, void*) {
  const Report r{Report::trapped, info->si_syscall, info->si_code};
  (void)!::write(g_report_fd, &r, sizeof r);
  ::_exit(0);
}

// How one call ended in a filtered child.
struct Outcome {
  bool reported = false;
  Report report{};
  int signal = 0;  // the child was killed by this signal before it reported
};

Outcome run_filtered(const std::vector<Filter>& filters, const std::function<long()>& call) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) die("pipe2");
  const pid_t child = ::fork();
  if (child < 0) die("fork");
  if (child == 0) {
    ::close(fds[0]);
    g_report_fd = fds[1];
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction sa{};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSYS, &sa, nullptr);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(3);
    for (const Filter& f : filters) {
      sock_fprog prog{static_cast<unsigned short>(f.size()), const_cast<sock_filter*>(f.data())};
      if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(4);
    }
    errno = 0;
    const long value = call();
    const Report r{Report::returned, value, errno};
    (void)!::write(g_report_fd, &r, sizeof r);
    ::_exit(0);
  }
  ::close(fds[1]);
  Outcome o;
  o.reported = ::read(fds[0], &o.report, sizeof o.report) == static_cast<ssize_t>(sizeof o.report);
  ::close(fds[0]);
  int status = 0;
  if (::waitpid(child, &status, 0) != child) die("waitpid");
  if (!o.reported) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 4) die("loading the filter in the child");
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  }
  return o;
}

// What one call must do under the filter.
enum class Expect {
  refused,    // the filter's denial (--refusal)
  enosys,     // fails with ENOSYS (clone3: glibc falls back to clone)
  succeeds,   // returns >= 0
  not_eperm,  // passes the filter; the kernel's answer is an error other than EPERM
  eacces,     // fails with EACCES (the filter's answer to a Unix socket)
  killed,     // the kernel kills the child with SIGSYS (a foreign system-call ABI)
  none,       // not tried for this program
};

struct Probe {
  const char* name;
  long nr;  // the system call tried, as SIGSYS reports it
  Expect netstack, tun;
  std::function<long()> call;
};

// wg-run's outer process: wg-netstack's sockets (the resolver's, for a reload's endpoint
// names), wg-tun's interface ioctls (its TUN), and no setns.
Expect wg_run_expects(const Probe& p) {
  if (std::string(p.name) == "setns(CLONE_NEWNET)") return Expect::refused;
  return p.netstack == Expect::refused ? p.tun : p.netstack;
}

std::string describe(const Outcome& o) {
  if (!o.reported) return o.signal ? std::string("killed by ") + strsignal(o.signal) : "exited without a report";
  if (o.report.kind == Report::trapped)
    return "SIGSYS (si_syscall " + std::to_string(o.report.value) + ", si_code " + std::to_string(o.report.err) + ")";
  if (o.report.value < 0) return std::string("failed: ") + std::strerror(o.report.err);
  return "returned " + std::to_string(o.report.value);
}

bool met(const Outcome& o, Expect e, bool sigsys, long nr) {
  const bool returned = o.reported && o.report.kind == Report::returned;
  const bool failed = returned && o.report.value < 0;
  switch (e) {
    case Expect::refused:
      if (sigsys)
        return o.reported && o.report.kind == Report::trapped && o.report.value == nr && o.report.err == kSysSeccomp;
      return failed && o.report.err == EPERM;
    case Expect::enosys: return failed && o.report.err == ENOSYS;
    case Expect::succeeds: return returned && o.report.value >= 0;
    case Expect::not_eperm: return failed && o.report.err != EPERM;
    case Expect::eacces: return failed && o.report.err == EACCES;
    case Expect::killed: return !o.reported && o.signal == SIGSYS;
    case Expect::none: return true;
  }
  return false;
}

const char* expectation(Expect e, bool sigsys) {
  switch (e) {
    case Expect::refused: return sigsys ? "refused (SIGSYS)" : "refused (EPERM)";
    case Expect::enosys: return "ENOSYS";
    case Expect::succeeds: return "allowed";
    case Expect::not_eperm: return "allowed (the kernel's error)";
    case Expect::eacces: return "EACCES";
    case Expect::killed: return "killed (SIGSYS)";
    case Expect::none: return "";
  }
  return "";
}

long sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  return ::syscall(nr, a, b, c, d, e);
}
long ptr(const void* p) { return static_cast<long>(reinterpret_cast<uintptr_t>(p)); }

// A thread made and joined as every daemon makes its threads.
long make_thread() {
  pthread_t t;
  if (int rc = ::pthread_create(&t, nullptr, [](void*) -> void* { return nullptr; }, nullptr); rc != 0) {
    errno = rc;
    return -1;
  }
  ::pthread_join(t, nullptr);
  return 0;
}

// clone3 with struct clone_args' first version (64 bytes): a child that exits at once.
long try_clone3(uint64_t flags) {
  uint64_t args[8] = {flags, 0, 0, 0, SIGCHLD, 0, 0, 0};
  const long r = sys(SYS_clone3, ptr(args), sizeof args);
  if (r == 0) ::_exit(0);
  return r;
}

long try_clone(long flags) {
  const long r = sys(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (r == 0) ::_exit(0);
  return r;
}

// getpid through the i386 entry (int 0x80) and the x32 one.
long getpid_i386() {
  long r = 20;  // __NR_getpid of i386
  asm volatile("int $0x80" : "+a"(r) : : "r8", "r9", "r10", "r11", "memory");  // the compat entry may clear r8-r11
  return r;
}
long getpid_x32() { return sys(0x40000000L | SYS_getpid); }

// Each probe is a fresh child: the fixtures it uses are made before the filter.
std::vector<Probe> probes(const std::string& dir, pid_t daemon, int sock_fd, int pipe_fd, int tun_fd, int netns_fd,
                          int userns_fd) {
  static std::string file, fresh, other, dirname;
  file = dir + "/file";
  fresh = dir + "/fresh";
  other = dir + "/other";
  dirname = dir + "/dir";
  const char* f = file.c_str();
  const char* n = fresh.c_str();
  const char* o = other.c_str();
  const char* d = dirname.c_str();
  const long cwd = AT_FDCWD;
  const long parent = ::getpid();  // another process than the filtered child
  using E = Expect;
  auto sock = [](long family, long type, long proto) { return [=] { return sys(SYS_socket, family, type, proto); }; };
  return {
      // Refused in both daemons.
      {"clone(CLONE_NEWUSER|CLONE_NEWNET)", SYS_clone, E::refused, E::refused,
       [] { return try_clone(CLONE_NEWUSER | CLONE_NEWNET); }},
      {"clone(CLONE_NEWNS)", SYS_clone, E::refused, E::refused, [] { return try_clone(CLONE_NEWNS); }},
      {"clone(fork, no CLONE_THREAD)", SYS_clone, E::refused, E::refused, [] { return try_clone(0); }},
      {"clone3(CLONE_NEWUSER)", SYS_clone3, E::enosys, E::enosys, [] { return try_clone3(CLONE_NEWUSER); }},
      {"unshare(CLONE_NEWUSER|CLONE_NEWNET)", SYS_unshare, E::refused, E::refused,
       [] { return sys(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNET); }},
      {"socket(AF_NETLINK, NETLINK_NETFILTER)", SYS_socket, E::refused, E::refused,
       sock(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)},
      {"socket(AF_NETLINK, NETLINK_XFRM)", SYS_socket, E::refused, E::refused, sock(AF_NETLINK, SOCK_RAW, NETLINK_XFRM)},
      {"socket(AF_PACKET, SOCK_RAW)", SYS_socket, E::refused, E::refused, sock(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL))},
      {"socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)", SYS_socket, E::refused, E::refused,
       sock(AF_INET, SOCK_RAW, IPPROTO_ICMP)},
      {"socket(AF_INET6, SOCK_RAW, IPPROTO_RAW)", SYS_socket, E::refused, E::refused,
       sock(AF_INET6, SOCK_RAW, IPPROTO_RAW)},
      {"socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)", SYS_socket, E::refused, E::refused,
       sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)},
      {"socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)", SYS_socket, E::refused, E::refused,
       sock(AF_INET, SOCK_STREAM, IPPROTO_SCTP)},
      {"socket(AF_VSOCK)", SYS_socket, E::refused, E::refused, sock(AF_VSOCK, SOCK_STREAM, 0)},
      {"socket(AF_ALG)", SYS_socket, E::refused, E::refused, sock(AF_ALG, SOCK_SEQPACKET, 0)},
      {"socketpair(AF_INET)", SYS_socketpair, E::refused, E::refused,
       [] {
         static int sv[2];
         return sys(SYS_socketpair, AF_INET, SOCK_STREAM, 0, ptr(sv));
       }},
      {"ioctl(TIOCSTI) on a pipe", SYS_ioctl, E::refused, E::refused,
       [pipe_fd] {
         static const char c = 'x';
         return sys(SYS_ioctl, pipe_fd, TIOCSTI, ptr(&c));
       }},
      {"open(O_CREAT|O_WRONLY)", SYS_open, E::refused, E::refused,
       [n] { return sys(SYS_open, ptr(n), O_CREAT | O_WRONLY | O_CLOEXEC, 0600); }},
      {"open(O_CREAT) read-only", SYS_open, E::refused, E::refused,
       [n] { return sys(SYS_open, ptr(n), O_CREAT | O_RDONLY | O_CLOEXEC, 0600); }},
      {"open(O_WRONLY)", SYS_open, E::refused, E::refused, [f] { return sys(SYS_open, ptr(f), O_WRONLY | O_CLOEXEC); }},
      {"open(O_RDWR)", SYS_open, E::refused, E::refused, [f] { return sys(SYS_open, ptr(f), O_RDWR | O_CLOEXEC); }},
      {"open(O_TRUNC)", SYS_open, E::refused, E::refused,
       [f] { return sys(SYS_open, ptr(f), O_RDONLY | O_TRUNC | O_CLOEXEC); }},
      {"openat(O_CREAT|O_WRONLY)", SYS_openat, E::refused, E::refused,
       [n, cwd] { return sys(SYS_openat, cwd, ptr(n), O_CREAT | O_WRONLY | O_CLOEXEC, 0600); }},
      {"openat(O_WRONLY)", SYS_openat, E::refused, E::refused,
       [f, cwd] { return sys(SYS_openat, cwd, ptr(f), O_WRONLY | O_CLOEXEC); }},
      {"openat(O_RDWR)", SYS_openat, E::refused, E::refused,
       [f, cwd] { return sys(SYS_openat, cwd, ptr(f), O_RDWR | O_CLOEXEC); }},
      {"openat(O_TRUNC)", SYS_openat, E::refused, E::refused,
       [f, cwd] { return sys(SYS_openat, cwd, ptr(f), O_RDONLY | O_TRUNC | O_CLOEXEC); }},
      {"openat(O_TMPFILE)", SYS_openat, E::refused, E::refused,
       [cwd, dir] { return sys(SYS_openat, cwd, ptr(dir.c_str()), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600); }},
      {"creat", SYS_creat, E::refused, E::refused, [n] { return sys(SYS_creat, ptr(n), 0600); }},
      {"mkdir", SYS_mkdir, E::refused, E::refused, [d] { return sys(SYS_mkdir, ptr(d), 0700); }},
      {"mkdirat", SYS_mkdirat, E::refused, E::refused, [d, cwd] { return sys(SYS_mkdirat, cwd, ptr(d), 0700); }},
      {"rename", SYS_rename, E::refused, E::refused, [f, o] { return sys(SYS_rename, ptr(f), ptr(o)); }},
      {"renameat2", SYS_renameat2, E::refused, E::refused,
       [f, o, cwd] { return sys(SYS_renameat2, cwd, ptr(f), cwd, ptr(o), 0); }},
      {"symlink", SYS_symlink, E::refused, E::refused, [f, o] { return sys(SYS_symlink, ptr(f), ptr(o)); }},
      {"symlinkat", SYS_symlinkat, E::refused, E::refused, [f, o, cwd] { return sys(SYS_symlinkat, ptr(f), cwd, ptr(o)); }},
      {"link", SYS_link, E::refused, E::refused, [f, o] { return sys(SYS_link, ptr(f), ptr(o)); }},
      {"linkat", SYS_linkat, E::refused, E::refused,
       [f, o, cwd] { return sys(SYS_linkat, cwd, ptr(f), cwd, ptr(o), 0); }},
      {"unlinkat", SYS_unlinkat, E::refused, E::refused, [f, cwd] { return sys(SYS_unlinkat, cwd, ptr(f), 0); }},
      {"rmdir", SYS_rmdir, E::refused, E::refused, [d] { return sys(SYS_rmdir, ptr(d)); }},
      {"prlimit64 on another process", SYS_prlimit64, E::refused, E::refused,
       [parent] {
         static rlimit old;
         return sys(SYS_prlimit64, parent, RLIMIT_NOFILE, 0, ptr(&old));
       }},
      {"sched_setaffinity on another process", SYS_sched_setaffinity, E::refused, E::refused,
       [parent] { return sys(SYS_sched_setaffinity, parent, sizeof g_own_mask, ptr(&g_own_mask)); }},
      // Read only, and a thread's own TID must pass (pthread_getattr_np).
      {"sched_getaffinity of another process", SYS_sched_getaffinity, E::succeeds, E::succeeds,
       [parent] {
         static cpu_set_t set;
         return sys(SYS_sched_getaffinity, parent, sizeof set, ptr(&set));
       }},
      {"kill another process", SYS_kill, E::refused, E::refused, [parent] { return sys(SYS_kill, parent, 0); }},
      {"execve", SYS_execve, E::refused, E::refused,
       [] {
         static const char* argv[] = {"/nonexistent", nullptr};
         return sys(SYS_execve, ptr(argv[0]), ptr(argv), 0);
       }},
      {"ptrace", SYS_ptrace, E::refused, E::refused, [parent] { return sys(SYS_ptrace, PTRACE_INTERRUPT, parent, 0, 0); }},
      {"process_vm_readv", SYS_process_vm_readv, E::refused, E::refused,
       [parent] { return sys(SYS_process_vm_readv, parent, 0, 0, 0, 0); }},
      {"mount", SYS_mount, E::refused, E::refused,
       [] { return sys(SYS_mount, 0, ptr("/nonexistent"), 0, MS_REMOUNT, 0); }},
      {"bpf", SYS_bpf, E::refused, E::refused, [] { return sys(SYS_bpf, 0, 0, 0); }},
      {"io_uring_setup", SYS_io_uring_setup, E::refused, E::refused, [] { return sys(SYS_io_uring_setup, 0, 0); }},
      {"userfaultfd", SYS_userfaultfd, E::refused, E::refused, [] { return sys(SYS_userfaultfd, O_CLOEXEC); }},
      {"setns (a user namespace)", SYS_setns, E::refused, E::refused,
       [userns_fd] { return sys(SYS_setns, userns_fd, CLONE_NEWUSER); }},
      {"getpid through the x32 entry", 0x40000000L | SYS_getpid, E::killed, E::killed, getpid_x32},
      {"getpid through the i386 entry", 20, E::killed, E::killed, getpid_i386},
      // What wg-tun needs and wg-netstack does not.
      {"setns(CLONE_NEWNET)", SYS_setns, E::refused, E::succeeds,
       [netns_fd] { return sys(SYS_setns, netns_fd, CLONE_NEWNET); }},
      {"ioctl(TUNGETIFF)", SYS_ioctl, E::refused, E::not_eperm,
       [tun_fd] {
         static ifreq ifr;
         return sys(SYS_ioctl, tun_fd, TUNGETIFF, ptr(&ifr));
       }},
      {"ioctl(SIOCGIFFLAGS)", SYS_ioctl, E::refused, E::succeeds,
       [sock_fd] {
         static ifreq ifr;
         std::strcpy(ifr.ifr_name, "lo");
         return sys(SYS_ioctl, sock_fd, SIOCGIFFLAGS, ptr(&ifr));
       }},
      // What wg-netstack needs and wg-tun does not: TCP, UDP from the resolver.
      {"socket(AF_INET, SOCK_STREAM)", SYS_socket, E::succeeds, E::refused,
       sock(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP)},
      {"socket(AF_INET6, SOCK_STREAM, 0)", SYS_socket, E::succeeds, E::refused, sock(AF_INET6, SOCK_STREAM, 0)},
      {"socket(AF_INET6, SOCK_DGRAM, 0)", SYS_socket, E::succeeds, E::refused, sock(AF_INET6, SOCK_DGRAM, 0)},
      // A Unix socket could connect() to another daemon's UAPI socket: glibc's nscd
      // client gets EACCES from wg-netstack's filter, wg-tun's refuses it outright.
      {"socket(AF_UNIX, SOCK_STREAM)", SYS_socket, E::eacces, E::refused, sock(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)},
      // Used by neither.
      {"socketpair(AF_UNIX)", SYS_socketpair, E::refused, E::refused,
       [] {
         static int sv[2];
         return sys(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, ptr(sv));
       }},
      {"ioctl(FIONREAD)", SYS_ioctl, E::refused, E::refused,
       [sock_fd] {
         static int avail;
         return sys(SYS_ioctl, sock_fd, FIONREAD, ptr(&avail));
       }},
      // What both need.
      {"a thread (pthread_create)", SYS_clone, E::succeeds, E::succeeds, make_thread},
      {"clone3 (a plain fork)", SYS_clone3, E::enosys, E::enosys, [] { return try_clone3(0); }},
      {"socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP)", SYS_socket, E::succeeds, E::succeeds,
       sock(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP)},
      {"socket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP)", SYS_socket, E::succeeds, E::succeeds,
       sock(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP)},
      {"socket(AF_NETLINK, NETLINK_ROUTE)", SYS_socket, E::succeeds, E::succeeds,
       sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)},
      {"ioctl(SIOCGIFINDEX)", SYS_ioctl, E::succeeds, E::succeeds,
       [sock_fd] {
         static ifreq ifr;
         std::strcpy(ifr.ifr_name, "lo");
         return sys(SYS_ioctl, sock_fd, SIOCGIFINDEX, ptr(&ifr));
       }},
      {"ioctl(FIONBIO)", SYS_ioctl, E::succeeds, E::succeeds,
       [sock_fd] {
         static int on = 1;
         return sys(SYS_ioctl, sock_fd, FIONBIO, ptr(&on));
       }},
      {"open(O_RDONLY)", SYS_open, E::succeeds, E::succeeds, [f] { return sys(SYS_open, ptr(f), O_RDONLY | O_CLOEXEC); }},
      {"openat(O_RDONLY)", SYS_openat, E::succeeds, E::succeeds,
       [f, cwd] { return sys(SYS_openat, cwd, ptr(f), O_RDONLY | O_CLOEXEC | O_NONBLOCK); }},
      {"unlink (the UAPI socket's removal)", SYS_unlink, E::succeeds, E::succeeds, [f] { return sys(SYS_unlink, ptr(f)); }},
      {"prlimit64 on itself (pid 0)", SYS_prlimit64, E::succeeds, E::succeeds,
       [] {
         static rlimit old;
         return sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, ptr(&old));
       }},
      {"sched_getaffinity of itself (pid 0)", SYS_sched_getaffinity, E::succeeds, E::succeeds,
       [] {
         static cpu_set_t set;
         return sys(SYS_sched_getaffinity, 0, sizeof set, ptr(&set));
       }},
      {"kill to the daemon's own process (signal 0)", SYS_kill, E::succeeds, E::succeeds,
       [daemon] { return sys(SYS_kill, daemon, 0); }},
  };
}

// The file calls' fixtures: DIR/file (a file) and nothing else.
void reset_scratch(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove_all(e.path(), ec);
  FILE* f = std::fopen((dir + "/file").c_str(), "w");
  if (!f) die("creating " + dir + "/file");
  std::fputs("probe\n", f);
  std::fclose(f);
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: seccomp_probe --program wg-netstack|wg-tun|wg-run [--refusal sigsys|eperm] --scratch DIR PID\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string program, dir;
#ifdef WGNET_SANDBOX_KILL
  bool sigsys = true;
#else
  bool sigsys = false;
#endif
  pid_t pid = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--program" && i + 1 < argc) program = argv[++i];
    else if (a == "--scratch" && i + 1 < argc) dir = argv[++i];
    else if (a == "--refusal" && i + 1 < argc) {
      const std::string r = argv[++i];
      if (r != "sigsys" && r != "eperm") usage();
      sigsys = r == "sigsys";
    } else if (pid == 0 && !a.empty() && a[0] != '-') pid = static_cast<pid_t>(std::atoi(a.c_str()));
    else usage();
  }
  if ((program != "wg-netstack" && program != "wg-tun" && program != "wg-run") || dir.empty() || pid <= 0) usage();
  const bool tun = program == "wg-tun", run = program == "wg-run";

  if (::sched_getaffinity(0, sizeof g_own_mask, &g_own_mask) != 0) die("sched_getaffinity");
  const std::vector<Filter> filters = read_filters(pid);
  if (filters.empty()) {
    std::printf("FAIL: process %d has no seccomp filter\n", pid);
    return 1;
  }
  size_t insns = 0;
  for (auto& f : filters) insns += f.size();
  std::printf("%s (pid %d): %zu filter(s), %zu instructions; refusal expected as %s\n", program.c_str(), pid,
              filters.size(), insns, sigsys ? "SIGSYS" : "EPERM");

  // Descriptors the calls act on, made before any filter.
  const int sock_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int pipe_fds[2];
  if (sock_fd < 0 || ::pipe2(pipe_fds, O_CLOEXEC) != 0) die("fixtures");
  const int tun_fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);  // not attached: TUNGETIFF says EBADFD
  const int netns_fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int userns_fd = ::open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
  if (tun_fd < 0 || netns_fd < 0 || userns_fd < 0) die("fixtures");

  int failures = 0;
  for (const Probe& p : probes(dir, pid, sock_fd, pipe_fds[0], tun_fd, netns_fd, userns_fd)) {
    const Expect e = tun ? p.tun : run ? wg_run_expects(p) : p.netstack;
    if (e == Expect::none) continue;
    reset_scratch(dir);
    const Outcome o = run_filtered(filters, p.call);
    const bool ok = met(o, e, sigsys, p.nr);
    if (!ok) ++failures;
    std::printf("%s: %s: expected %s, got %s\n", ok ? "ok" : "FAIL", p.name, expectation(e, sigsys),
                describe(o).c_str());
  }
  reset_scratch(dir);
  std::filesystem::remove(dir + "/file");
  std::printf("%s: %d of the calls did not meet their expectation\n", program.c_str(), failures);
  return failures ? 1 : 0;
}

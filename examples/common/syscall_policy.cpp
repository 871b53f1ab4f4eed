// The seccomp tables of the confined programs. What both daemons share comes first; then
// each program's own table. An entry names the call site that needs it; a call nobody
// names is refused. Integer arguments are compared on their low 32 bits, as the kernel
// reads them.
#include "syscall_policy.hpp"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <iterator>
#include <stdexcept>

namespace programs {
namespace {

constexpr uint64_t kInt = 0xffffffff;  // an int argument: its low 32 bits
constexpr uint64_t kSocketType = 0xf;  // SOCK_STREAM, SOCK_DGRAM, ... without SOCK_NONBLOCK/SOCK_CLOEXEC
// Every namespace clone() can make (CLONE_NEWTIME exists only for clone3 and unshare,
// which are refused).
constexpr uint64_t kCloneNamespaces =
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
// What makes an open() write, create or truncate (O_TMPFILE needs a write mode too).
constexpr uint64_t kOpenWrites = O_ACCMODE | O_CREAT | O_TRUNC;

constexpr ArgIs is(unsigned index, uint64_t value) { return {index, kInt, value, false}; }
constexpr ArgIs masked(unsigned index, uint64_t mask, uint64_t value) { return {index, mask, value, false}; }
constexpr ArgIs self(unsigned index) { return {index, kInt, 0, true}; }
SyscallRule ioctl_request(unsigned long request) { return {"ioctl", {is(1, request)}}; }

// Both daemons, any arguments: glibc and libstdc++ (memory, threads, time, signals),
// Asio's reactor, the sockets they hold (the WireGuard port, listeners, the UAPI socket
// and its peer's credentials), descriptors of files they may read.
const char* const kCommonCalls[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mlock", "munlock", "membarrier",
    // threads and their life (clone and clone3: the rules below)
    "set_robust_list", "get_robust_list", "rseq", "futex", "sched_yield", "gettid", "getpid", "exit", "exit_group",
    "set_tid_address",
    // time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    // signals (kill and tgkill: the rules below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "restart_syscall",
    // descriptors; reading files (open and openat: the rules below)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "lseek", "fstat", "newfstatat", "statx",
    "stat", "lstat", "fcntl", "dup", "dup2", "dup3", "pipe2", "getdents64", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getcwd", "fstatfs", "statfs",
    // readiness
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2", "timerfd_create",
    "timerfd_settime", "timerfd_gettime", "poll", "ppoll", "select", "pselect6",
    // sockets already made (socket: the rules of each program)
    "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername", "setsockopt", "getsockopt",
    "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
    // identity, randomness, the system
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getrandom", "uname",
    "sysinfo", "getrusage", "getpriority",
};

// Both daemons, with these arguments only.
const SyscallRule kCommonRules[] = {
    // pthread_create (std::thread, the pipeline's workers, Asio): glibc tries clone3, whose
    // flags lie in memory a filter cannot read, and on ENOSYS calls clone.
    {"clone3", {}, ENOSYS},
    // ... clone with a thread's flags: CLONE_THREAD, no namespace (no fork either).
    {"clone", {masked(0, kCloneNamespaces | CLONE_THREAD, CLONE_THREAD)}},
    // Reading only: the config and key files on SIGHUP (wg-netstack), the resolver's files,
    // /dev/null (wg/uapi_server.cpp: the spare descriptor), glibc's malloc
    // (/proc/sys/vm/overcommit_memory) and get_nprocs (/sys/devices/system/cpu/online),
    // OpenSSL's configuration at its first use.
    {"openat", {masked(2, kOpenWrites, O_RDONLY)}},
    {"open", {masked(1, kOpenWrites, O_RDONLY)}},
    // UapiSocket::close (examples/common/uapi_socket.cpp): the UAPI socket's file at
    // shutdown. glibc's unlink() is this call; unlinkat, rmdir and rename stay refused.
    {"unlink"},
    // glibc's getrlimit/setrlimit: this process only.
    {"prlimit64", {is(0, 0)}},
    // glibc's get_nprocs and sysconf (pid 0), and pthread_getattr_np, which ASan calls in
    // every new thread (that thread's TID, which no rule can name): any pid, read only.
    {"sched_getaffinity"},
    // Signals to this process only: raise() and the daemons' own stop signal (wg-tun's
    // SIGUSR1 when its interface is deleted).
    {"kill", {self(0)}},
    {"tgkill", {self(0)}},
    // Thread names (pthread_setname_np), for ps and the tests.
    {"prctl", {is(0, PR_SET_NAME)}},
    {"prctl", {is(0, PR_GET_NAME)}},
    // Asio: a socket's non-blocking mode.
    ioctl_request(FIONBIO),
};

// socket(family, type, protocol) of one type with the protocol 0 or `protocol`.
void add_socket(std::vector<SyscallRule>& rules, int family, int type, int protocol) {
  for (int p : {0, protocol})
    rules.push_back({"socket", {is(0, family), masked(1, kSocketType, type), is(2, p)}});
}

// UDP and TCP over IPv4 and IPv6 and routing netlink: bind/linux.cpp (the WireGuard
// port, also when `wg set` changes it) and glibc's getaddrinfo for endpoint names (DNS
// over UDP and TCP, AI_ADDRCONFIG's rtnetlink). No Unix socket: connect() to a path is
// beyond Landlock, and would reach another daemon's UAPI socket (its private key, for
// the same uid). glibc's nscd client gets EACCES and asks DNS itself.
void add_udp_and_resolver_sockets(std::vector<SyscallRule>& r) {
  for (int family : {AF_INET, AF_INET6}) {
    add_socket(r, family, SOCK_DGRAM, IPPROTO_UDP);
    add_socket(r, family, SOCK_STREAM, IPPROTO_TCP);
  }
  r.push_back({"socket", {is(0, AF_UNIX)}, EACCES});
  r.push_back({"socket", {is(0, AF_NETLINK), is(2, NETLINK_ROUTE)}});
}

SyscallTable wg_netstack() {
  SyscallTable t;
  std::vector<SyscallRule>& r = t.rules;
  // Also Asio's: UDP (forwards, SOCKS5 UDP ASSOCIATE), TCP (the listeners: SOCKS5, HTTP,
  // health, forwards).
  add_udp_and_resolver_sockets(r);
  // glibc's getaddrinfo: an Endpoint's IPv6 scope given by interface name (if_nametoindex).
  r.push_back(ioctl_request(SIOCGIFINDEX));
  return t;
}

SyscallTable wg_tun() {
  SyscallTable t;
  std::vector<SyscallRule>& r = t.rules;
  // bind/linux.cpp open_socket: the UDP sockets, opened when the interface comes up and
  // when `wg set` changes the listen port.
  r.push_back({"socket", {is(0, AF_INET), masked(1, kSocketType, SOCK_DGRAM), is(2, IPPROTO_UDP)}});
  r.push_back({"socket", {is(0, AF_INET6), masked(1, kSocketType, SOCK_DGRAM), is(2, IPPROTO_UDP)}});
  // tunlinux/tun.cpp link_socket_in: an rtnetlink socket in the namespace the interface
  // moved to, made on a thread that enters it (root only: CAP_SYS_ADMIN).
  r.push_back({"socket", {is(0, AF_NETLINK), is(2, NETLINK_ROUTE)}});
  r.push_back({"setns", {{}, is(1, CLONE_NEWNET)}});
  // tunlinux/tun.cpp follow_move: where the interface went (TUNGETDEVNETNS) and its name
  // there (TUNGETIFF, SIOCGIFINDEX).
  r.push_back(ioctl_request(TUNGETDEVNETNS));
  r.push_back(ioctl_request(TUNGETIFF));
  r.push_back(ioctl_request(SIOCGIFINDEX));
  // tunlinux/tun.cpp query_link: the interface's state when the device subscribes to its
  // events, after a missed event or a move.
  r.push_back(ioctl_request(SIOCGIFNAME));
  r.push_back(ioctl_request(SIOCGIFFLAGS));
  r.push_back(ioctl_request(SIOCGIFMTU));
  return t;
}

SyscallTable wg_run() {
  SyscallTable t;
  std::vector<SyscallRule>& r = t.rules;
  add_udp_and_resolver_sockets(r);  // the WireGuard port; a reload's endpoint names
  // tunlinux/tun.cpp query_link: the TUN's state after a missed event.
  r.push_back(ioctl_request(TUNGETIFF));
  r.push_back(ioctl_request(SIOCGIFINDEX));
  r.push_back(ioctl_request(SIOCGIFNAME));
  r.push_back(ioctl_request(SIOCGIFFLAGS));
  r.push_back(ioctl_request(SIOCGIFMTU));
  // main.cpp: COMMAND's end (waitpid). Signals to COMMAND: restrict_syscalls' child.
  t.any_arguments.push_back("wait4");
  return t;
}

// Each program's own table; a Program without one is a build warning (-Wswitch).
SyscallTable own_table(Program program) {
  switch (program) {
    case Program::wg_netstack: return wg_netstack();
    case Program::wg_tun: return wg_tun();
    case Program::wg_run: return wg_run();
  }
  throw std::logic_error("sandbox: no system-call table for this program");
}

}  // namespace

SyscallTable syscall_table(Program program) {
  SyscallTable t = own_table(program);
  t.any_arguments.insert(t.any_arguments.begin(), std::begin(kCommonCalls), std::end(kCommonCalls));
  t.rules.insert(t.rules.begin(), std::begin(kCommonRules), std::end(kCommonRules));
  return t;
}

}  // namespace programs

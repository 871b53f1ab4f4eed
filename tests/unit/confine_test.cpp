// The daemons' confinement (examples/common/confine.*), each case in a forked child so
// that the test process itself stays free: Landlock leaves exactly the files the rules
// name, and the system-call allow-list answers a call outside it as the denial says.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <tuple>

#include "confine.hpp"
#include "skip.hpp"

namespace {

namespace fs = std::filesystem;

// Runs `body` in a child whose stderr goes to `err_path`; the child's wait status.
int in_child(const std::function<int()>& body, const std::string& err_path) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) ::dup2(fd, 2);
    int rc = 100;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      rc = 101;
    }
    std::_Exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/wgnet-confine.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

bool landlock_available() { return ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U) > 0; }

int open_errno(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  return errno;
}

}  // namespace

TEST_CASE("confine: Landlock leaves only the files the rules name", "[confine]") {
  if (!landlock_available()) WGNET_SKIP("this kernel has no Landlock");
  TempDir t;
  fs::create_directories(t.path / "conf");
  fs::create_directories(t.path / "other");
  fs::create_directories(t.path / "run");
  write_file(t.path / "conf" / "wg0.conf", "a");
  write_file(t.path / "other" / "wg1.conf", "b");
  write_file(t.path / "lone.key", "c");
  write_file(t.path / "run" / "wg0.sock", "");
  const std::string err = (t.path / "stderr").string();

  const int status = in_child(
      [&] {
        programs::FileRules rules;
        rules.read_beneath.push_back((t.path / "conf").string());
        rules.read_files.push_back((t.path / "lone.key").string());
        rules.remove_in.push_back((t.path / "run").string());
        rules.read_files.push_back((t.path / "absent").string());  // left out, not an error
        auto c = programs::restrict_files(rules);
        if (c.abi <= 0) return 2;
        int bad = 0;
        auto expect = [&bad](const char* what, int got, int want) {
          if (got != want) {
            std::fprintf(stderr, "%s: errno %d, expected %d\n", what, got, want);
            ++bad;
          }
        };
        expect("read beneath an allowed directory", open_errno(t.path / "conf" / "wg0.conf", O_RDONLY), 0);
        expect("read another directory's file", open_errno(t.path / "other" / "wg1.conf", O_RDONLY), EACCES);
        expect("read a single allowed file", open_errno(t.path / "lone.key", O_RDONLY), 0);
        expect("write an allowed file", open_errno(t.path / "lone.key", O_WRONLY), EACCES);
        expect("create a file", open_errno(t.path / "conf" / "new", O_WRONLY | O_CREAT), EACCES);
        expect("read /etc/passwd", open_errno("/etc/passwd", O_RDONLY), EACCES);
        expect("remove in the socket directory", ::unlink((t.path / "run" / "wg0.sock").c_str()) == 0 ? 0 : errno, 0);
        expect("remove elsewhere", ::unlink((t.path / "other" / "wg1.conf").c_str()) == 0 ? 0 : errno, EACCES);
        const char* argv[] = {"/bin/true", nullptr};
        ::execv("/bin/true", const_cast<char* const*>(argv));
        expect("execute /bin/true", errno, EACCES);
        return bad == 0 ? 0 : 3;
      },
      err);
  INFO(slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent was not confined.
  CHECK(open_errno(t.path / "other" / "wg1.conf", O_RDONLY) == 0);
}

TEST_CASE("confine: Landlock refuses once a second thread runs", "[confine]") {
  if (!landlock_available()) WGNET_SKIP("this kernel has no Landlock");
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  const int status = in_child(
      [] {
        std::thread idle([] { ::pause(); });
        idle.detach();
        auto c = programs::restrict_files({});
        std::fprintf(stderr, "%s\n", c.message.c_str());
        return c.abi == 0 ? 0 : 1;
      },
      err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(slurp(err).find("threads already run") != std::string::npos);
}

TEST_CASE("confine: a call outside the allow-list fails with EPERM", "[confine]") {
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  for (auto denial : {programs::SyscallDenial::eperm, programs::SyscallDenial::log}) {
    const int status = in_child(
        [denial] {
          programs::restrict_syscalls(programs::Program::wg_netstack, denial);
          // Allowed: what the daemons do all day.
          int fds[2];
          if (::pipe2(fds, O_CLOEXEC) != 0 || ::write(fds[1], "x", 1) != 1) return 2;
          // Not allowed: running a program, and signalling another process.
          const char* argv[] = {"/bin/true", nullptr};
          ::execv("/bin/true", const_cast<char* const*>(argv));
          if (errno != EPERM) return 3;
          if (::kill(::getppid(), 0) == 0 || errno != EPERM) return 4;
          if (::kill(::getpid(), 0) != 0) return 5;  // itself: allowed
          return 0;
        },
        err);
    INFO(slurp(err));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  // Seccomp shown in /proc: a filter and no_new_privs.
  const int status = in_child(
      [] {
        programs::restrict_syscalls(programs::Program::wg_netstack, programs::SyscallDenial::eperm);
        std::ifstream in("/proc/self/status");
        std::string line;
        int seen = 0;
        while (std::getline(in, line))
          if (line == "Seccomp:\t2" || line == "NoNewPrivs:\t1") ++seen;
        return seen == 2 ? 0 : 6;
      },
      err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("confine: the tables check arguments", "[confine]") {
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  const std::string file = (t.path / "file").string();
  std::ofstream(file) << "x";
  for (auto program : {programs::Program::wg_netstack, programs::Program::wg_tun}) {
    const int status = in_child(
        [program, &file] {
          programs::restrict_syscalls(program, programs::SyscallDenial::eperm);
          // Threads: clone3 says ENOSYS, glibc falls back to clone with a thread's flags.
          bool ran = false;
          std::thread([&ran] { ran = true; }).join();
          if (!ran) return 2;
          if (::syscall(SYS_clone3, nullptr, 0) != -1 || errno != ENOSYS) return 3;
          // A fork or a namespace is refused.
          if (::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) != -1 || errno != EPERM) return 4;
          if (::syscall(SYS_unshare, CLONE_NEWUSER) != -1 || errno != EPERM) return 5;
          // The WireGuard port's socket, and no other family.
          const int udp = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
          if (udp < 0) return 6;
          ::close(udp);
          if (::socket(AF_PACKET, SOCK_RAW, 0) != -1 || errno != EPERM) return 7;
          if (::socket(AF_INET, SOCK_RAW, IPPROTO_UDP) != -1 || errno != EPERM) return 8;
          // Files: read, never written or made.
          const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) return 9;
          ::close(fd);
          if (::open(file.c_str(), O_WRONLY | O_CLOEXEC) != -1 || errno != EPERM) return 10;
          if (::open((file + "2").c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600) != -1 || errno != EPERM) return 11;
          if (::syscall(SYS_unlinkat, AT_FDCWD, file.c_str(), 0) != -1 || errno != EPERM) return 12;
          // Another process's limits.
          rlimit old{};
          if (::prlimit(::getppid(), RLIMIT_NOFILE, nullptr, &old) != -1 || errno != EPERM) return 13;
          if (::prlimit(0, RLIMIT_NOFILE, nullptr, &old) != 0) return 14;
          return 0;
        },
        err);
    INFO(slurp(err));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(fs::exists(file));
}

TEST_CASE("confine: the kill build names the denied call and exits 159", "[confine]") {
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  const int status = in_child(
      [] {
        programs::restrict_syscalls(programs::Program::wg_netstack, programs::SyscallDenial::kill);
        ::syscall(SYS_execve, "/bin/true", nullptr, nullptr);
        return 0;
      },
      err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 159);
  CHECK(slurp(err).find("sandbox: system call " + std::to_string(SYS_execve) + " is not on the allow-list") !=
        std::string::npos);
}

namespace {

// The hexadecimal value of a /proc/self/status field ("CapEff", ...), or ~0 if missing.
uint64_t status_hex(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":\t", 0) == 0) return std::stoull(line.substr(field.size() + 2), nullptr, 16);
  return ~0ULL;
}

}  // namespace

TEST_CASE("confine: become_user keeps exactly the capabilities asked for", "[confine][root]") {
  WGNET_REQUIRE_ROOT();
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  const int status = in_child(
      [] {
        programs::become_user("nobody", {CAP_NET_ADMIN, CAP_NET_BIND_SERVICE});
        const uint64_t kept = (1ULL << CAP_NET_ADMIN) | (1ULL << CAP_NET_BIND_SERVICE);
        int bad = 0;
        auto expect = [&bad](const char* what, uint64_t got, uint64_t want) {
          if (got != want) {
            std::fprintf(stderr, "%s: %llx, expected %llx\n", what, static_cast<unsigned long long>(got),
                         static_cast<unsigned long long>(want));
            ++bad;
          }
        };
        expect("CapEff", status_hex("CapEff"), kept);
        expect("CapPrm", status_hex("CapPrm"), kept);
        expect("CapInh", status_hex("CapInh"), 0);
        expect("CapAmb", status_hex("CapAmb"), 0);
        expect("CapBnd", status_hex("CapBnd"), kept);
        expect("uid", ::getuid() == 0 || ::geteuid() == 0, 0);
        expect("setuid(0)", ::setuid(0) == 0, 0);
        gid_t groups[4];
        expect("supplementary groups", static_cast<uint64_t>(::getgroups(4, groups)), 0);
        // What the kept capabilities are for: a port below 1024.
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(1023);
        expect("bind to 127.0.0.1:1023", ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno, 0);
        ::close(s);
        // What root could and this user cannot: a file only root may read.
        expect("open /etc/shadow", open_errno("/etc/shadow", O_RDONLY), EACCES);
        return bad == 0 ? 0 : 3;
      },
      err);
  INFO(slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("confine: become_user refuses root, a missing user and a second thread", "[confine][root]") {
  WGNET_REQUIRE_ROOT();
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  for (auto [user, with_thread, message] :
       {std::tuple{"root", false, "that is root"}, std::tuple{"no-such-user-wgnet", false, "no such user"},
        std::tuple{"nobody", true, "threads already run"}}) {
    const int status = in_child(
        [user = user, with_thread = with_thread] {
          if (with_thread) std::thread([] { ::pause(); }).detach();
          programs::become_user(user, {CAP_NET_ADMIN});
          return 0;
        },
        err);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 101);  // in_child: an exception
    CHECK(slurp(err).find(message) != std::string::npos);
  }
}

// wg-tun's rules as root: /dev/net/tun opened read-write (more queues), removing in the
// socket directory; nothing else read, and no other device.
TEST_CASE("confine: a device rule allows that device read-write, and nothing else", "[confine][root]") {
  WGNET_REQUIRE_ROOT();
  if (!landlock_available()) WGNET_SKIP("this kernel has no Landlock");
  TempDir t;
  fs::create_directories(t.path / "run");
  write_file(t.path / "run" / "wg0.sock", "");
  const std::string err = (t.path / "stderr").string();
  const int status = in_child(
      [&] {
        programs::FileRules rules;
        rules.devices.push_back("/dev/net/tun");
        rules.remove_in.push_back((t.path / "run").string());
        if (programs::restrict_files(rules).abi <= 0) return 2;
        int bad = 0;
        auto expect = [&bad](const char* what, int got, int want) {
          if (got != want) {
            std::fprintf(stderr, "%s: errno %d, expected %d\n", what, got, want);
            ++bad;
          }
        };
        expect("open /dev/net/tun read-write", open_errno("/dev/net/tun", O_RDWR), 0);
        expect("open /dev/null", open_errno("/dev/null", O_RDWR), EACCES);
        expect("read /etc/shadow", open_errno("/etc/shadow", O_RDONLY), EACCES);
        expect("create in the socket directory", open_errno(t.path / "run" / "new", O_WRONLY | O_CREAT), EACCES);
        expect("remove in the socket directory", ::unlink((t.path / "run" / "wg0.sock").c_str()) == 0 ? 0 : errno, 0);
        return bad == 0 ? 0 : 3;
      },
      err);
  INFO(slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// Root that stays root: only the kept capabilities, and uid 0 wins nothing back (no
// /etc/shadow of someone else's, no capset, no setuid fix-up).
TEST_CASE("confine: drop_capabilities keeps root's uid but only the capabilities asked for", "[confine][root]") {
  WGNET_REQUIRE_ROOT();
  TempDir t;
  const std::string err = (t.path / "stderr").string();
  // A file root owns no longer, readable by its owner only: root gets in by CAP_DAC_OVERRIDE.
  write_file(t.path / "theirs", "x");
  REQUIRE(::chown((t.path / "theirs").c_str(), 65534, 65534) == 0);
  REQUIRE(::chmod((t.path / "theirs").c_str(), 0600) == 0);
  const int status = in_child(
      [&] {
        programs::drop_capabilities({CAP_NET_BIND_SERVICE});
        const uint64_t kept = 1ULL << CAP_NET_BIND_SERVICE;
        int bad = 0;
        auto expect = [&bad](const char* what, uint64_t got, uint64_t want) {
          if (got != want) {
            std::fprintf(stderr, "%s: %llx, expected %llx\n", what, static_cast<unsigned long long>(got),
                         static_cast<unsigned long long>(want));
            ++bad;
          }
        };
        expect("CapEff", status_hex("CapEff"), kept);
        expect("CapPrm", status_hex("CapPrm"), kept);
        expect("CapBnd", status_hex("CapBnd"), kept);
        expect("CapAmb", status_hex("CapAmb"), 0);
        expect("still uid 0", ::getuid(), 0);
        expect("another user's 0600 file", open_errno(t.path / "theirs", O_RDONLY), EACCES);
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2]{};
        data[0].effective = data[0].permitted = ~0U;
        expect("capset back to all", ::syscall(SYS_capset, &header, data) == 0, 0);
        expect("securebits locked", ::prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) == 0, 0);
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(1022);
        expect("bind to 127.0.0.1:1022", ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno, 0);
        ::close(s);
        return bad == 0 ? 0 : 3;
      },
      err);
  INFO(slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

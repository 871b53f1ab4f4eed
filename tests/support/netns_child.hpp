// A test body run in a forked child inside a new network namespace (root): the kernel
// TUN tests use it so that each case has its own interfaces and routes. The child
// reports a failure as text through a pipe; an alarm bounds it. Shared by the [root]
// tests of tests/unit/ (the kernel TUN, the core over it, the Linux Bind).
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <utility>

namespace wgtest {

// A failed expectation inside the child: thrown, caught by run_in_netns, reported.
struct ChildFailure {
  std::string what;
};

// A thread beside the child's test body that a failed EXPECT does not leave joinable:
// the unwinding runs `stop` (which must make `body` return, e.g. close what it blocks
// on) and joins. A joinable std::thread destroyed by the unwinding would call
// std::terminate, and the child would die of SIGABRT without the failure's message.
// `body` must not EXPECT itself (a throw on its thread terminates too): it leaves what
// it saw for the test body to check after join().
class StoppingThread {
public:
  StoppingThread(std::function<void()> body, std::function<void()> stop)
      : stop_(std::move(stop)), thread_(std::move(body)) {}
  ~StoppingThread() {
    if (thread_.joinable()) {
      stop_();
      thread_.join();
    }
  }
  StoppingThread(const StoppingThread&) = delete;
  StoppingThread& operator=(const StoppingThread&) = delete;
  void join() { thread_.join(); }

private:
  std::function<void()> stop_;
  std::thread thread_;
};

#define EXPECT(cond)                                                                                  \
  do {                                                                                                \
    if (!(cond)) throw ::wgtest::ChildFailure{std::string("line ") + std::to_string(__LINE__) + ": " #cond}; \
  } while (0)
#define EXPECT_MSG(cond, msg)                                                                         \
  do {                                                                                                \
    if (!(cond))                                                                                      \
      throw ::wgtest::ChildFailure{std::string("line ") + std::to_string(__LINE__) + ": " #cond " (" + (msg) + ")"}; \
  } while (0)

namespace netns_detail {
inline int report_fd = -1;
inline const char* volatile step = "start";

inline void on_alarm(int) {
  const char prefix[] = "timed out during: ";
  [[maybe_unused]] ssize_t r = ::write(report_fd, prefix, sizeof prefix - 1);
  r = ::write(report_fd, step, std::strlen(step));
  _exit(2);
}
}  // namespace netns_detail

// Names what the child is doing, for the report of a failure or a timeout.
inline void step(const char* s) { netns_detail::step = s; }

// A shell command that must succeed.
inline void sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  EXPECT_MSG(rc == 0, cmd);
}

// Writes a /proc or /sys file; a missing one is ignored (IPv6 may be compiled out).
// One UDP_SEGMENT send of `data` to ipv4 `to`:port, cut by the kernel into datagrams of
// `gso` bytes: what a TUN with USO reads as one super-packet. True when all was sent.
inline bool send_udp_segmented(const uint8_t to[4], uint16_t port, int gso, std::span<const uint8_t> data) {
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  std::memcpy(&addr.sin_addr, to, 4);
  const bool ok = s >= 0 && ::setsockopt(s, SOL_UDP, UDP_SEGMENT, &gso, sizeof gso) == 0 &&
                  ::sendto(s, data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr) ==
                      static_cast<ssize_t>(data.size());
  if (s >= 0) ::close(s);
  return ok;
}

inline void write_file(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  [[maybe_unused]] ssize_t r = ::write(fd, text, std::strlen(text));
  ::close(fd);
}

// Runs `body` in a forked child in a new network namespace (loopback up, IPv6 off).
// Returns "" when it passed, else what went wrong and during which step.
inline std::string run_in_netns(const std::function<void()>& body, unsigned timeout_s = 30) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return "pipe2 failed";
  pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(p[0]);
    netns_detail::report_fd = p[1];
    struct sigaction sa {};
    sa.sa_handler = netns_detail::on_alarm;
    ::sigaction(SIGALRM, &sa, nullptr);
    ::alarm(timeout_s);
    std::string failure;
    try {
      EXPECT_MSG(::unshare(CLONE_NEWNET) == 0, std::strerror(errno));
      write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
      write_file("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
      sh("ip link set lo up");
      body();
    } catch (const ChildFailure& f) {
      failure = f.what;
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      failure = std::string("[") + netns_detail::step + "] " + failure;
      [[maybe_unused]] ssize_t r = ::write(p[1], failure.data(), failure.size());
    }
    _exit(failure.empty() ? 0 : 1);
  }
  ::close(p[1]);
  std::string text;
  char buf[512];
  ssize_t r;
  while ((r = ::read(p[0], buf, sizeof buf)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    text.append(buf, static_cast<size_t>(r));
  }
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFSIGNALED(status)) text += " (child killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  return text.empty() ? "child failed without a message" : text;
}

inline void require_in_netns(const std::function<void()>& body, unsigned timeout_s = 30) {
  std::string failure = run_in_netns(body, timeout_s);
  INFO(failure);
  REQUIRE(failure.empty());
}

}  // namespace wgtest

// The UAPI server over a real Unix socket: over-long lines are answered and end the
// connection, a connection's descriptor goes when it ends, clients that send nothing are
// closed to make room, and at the descriptor limit a client is answered -EMFILE instead
// of waiting in the backlog while accept() fails in a loop.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../support/eventually.hpp"
#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "wg/uapi_server.hpp"

using namespace wg;
using namespace std::chrono_literals;

namespace {

struct Daemon {
  conn::MemoryNetwork net;
  tun::MemoryDevice tun;
  conn::MemoryBind bind{net};
  Device dev{tun, bind};
};

// A socket path of its own per test run.
std::string socket_path(const char* name) {
  return "/tmp/wgnet-uapi-test-" + std::to_string(::getpid()) + "-" + name + ".sock";
}

int connect_to(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};  // a server that never answers fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `request` (as much as the server takes) and reads until the blank line or EOF.
std::string ask(int fd, const std::string& request) {
  std::thread writer([&] {
    size_t off = 0;
    while (off < request.size()) {
      ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server answered and hung up first
      off += static_cast<size_t>(n);
    }
  });
  std::string reply;
  char buf[4096];
  while (reply.size() < 2 || reply.compare(reply.size() - 2, 2, "\n\n") != 0) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  return reply;
}

// True once the server has closed its end, waiting up to 5 s: recv returns 0, or fails
// with ECONNRESET, which is what a Unix socket's peer gets when the server closed with
// bytes of ours still unread (an over-long request: the server stops reading at its
// limit). Which of the two depends on how far the writer got: under TSan, CI saw the
// reset.
bool closed_by_server(int fd) {
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  const ssize_t n = ::recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("uapi server: an over-long line is answered and ends the connection", "[uapi]") {
  Daemon d;
  std::string path = socket_path("long"), err;
  int lfd = uapi::listen_unix(path, err);
  REQUIRE(lfd >= 0);
  uapi::Server server(d.dev, lfd);

  struct Case {
    const char* what;
    std::string request;
    const char* reply;
  } cases[] = {
      {"line in a set", "set=1\n" + std::string(1 << 20, 'a') + "\n\n", "errno=-5\n\n"},
      {"operation line", std::string(1 << 20, 'a') + "\n\n", "errno=-22\n\n"},
      {"unknown operation", "nonsense=1\n\n", "errno=-22\n\n"},
  };
  for (auto& c : cases) {
    INFO(c.what);
    int fd = connect_to(path);
    REQUIRE(fd >= 0);
    CHECK(ask(fd, c.request) == c.reply);
    CHECK(closed_by_server(fd));
    ::close(fd);
  }
  // A set cut short by EOF changes nothing and is answered -EPROTO.
  int fd = connect_to(path);
  REQUIRE(fd >= 0);
  ::send(fd, "set=1\nlisten_port=4444\n", 23, MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  CHECK(ask(fd, "") == "errno=-71\n\n");
  ::close(fd);
  CHECK(d.dev.listen_port() != 4444);
  server.stop();
  ::unlink(path.c_str());
}

TEST_CASE("uapi server: a connection's descriptor is closed as soon as it ends", "[uapi]") {
  Daemon d;
  std::string path = socket_path("fds"), err;
  int lfd = uapi::listen_unix(path, err);
  REQUIRE(lfd >= 0);
  uapi::Server server(d.dev, lfd);
  const size_t before = open_fds();
  for (int i = 0; i < 20; ++i) {
    int fd = connect_to(path);
    REQUIRE(fd >= 0);
    CHECK(ask(fd, "get=1\n\n").ends_with("errno=0\n\n"));
    ::close(fd);
  }
  // The server lets go of them without waiting for the next client.
  size_t now = open_fds();
  wgtest::eventually([&] { return (now = open_fds()) == before; }, 2s, 10ms);
  CHECK(now == before);
  CHECK(server.connections() == 0);
  server.stop();
  ::unlink(path.c_str());
}

TEST_CASE("uapi server: past max_connections the connection quiet longest is closed", "[uapi]") {
  Daemon d;
  std::string path = socket_path("cap"), err;
  int lfd = uapi::listen_unix(path, err);
  REQUIRE(lfd >= 0);
  uapi::Server server(d.dev, lfd, 4);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(connect_to(path));
    REQUIRE(idle.back() >= 0);
    // Accepted in this order: each one is quiet longer than the next.
    wgtest::eventually([&] { return server.connections() >= idle.size(); }, 1s);
  }
  REQUIRE(server.connections() == 4);
  int fd = connect_to(path);
  REQUIRE(fd >= 0);
  CHECK(ask(fd, "get=1\n\n").ends_with("errno=0\n\n"));
  CHECK(closed_by_server(idle[0]));  // the oldest made room
  ::close(fd);
  // The others are still served.
  CHECK(ask(idle[3], "get=1\n\n").ends_with("errno=0\n\n"));
  for (int f : idle) ::close(f);
  server.stop();
  ::unlink(path.c_str());
}

TEST_CASE("uapi server: at the descriptor limit a client is answered -EMFILE, then served again", "[uapi]") {
  // The server runs in a child process whose descriptors the child itself fills up to
  // its limit, so no waiting connection can make room. The parent is the client.
  std::string path = socket_path("emfile"), err;
  int lfd = uapi::listen_unix(path, err);
  REQUIRE(lfd >= 0);
  int to_child[2], to_parent[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(to_parent) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    int status = 1;
    {
      Daemon d;
      uapi::Server server(d.dev, lfd);
      rlimit rl{};
      ::getrlimit(RLIMIT_NOFILE, &rl);
      rl.rlim_cur = open_fds() + 16;
      ::setrlimit(RLIMIT_NOFILE, &rl);
      std::vector<int> fillers;
      for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
      char c = 'f';
      // Full: tell the parent, wait for its word, then free the descriptors.
      if (::write(to_parent[1], &c, 1) == 1 && ::read(to_child[0], &c, 1) == 1) {
        for (int fd : fillers) ::close(fd);
        c = 'r';
        if (::write(to_parent[1], &c, 1) == 1 && ::read(to_child[0], &c, 1) == 0) status = 0;
      }
      server.stop();
    }
    std::_Exit(status);
  }
  ::close(lfd);
  ::close(to_child[0]);
  ::close(to_parent[1]);
  char c;
  REQUIRE(::read(to_parent[0], &c, 1) == 1);
  for (int i = 0; i < 3; ++i) {
    int fd = connect_to(path);
    REQUIRE(fd >= 0);
    CHECK(ask(fd, "get=1\n\n") == "errno=-24\n\n");
    ::close(fd);
  }
  REQUIRE(::write(to_child[1], "g", 1) == 1);
  REQUIRE(::read(to_parent[0], &c, 1) == 1);
  int fd = connect_to(path);
  REQUIRE(fd >= 0);
  CHECK(ask(fd, "get=1\n\n").ends_with("errno=0\n\n"));
  ::close(fd);
  ::close(to_child[1]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::close(to_parent[0]);
  ::unlink(path.c_str());
}

TEST_CASE("uapi server: the socket's directory is made 0755, one that exists keeps its mode", "[uapi]") {
  char tmpl[] = "/tmp/wgnet-uapi-dir.XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string top = tmpl;
  // Like /tmp: a directory that exists, sticky and writable by all.
  REQUIRE(::chmod(top.c_str(), 01777) == 0);
  std::string err;
  int lfd = uapi::listen_unix(top + "/wg0.sock", err);
  REQUIRE(lfd >= 0);
  ::close(lfd);
  struct stat st{};
  REQUIRE(::stat(top.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 01777);  // was turned into 0755
  // One that does not exist yet is made, 0755 whatever the umask.
  const mode_t old_umask = ::umask(077);
  lfd = uapi::listen_unix(top + "/run/wireguard/wg0.sock", err);
  ::umask(old_umask);
  REQUIRE(lfd >= 0);
  ::close(lfd);
  REQUIRE(::stat((top + "/run/wireguard").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  std::filesystem::remove_all(top);
}

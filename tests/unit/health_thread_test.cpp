// programs::HealthThread, the --health of wg-run and wg-tun: start errors in one line, a
// socket taken over from a parent, the pages served from its own thread until stop().
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "bind/memory.hpp"
#include "health_server.hpp"
#include "tun/memory.hpp"
#include "wg/crypto.hpp"
#include "wg/device.hpp"

namespace {

struct Daemon {
  conn::MemoryNetwork net;
  tun::MemoryDevice tun;
  conn::MemoryBind bind{net};
  wg::Device dev{tun, bind};
};

uint16_t port_of(const std::string& address) { return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))); }

// A TCP connection to 127.0.0.1:PORT with 5 s timeouts; -1 when refused.
int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};  // a server that never answers fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// The whole answer to one GET (Connection: close), or "" when nothing answers.
std::string get(uint16_t port, const std::string& target) {
  int fd = connect_loopback(port);
  if (fd < 0) return "";
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
  std::string out;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// A listening TCP socket on 127.0.0.1, port chosen by the kernel (listen = false: bound only).
int loopback_socket(bool listen) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  if (listen) REQUIRE(::listen(fd, 16) == 0);
  return fd;
}

}  // namespace

TEST_CASE("health thread: a bad address or a port in use is one line naming --health", "[health]") {
  using programs::HealthThread;
  CHECK_THROWS_WITH(HealthThread("nonsense", "t"), "--health nonsense: 'nonsense' is not ADDR:PORT");
  CHECK_THROWS_WITH(HealthThread("127.0.0.1", "t"), "--health 127.0.0.1: '127.0.0.1' is not ADDR:PORT");
  CHECK_THROWS_WITH(HealthThread("host.example:9100", "t"), "--health host.example:9100: 'host.example' is not an IP address");
  HealthThread first("localhost:0", "t");
  const std::string taken = first.local_address();
  CHECK(taken.rfind("127.0.0.1:", 0) == 0);
  CHECK_THROWS_WITH(HealthThread(taken, "t"), "--health " + taken + ": Address already in use");
}

TEST_CASE("health thread: refuses a descriptor that is no listening TCP socket, and leaves it open", "[health]") {
  using programs::HealthThread;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  CHECK_THROWS_WITH(HealthThread(pipe_fds[0], "WG_HEALTH_FD=7", "t"), "WG_HEALTH_FD=7: Socket operation on non-socket");
  CHECK(::fcntl(pipe_fds[0], F_GETFD) >= 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int bound = loopback_socket(false);
  CHECK_THROWS_WITH(HealthThread(bound, "WG_HEALTH_FD=7", "t"), "WG_HEALTH_FD=7: not a listening TCP socket");
  CHECK(::fcntl(bound, F_GETFD) >= 0);
  ::close(bound);
  const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
  CHECK_THROWS_WITH(HealthThread(udp, "WG_HEALTH_FD=7", "t"), "WG_HEALTH_FD=7: not a listening TCP socket");
  ::close(udp);
}

TEST_CASE("health thread: serves /readyz and /metrics from its thread until stop()", "[health]") {
  Daemon d;
  d.dev.set_private_key(wg::crypto::generate_private_key());
  const wg::PublicKey peer_key = wg::crypto::public_key(wg::crypto::generate_private_key());
  REQUIRE(d.dev.add_peer(peer_key) != nullptr);
  programs::HealthThread health("127.0.0.1:0", "wg-test");
  const uint16_t port = port_of(health.local_address());
  health.start(d.dev);

  const std::string readyz = get(port, "/readyz");
  CHECK(readyz.rfind("HTTP/1.1 503 ", 0) == 0);  // no handshake yet
  CHECK(readyz.find("\r\nServer: wg-test\r\n") != std::string::npos);
  const std::string metrics = get(port, "/metrics");
  CHECK(metrics.rfind("HTTP/1.1 200 ", 0) == 0);
  CHECK(metrics.find("\r\nContent-Type: text/plain; version=0.0.4\r\n") != std::string::npos);
  CHECK(metrics.find("\nwgnet_peer_tx_bytes_total{peer=\"0\"} 0\n") != std::string::npos);
  CHECK(metrics.find("\nwgnet_peer_last_handshake_seconds{peer=\"0\"} 0\n") != std::string::npos);
  CHECK(get(port, "/other").rfind("HTTP/1.1 404 ", 0) == 0);

  health.stop();
  const int after = connect_loopback(port);
  CHECK(after < 0);  // the port is closed
  if (after >= 0) ::close(after);
  health.stop();  // again: nothing
}

TEST_CASE("health thread: takes over a listening socket (a daemon's inherited one)", "[health]") {
  Daemon d;
  const int fd = loopback_socket(true);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0);
  const uint16_t port = ntohs(local.sin_port);
  {
    programs::HealthThread health(fd, "WG_HEALTH_FD=5", "wg-test");
    CHECK(health.native_handle() == fd);
    CHECK(health.local_address() == "127.0.0.1:" + std::to_string(port));
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    health.start(d.dev);
    CHECK(get(port, "/readyz").rfind("HTTP/1.1 503 ", 0) == 0);  // no peers
    CHECK(get(port, "/metrics").find("# TYPE wgnet_handshakes_total counter\n") != std::string::npos);
  }
  CHECK(::fcntl(fd, F_GETFD) < 0);  // closed with the object
  CHECK(errno == EBADF);
}

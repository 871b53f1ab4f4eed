// programs::accept_loop, every listener's accept loop: at its cap a client is reset at
// once and served again once another left; out of file descriptors it resets the waiting
// clients and pauses instead of retrying at once (which spun a core), then serves again
// once descriptors are free.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "accept_loop.hpp"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

// Says '+' to each client it serves, then holds the connection until the client closes.
asio::awaitable<void> greet_and_hold(tcp::socket s) {
  char plus = '+';
  co_await asio::async_write(s, asio::buffer(&plus, 1), kTry);
  char b[64];
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(b), kTry);
    if (ec) co_return;
  }
}

// A loop on 127.0.0.1 (a port of the kernel's choice) run by a thread of its own.
struct Server {
  explicit Server(size_t max_connections) {
    acceptor.open(tcp::v4());
    acceptor.bind({asio::ip::address_v4::loopback(), 0});
    acceptor.listen();
    port = acceptor.local_endpoint().port();
    programs::AcceptOptions o{"test listener", max_connections, [this] { refused.fetch_add(1); }};
    asio::co_spawn(ioc, programs::accept_loop(acceptor, std::move(o), greet_and_hold), asio::detached);
    thread = std::thread([this] { ioc.run(); });
  }
  ~Server() {
    asio::post(ioc, [this] {
      boost::system::error_code ec;
      acceptor.close(ec);
      ioc.stop();
    });
    thread.join();
  }
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  uint16_t port = 0;
  std::atomic<int> refused{0};
  std::thread thread;
};

int unconnected() { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

bool connect_to(int fd, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

enum class Outcome { served, reset, nothing };

// What the server did with a connected client within 3 s: greeted it, or closed it.
Outcome outcome(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 3000) <= 0) return Outcome::nothing;
  char c = 0;
  const ssize_t n = ::recv(fd, &c, 1, 0);
  return n == 1 && c == '+' ? Outcome::served : Outcome::reset;
}

Outcome connect_and_see(uint16_t port, std::vector<int>& open) {
  int fd = unconnected();
  open.push_back(fd);
  if (!connect_to(fd, port)) return Outcome::reset;
  return outcome(fd);
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST_CASE("accept loop: past max_connections a client is reset, and served once one left", "[accept]") {
  Server server(2);
  std::vector<int> fds;
  CHECK(connect_and_see(server.port, fds) == Outcome::served);
  CHECK(connect_and_see(server.port, fds) == Outcome::served);
  CHECK(connect_and_see(server.port, fds) == Outcome::reset);
  CHECK(server.refused == 1);
  ::close(fds[0]);
  fds.erase(fds.begin());
  // The server notices the close asynchronously: the next client may still meet the cap.
  Outcome next = Outcome::reset;
  for (int i = 0; i < 50 && next != Outcome::served; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    next = connect_and_see(server.port, fds);
  }
  CHECK(next == Outcome::served);
  for (int fd : fds) ::close(fd);
}

TEST_CASE("accept loop: out of descriptors it resets clients without spinning, then serves again", "[accept]") {
  Server server(0);
  std::vector<int> fds;
  REQUIRE(connect_and_see(server.port, fds) == Outcome::served);  // the loop runs, its reserve held

  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  std::vector<int> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(unconnected());
  // Every descriptor below a low limit taken: the server's accepts fail with EMFILE.
  int highest = 0;
  for (int fd : clients) highest = std::max(highest, fd);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest + 32);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;
  for (int fd; (fd = ::dup(clients[0])) >= 0;) filler.push_back(fd);

  for (int fd : clients) connect_to(fd, server.port);  // queued by the kernel: no descriptor here
  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu_used = cpu_seconds() - cpu_before;
  std::vector<Outcome> seen;
  for (int fd : clients) seen.push_back(outcome(fd));

  for (int fd : filler) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  INFO("CPU seconds in 1 s out of descriptors: " << cpu_used);
  CHECK(cpu_used < 0.2);
  for (auto o : seen) CHECK(o == Outcome::reset);
  CHECK(server.refused >= 8);
  // Descriptors free again: served (after at most the 100 ms pause).
  CHECK(connect_and_see(server.port, fds) == Outcome::served);
  for (int fd : clients) ::close(fd);
  for (int fd : fds) ::close(fd);
}

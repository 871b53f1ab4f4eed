// Several Stacks in one process (its own executable: it makes and ends Stacks, and counts
// the process's lwIP threads). Two tunnels with the same addresses, four Stacks, each
// under its own wg::Device and UDP port, WireGuard over 127.0.0.1:
//
//   tunnel 1:  x1 198.19.0.1, fd00:19::1 ─ Device ─ LinuxBind <═ 127.0.0.1 ═> LinuxBind ─ Device ─ y1 198.19.0.2, fd00:19::2
//   tunnel 2:  x2 198.19.0.1, fd00:19::1 ─ Device ─ LinuxBind <═ 127.0.0.1 ═> LinuxBind ─ Device ─ y2 198.19.0.2, fd00:19::2
//
// Each Stack sits behind a Tap that counts the ICMP errors it sends, so a test can tell
// which tunnel an answer left through (tunnel_pair.hpp). lwIP's netif list is y2, x2, y1, x1 (netif_add
// puts a new one first): where lwIP would pick a netif by subnet, it picks tunnel 2's.
#include <catch2/catch.hpp>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/eventually.hpp"
#include "netstack/stack.hpp"
#include "tunnel_pair.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using netstack::Endpoint;
using netstack::error_code;
using netstack::TcpStream;

wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }
const wg::IpAddress kX4 = ip("198.19.0.1"), kY4 = ip("198.19.0.2"), kY6 = ip("fd00:19::2");

using tunnel_pair::Tunnel;

// Serves one connection on `l`: sends `label`, then echoes what it reads until EOF. The
// future ends when the connection does or the listener is closed.
std::future<void> serve(netstack::TcpListener& l, std::string label) {
  return std::async(std::launch::async, [&l, label] {
    error_code ec;
    TcpStream s = l.accept(ec);
    if (ec) return;
    s.write_all(asio::buffer(label), ec);
    char buf[512];
    for (size_t n; !ec && (n = s.read_some(asio::buffer(buf), ec)) > 0;) s.write_all(asio::buffer(buf, n), ec);
    s.close();
  });
}

// Reads exactly n bytes (the stream's watchdog is the Stack's dial timeout and the
// caller's bounded wait: a read that never completes fails the test there).
std::string read_n(TcpStream& s, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  error_code ec;
  while (got < n && !ec) got += s.read_some(asio::buffer(out.data() + got, n - got), ec);
  INFO("read: " << ec.message());
  CHECK(!ec);
  out.resize(got);
  return out;
}

// Runs f on a thread of its own and waits at most `limit` for it: a lost packet fails
// the test instead of hanging it.
template <class F>
auto bounded(F f, std::chrono::seconds limit = 20s) {
  auto fut = std::async(std::launch::async, std::move(f));
  REQUIRE(fut.wait_for(limit) == std::future_status::ready);
  return fut.get();
}

// Threads of this process named like the lwIP thread.
int lwip_threads() {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name == "wg-netstack";
  }
  return n;
}

}  // namespace

TEST_CASE("netstack multi: two tunnels with the same addresses carry their own TCP and UDP", "[netstack][multi]") {
  Tunnel t1, t2;
  CHECK(t1.x.stack->get_executor() == t2.y.stack->get_executor());  // one lwIP thread
  CHECK(lwip_threads() == 1);

  // The same address and port on two Stacks: each Stack's ports are its own.
  error_code ec1, ec2;
  auto l1 = t1.y.stack->listen_tcp({kY4, 80}, ec1);
  auto l2 = t2.y.stack->listen_tcp({kY4, 80}, ec2);
  INFO(ec1.message() << " / " << ec2.message());
  REQUIRE((!ec1 && !ec2));
  auto served1 = serve(l1, "one"), served2 = serve(l2, "two");
  for (auto* t : {&t1, &t2}) {
    const std::string label = t == &t1 ? "one" : "two";
    bounded([&] {
      error_code ec;
      TcpStream s = t->x.stack->dial_tcp({kY4, 80}, ec);
      INFO("dial: " << ec.message());
      REQUIRE(!ec);
      CHECK(read_n(s, 3) == label);
      const std::string msg = "through tunnel " + label;
      s.write_all(asio::buffer(msg), ec);
      CHECK(read_n(s, msg.size()) == msg);
      s.close();
    });
  }
  l1.close();
  l2.close();
  served1.wait();
  served2.wait();

  // UDP: the same port on both y's, each answers with its own label.
  auto u1 = t1.y.stack->listen_udp({kY6, 7}, ec1);
  auto u2 = t2.y.stack->listen_udp({kY6, 7}, ec2);
  INFO(ec1.message() << " / " << ec2.message());
  REQUIRE((!ec1 && !ec2));
  for (auto* t : {&t1, &t2}) {
    const std::string label = t == &t1 ? "one" : "two";
    auto& server = t == &t1 ? u1 : u2;
    bounded([&] {
      error_code ec;
      auto c = t->x.stack->dial_udp({kY6, 7}, ec);
      REQUIRE(!ec);
      char in[64];
      Endpoint from;
      auto got = server.async_receive_from(asio::buffer(in), from, asio::use_future);
      c.async_send_to(asio::buffer(std::string("hello")), {kY6, 7}, asio::use_future).get();
      const size_t n = got.get();
      CHECK(std::string(in, n) == "hello");
      Endpoint back;
      auto reply = c.async_receive_from(asio::buffer(in), back, asio::use_future);
      server.async_send_to(asio::buffer(label), from, asio::use_future).get();
      CHECK(std::string(in, reply.get()) == label);
      CHECK(back == Endpoint{kY6, 7});
    });
  }
}

TEST_CASE("netstack multi: what a Stack answers without a socket leaves through its own tunnel",
          "[netstack][multi]") {
  Tunnel t1, t2;
  // Tunnel 2 listens on port 81, tunnel 1 does not: x1's SYN is refused by y1 (a reset
  // sent without a pcb), never taken by y2's listener.
  error_code ec;
  auto l2 = t2.y.stack->listen_tcp({{}, 81}, ec);
  REQUIRE(!ec);
  bounded([&] {
    error_code ec;
    t1.x.stack->dial_tcp({kY4, 81}, ec);
    CHECK(ec == asio::error::connection_refused);
  });

  // A datagram to a closed port of y1: the port unreachable leaves through y1's tunnel.
  // lwIP routes it by the destination's subnet, which y2's netif matches first; it must
  // go out where the datagram came in (lwipopts.h's route hooks).
  for (const auto& to : {kY4, kY6}) {
    INFO("to " << to.to_string());
    const int before1 = t1.y.tap->icmp_errors, before2 = t2.y.tap->icmp_errors;
    bounded([&] {
      error_code ec;
      auto c = t1.x.stack->dial_udp({to, 9}, ec);
      REQUIRE(!ec);
      c.async_send_to(asio::buffer(std::string("anyone?")), {to, 9}, asio::use_future).get();
    });
    wgtest::eventually([&] { return t1.y.tap->icmp_errors != before1; });
    CHECK(t1.y.tap->icmp_errors == before1 + 1);
    CHECK(t2.y.tap->icmp_errors == before2);
  }
}

TEST_CASE("netstack multi: ending one tunnel leaves the other's connections open", "[netstack][multi]") {
  auto t1 = std::make_unique<Tunnel>();
  auto t2 = std::make_unique<Tunnel>();
  error_code ec1, ec2;
  // (Other ports: this one is about the end, not the ports.)
  auto l1 = t1->y.stack->listen_tcp({kY4, 80}, ec1);
  auto l2 = t2->y.stack->listen_tcp({kY4, 8080}, ec2);
  REQUIRE((!ec1 && !ec2));
  auto served1 = serve(l1, "one"), served2 = serve(l2, "two");
  TcpStream s1, s2;
  bounded([&] {
    error_code ec;
    s1 = t1->x.stack->dial_tcp({kY4, 80}, ec);
    REQUIRE(!ec);
    s2 = t2->x.stack->dial_tcp({kY4, 8080}, ec);
    REQUIRE(!ec);
    CHECK(read_n(s1, 3) == "one");
    CHECK(read_n(s2, 3) == "two");
  });

  // Tunnel 2 ends (its Devices, then its Stacks, whose netifs have tunnel 1's addresses).
  l2.close();
  t2.reset();
  served2.wait();
  error_code ec;
  char c;
  s2.read_some(asio::buffer(&c, 1), ec);
  CHECK(ec == asio::error::operation_aborted);  // outlived its Stack

  // Tunnel 1's connection goes on, both ways, and new ones are made.
  bounded([&] {
    error_code ec;
    const std::string msg = "still here";
    s1.write_all(asio::buffer(msg), ec);
    INFO("write: " << ec.message());
    CHECK(!ec);
    CHECK(read_n(s1, msg.size()) == msg);
    s1.close();
    error_code pec;
    t1->x.stack->ping(kY4, 3000ms, pec);
    CHECK(!pec);
  });
  l1.close();
  served1.wait();
}

TEST_CASE("netstack multi: the lwIP thread ends with the last Stack and comes back with the next",
          "[netstack][multi]") {
  {
    Tunnel t;
    CHECK(lwip_threads() == 1);
  }
  CHECK(lwip_threads() == 0);
  Tunnel again;  // a new thread, lwIP's timers running again: a handshake and a ping
  CHECK(lwip_threads() == 1);
  error_code ec;
  auto l = again.y.stack->listen_tcp({kY4, 80}, ec);
  REQUIRE(!ec);
  auto served = serve(l, "back");
  bounded([&] {
    error_code ec;
    TcpStream s = again.x.stack->dial_tcp({kY4, 80}, ec);
    REQUIRE(!ec);
    CHECK(read_n(s, 4) == "back");
    s.close();
  });
  l.close();
  served.wait();
}

TEST_CASE("netstack multi: kMaxStacks Stacks at once, one more is refused", "[netstack][multi]") {
  std::vector<std::unique_ptr<netstack::Stack>> stacks;
  netstack::StackOptions so;
  so.addresses = {*wg::IpPrefix::parse("198.19.0.1/24")};
  std::error_code ec;
  for (int i = 0; i < netstack::Stack::kMaxStacks; ++i) {
    stacks.push_back(netstack::Stack::create(so, ec));
    INFO("Stack " << i << ": " << ec.message());
    REQUIRE(stacks.back());
  }
  CHECK(netstack::Stack::create(so, ec) == nullptr);
  CHECK(ec == std::errc::too_many_files_open);
  // Each has its own listener on the same address and port.
  std::vector<netstack::TcpListener> listeners;
  for (auto& s : stacks) {
    error_code lec;
    listeners.push_back(s->listen_tcp({kX4, 80}, lec));
    REQUIRE(!lec);
  }
  listeners.clear();
  stacks.pop_back();
  stacks.push_back(netstack::Stack::create(so, ec));
  CHECK(stacks.back() != nullptr);
}

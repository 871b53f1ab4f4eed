// Dialing by name: the lookup through the tunnel's DNS, the order of RFC 8305 and its
// attempts in parallel (a dead address first costs attempt_delay, not the dial timeout),
// the family filter, UDP by name, and cancellation of the whole.
#include <catch2/catch.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "harness.hpp"

using namespace netstack_test;
namespace aex = asio::experimental;
using Family = netstack::DialOptions::Family;

TEST_CASE("dial_order: IPv6 first, then the families alternate, each in its order", "[netstack][dial]") {
  const auto a1 = ip("198.19.0.5"), a2 = ip("198.19.0.6"), a3 = ip("198.19.0.7");
  const auto b1 = ip("fd00:19::5"), b2 = ip("fd00:19::6");
  const std::vector<wg::IpAddress> in{a1, a2, a3, b1, b2};
  CHECK(netstack::dial_order(in, Family::any) == std::vector<wg::IpAddress>{b1, a1, b2, a2, a3});
  CHECK(netstack::dial_order(in, Family::ipv4) == std::vector<wg::IpAddress>{a1, a2, a3});
  CHECK(netstack::dial_order(in, Family::ipv6) == std::vector<wg::IpAddress>{b1, b2});
  CHECK(netstack::dial_order({a1}, Family::ipv6).empty());
  CHECK(netstack::dial_order({}, Family::any).empty());
}

namespace {

struct Dialed {
  error_code ec;
  Endpoint remote;
  std::string echoed;
};

// Dials host:7 (the echo) by name and says hello.
awaitable<Dialed> dial_echo(std::string host, netstack::DialOptions o) {
  Watchdog wd(co_await asio::this_coro::executor, 20s);
  Dialed d;
  auto [ec, s] = co_await harness().stack->async_dial_tcp(std::move(host), 7, o, kTry);
  d.ec = ec;
  if (ec) co_return d;
  wd.watch(s);
  d.remote = s.remote_endpoint();
  const std::string msg = "by name";
  co_await asio::async_write(s, asio::buffer(msg), kTry);
  d.echoed.resize(msg.size());
  auto [rec, rn] = co_await asio::async_read(s, asio::buffer(d.echoed), kTry);
  if (rec) d.echoed = rec.message();
  co_return d;
}

}  // namespace

TEST_CASE("netstack: async_dial_tcp by name, IPv6 first, or the family asked for", "[netstack][dial]") {
  auto any = run(dial_echo("peer.test", {}));
  INFO(error_text(any.ec));
  REQUIRE(!any.ec);
  CHECK(any.remote == Endpoint{kPeer6, 7});
  CHECK(any.echoed == "by name");

  auto v4 = run(dial_echo("peer.test", {Family::ipv4, 250ms}));
  REQUIRE(!v4.ec);
  CHECK(v4.remote == Endpoint{kPeer4, 7});
  CHECK(v4.echoed == "by name");

  auto literal = run(dial_echo("198.19.0.2", {Family::ipv6, 250ms}));
  CHECK(!literal.ec);
  CHECK(literal.remote == Endpoint{kPeer4, 7});

  auto none = run(dial_echo("nowhere.test", {}));
  CHECK(none.ec == asio::error::host_not_found);
  auto no_v6 = run(dial_echo("twofold.test", {Family::ipv6, 250ms}));
  CHECK(no_v6.ec == asio::error::host_not_found);
}

TEST_CASE("netstack: a dead address first costs the attempt delay, not the dial timeout", "[netstack][dial]") {
  // twofold.test: 198.19.0.3 (silent) first, then 198.19.0.2. The harness's dial timeout is
  // 10 s; one address after the other would connect only after it, and lose to the 5 s
  // timer. With Happy Eyeballs the second attempt starts 250 ms after the first.
  struct Result {
    size_t first = 9;
    error_code ec;
    Endpoint remote;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Result r;
    asio::steady_timer t(exec, 5s);
    auto [order, ec, s, tec] =
        co_await aex::make_parallel_group(harness().stack->async_dial_tcp("twofold.test", 7, {}, asio::deferred),
                                          t.async_wait(asio::deferred))
            .async_wait(aex::wait_for_one(), asio::use_awaitable);
    r.first = order[0];
    r.ec = ec;
    r.remote = s.remote_endpoint();
    co_return r;
  }());
  INFO(error_text(r.ec));
  CHECK(r.first == 0);
  CHECK(!r.ec);
  CHECK(r.remote == Endpoint{kPeer4, 7});
}

TEST_CASE("netstack: a dial by name is cancelled as a whole", "[netstack][dial][cancel]") {
  // silent.test is never answered: without cancellation the lookup times out after 5 s.
  struct Result {
    size_t first = 9;
    error_code ec;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Result r;
    asio::steady_timer t(exec, 200ms);
    auto [order, ec, s, tec] =
        co_await aex::make_parallel_group(harness().stack->async_dial_tcp("silent.test", 7, {}, asio::deferred),
                                          t.async_wait(asio::deferred))
            .async_wait(aex::wait_for_one(), asio::use_awaitable);
    r.first = order[0];
    r.ec = ec;
    co_return r;
  }());
  CHECK(r.first == 1);
  CHECK(r.ec == asio::error::operation_aborted);
}

TEST_CASE("netstack: async_dial_udp by name", "[netstack][dial]") {
  struct Result {
    error_code ec;
    std::string echoed;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    auto [ec, u] = co_await harness().stack->async_dial_udp("peer.test", 7, {Family::ipv4, 250ms}, kTry);
    r.ec = ec;
    if (ec) co_return r;
    wd.watch(u);
    char buf[64];
    Endpoint from;
    for (int i = 0; i < 5 && r.echoed.empty(); ++i) {
      co_await u.async_send_to(asio::buffer(std::string("udp by name")), Endpoint{}, kTry);
      asio::steady_timer t(exec, 1s);
      auto [order, rec, n, tec] =
          co_await aex::make_parallel_group(u.async_receive_from(asio::buffer(buf), from, asio::deferred),
                                            t.async_wait(asio::deferred))
              .async_wait(aex::wait_for_one(), asio::use_awaitable);
      if (order[0] == 0 && !rec) r.echoed.assign(buf, n);
    }
    co_return r;
  }());
  REQUIRE(!r.ec);
  CHECK(r.echoed == "udp by name");
}

// Per-operation cancellation of the dialer API (Asio's cancellation slots): every
// asynchronous operation raced against a timer, through experimental::parallel_group
// (which reports the loser's result too) and through `||`. A cancelled operation
// completes with operation_aborted, has transferred nothing, and leaves its object
// usable. Without cancellation each race would wait for the operation itself, or for the
// watchdog, which closes the sockets: the checks that the objects still work afterwards,
// and that the loser's error is operation_aborted rather than what a close or a timeout
// gives, tell the two apart.
#include <catch2/catch.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "harness.hpp"

using namespace netstack_test;
using asio::deferred;
namespace aex = asio::experimental;
namespace http = boost::beast::http;

namespace {

constexpr auto kRace = 200ms;

// Waits for the first of the operations; the others are cancelled and awaited.
template <class... Ops>
auto first_of(Ops... ops) {
  return aex::make_parallel_group(std::move(ops)...).async_wait(aex::wait_for_one(), asio::use_awaitable);
}

// An echo round trip of `msg` on s: what came back.
awaitable<std::string> echo_once(TcpStream& s, const std::string& msg) {
  auto [wec, wn] = co_await asio::async_write(s, asio::buffer(msg), kTry);
  if (wec) co_return "write: " + wec.message();
  std::string back(msg.size(), '\0');
  auto [rec, rn] = co_await asio::async_read(s, asio::buffer(back), kTry);
  if (rec) co_return "read: " + rec.message();
  co_return back;
}

}  // namespace

TEST_CASE("netstack cancel: a read loses to a timer and the stream reads on", "[netstack][cancel]") {
  struct Result {
    error_code dial, read, wait;
    size_t first = 9, wait_first = 9;
    bool or_timer = false;
    std::string echoed;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 7});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    char buf[64];
    asio::steady_timer t(exec, kRace);
    auto [order, rec, rn, tec] = co_await first_of(s.async_read_some(asio::buffer(buf), deferred), t.async_wait(deferred));
    r.first = order[0];
    r.read = rec;
    // async_wait_readable the same way.
    t.expires_after(kRace);
    auto [worder, wec, tec2] = co_await first_of(s.async_wait_readable(deferred), t.async_wait(deferred));
    r.wait_first = worder[0];
    r.wait = wec;
    // The awaitable operator.
    using namespace aex::awaitable_operators;
    asio::steady_timer t2(exec, kRace);
    auto v = co_await (s.async_read_some(asio::buffer(buf), kTry) || t2.async_wait(kTry));
    r.or_timer = v.index() == 1;
    r.echoed = co_await echo_once(s, "still here");
    co_return r;
  }());
  REQUIRE(!r.dial);
  CHECK(r.first == 1);
  CHECK(r.read == asio::error::operation_aborted);
  CHECK(r.wait_first == 1);
  CHECK(r.wait == asio::error::operation_aborted);
  CHECK(r.or_timer);
  CHECK(r.echoed == "still here");
}

TEST_CASE("netstack cancel: a write waiting for window loses to a timer and has sent nothing", "[netstack][cancel]") {
  struct Result {
    error_code dial, err, cancelled_ec, reply;
    size_t cancelled_n = 99;
    bool cancelled = false;
    uint64_t sent = 0, sink_count = 0;
    uint64_t sent_fnv = 0, sink_fnv = 1;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 40s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 9002});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    // The held sink reads nothing for 8 s (ample for the loop below even on a loaded
    // machine): the send buffer and its window fill, and then a write waits.
    uint8_t hold[8];
    put_u64(hold, 8000);
    co_await asio::async_write(s, asio::buffer(hold), kTry);
    std::vector<uint8_t> chunk(64 * 1024);
    Fnv fnv;
    for (int i = 0; i < 400 && !r.cancelled; ++i) {
      for (size_t j = 0; j < chunk.size(); ++j) chunk[j] = pattern(r.sent + j);
      asio::steady_timer t(exec, kRace);
      auto [order, wec, wn, tec] = co_await first_of(s.async_write_some(asio::buffer(chunk), deferred), t.async_wait(deferred));
      fnv.add(chunk.data(), wn);
      r.sent += wn;
      if (order[0] == 1) {
        r.cancelled = true;
        r.cancelled_ec = wec;
        r.cancelled_n = wn;
      } else if (wec) {
        r.err = wec;
        co_return r;
      }
    }
    // One more write, which the sink takes once it reads; then its count and checksum
    // must be those of exactly the bytes the writes reported.
    for (size_t j = 0; j < chunk.size(); ++j) chunk[j] = pattern(r.sent + j);
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(chunk), kTry);
    if (wec) r.err = wec;
    fnv.add(chunk.data(), wn);
    r.sent += wn;
    r.sent_fnv = fnv.h;
    s.shutdown_send();
    uint8_t reply[16];
    auto [rec, rn] = co_await asio::async_read(s, asio::buffer(reply), kTry);
    r.reply = rec;
    if (!rec) {
      r.sink_count = get_u64(reply);
      r.sink_fnv = get_u64(reply + 8);
    }
    co_return r;
  }());
  REQUIRE(!r.dial);
  INFO("error: " << error_text(r.err) << ", reply: " << error_text(r.reply));
  REQUIRE(r.cancelled);
  CHECK(r.cancelled_ec == asio::error::operation_aborted);
  CHECK(r.cancelled_n == 0);
  CHECK(!r.err);
  CHECK(!r.reply);
  CHECK(r.sink_count == r.sent);
  CHECK(r.sink_fnv == r.sent_fnv);
}

TEST_CASE("netstack cancel: a dial to a silent host loses to a timer", "[netstack][cancel]") {
  struct Result {
    size_t first = 9;
    error_code dial, after;
    std::string echoed;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    auto& st = *harness().stack;
    asio::steady_timer t(exec, kRace);
    // The harness's dial timeout is 10 s: a dial that ignored the cancellation would
    // complete with timed_out after that, and the watchdog would have fired.
    auto [order, dec, stream, tec] = co_await first_of(st.async_dial_tcp({kSilent4, 80}, deferred), t.async_wait(deferred));
    r.first = order[0];
    r.dial = dec;
    // The Stack dials on.
    auto [ec, s] = co_await dial({kPeer4, 7});
    r.after = ec;
    if (!ec) {
      wd.watch(s);
      r.echoed = co_await echo_once(s, "dialed after");
    }
    co_return r;
  }());
  CHECK(r.first == 1);
  CHECK(r.dial == asio::error::operation_aborted);
  REQUIRE(!r.after);
  CHECK(r.echoed == "dialed after");
}

TEST_CASE("netstack cancel: an accept loses to a timer and the listener accepts on", "[netstack][cancel]") {
  struct Result {
    error_code listen, accept, dial_back, accepted;
    size_t first = 9;
    std::string greeting, control;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    auto& st = *harness().stack;
    auto l = st.listen_tcp({ip("198.19.0.1"), 7401}, r.listen);
    if (r.listen) co_return r;
    wd.watch(l);
    asio::steady_timer t(exec, kRace);
    auto [order, aec, stream, tec] = co_await first_of(l.async_accept(deferred), t.async_wait(deferred));
    r.first = order[0];
    r.accept = aec;
    // The peer dials back into the same listener (its :9100 service).
    auto [ec, ctl] = co_await dial({kPeer4, 9100});
    r.dial_back = ec;
    if (ec) co_return r;
    wd.watch(ctl);
    co_await asio::async_write(ctl, asio::buffer(std::string("7401\n")), kTry);
    auto [acc_ec, in] = co_await l.async_accept(kTry);
    r.accepted = acc_ec;
    if (!acc_ec) {
      wd.watch(in);
      std::tie(std::ignore, r.greeting) = co_await read_all(in, 15);
    }
    std::tie(std::ignore, r.control) = co_await read_all(ctl, 3);
    co_return r;
  }());
  REQUIRE(!r.listen);
  CHECK(r.first == 1);
  CHECK(r.accept == asio::error::operation_aborted);
  REQUIRE(!r.dial_back);
  CHECK(!r.accepted);
  CHECK(r.greeting == "hello from peer");
  CHECK(r.control == "ok\n");
}

TEST_CASE("netstack cancel: a UDP receive loses to a timer and the socket receives on", "[netstack][cancel]") {
  struct Result {
    error_code open, recv, send, recv2;
    size_t first = 9;
    std::string echoed;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    auto u = harness().stack->dial_udp({kPeer4, 7}, r.open);
    if (r.open) co_return r;
    wd.watch(u);
    char buf[64];
    Endpoint from;
    asio::steady_timer t(exec, kRace);
    auto [order, rec, rn, tec] = co_await first_of(u.async_receive_from(asio::buffer(buf), from, deferred), t.async_wait(deferred));
    r.first = order[0];
    r.recv = rec;
    // Datagrams may be lost: a few tries, each bounded by a cancelled receive.
    for (int i = 0; i < 5 && r.echoed.empty(); ++i) {
      const std::string msg = "udp after";
      std::tie(r.send, std::ignore) = co_await u.async_send_to(asio::buffer(msg), Endpoint{}, kTry);
      asio::steady_timer t2(exec, 1s);
      auto [o2, rec2, n2, tec2] = co_await first_of(u.async_receive_from(asio::buffer(buf), from, deferred), t2.async_wait(deferred));
      r.recv2 = rec2;
      if (o2[0] == 0 && !rec2) r.echoed.assign(buf, n2);
    }
    co_return r;
  }());
  REQUIRE(!r.open);
  CHECK(r.first == 1);
  CHECK(r.recv == asio::error::operation_aborted);
  CHECK(!r.send);
  CHECK(r.echoed == "udp after");
}

TEST_CASE("netstack cancel: a ping and a lookup lose to a timer", "[netstack][cancel]") {
  struct Result {
    size_t ping_first = 9, resolve_first = 9;
    error_code ping, resolve, resolve_after;
    std::vector<wg::IpAddress> after;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Result r;
    auto& st = *harness().stack;
    asio::steady_timer t(exec, kRace);
    // Without cancellation: timed_out after the ping's own 10 s.
    auto [po, pec, rtt, tec] = co_await first_of(st.async_ping(kSilent4, 10000ms, deferred), t.async_wait(deferred));
    r.ping_first = po[0];
    r.ping = pec;
    // silent.test is never answered: without cancellation, timed_out after dns_timeout (5 s).
    t.expires_after(kRace);
    auto [ro, rec, addrs, tec2] = co_await first_of(st.async_resolve("silent.test", deferred), t.async_wait(deferred));
    r.resolve_first = ro[0];
    r.resolve = rec;
    std::tie(r.resolve_after, r.after) = co_await st.async_resolve("peer.test", kTry);
    co_return r;
  }());
  CHECK(r.ping_first == 1);
  CHECK(r.ping == asio::error::operation_aborted);
  CHECK(r.resolve_first == 1);
  CHECK(r.resolve == asio::error::operation_aborted);
  CHECK(!r.resolve_after);
  CHECK(r.after == std::vector<wg::IpAddress>{kPeer4, kPeer6});
}

TEST_CASE("netstack cancel: a Beast HTTP read with a timeout, against a server that never answers", "[netstack][cancel]") {
  struct Result {
    error_code dial, write, reply;
    bool timed_out = false;
    size_t request_bytes = 0;
    uint64_t sink_count = 0;
  };
  auto r = run([]() -> awaitable<Result> {
    auto exec = co_await asio::this_coro::executor;
    Watchdog wd(exec, 20s);
    Result r;
    // The sink reads and answers nothing before EOF: no HTTP response comes.
    auto [ec, s] = co_await dial({kPeer4, 9001});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    http::request<http::empty_body> req{http::verb::get, "/", 11};
    req.set(http::field::host, "198.19.0.2");
    std::tie(r.write, r.request_bytes) = co_await http::async_write(s, req, kTry);
    boost::beast::flat_buffer buf;
    http::response<http::string_body> res;
    using namespace aex::awaitable_operators;
    asio::steady_timer t(exec, kRace);
    auto v = co_await (http::async_read(s, buf, res, kTry) || t.async_wait(kTry));
    r.timed_out = v.index() == 1;
    // The stream is as it was: more bytes, the end, and the sink's count of all of them.
    const std::string tail = "after the timeout";
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(tail), kTry);
    if (wec) r.write = wec;
    r.request_bytes += wn;
    s.shutdown_send();
    uint8_t reply[16];
    std::tie(r.reply, std::ignore) = co_await asio::async_read(s, asio::buffer(reply), kTry);
    if (!r.reply) r.sink_count = get_u64(reply);
    co_return r;
  }());
  REQUIRE(!r.dial);
  CHECK(!r.write);
  CHECK(r.timed_out);
  CHECK(!r.reply);
  CHECK(r.sink_count == r.request_bytes);
}

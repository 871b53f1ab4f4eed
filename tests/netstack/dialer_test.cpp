// The dialer API end to end, without root, against wgnet_netstack_peer (fixture and
// topology: harness.hpp; the peer's services: peer_main.cpp).
#include <catch2/catch.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>

#include "../support/eventually.hpp"
#include "harness.hpp"

using namespace netstack_test;

TEST_CASE("netstack: TCP to the peer's echo service, IPv4 and IPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  struct Result {
    error_code dial, io;
    std::string echoed;
    Endpoint local, remote;
  };
  auto r = run([](wg::IpAddress to) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 15s);
    Result r;
    auto [ec, s] = co_await dial({to, 7});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    r.local = s.local_endpoint();
    r.remote = s.remote_endpoint();
    const std::string msg = "hello through the tunnel";
    std::tie(r.io, std::ignore) = co_await asio::async_write(s, asio::buffer(msg), kTry);
    r.echoed.resize(msg.size());
    if (!r.io) std::tie(r.io, std::ignore) = co_await asio::async_read(s, asio::buffer(r.echoed), kTry);
    co_return r;
  }(v6 ? kPeer6 : kPeer4));
  INFO("dial: " << error_text(r.dial) << ", io: " << error_text(r.io));
  REQUIRE(!r.dial);
  CHECK(!r.io);
  CHECK(r.echoed == "hello through the tunnel");
  CHECK(r.remote == Endpoint{v6 ? kPeer6 : kPeer4, 7});
  CHECK(r.local.addr == (v6 ? ip("fd00:19::1") : ip("198.19.0.1")));
  CHECK(r.local.port != 0);
}

TEST_CASE("netstack: a closed stream keeps its executor and fails reads cleanly", "[netstack]") {
  struct Result {
    error_code dial, read;
    bool posted = false, same = false;
  };
  auto r = run([](wg::IpAddress to) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 15s);
    Result r;
    auto [ec, s] = co_await dial({to, 7});
    r.dial = ec;
    if (ec) co_return r;
    auto before = s.get_executor();
    s.close();
    auto after = s.get_executor();  // was a null dereference once closed
    r.same = before == after;
    co_await asio::post(after, asio::use_awaitable);
    r.posted = true;
    char b[8];
    std::tie(r.read, std::ignore) = co_await s.async_read_some(asio::buffer(b), kTry);
    co_return r;
  }(kPeer4));
  REQUIRE(!r.dial);
  CHECK(r.same);
  CHECK(r.posted);
  CHECK(r.read == asio::error::bad_descriptor);
}

TEST_CASE("netstack: the peer dials back into listen_tcp", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  struct Result {
    error_code listen, dial, accept;
    std::string hello, answer;
    Endpoint from;
  };
  auto r = run([](bool v6) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 20s);
    Result r;
    auto l = harness().stack->listen_tcp(Endpoint{}, r.listen);  // any address, a free port
    if (r.listen) co_return r;
    wd.watch(l);
    auto [ec, ctrl] = co_await dial({kPeer4, 9100});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(ctrl);
    const std::string cmd = (v6 ? "6 " : "") + std::to_string(l.local_endpoint().port) + "\n";
    co_await asio::async_write(ctrl, asio::buffer(cmd), kTry);
    auto [aec, in] = co_await l.async_accept(kTry);
    r.accept = aec;
    if (!aec) {
      wd.watch(in);
      r.from = in.remote_endpoint();
      std::tie(std::ignore, r.hello) = co_await read_all(in);
    }
    std::tie(std::ignore, r.answer) = co_await read_all(ctrl);
    co_return r;
  }(v6));
  INFO("listen: " << error_text(r.listen) << ", dial: " << error_text(r.dial) << ", accept: "
                  << error_text(r.accept) << ", peer: " << r.answer);
  REQUIRE(!r.listen);
  REQUIRE(!r.dial);
  REQUIRE(!r.accept);
  CHECK(r.hello == "hello from peer");
  CHECK(r.answer == "ok\n");
  CHECK(r.from.addr == (v6 ? kPeer6 : kPeer4));
}

TEST_CASE("netstack: 20 MB each way arrive intact", "[netstack]") {
  static constexpr uint64_t kSize = 20 * 1000 * 1000;

  SECTION("to the peer's sink: byte count and checksum") {
    struct Result {
      error_code ec;
      uint64_t count = 0, sum = 0, expected_sum = 0;
    };
    auto r = run([]() -> awaitable<Result> {
      Watchdog wd(co_await asio::this_coro::executor, 60s);
      Result r;
      auto [ec, s] = co_await dial({kPeer4, 9001});
      r.ec = ec;
      if (ec) co_return r;
      wd.watch(s);
      std::vector<uint8_t> buf(256 * 1024);
      Fnv sum;
      for (uint64_t sent = 0; sent < kSize && !r.ec;) {
        size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), kSize - sent));
        for (size_t i = 0; i < len; ++i) buf[i] = pattern(sent + i) ^ 0x5a;
        sum.add(buf.data(), len);
        std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(buf.data(), len), kTry);
        sent += len;
      }
      r.expected_sum = sum.h;
      if (r.ec) co_return r;
      s.shutdown_send();
      uint8_t reply[16];
      std::tie(r.ec, std::ignore) = co_await asio::async_read(s, asio::buffer(reply), kTry);
      r.count = get_u64(reply);
      r.sum = get_u64(reply + 8);
      co_return r;
    }());
    INFO(error_text(r.ec));
    REQUIRE(!r.ec);
    CHECK(r.count == kSize);
    CHECK(r.sum == r.expected_sum);
  }

  SECTION("from the peer's source: every byte where it belongs") {
    struct Result {
      error_code ec;
      uint64_t count = 0, wrong = 0;
    };
    auto r = run([]() -> awaitable<Result> {
      Watchdog wd(co_await asio::this_coro::executor, 60s);
      Result r;
      auto [ec, s] = co_await dial({kPeer6, 9000});
      r.ec = ec;
      if (ec) co_return r;
      wd.watch(s);
      uint8_t head[8];
      put_u64(head, kSize);
      std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
      std::vector<uint8_t> buf(256 * 1024);
      while (!r.ec) {
        auto [rec, n] = co_await s.async_read_some(asio::buffer(buf), kTry);
        for (size_t i = 0; i < n; ++i) r.wrong += buf[i] != pattern(r.count + i);
        r.count += n;
        if (rec == asio::error::eof) break;
        r.ec = rec;
      }
      co_return r;
    }());
    INFO(error_text(r.ec));
    REQUIRE(!r.ec);
    CHECK(r.count == kSize);
    CHECK(r.wrong == 0);
  }
}

TEST_CASE("netstack: UDP round trip through the peer's echo, IPv4 and IPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  const bool dialed = GENERATE(true, false);
  CAPTURE(v6, dialed);
  struct Result {
    error_code open, send, receive;
    std::string reply;
    Endpoint from;
  };
  auto r = run([](wg::IpAddress to, bool dialed) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 10s);
    Result r;
    auto& st = *harness().stack;
    auto u = dialed ? st.dial_udp({to, 7}, r.open) : st.listen_udp({}, r.open);
    if (r.open) co_return r;
    wd.watch(u);
    const std::string msg = "datagram through the tunnel";
    std::tie(r.send, std::ignore) =
        co_await u.async_send_to(asio::buffer(msg), dialed ? Endpoint{} : Endpoint{to, 7}, kTry);
    if (r.send) co_return r;
    char buf[256];
    auto [ec, n] = co_await u.async_receive_from(asio::buffer(buf), r.from, kTry);
    r.receive = ec;
    r.reply.assign(buf, n);
    co_return r;
  }(v6 ? kPeer6 : kPeer4, dialed));
  INFO("open: " << error_text(r.open) << ", send: " << error_text(r.send) << ", receive: "
                << error_text(r.receive));
  REQUIRE(!r.open);
  REQUIRE(!r.send);
  REQUIRE(!r.receive);
  CHECK(r.reply == "datagram through the tunnel");
  CHECK(r.from == Endpoint{v6 ? kPeer6 : kPeer4, 7});
}

TEST_CASE("netstack: async_wait_readable gives a datagram's size and leaves it to receive", "[netstack]") {
  struct Result {
    error_code open, send, wait, receive;
    size_t size = 0;
    std::string reply;
  };
  auto r = run([](wg::IpAddress to) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 10s);
    Result r;
    auto u = harness().stack->dial_udp({to, 7}, r.open);
    if (r.open) co_return r;
    wd.watch(u);
    const std::string msg = "sized to the datagram";
    std::tie(r.send, std::ignore) = co_await u.async_send_to(asio::buffer(msg), Endpoint{}, kTry);
    if (r.send) co_return r;
    std::tie(r.wait, r.size) = co_await u.async_wait_readable(kTry);
    if (r.wait) co_return r;
    std::string buf(r.size, '\0');
    Endpoint from;
    auto [ec, n] = co_await u.async_receive_from(asio::buffer(buf), from, kTry);
    r.receive = ec;
    r.reply = buf.substr(0, n);
    co_return r;
  }(kPeer4));
  INFO("open: " << error_text(r.open) << ", send: " << error_text(r.send) << ", wait: " << error_text(r.wait)
                << ", receive: " << error_text(r.receive));
  REQUIRE(!r.open);
  REQUIRE(!r.send);
  REQUIRE(!r.wait);
  REQUIRE(!r.receive);
  CHECK(r.size == 21);
  CHECK(r.reply == "sized to the datagram");
}

TEST_CASE("netstack: ping over ICMP and ICMPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  auto& st = *harness().stack;
  error_code ec;
  const auto before = Clock::now();
  auto rtt = st.ping(v6 ? kPeer6 : kPeer4, 3000ms, ec);  // bounded by its own timeout
  const auto took = Clock::now() - before;
  INFO(error_text(ec));
  REQUIRE(!ec);
  // Measured from the request to the reply, both within the call: not a made-up or
  // stale figure. A reply later than the timeout would have been timed_out, so the
  // last check is the contract, not a guess at the machine's speed.
  CHECK(rtt > 0ns);
  CHECK(rtt <= took);
  CHECK(rtt < 3000ms);
}

TEST_CASE("netstack: resolve asks the tunnel's DNS server", "[netstack]") {
  auto& st = *harness().stack;
  error_code ec;

  SECTION("A and AAAA") {
    auto addrs = st.resolve("peer.test", ec);
    INFO(error_text(ec));
    REQUIRE(!ec);
    CHECK(addrs == std::vector<wg::IpAddress>{kPeer4, kPeer6});
  }
  SECTION("a truncated UDP answer is asked again over TCP") {
    // The UDP answer holds the records that fit in 512 bytes and sets TC; all 100 of
    // each type only come over TCP.
    auto addrs = st.resolve("big.test", ec);
    INFO(error_text(ec));
    REQUIRE(!ec);
    REQUIRE(addrs.size() == 200);
    CHECK(addrs.front() == ip("198.19.0.10"));
    CHECK(addrs[99] == ip("198.19.0.109"));
    CHECK(addrs[100] == ip("fd00:19::1000"));
    CHECK(addrs.back() == ip("fd00:19::1063"));
  }
  SECTION("NXDOMAIN is host_not_found") {
    auto addrs = st.resolve("nowhere.test", ec);
    CHECK(ec == asio::error::host_not_found);
    CHECK(addrs.empty());
  }
  SECTION("a literal resolves to itself without a query") {
    auto addrs = st.resolve("[fd00:19::2]", ec);
    CHECK(!ec);
    CHECK(addrs == std::vector<wg::IpAddress>{kPeer6});
  }
  SECTION("names reach TCP services") {
    auto addrs = st.resolve("peer.test", ec);
    REQUIRE(!ec);
    auto r = run([](wg::IpAddress to) -> awaitable<std::pair<error_code, std::string>> {
      Watchdog wd(co_await asio::this_coro::executor, 10s);
      auto [ec, s] = co_await dial({to, 7});
      if (ec) co_return std::pair{ec, std::string{}};
      wd.watch(s);
      co_await asio::async_write(s, asio::buffer(std::string_view("by name")), kTry);
      std::string back(7, '\0');
      auto [rec, n] = co_await asio::async_read(s, asio::buffer(back), kTry);
      co_return std::pair{rec, back};
    }(addrs.front()));
    CHECK(!r.first);
    CHECK(r.second == "by name");
  }
}

TEST_CASE("netstack: a closed port refuses the connection", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  error_code ec;
  auto s = harness().stack->dial_tcp({v6 ? kPeer6 : kPeer4, 9999}, ec);  // bounded by dial_timeout
  CHECK(ec == asio::error::connection_refused);
  CHECK(!s.is_open());
}

TEST_CASE("netstack: destinations outside the allowed IPs are unreachable at once", "[netstack]") {
  auto& st = *harness().stack;
  auto& tun = *harness().tun;
  const auto nowhere = ip("198.19.0.99"), nowhere6 = ip("fd00:19::99");
  error_code ec;
  auto s = st.dial_tcp({nowhere, 80}, ec);
  CHECK(ec == asio::error::host_unreachable);
  auto u = st.dial_udp({nowhere, 53}, ec);
  CHECK(ec == asio::error::host_unreachable);
  st.ping(nowhere6, 3000ms, ec);
  CHECK(ec == asio::error::host_unreachable);
  // Refused locally, no SYN or echo request into the void: a datagram to the silent
  // host, sent after them, reaches the Device after anything they had sent.
  const uint64_t markers = tun.sent_to(kSilent4);
  auto marker = st.dial_udp({kSilent4, 9}, ec);
  REQUIRE(!ec);
  std::promise<error_code> sent;
  marker.async_send_to(asio::buffer("marker", 6), Endpoint{}, [&](error_code e, size_t) { sent.set_value(e); });
  REQUIRE(!sent.get_future().get());
  REQUIRE(wgtest::eventually([&] { return tun.sent_to(kSilent4) > markers; }));
  CHECK(tun.sent_to(nowhere) == 0);
  CHECK(tun.sent_to(nowhere6) == 0);
}

TEST_CASE("netstack: a slow reader holds the sender back, memory stays bounded", "[netstack]") {
  // The peer's source offers 64 MB. After a warm-up at full speed the test reads 64 KB
  // every 5 ms for 2 s: without back-pressure the rest would pile up in this process.
  static constexpr uint64_t kSize = 64 << 20, kWarmup = 4 << 20, kChunk = 64 << 10;
  struct Result {
    error_code ec;
    uint64_t count = 0, wrong = 0, read_while_lagging = 0;
    size_t rss_before = 0, rss_max = 0;
  };
  auto r = run([]() -> awaitable<Result> {
    auto ex = co_await asio::this_coro::executor;
    Watchdog wd(ex, 90s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 9000});
    r.ec = ec;
    if (ec) co_return r;
    wd.watch(s);
    uint8_t head[8];
    put_u64(head, kSize);
    std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
    std::vector<uint8_t> buf(kChunk);
    auto take = [&](size_t n) -> awaitable<bool> {
      auto [rec, got] = co_await asio::async_read(s, asio::buffer(buf.data(), n), kTry);
      for (size_t i = 0; i < got; ++i) r.wrong += buf[i] != pattern(r.count + i);
      r.count += got;
      if (rec && rec != asio::error::eof) r.ec = rec;
      co_return !rec;
    };
    while (!r.ec && r.count < kWarmup) co_await take(kChunk);
    r.rss_before = r.rss_max = rss_bytes();
    asio::steady_timer pause(ex);
    for (auto end = Clock::now() + 2s; !r.ec && Clock::now() < end;) {
      if (!co_await take(kChunk)) break;
      r.read_while_lagging += kChunk;
      r.rss_max = std::max(r.rss_max, rss_bytes());
      pause.expires_after(5ms);
      co_await pause.async_wait(kTry);
    }
    while (!r.ec && r.count < kSize)
      if (!co_await take(std::min<uint64_t>(kChunk, kSize - r.count))) break;
    co_return r;
  }(), 120s);
  INFO(error_text(r.ec) << "; read " << r.read_while_lagging << " bytes while lagging; RSS "
                        << r.rss_before / 1024 << " KiB before, " << r.rss_max / 1024 << " KiB at most");
  REQUIRE(!r.ec);
  CHECK(r.count == kSize);
  CHECK(r.wrong == 0);
  // Growth is bounded by the receive window (4 MiB) plus the pipeline's buffers and
  // queues, not by what was sent; and the reader lagged enough that, without
  // back-pressure, what was left at the peer would have broken the bound.
  constexpr size_t kBound = 32u << 20;
  CHECK(kSize - kWarmup - r.read_while_lagging > kBound);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan's quarantine keeps freed memory resident and TSan shadows every byte: RSS
  // measures allocation churn there, not what is alive.
#else
  CHECK(r.rss_max - r.rss_before < kBound);
#endif
}

TEST_CASE("netstack: writes complete only as the peer's sink consumes", "[netstack]") {
  // The held sink reads nothing for 3 s. Our writes may fill our send buffer (4 MiB) and
  // the peer's receive window (4 MiB), then must wait until the sink reads.
  static constexpr uint64_t kSize = 24 << 20, kChunk = 64 << 10;
  static constexpr auto kHold = 3000ms;
  struct Result {
    error_code ec;
    std::vector<std::pair<Clock::duration, uint64_t>> progress;  // (since the header, bytes written)
    uint64_t count = 0, sum = 0, expected_sum = 0;
  };
  auto r = run([]() -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 60s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 9002});
    r.ec = ec;
    if (ec) co_return r;
    wd.watch(s);
    uint8_t head[8];
    put_u64(head, static_cast<uint64_t>(kHold.count()));
    std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
    const auto start = Clock::now();
    std::vector<uint8_t> buf(kChunk);
    Fnv sum;
    for (uint64_t sent = 0; sent < kSize && !r.ec;) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(sent + i);
      sum.add(buf.data(), buf.size());
      std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(buf), kTry);
      sent += buf.size();
      r.progress.emplace_back(Clock::now() - start, sent);
    }
    r.expected_sum = sum.h;
    if (r.ec) co_return r;
    s.shutdown_send();
    uint8_t reply[16];
    std::tie(r.ec, std::ignore) = co_await asio::async_read(s, asio::buffer(reply), kTry);
    r.count = get_u64(reply);
    r.sum = get_u64(reply + 8);
    co_return r;
  }());
  INFO(error_text(r.ec));
  REQUIRE(!r.ec);
  REQUIRE(!r.progress.empty());
  auto written_by = [&](Clock::duration t) {
    uint64_t w = 0;
    for (auto& [at, bytes] : r.progress)
      if (at <= t) w = bytes;
    return w;
  };
  const uint64_t held = written_by(2500ms);
  INFO("written after 0.5 s: " << written_by(500ms) << ", after 2.5 s: " << held
                               << ", last write done after "
                               << std::chrono::duration_cast<std::chrono::milliseconds>(r.progress.back().first).count()
                               << " ms");
  CHECK(held > 0);
  CHECK(held < 16u << 20);                    // buffers, not the whole stream
  CHECK(r.progress.back().first > 2800ms);    // the rest waited for the sink
  CHECK(r.count == kSize);
  CHECK(r.sum == r.expected_sum);
}

TEST_CASE("netstack: SYNs carry window scaling and SACK-permitted", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  auto r = run([](wg::IpAddress to) -> awaitable<error_code> {
    auto [ec, s] = co_await dial({to, 7});
    co_return ec;
  }(v6 ? kPeer6 : kPeer4));
  REQUIRE(!r);
  auto& tun = *harness().tun;
  const TcpOptions syn = tun.syn_sent(v6 ? 6 : 4), syn_ack = tun.syn_ack_received(v6 ? 6 : 4);
  REQUIRE(syn.seen);
  CHECK(syn.sack_permitted);
  CHECK(syn.window_scale == 7);  // TCP_RCV_SCALE: a 4 MiB window
  CHECK(syn.mss == (v6 ? 1360 : 1380));
  // The peer's lwIP answers in kind: both ends then use scaling and SACK.
  REQUIRE(syn_ack.seen);
  CHECK(syn_ack.sack_permitted);
  CHECK(syn_ack.window_scale == 7);
}

TEST_CASE("netstack: async_wait_readable completes when bytes or EOF arrive", "[netstack]") {
  struct Result {
    error_code dial, early_wait, second, wait, read, eof_wait, eof_read, closed_wait;
    bool done_early = false;
    std::string got;
  };
  auto r = run([]() -> awaitable<Result> {
    auto ex = co_await asio::this_coro::executor;
    Watchdog wd(ex, 20s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 7});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    // Nothing sent yet: the wait stays pending, and is the one read operation.
    auto done = std::make_shared<std::optional<error_code>>();
    s.async_wait_readable([done](error_code e) { *done = e; });
    char b[16];
    std::tie(r.second, std::ignore) = co_await s.async_read_some(asio::buffer(b), kTry);
    asio::steady_timer t(ex, 200ms);
    co_await t.async_wait(kTry);
    r.done_early = done->has_value();
    // The echo of a write makes it readable.
    co_await asio::async_write(s, asio::buffer(std::string_view("wake")), kTry);
    while (!done->has_value()) {
      t.expires_after(10ms);
      co_await t.async_wait(kTry);
    }
    r.wait = **done;
    auto [rec, n] = co_await s.async_read_some(asio::buffer(b), kTry);
    r.read = rec;
    r.got.assign(b, n);
    // EOF is readable too: the echo closes after ours.
    s.shutdown_send();
    std::tie(r.eof_wait) = co_await s.async_wait_readable(kTry);
    std::tie(r.eof_read, std::ignore) = co_await s.async_read_some(asio::buffer(b), kTry);
    co_return r;
  }());
  INFO("dial: " << error_text(r.dial));
  REQUIRE(!r.dial);
  CHECK_FALSE(r.done_early);
  CHECK(r.second == asio::error::in_progress);
  CHECK(!r.wait);
  CHECK(!r.read);
  CHECK(r.got.substr(0, 4) == "wake");  // the echo may come in two segments: 1..4 bytes
  CHECK(!r.eof_wait);
  // The rest of "wake" (if any) first, then EOF.
  CHECK((r.eof_read == asio::error::eof || !r.eof_read));
}

TEST_CASE("netstack: closing a stream ends its async_wait_readable", "[netstack]") {
  struct Result {
    error_code dial, wait, after;
  };
  auto r = run([]() -> awaitable<Result> {
    auto ex = co_await asio::this_coro::executor;
    Watchdog wd(ex, 20s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 7});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    asio::steady_timer t(ex, 100ms);
    t.async_wait([&s](error_code) { s.close(); });
    std::tie(r.wait) = co_await s.async_wait_readable(kTry);
    std::tie(r.after) = co_await s.async_wait_readable(kTry);
    co_return r;
  }());
  REQUIRE(!r.dial);
  CHECK(r.wait == asio::error::operation_aborted);
  CHECK(r.after == asio::error::bad_descriptor);
}

TEST_CASE("netstack: more connections than local ports, one after another, all get a port", "[netstack]") {
  // Each connection ends the way a relayed one does: we send FIN, the peer's echo answers
  // with its own, we close. lwIP would keep each in TIME_WAIT, and its local port, for
  // 120 s: its 16,383 ephemeral ports ran out and dials failed (or stalled the Stack's
  // thread while lwIP searched every list for every port).
  static constexpr int kTotal = 17000, kWorkers = 32;
  struct Result {
    int ok = 0, failed = 0;
    error_code first_error;
  };
  const auto start = Clock::now();
  auto r = run([]() -> awaitable<Result> {
    auto ex = co_await asio::this_coro::executor;
    Result r;
    int next = 0, running = kWorkers;
    auto worker = [&]() -> awaitable<void> {
      while (next < kTotal && r.failed == 0) {
        ++next;
        auto [ec, s] = co_await dial({kPeer4, 7});
        if (!ec) {
          Watchdog wd(ex, 10s);
          wd.watch(s);
          std::tie(ec, std::ignore) = co_await asio::async_write(s, asio::buffer("x", 1), kTry);
          s.shutdown_send();
          if (!ec) std::tie(ec, std::ignore) = co_await read_all(s);
          s.close();
        }
        if (ec && !r.first_error) r.first_error = ec;
        ++(ec ? r.failed : r.ok);
      }
      --running;
    };
    for (int i = 0; i < kWorkers; ++i) asio::co_spawn(ex, worker(), asio::detached);
    asio::steady_timer t(ex);
    while (running > 0) {
      t.expires_after(20ms);
      co_await t.async_wait(kTry);
    }
    co_return r;
  }(), 170s);
  INFO("first error: " << error_text(r.first_error) << "; took "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() << " ms");
  CHECK(r.failed == 0);
  CHECK(r.ok == kTotal);
}

// The resolver of Stack x against DNS servers on Stack y that the test steers, through a
// real WireGuard tunnel in this process (tunnel_pair.hpp):
//
//   x 198.19.0.1 ─ Device ═ 127.0.0.1 ═ Device ─ y 198.19.0.2 :53  Responder dns4
//     (resolver under test)                          fd00:19::2 :53  Responder dns6
//
// Each Responder answers per name and type with records and a TTL, no records, NXDOMAIN,
// SERVFAIL or nothing, may drop the first queries or hold its replies until both families
// were asked, and notes every query it sees. The tests assert on what the responders saw
// (counts, order, which server); times are only compared with generous margins.
#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cctype>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/eventually.hpp"
#include "netstack/stack.hpp"
#include "tunnel_pair.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using netstack::Endpoint;
using netstack::error_code;
using Clock = std::chrono::steady_clock;
using tunnel_pair::Tunnel;
constexpr uint16_t kA = 1, kAaaa = 28;

wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }
const wg::IpAddress kY4 = ip("198.19.0.2"), kY6 = ip("fd00:19::2");

struct Rule {
  enum class Kind { records, no_data, nx_domain, servfail, silent };
  Kind kind = Kind::nx_domain;
  std::vector<wg::IpAddress> addrs;
  uint32_t ttl = 60;
  int drop_first = 0;          // this many queries go unanswered before it answers
  bool hold_for_both = false;  // no reply until both families of the name were asked
};

Rule records(std::vector<wg::IpAddress> a, uint32_t ttl = 60) { return Rule{Rule::Kind::records, std::move(a), ttl}; }
Rule just(Rule::Kind k) { return Rule{k, {}, 60}; }

struct Seen {
  std::string name;
  uint16_t qtype = 0;
  Clock::time_point at;
};

// A DNS server on y at `addr`:53. Unknown names get NXDOMAIN. Rules and the log are
// shared with the test thread under a mutex; the server runs on the Stacks' thread.
class Responder {
public:
  Responder(netstack::Stack& y, const wg::IpAddress& addr) : st_(std::make_shared<State>()) {
    error_code ec;
    st_->sock = y.listen_udp({addr, 53}, ec);
    if (ec) throw std::runtime_error("listen on :53: " + ec.message());
    asio::co_spawn(y.get_executor(), serve(st_), asio::detached);
  }
  ~Responder() { st_->sock.close(); }
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  void set(const std::string& name, uint16_t qtype, Rule r) {
    std::lock_guard lock(st_->mu);
    st_->rules[{name, qtype}] = std::move(r);
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(st_->mu);
    return st_->seen;
  }
  size_t count(const std::string& name, uint16_t qtype) {
    size_t n = 0;
    for (auto& s : seen()) n += s.name == name && s.qtype == qtype;
    return n;
  }
  // When the n-th query (0: the first) of name/qtype came.
  Clock::time_point when(const std::string& name, uint16_t qtype, size_t n) {
    size_t i = 0;
    for (auto& s : seen())
      if (s.name == name && s.qtype == qtype && i++ == n) return s.at;
    FAIL("no query " << n << " of " << name << " type " << qtype);
    return {};
  }

private:
  struct Held {
    Endpoint to;
    std::vector<uint8_t> reply;
  };
  struct State {
    netstack::UdpSocket sock;
    std::mutex mu;
    std::map<std::pair<std::string, uint16_t>, Rule> rules;
    std::map<std::pair<std::string, uint16_t>, int> answered;  // queries seen per name/type
    std::vector<Seen> seen;
    std::map<std::string, std::vector<Held>> held;  // by name
  };

  struct Question {
    std::string name;
    uint16_t qtype = 0;
    size_t end = 0;  // offset just past the question
  };

  static std::optional<Question> question(const uint8_t* p, size_t n) {
    if (n < 12 || (p[2] & 0x80) || p[4] != 0 || p[5] != 1) return std::nullopt;
    Question q;
    size_t off = 12;
    while (off < n && p[off] != 0) {
      const size_t len = p[off];
      if (len > 63 || off + 1 + len >= n) return std::nullopt;
      if (!q.name.empty()) q.name += '.';
      for (size_t i = 0; i < len; ++i) q.name += static_cast<char>(std::tolower(p[off + 1 + i]));
      off += 1 + len;
    }
    if (off + 5 > n) return std::nullopt;
    q.qtype = static_cast<uint16_t>(p[off + 1] << 8 | p[off + 2]);
    q.end = off + 5;
    return q;
  }

  // The reply to `query` under rule r: header and question copied, then r's records.
  static std::vector<uint8_t> reply(const uint8_t* query, const Question& q, const Rule& r) {
    std::vector<uint8_t> out(query, query + q.end);
    const uint8_t rcode = r.kind == Rule::Kind::nx_domain ? 3 : r.kind == Rule::Kind::servfail ? 2 : 0;
    out[2] = static_cast<uint8_t>(0x84 | (query[2] & 0x01));  // QR, AA, RD copied
    out[3] = static_cast<uint8_t>(0x80 | rcode);              // RA
    for (size_t i = 6; i < 12; ++i) out[i] = 0;
    uint16_t count = 0;
    if (r.kind == Rule::Kind::records) {
      for (auto& a : r.addrs) {
        if (a.is_v4() != (q.qtype == kA)) continue;
        const size_t len = a.is_v4() ? 4 : 16;
        const uint8_t rr[12] = {0xc0, 0x0c, static_cast<uint8_t>(q.qtype >> 8), static_cast<uint8_t>(q.qtype), 0, 1,
                                static_cast<uint8_t>(r.ttl >> 24), static_cast<uint8_t>(r.ttl >> 16),
                                static_cast<uint8_t>(r.ttl >> 8), static_cast<uint8_t>(r.ttl), 0,
                                static_cast<uint8_t>(len)};
        out.insert(out.end(), rr, rr + sizeof rr);
        out.insert(out.end(), a.bytes.begin(), a.bytes.begin() + static_cast<ptrdiff_t>(len));
        ++count;
      }
    }
    out[7] = static_cast<uint8_t>(count);
    return out;
  }

  static asio::awaitable<void> serve(std::shared_ptr<State> st) {
    constexpr auto kTry = asio::as_tuple(asio::use_awaitable);
    std::vector<uint8_t> buf(4096);
    for (;;) {
      Endpoint from;
      auto [ec, n] = co_await st->sock.async_receive_from(asio::buffer(buf), from, kTry);
      if (ec) co_return;
      auto q = question(buf.data(), n);
      if (!q) continue;
      std::vector<Held> out;
      {
        std::lock_guard lock(st->mu);
        st->seen.push_back({q->name, q->qtype, Clock::now()});
        auto it = st->rules.find({q->name, q->qtype});
        const Rule r = it == st->rules.end() ? Rule{} : it->second;
        const int nth = st->answered[{q->name, q->qtype}]++;
        if (r.kind == Rule::Kind::silent || nth < r.drop_first) continue;
        auto& held = st->held[q->name];
        held.push_back({from, reply(buf.data(), *q, r)});
        const bool both = st->answered.count({q->name, kA}) && st->answered.count({q->name, kAaaa});
        if (!r.hold_for_both || both) out = std::exchange(held, {});
      }
      for (auto& h : out) co_await st->sock.async_send_to(asio::buffer(h.reply), h.to, kTry);
    }
  }

  std::shared_ptr<State> st_;
};

netstack::StackOptions options(std::vector<wg::IpAddress> servers, std::chrono::milliseconds retry = 1000ms,
                               std::chrono::milliseconds timeout = 5000ms, size_t cache = 256) {
  netstack::StackOptions o;
  o.dns_servers = std::move(servers);
  o.dns_retry = retry;
  o.dns_timeout = timeout;
  o.dns_cache_size = cache;
  return o;
}

// A tunnel whose x resolves with `o`, and a responder on each of y's addresses.
struct Setup {
  explicit Setup(netstack::StackOptions o) : t(std::move(o)), dns4(*t.y.stack, kY4), dns6(*t.y.stack, kY6) {}
  Tunnel t;
  Responder dns4, dns6;
};

struct Looked {
  error_code ec;
  std::vector<wg::IpAddress> addrs;
  Clock::duration took{};
};

// A lookup through x started; its result arrives in the future.
std::future<Looked> start_lookup(Setup& s, const std::string& name) {
  auto done = std::make_shared<std::promise<Looked>>();
  s.t.x.stack->async_resolve(name, [done, start = Clock::now()](error_code ec, std::vector<wg::IpAddress> a) {
    done->set_value(Looked{ec, std::move(a), Clock::now() - start});
  });
  return done->get_future();
}

// One lookup through x, from this thread; bounded so that a lost completion fails the test.
Looked resolve(Setup& s, const std::string& name) {
  auto f = start_lookup(s, name);
  REQUIRE(f.wait_for(20s) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("resolver: A and AAAA leave together", "[netstack][resolver]") {
  // Replies are held until both families were asked: one after the other would see its
  // first query unanswered, retry it, and give up before asking the second.
  Setup s(options({kY4}));
  Rule both = records({kY4, kY6});
  both.hold_for_both = true;
  s.dns4.set("both.test", kA, both);
  s.dns4.set("both.test", kAaaa, both);
  auto r = resolve(s, "both.test");
  INFO(r.ec.message());
  REQUIRE(!r.ec);
  CHECK(r.addrs == std::vector<wg::IpAddress>{kY4, kY6});
  CHECK(s.dns4.count("both.test", kA) == 1);
  CHECK(s.dns4.count("both.test", kAaaa) == 1);
}

TEST_CASE("resolver: A timed out and AAAA without records is a timeout, not no data", "[netstack][resolver]") {
  Setup s(options({kY4}, 100ms, 600ms));
  s.dns4.set("v6less.test", kA, just(Rule::Kind::silent));
  s.dns4.set("v6less.test", kAaaa, just(Rule::Kind::no_data));
  auto r = resolve(s, "v6less.test");
  CHECK(r.ec == asio::error::timed_out);
  CHECK(r.addrs.empty());
  // Not cached: the next lookup asks again.
  const size_t before = s.dns4.count("v6less.test", kA);
  CHECK(resolve(s, "v6less.test").ec == asio::error::timed_out);
  CHECK(s.dns4.count("v6less.test", kA) > before);

  // Both without records: no data, permanent.
  s.dns4.set("empty.test", kA, just(Rule::Kind::no_data));
  s.dns4.set("empty.test", kAaaa, just(Rule::Kind::no_data));
  CHECK(resolve(s, "empty.test").ec == asio::error::no_data);
}

TEST_CASE("resolver: an unanswered query is sent again after dns_retry (1 s)", "[netstack][resolver]") {
  // AAAA has no records: the lookup waits for A, whose first query goes unanswered.
  Setup s(options({kY4}));
  Rule late = records({kY4});
  late.drop_first = 1;
  s.dns4.set("late.test", kA, late);
  s.dns4.set("late.test", kAaaa, just(Rule::Kind::no_data));
  auto r = resolve(s, "late.test");
  INFO(r.ec.message());
  REQUIRE(!r.ec);
  CHECK(r.addrs == std::vector<wg::IpAddress>{kY4});
  CHECK(s.dns4.count("late.test", kA) == 2);
  CHECK(s.dns4.count("late.test", kAaaa) == 1);  // answered: not sent again
  // The retry waited for its time (the schedule itself: dns_lookup_test, on no clock).
  const auto gap = s.dns4.when("late.test", kA, 1) - s.dns4.when("late.test", kA, 0);
  CHECK(gap >= 900ms);
}

TEST_CASE("resolver: a silent server is asked on the schedule, then timed_out within the bound",
          "[netstack][resolver]") {
  // dns_retry 200 ms, dns_timeout 1 s: sends at 0, 200, 600 ms (the next, 1400, is past).
  Setup s(options({kY4}, 200ms, 1000ms));
  s.dns4.set("silent.test", kA, just(Rule::Kind::silent));
  s.dns4.set("silent.test", kAaaa, just(Rule::Kind::silent));
  auto r = resolve(s, "silent.test");
  CHECK(r.ec == asio::error::timed_out);
  CHECK(r.took >= 950ms);
  // Every send the schedule makes before the bound, each family; that none follows the
  // bound is dns_lookup_test's (the schedule ends there).
  CHECK(wgtest::eventually([&] { return s.dns4.count("silent.test", kA) >= 3; }));
  CHECK(s.dns4.count("silent.test", kA) == 3);
  CHECK(wgtest::eventually([&] { return s.dns4.count("silent.test", kAaaa) >= 3; }));
  CHECK(s.dns4.count("silent.test", kAaaa) == 3);
}

TEST_CASE("resolver: the second server is asked when the first is silent", "[netstack][resolver]") {
  Setup s(options({kY4, kY6}));
  for (uint16_t t : {kA, kAaaa}) {
    s.dns4.set("two.test", t, just(Rule::Kind::silent));
    s.dns6.set("two.test", t, records({kY4, kY6}));
  }
  auto r = resolve(s, "two.test");
  INFO(r.ec.message());
  REQUIRE(!r.ec);
  CHECK(r.addrs == std::vector<wg::IpAddress>{kY4, kY6});
  CHECK(s.dns4.count("two.test", kA) == 1);
  CHECK(s.dns6.count("two.test", kA) == 1);
  CHECK(s.dns6.count("two.test", kAaaa) == 1);
  CHECK(s.dns6.when("two.test", kA, 0) - s.dns4.when("two.test", kA, 0) >= 900ms);
}

TEST_CASE("resolver: a server failure moves on to the next server at once", "[netstack][resolver]") {
  Setup s(options({kY4, kY6}, 2000ms, 5000ms));
  for (uint16_t t : {kA, kAaaa}) {
    s.dns4.set("fail.test", t, just(Rule::Kind::servfail));
    s.dns6.set("fail.test", t, records({kY4}));
  }
  auto r = resolve(s, "fail.test");
  INFO(r.ec.message());
  REQUIRE(!r.ec);
  CHECK(r.addrs == std::vector<wg::IpAddress>{kY4});
  CHECK(s.dns6.count("fail.test", kA) == 1);
  // Long before the 2 s the schedule would have waited.
  CHECK(s.dns6.when("fail.test", kA, 0) - s.dns4.when("fail.test", kA, 0) < 1500ms);

  // Every server failing: a temporary failure.
  for (auto* d : {&s.dns4, &s.dns6})
    for (uint16_t t : {kA, kAaaa}) d->set("down.test", t, just(Rule::Kind::servfail));
  CHECK(resolve(s, "down.test").ec == asio::error::host_not_found_try_again);
}

TEST_CASE("resolver: a name with only an A record does not wait for a lost AAAA", "[netstack][resolver]") {
  Setup s(options({kY4}));
  s.dns4.set("v4only.test", kA, records({kY4}));
  s.dns4.set("v4only.test", kAaaa, just(Rule::Kind::silent));
  auto r = resolve(s, "v4only.test");
  INFO(r.ec.message());
  REQUIRE(!r.ec);
  CHECK(r.addrs == std::vector<wg::IpAddress>{kY4});
  // Answered after the short wait for the other family, before the retry at 1 s.
  CHECK(s.dns4.count("v4only.test", kAaaa) == 1);
}

TEST_CASE("resolver: answers are cached, a burst of lookups costs one query", "[netstack][resolver]") {
  Setup s(options({kY4}));
  s.dns4.set("peer.test", kA, records({kY4}, 300));
  s.dns4.set("peer.test", kAaaa, records({kY6}, 300));
  // Ten at once: they share the one lookup in flight.
  std::vector<std::future<Looked>> burst;
  for (int i = 0; i < 10; ++i) burst.push_back(start_lookup(s, "peer.test"));
  for (auto& f : burst) {
    REQUIRE(f.wait_for(20s) == std::future_status::ready);
    auto r = f.get();
    CHECK(!r.ec);
    CHECK(r.addrs == std::vector<wg::IpAddress>{kY4, kY6});
  }
  CHECK(s.dns4.count("peer.test", kA) == 1);
  CHECK(s.dns4.count("peer.test", kAaaa) == 1);
  // Later ones, in other spellings of the name, from the cache.
  for (const char* name : {"peer.test", "PEER.test", "peer.test."}) {
    auto r = resolve(s, name);
    CHECK(!r.ec);
    CHECK(r.addrs == std::vector<wg::IpAddress>{kY4, kY6});
  }
  CHECK(s.dns4.count("peer.test", kA) == 1);
  CHECK(s.dns4.count("peer.test", kAaaa) == 1);

  // NXDOMAIN too, for a while.
  CHECK(resolve(s, "nowhere.test").ec == asio::error::host_not_found);
  CHECK(resolve(s, "nowhere.test").ec == asio::error::host_not_found);
  CHECK(s.dns4.count("nowhere.test", kA) == 1);
}

TEST_CASE("resolver: an answer whose TTL has run out is asked for again", "[netstack][resolver]") {
  Setup s(options({kY4}));
  s.dns4.set("short.test", kA, records({kY4}, 1));
  s.dns4.set("short.test", kAaaa, records({kY6}, 1));
  REQUIRE(!resolve(s, "short.test").ec);
  REQUIRE(!resolve(s, "short.test").ec);
  CHECK(s.dns4.count("short.test", kA) == 1);
  std::this_thread::sleep_for(1100ms);
  REQUIRE(!resolve(s, "short.test").ec);
  CHECK(s.dns4.count("short.test", kA) == 2);
  CHECK(s.dns4.count("short.test", kAaaa) == 2);
}

TEST_CASE("resolver: the cache holds at most dns_cache_size names", "[netstack][resolver]") {
  Setup s(options({kY4}, 1000ms, 5000ms, 2));
  for (const char* name : {"a.test", "b.test", "c.test"}) {
    s.dns4.set(name, kA, records({kY4}, 300));
    s.dns4.set(name, kAaaa, just(Rule::Kind::no_data));
  }
  for (const char* name : {"a.test", "b.test", "c.test"}) REQUIRE(!resolve(s, name).ec);
  // a.test was the least recently used of three: gone; c.test is still there.
  REQUIRE(!resolve(s, "c.test").ec);
  REQUIRE(!resolve(s, "a.test").ec);
  CHECK(s.dns4.count("c.test", kA) == 1);
  CHECK(s.dns4.count("a.test", kA) == 2);
}

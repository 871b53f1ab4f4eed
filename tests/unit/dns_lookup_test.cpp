// The resolver's decisions without I/O: the schedule of a lookup's sends across its
// servers, what two families' outcomes mean together, and the cache of results against
// a fake clock.
#include <catch2/catch.hpp>

#include <boost/asio/error.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "netstack/dns_cache.hpp"
#include "netstack/dns_lookup.hpp"

namespace {

using namespace std::chrono_literals;
using namespace netstack::dns;
namespace e = boost::asio::error;

// The sends of a lookup, as offsets from its start, until the schedule ends.
std::vector<Clock::duration> schedule(size_t servers, Clock::duration retry = 1s, Clock::duration total = 5s) {
  std::vector<Clock::duration> out;
  for (size_t i = 0;; ++i) {
    auto at = send_at(i, servers, retry, total);
    if (!at) return out;
    out.push_back(*at);
    REQUIRE(out.size() < 100);
  }
}

wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }

FamilyResult addresses(std::vector<wg::IpAddress> a, uint32_t ttl) {
  return FamilyResult{Outcome::addresses, std::move(a), ttl};
}
FamilyResult just(Outcome o) { return FamilyResult{o, {}, 0}; }

struct FakeClock {
  Clock::time_point now = Clock::time_point{} + 1000h;
};

Resolution positive(const char* addr, Clock::duration ttl) { return Resolution{{}, {ip(addr)}, ttl}; }

}  // namespace

TEST_CASE("dns schedule: one server, first retry after 1 s, the gap doubling, all within 5 s", "[dns][resolver]") {
  CHECK(schedule(1) == std::vector<Clock::duration>{0s, 1s, 3s});
  CHECK(schedule(1, 1s, 3s) == std::vector<Clock::duration>{0s, 1s});
  CHECK(schedule(1, 1s, 3001ms) == std::vector<Clock::duration>{0s, 1s, 3s});
}

TEST_CASE("dns schedule: several servers in turn, the gap doubling per round", "[dns][resolver]") {
  // Send i goes to server i % servers.
  CHECK(schedule(2) == std::vector<Clock::duration>{0s, 1s, 2s, 4s});
  CHECK(schedule(3) == std::vector<Clock::duration>{0s, 1s, 2s, 3s});
  CHECK(schedule(3, 500ms) == std::vector<Clock::duration>{0ms, 500ms, 1000ms, 1500ms, 2500ms, 3500ms, 4500ms});
  CHECK(schedule(0).empty());
  // Far past the total: no overflow of the doubling, just the end.
  CHECK_FALSE(send_at(1000, 1, 1s, 5s));
}

TEST_CASE("dns combine: addresses of either family win, A's first", "[dns][resolver]") {
  auto r = combine(addresses({ip("198.19.0.2")}, 300), addresses({ip("fd00:19::2")}, 60));
  CHECK(!r.ec);
  CHECK(r.addresses == std::vector<wg::IpAddress>{ip("198.19.0.2"), ip("fd00:19::2")});
  CHECK(r.cache_for == 60s);  // the smaller TTL

  r = combine(addresses({ip("198.19.0.2")}, 300), just(Outcome::no_data));
  CHECK(!r.ec);
  CHECK(r.cache_for == 300s);
  CHECK(combine(addresses({ip("198.19.0.2")}, 86400 * 7), just(Outcome::no_data)).cache_for == kMaxTtl);
  CHECK(combine(addresses({ip("198.19.0.2")}, 0), just(Outcome::no_data)).cache_for == 0s);
}

TEST_CASE("dns combine: addresses with the other family failed are kept only briefly", "[dns][resolver]") {
  for (auto other : {Outcome::timed_out, Outcome::pending, Outcome::server_failure}) {
    auto r = combine(just(other), addresses({ip("fd00:19::2")}, 3600));
    CHECK(!r.ec);
    CHECK(r.addresses == std::vector<wg::IpAddress>{ip("fd00:19::2")});
    CHECK(r.cache_for == kNegativeTtl);
  }
}

TEST_CASE("dns combine: a timeout with no records of the other family is a timeout, not no data",
          "[dns][resolver]") {
  auto r = combine(just(Outcome::timed_out), just(Outcome::no_data));
  CHECK(r.ec == e::timed_out);
  CHECK(r.cache_for == 0s);  // temporary: never cached
  CHECK(combine(just(Outcome::no_data), just(Outcome::pending)).ec == e::timed_out);
  CHECK(combine(just(Outcome::timed_out), just(Outcome::timed_out)).ec == e::timed_out);
  CHECK(combine(just(Outcome::timed_out), just(Outcome::server_failure)).ec == e::timed_out);
}

TEST_CASE("dns combine: NXDOMAIN, server failure and no data", "[dns][resolver]") {
  auto nx = combine(just(Outcome::nx_domain), just(Outcome::timed_out));
  CHECK(nx.ec == e::host_not_found);
  CHECK(nx.cache_for == kNegativeTtl);
  auto fail = combine(just(Outcome::server_failure), just(Outcome::no_data));
  CHECK(fail.ec == e::host_not_found_try_again);
  CHECK(fail.cache_for == 0s);
  auto none = combine(just(Outcome::no_data), just(Outcome::no_data));
  CHECK(none.ec == e::no_data);
  CHECK(none.cache_for == kNegativeTtl);
}

TEST_CASE("dns cache: a result is kept until its time is up, then gone", "[dns][resolver]") {
  FakeClock c;
  Cache cache(4);
  cache.insert("peer.test", positive("198.19.0.2", 60s), c.now);
  auto hit = cache.find("peer.test", c.now + 60s - 1ns);
  REQUIRE(hit);
  CHECK(!hit->ec);
  CHECK(hit->addresses == std::vector<wg::IpAddress>{ip("198.19.0.2")});
  CHECK_FALSE(cache.find("peer.test", c.now + 60s));
  CHECK(cache.size() == 0);  // dropped when found expired
  CHECK_FALSE(cache.find("other.test", c.now));
}

TEST_CASE("dns cache: negative results, and what is not to be cached", "[dns][resolver]") {
  FakeClock c;
  Cache cache(4);
  cache.insert("nowhere.test", combine(just(Outcome::nx_domain), just(Outcome::nx_domain)), c.now);
  auto hit = cache.find("nowhere.test", c.now + kNegativeTtl - 1ns);
  REQUIRE(hit);
  CHECK(hit->ec == e::host_not_found);
  CHECK_FALSE(cache.find("nowhere.test", c.now + kNegativeTtl));

  cache.insert("slow.test", combine(just(Outcome::timed_out), just(Outcome::no_data)), c.now);
  CHECK_FALSE(cache.find("slow.test", c.now));
  // A result not to be cached also drops the older one.
  cache.insert("peer.test", positive("198.19.0.2", 60s), c.now);
  cache.insert("peer.test", positive("198.19.0.2", 0s), c.now);
  CHECK_FALSE(cache.find("peer.test", c.now));
  Cache none(0);
  none.insert("peer.test", positive("198.19.0.2", 60s), c.now);
  CHECK_FALSE(none.find("peer.test", c.now));
}

TEST_CASE("dns cache: bounded, the least recently used name makes room", "[dns][resolver]") {
  FakeClock c;
  Cache cache(3);
  cache.insert("a.test", positive("198.19.0.1", 60s), c.now);
  cache.insert("b.test", positive("198.19.0.2", 60s), c.now);
  cache.insert("c.test", positive("198.19.0.3", 60s), c.now);
  CHECK(cache.find("a.test", c.now));  // a is now the most recently used
  cache.insert("d.test", positive("198.19.0.4", 60s), c.now);
  CHECK(cache.size() == 3);
  CHECK_FALSE(cache.find("b.test", c.now));
  CHECK(cache.find("a.test", c.now));
  CHECK(cache.find("c.test", c.now));
  CHECK(cache.find("d.test", c.now));
  for (int i = 0; i < 1000; ++i) cache.insert("n" + std::to_string(i) + ".test", positive("198.19.0.9", 60s), c.now);
  CHECK(cache.size() == 3);
  CHECK(cache.find("n999.test", c.now));
}

TEST_CASE("dns cache: names are keyed without case and trailing dot", "[dns][resolver]") {
  CHECK(Cache::key("Peer.TEST.") == "peer.test");
  CHECK(Cache::key("peer.test") == "peer.test");
  CHECK(Cache::key("") == "");
}

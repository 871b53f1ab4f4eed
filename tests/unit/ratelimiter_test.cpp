// RateLimiter with a fake clock: burst, refill rate, IPv6 /64 keying, table bound, and
// the lazy sweep of idle sources.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string_view>
#include <thread>
#include <vector>

#include "wg/ratelimiter.hpp"

namespace {

using namespace std::chrono_literals;
using wg::IpAddress;
using wg::RateLimiter;
using Clock = std::chrono::steady_clock;

const Clock::time_point t0{1h};  // arbitrary fake epoch

IpAddress ip(std::string_view s) { return IpAddress::parse(s).value(); }

// How many of n back-to-back initiations from `src` at `now` get through.
int allowed_of(RateLimiter& rl, const IpAddress& src, Clock::time_point now, int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) ok += rl.allow(src, now);
  return ok;
}

}  // namespace

TEST_CASE("ratelimiter: a burst of 5, then deny", "[ratelimiter]") {
  RateLimiter rl;
  const auto a = ip("198.51.100.7");
  for (int i = 0; i < 5; ++i) CHECK(rl.allow(a, t0));
  CHECK_FALSE(rl.allow(a, t0));
  CHECK_FALSE(rl.allow(a, t0));
  CHECK(rl.size() == 1);
}

TEST_CASE("ratelimiter: refills at 20 per second", "[ratelimiter]") {
  RateLimiter rl;
  const auto a = ip("198.51.100.7");
  REQUIRE(allowed_of(rl, a, t0, 5) == 5);

  SECTION("exactly one more after 50 ms, not a nanosecond before") {
    CHECK_FALSE(rl.allow(a, t0 + 50ms - 1ns));
    CHECK(rl.allow(a, t0 + 50ms));
    CHECK_FALSE(rl.allow(a, t0 + 50ms));
  }
  SECTION("a denied packet does not forfeit the time it waited") {
    CHECK_FALSE(rl.allow(a, t0 + 30ms));
    CHECK(rl.allow(a, t0 + 50ms));
  }
  SECTION("20 in a second of steady polling") {
    int ok = 0;
    for (int ms = 1; ms <= 1000; ++ms) ok += rl.allow(a, t0 + std::chrono::milliseconds(ms));
    CHECK(ok == 20);
  }
  SECTION("a long pause earns no more than the burst") {
    CHECK(allowed_of(rl, a, t0 + 900ms, 10) == 5);
  }
  SECTION("a clock going backwards earns nothing") {
    CHECK_FALSE(rl.allow(a, t0 - 10s));
    CHECK_FALSE(rl.allow(a, t0 + 50ms - 1ns));
    CHECK(rl.allow(a, t0 + 50ms));
  }
}

TEST_CASE("ratelimiter: IPv4 keyed by full address, IPv6 by /64", "[ratelimiter]") {
  RateLimiter rl;

  SECTION("IPv4 neighbours have their own buckets") {
    CHECK(allowed_of(rl, ip("198.19.0.1"), t0, 10) == 5);
    CHECK(allowed_of(rl, ip("198.19.0.2"), t0, 10) == 5);
    CHECK(rl.size() == 2);
  }
  SECTION("IPv6 addresses in one /64 share a bucket") {
    CHECK(allowed_of(rl, ip("2001:db8:1:2::1"), t0, 3) == 3);
    CHECK(allowed_of(rl, ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), t0, 10) == 2);
    CHECK_FALSE(rl.allow(ip("2001:db8:1:2:abcd::9"), t0));
    CHECK(rl.size() == 1);
  }
  SECTION("different /64s do not") {
    CHECK(allowed_of(rl, ip("2001:db8:1:2::1"), t0, 10) == 5);
    CHECK(allowed_of(rl, ip("2001:db8:1:3::1"), t0, 10) == 5);
    CHECK(allowed_of(rl, ip("2001:db8:1:2::1"), t0, 10) == 0);
    CHECK(rl.size() == 2);
  }
  SECTION("an IPv4 address and an IPv6 one with the same leading bytes do not") {
    CHECK(allowed_of(rl, ip("198.19.0.1"), t0, 10) == 5);
    CHECK(allowed_of(rl, ip("a00:1::"), t0, 10) == 5);
    CHECK(rl.size() == 2);
  }
  SECTION("an empty address is denied and not tracked") {
    CHECK_FALSE(rl.allow(IpAddress{}, t0));
    CHECK(rl.size() == 0);
  }
}

TEST_CASE("ratelimiter: a full table denies new sources", "[ratelimiter]") {
  RateLimiter rl(4);
  for (int i = 1; i <= 4; ++i) REQUIRE(rl.allow(ip("198.19.0." + std::to_string(i)), t0));
  CHECK_FALSE(rl.allow(ip("198.19.0.5"), t0));
  CHECK_FALSE(rl.allow(ip("2001:db8::5"), t0 + 500ms));
  CHECK(rl.size() == 4);
  CHECK(rl.allow(ip("198.19.0.1"), t0 + 500ms));  // known sources carry on

  // Once the others have been idle for over a second, the sweep makes room.
  CHECK(rl.allow(ip("198.19.0.5"), t0 + 1s + 1ns));
  CHECK(rl.size() == 2);  // 198.19.0.1 (seen at 500 ms) and 198.19.0.5
}

TEST_CASE("ratelimiter: clear forgets every source, drained or filling the table", "[ratelimiter]") {
  RateLimiter rl(2);
  const auto a = ip("198.51.100.7"), b = ip("198.51.100.8");
  REQUIRE(allowed_of(rl, a, t0, 6) == 5);
  REQUIRE(rl.allow(b, t0));
  REQUIRE_FALSE(rl.allow(ip("198.51.100.9"), t0));  // table full
  rl.clear();
  CHECK(rl.size() == 0);
  CHECK(allowed_of(rl, a, t0, 6) == 5);  // a full burst again, at the same instant
  CHECK(rl.allow(ip("198.51.100.9"), t0));
}

TEST_CASE("ratelimiter: idle sources are swept lazily, at most once a second", "[ratelimiter]") {
  RateLimiter rl;
  const auto a = ip("198.19.0.1"), b = ip("198.19.0.2"), c = ip("198.19.0.3"), d = ip("198.19.0.4");
  REQUIRE(rl.allow(a, t0));  // first call sweeps an empty table; next sweep at t0 + 1 s
  REQUIRE(rl.allow(b, t0));
  REQUIRE(rl.allow(c, t0));
  REQUIRE(rl.allow(a, t0 + 500ms));
  CHECK(rl.size() == 3);

  // Sweep at 1.5 s: b and c idle 1.5 s go; a, idle exactly 1 s, stays.
  REQUIRE(rl.allow(d, t0 + 1500ms));
  CHECK(rl.size() == 2);
  // No sweep before 2.5 s, though a is now idle for 1.9 s.
  REQUIRE(rl.allow(d, t0 + 2400ms));
  CHECK(rl.size() == 2);
  // Sweep at 2.5 s: a goes, d (seen 100 ms ago) stays.
  REQUIRE(rl.allow(d, t0 + 2500ms));
  CHECK(rl.size() == 1);
  // A swept source comes back with a full burst.
  CHECK(allowed_of(rl, a, t0 + 2500ms, 10) == 5);
}

TEST_CASE("ratelimiter: concurrent callers share one bucket correctly", "[ratelimiter]") {
  RateLimiter rl;
  const auto a = ip("203.0.113.9");
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) ok += rl.allow(a, t0);
    });
  for (auto& th : threads) th.join();
  CHECK(ok == 5);
}

// ReplayFilter: the kernel self-test's 34 numbered cases, its window-edge runs, and a
// randomized comparison against a naive set-based reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "wg/replay.hpp"

namespace {

using wg::kReplayWindow;
using wg::ReplayFilter;

// REJECT_AFTER_MESSAGES from the WireGuard paper: 2^64 - 2^13 - 1.
constexpr uint64_t kRejectAfterMessages = std::numeric_limits<uint64_t>::max() - (uint64_t{1} << 13);
constexpr uint64_t kLim = kReplayWindow + 1;  // the self-test's T_LIM
constexpr uint64_t kRej = kRejectAfterMessages;

struct Step {
  int n;             // case number in the kernel's selftest/counter.c
  uint64_t counter;
  bool accepted;
};

// One filter, fed in order.
constexpr Step kSteps[] = {
    {1, 0, true},
    {2, 1, true},
    {3, 1, false},
    {4, 9, true},
    {5, 8, true},
    {6, 7, true},
    {7, 7, false},
    {8, kLim, true},
    {9, kLim - 1, true},
    {10, kLim - 1, false},
    {11, kLim - 2, true},
    {12, 2, true},
    {13, 2, false},
    {14, kLim + 16, true},
    {15, 3, false},  // now just outside the window
    {16, kLim + 16, false},
    {17, kLim * 4, true},
    {18, kLim * 4 - (kLim - 1), true},  // exactly kReplayWindow behind: still in
    {19, 10, false},
    {20, kLim * 4 - kLim, false},  // one past the window
    {21, kLim * 4 - (kLim + 1), false},
    {22, kLim * 4 - (kLim - 2), true},
    {23, kLim * 4 + 1 - kLim, false},  // same counter as 18
    {24, 0, false},
    {25, kRej, false},  // at the limit
    {26, kRej - 1, true},
    {27, kRej, false},
    {28, kRej - 1, false},
    {29, kRej - 2, true},
    {30, kRej + 1, false},
    {31, kRej + 2, false},
    {32, kRej - 2, false},
    {33, kRej - 3, true},
    {34, 0, false},
};

}  // namespace

TEST_CASE("replay: the kernel's 34 numbered counter cases", "[replay]") {
  ReplayFilter f;
  for (const Step& s : kSteps) {
    INFO("case " << s.n << ", counter " << s.counter);
    CHECK(f.validate(s.counter, kRejectAfterMessages) == s.accepted);
  }
  STATIC_REQUIRE(sizeof(kSteps) / sizeof(kSteps[0]) == 34);
}

TEST_CASE("replay: edges of the window", "[replay]") {
  ReplayFilter f;
  auto ok = [&](uint64_t c) { return f.validate(c, kRejectAfterMessages); };
  auto all_ok = [&](uint64_t from, uint64_t to) {  // descending when from > to, inclusive
    bool good = true;
    for (uint64_t c = from;; c = from < to ? c + 1 : c - 1) {
      good = good && ok(c);
      if (c == to) break;
    }
    return good;
  };

  SECTION("ascending to the window size, then 0 is the oldest still accepted") {
    CHECK(all_ok(1, kReplayWindow));
    CHECK(ok(0));
    CHECK_FALSE(ok(0));
  }
  SECTION("ascending one further, then 1 is in and 0 is out") {
    CHECK(all_ok(2, kReplayWindow + 1));
    CHECK(ok(1));
    CHECK_FALSE(ok(0));
  }
  SECTION("descending from the window size reaches 0") {
    CHECK(all_ok(kReplayWindow, 0));
  }
  SECTION("descending from one past the window size stops short of 0") {
    CHECK(all_ok(kReplayWindow + 1, 1));
    CHECK_FALSE(ok(0));
  }
  SECTION("descending, then a step forward pushes 0 out") {
    CHECK(all_ok(kReplayWindow, 1));
    CHECK(ok(kReplayWindow + 1));
    CHECK_FALSE(ok(0));
  }
  SECTION("descending, then 0, then a step forward") {
    CHECK(all_ok(kReplayWindow, 1));
    CHECK(ok(0));
    CHECK(ok(kReplayWindow + 1));
  }
}

TEST_CASE("replay: reset forgets every counter", "[replay]") {
  ReplayFilter f;
  REQUIRE(f.validate(5, kRejectAfterMessages));
  REQUIRE(f.validate(100000, kRejectAfterMessages));
  REQUIRE_FALSE(f.validate(5, kRejectAfterMessages));
  f.reset();
  CHECK(f.validate(5, kRejectAfterMessages));
  CHECK(f.validate(0, kRejectAfterMessages));
}

TEST_CASE("replay: a jump over the whole ring clears stale bits", "[replay]") {
  ReplayFilter f;
  for (uint64_t c = 0; c < 200; ++c) REQUIRE(f.validate(c, kRejectAfterMessages));
  // 128 blocks of 64 later, the same ring slots come back; they must read as unseen.
  const uint64_t jump = 128 * 64;
  REQUIRE(f.validate(jump + 199, kRejectAfterMessages));
  for (uint64_t c = jump + 71; c < jump + 199; ++c) CHECK(f.validate(c, kRejectAfterMessages));
}

namespace {

// The rule stated plainly: every accepted counter in a set, plus the greatest one.
class NaiveReplay {
public:
  bool validate(uint64_t c, uint64_t limit) {
    if (c >= limit) return false;
    if (any_ && c < max_ && max_ - c > kReplayWindow) return false;
    if (!seen_.insert(c).second) return false;
    if (!any_ || c > max_) max_ = c;
    any_ = true;
    // Entries too old to matter are forgotten only to bound memory; the rule above
    // rejects them before the set is consulted.
    if (seen_.size() > 4 * kReplayWindow && max_ > kReplayWindow)
      seen_.erase(seen_.begin(), seen_.lower_bound(max_ - kReplayWindow));
    return true;
  }
  uint64_t max() const { return max_; }

private:
  std::set<uint64_t> seen_;
  uint64_t max_ = 0;
  bool any_ = false;
};

uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}
uint64_t sub_sat(uint64_t a, uint64_t b) { return a < b ? 0 : a - b; }

}  // namespace

TEST_CASE("replay: agrees with a naive reference on random traffic", "[replay]") {
  struct Run {
    uint64_t base;   // first counters start here
    uint64_t limit;
  };
  // The second run starts close enough to the limit (counters advance ~6500 a step on
  // average) to reach it about three quarters of the way through.
  const Run run = GENERATE(Run{0, kRejectAfterMessages},
                           Run{kRejectAfterMessages - 5'000'000'000, kRejectAfterMessages});
  constexpr int kCounters = 1'000'000;

  ReplayFilter f;
  NaiveReplay ref;
  std::mt19937_64 rng(0x5eed0000 + run.base % 977 + run.limit % 991);
  auto uniform = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  std::vector<uint64_t> recent;  // recently offered counters, for replays
  uint64_t accepted = 0, at_limit = 0;

  for (int i = 0; i < kCounters; ++i) {
    const uint64_t top = std::max(ref.max(), run.base);
    uint64_t c;
    const uint64_t kind = uniform(0, 99);
    if (kind < 45) c = add_sat(top, uniform(1, 4));                          // in order
    else if (kind < 55) c = add_sat(top, uniform(5, 3 * kReplayWindow));     // jump ahead
    else if (kind < 56) c = add_sat(top, uniform(1, uint64_t{1} << 20));     // long gap
    else if (kind < 70 && !recent.empty()) c = recent[uniform(0, recent.size() - 1)];  // replay
    else if (kind < 85) c = sub_sat(top, uniform(0, kReplayWindow + 200));  // reordered / old
    else if (kind < 95) c = sub_sat(top, kReplayWindow - 2 + uniform(0, 4)); // window edge
    else c = uniform(sub_sat(run.base, 10), top);                            // anything seen-ish

    const bool want = ref.validate(c, run.limit);
    const bool got = f.validate(c, run.limit);
    if (got != want) {
      INFO("step " << i << ", counter " << c << ", greatest " << top);
      REQUIRE(got == want);
    }
    accepted += got;
    at_limit += c >= run.limit;
    if (recent.size() < 256) recent.push_back(c);
    else recent[uniform(0, recent.size() - 1)] = c;
  }
  // The mix must actually exercise both outcomes.
  CHECK(accepted > kCounters / 4);
  CHECK(accepted < kCounters - kCounters / 8);
  if (run.base != 0) CHECK(at_limit > 1000);
}

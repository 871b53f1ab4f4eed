// The data path's buffer pool: bounded, blocking takes, and a take that a stop flag ends.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>

#include "../support/thread_state.hpp"
#include "wg/batch.hpp"
#include "wg/buffer_pool.hpp"

using namespace std::chrono_literals;

namespace {

// Closes the pool when the test leaves, before the waiting thread's future is destroyed
// (declared after it): a failed check must not leave that destructor waiting for good.
struct CloseAtExit {
  wg::BufferPool& pool;
  ~CloseAtExit() { pool.close(); }
};

}  // namespace

TEST_CASE("pool: a take waiting on an empty pool returns nothing once its stop is set and woken", "[pool]") {
  wg::BufferPool pool(2);
  uint8_t* held[2] = {};
  REQUIRE(pool.take(held, 2) == 2);
  std::atomic<bool> stop{false};
  uint8_t* more[1] = {};
  std::atomic<pid_t> tid{0};
  auto waiter = std::async(std::launch::async, [&] {
    tid = ::gettid();
    return pool.take(more, 1, &stop);
  });
  CloseAtExit close_at_exit{pool};
  // None free: it waits, asleep in take() and not returned.
  CHECK(wgtest::blocked_in_kernel(tid));
  CHECK(waiter.wait_for(0s) == std::future_status::timeout);
  stop = true;
  pool.wake();
  REQUIRE(waiter.wait_for(5s) == std::future_status::ready);
  CHECK(waiter.get() == 0);
  CHECK(pool.allocated() == 2);
  pool.give(held, 2);
  CHECK(pool.idle() == 2);
}

TEST_CASE("pool: a waiting take gets a buffer given back, and at least one of what it asked", "[pool]") {
  wg::BufferPool pool(3);
  uint8_t* held[3] = {};
  REQUIRE(pool.take(held, 3) == 3);
  std::atomic<bool> stop{false};
  uint8_t* more[3] = {};
  std::atomic<pid_t> tid{0};
  auto waiter = std::async(std::launch::async, [&] {
    tid = ::gettid();
    return pool.take(more, 3, &stop);
  });
  CloseAtExit close_at_exit{pool};
  CHECK(wgtest::blocked_in_kernel(tid));
  CHECK(waiter.wait_for(0s) == std::future_status::timeout);
  pool.give(held[1]);
  REQUIRE(waiter.wait_for(5s) == std::future_status::ready);
  CHECK(waiter.get() == 1);
  CHECK(more[0] == held[1]);
  pool.give(more, 1);
  pool.give(held[0]);
  pool.give(held[2]);
  CHECK(pool.idle() == 3);
  CHECK(pool.allocated() == 3);
}

TEST_CASE("pool: a trim frees the buffers idle since the last one, coldest first, keeping some", "[pool]") {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0{};
  wg::BufferPool pool(8);
  uint8_t* held[8] = {};
  REQUIRE(pool.take(held, 8) == 8);
  pool.give(held, 8);
  CHECK(pool.trim(t0, 1) == 0);  // all were in use since the pool began
  CHECK(pool.trim(t0 + 9s, 1) == 0);  // before the interval: nothing looked at
  // Two taken and given back: six stayed idle through the interval.
  uint8_t* hot[2] = {};
  REQUIRE(pool.take(hot, 2) == 2);
  CHECK(hot[0] == held[7]);  // the most recently given first
  pool.give(hot, 2);
  CHECK(pool.trim(t0 + 10s, 1) == 6);
  CHECK(pool.allocated() == 2);
  CHECK(pool.idle() == 2);
  // The two left are the ones in use during the interval, and still work.
  uint8_t* left[2] = {};
  REQUIRE(pool.try_take(left, 2) == 2);
  CHECK(((left[0] == hot[0] && left[1] == hot[1]) || (left[0] == hot[1] && left[1] == hot[0])));
  left[0][0] = left[1][wg::kBufferSize - 1] = 0xaa;
  pool.give(left, 2);
  CHECK(pool.trim(t0 + 20s, 1) == 0);  // both were in use in this interval
  // An idle interval: all but `keep` go.
  CHECK(pool.trim(t0 + 30s, 1) == 1);
  CHECK(pool.allocated() == 1);
  // Freed buffers count against the limit no more: all eight can be taken again.
  uint8_t* again[8] = {};
  CHECK(pool.take(again, 8) == 8);
  pool.give(again, 8);
  CHECK(pool.allocated() == 8);
}

TEST_CASE("pool: a reader holds more buffers after full reads and fewer after a run of sparse ones", "[pool]") {
  using wg::ReadDepth;
  ReadDepth d(128);
  CHECK(d.want() == ReadDepth::kMin);
  d.used(8, 8);  // every buffer filled: twice as many next time
  CHECK(d.want() == 16);
  for (int i = 0; i < 10; ++i) d.used(d.want(), d.want());
  CHECK(d.want() == 128);  // never past the batch
  // Short reads (a busy reader that drains its source each time) keep the batch.
  for (unsigned i = 0; i < 4 * ReadDepth::kWindow; ++i) d.used(ReadDepth::kMin / 2 + 1, 128);
  CHECK(d.want() == 128);
  // A run of sparse reads broken before its end by a busier one: kept too.
  for (unsigned i = 0; i + 1 < ReadDepth::kWindow; ++i) d.used(1, 128);
  d.used(ReadDepth::kMin, 128);
  for (unsigned i = 0; i + 1 < ReadDepth::kWindow; ++i) d.used(ReadDepth::kMin / 2, 128);
  CHECK(d.want() == 128);
  // The run's last read: back to the minimum.
  d.used(0, 128);
  CHECK(d.want() == ReadDepth::kMin);
  for (unsigned i = 0; i < ReadDepth::kWindow; ++i) d.used(1, 8);
  CHECK(d.want() == ReadDepth::kMin);  // never below it
  ReadDepth small(4);  // a batch below the minimum is the whole depth
  CHECK(small.want() == 4);
  small.used(4, 4);
  CHECK(small.want() == 4);
  for (unsigned i = 0; i < ReadDepth::kWindow; ++i) small.used(0, 4);
  CHECK(small.want() == 4);
}

// WorkQueue: order, the producers' bound, closing, and every item taken once under
// several producers and consumers.
#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "../support/eventually.hpp"
#include "wg/work_queue.hpp"

using wg::WorkQueue;

TEST_CASE("work queue: oldest first, with the count behind it", "[work_queue]") {
  WorkQueue<int> q(8);
  for (int i = 0; i < 5; ++i) q.push(i);
  CHECK(q.size() == 5);
  size_t left = 99;
  for (int i = 0; i < 5; ++i) {
    auto item = q.pop(&left);
    REQUIRE(item);
    CHECK(*item == i);
    CHECK(left == static_cast<size_t>(4 - i));
  }
  CHECK(q.size() == 0);
}

TEST_CASE("work queue: push_wait holds a producer at the limit until an item is taken", "[work_queue]") {
  WorkQueue<int> q(4);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 6; ++i) {
      q.push_wait(i);
      ++pushed;
    }
  });
  REQUIRE(wgtest::eventually([&] { return pushed.load() == 4; }));
  CHECK(q.size() == 4);  // the fifth waits
  for (int i = 0; i < 2; ++i) CHECK(*q.pop() == i);
  REQUIRE(wgtest::eventually([&] { return pushed.load() == 6; }));
  producer.join();
  CHECK(q.size() == 4);
  for (int i = 2; i < 6; ++i) CHECK(*q.pop() == i);
}

TEST_CASE("work queue: close drains, then wakes consumers with nothing", "[work_queue]") {
  WorkQueue<int> q(2);
  q.push(7);
  q.push(8);
  std::atomic<bool> unblocked{false};
  std::thread producer([&] {
    q.push_wait(9);  // the queue is full: waits until close
    unblocked = true;
  });
  q.close();
  producer.join();
  CHECK(unblocked);
  CHECK(*q.pop() == 7);
  CHECK(*q.pop() == 8);
  CHECK(*q.pop() == 9);
  CHECK(!q.pop());

  WorkQueue<int> idle(2);
  std::atomic<bool> woke{false};
  std::thread consumer([&] {
    woke = !idle.pop().has_value();
  });
  idle.close();
  consumer.join();
  CHECK(woke);
}

TEST_CASE("work queue: several producers and consumers take every item once", "[work_queue]") {
  constexpr int kProducers = 3, kConsumers = 3, kEach = 20000;
  WorkQueue<int> q(64);
  std::vector<std::atomic<int>> seen(kProducers * kEach);
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c)
    threads.emplace_back([&] {
      while (auto item = q.pop()) ++seen[*item];
    });
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) q.push_wait(p * kEach + i);
    });
  for (auto& t : producers) t.join();
  q.close();
  for (auto& t : threads) t.join();
  int once = 0;
  for (auto& s : seen) once += s.load() == 1;
  CHECK(once == kProducers * kEach);
}

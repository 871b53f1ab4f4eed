// A FIFO of work between threads: any number of producers and consumers, closed once.
// The crypto workers' batches and the handshake thread's messages go through one each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace wg {

template <class T>
class WorkQueue {
public:
  // `limit`: how many items push_wait lets wait; push() leaves bounding to its caller.
  explicit WorkQueue(size_t limit) : limit_(limit) {}

  // Queues `item` once fewer than the limit are queued, or at once when closed.
  void push_wait(T item) {
    {
      std::unique_lock lock(mu_);
      space_.wait(lock, [&] { return closed_ || items_.size() < limit_; });
      items_.push_back(std::move(item));
      size_.store(items_.size(), std::memory_order_relaxed);
    }
    ready_.notify_one();
  }

  void push(T item) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(item));
      size_.store(items_.size(), std::memory_order_relaxed);
    }
    ready_.notify_one();
  }

  // Waits for the oldest item; empty once closed and drained. `left`, if given, gets how
  // many were still queued behind it.
  std::optional<T> pop(size_t* left = nullptr) {
    std::optional<T> item;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
      if (items_.empty()) return std::nullopt;
      item.emplace(std::move(items_.front()));
      items_.pop_front();
      size_.store(items_.size(), std::memory_order_relaxed);
      if (left) *left = items_.size();
    }
    space_.notify_one();
    return item;
  }

  // Items queued, read without the lock: a hint for admission.
  size_t size() const { return size_.load(std::memory_order_relaxed); }

  // Wakes every waiter: producers queue without waiting, consumers drain and then get
  // nothing.
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
  }

private:
  const size_t limit_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<T> items_;  // under mu_
  bool closed_ = false;  // under mu_
  std::atomic<size_t> size_{0};
};

}  // namespace wg

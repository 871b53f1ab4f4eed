// A FIFO between any number of producers and consumers, closed once.
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
  // Bounds push_wait only.
  explicit WorkQueue(size_t limit) : limit_(limit) {}

  // Waits below the limit, not once closed.
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

  // Empty once closed and drained. `left`: how many remain.
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

  // Unlocked: a hint.
  size_t size() const { return size_.load(std::memory_order_relaxed); }

  // Producers then queue without waiting; consumers drain, then get nothing.
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

// Fault injection at the two seams, for tests: wrappers around a real conn::Bind and a
// real tun::Device that return EINTR, EAGAIN, ENOBUFS, EIO... in place of the real call,
// so that what a test sees is the core's handling of those errors.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "bind/bind.hpp"
#include "tun/device.hpp"

namespace wgnet_test {

// Errors to return instead of calling the real seam: a script consumed one per call (0
// passes that call through) and a persistent error returned while set. Counts calls, and
// notes when each persistent error was returned.
class FaultPlan {
public:
  void script(std::initializer_list<int> errnos, int times = 1) {
    std::lock_guard lock(mu_);
    for (int i = 0; i < times; ++i) script_.insert(script_.end(), errnos);
  }
  void set_persistent(int e) { persistent_ = e; }
  bool script_done() {
    std::lock_guard lock(mu_);
    return script_.empty();
  }
  // The error for this call, 0 for none.
  int next() {
    ++calls;
    if (int e = persistent_.load()) {
      std::lock_guard lock(mu_);
      persistent_times_.push_back(std::chrono::steady_clock::now());
      return e;
    }
    std::lock_guard lock(mu_);
    if (script_.empty()) return 0;
    int e = script_.front();
    script_.pop_front();
    if (e) ++injected;
    return e;
  }
  std::atomic<uint64_t> calls{0}, injected{0};
  // When the persistent error was returned, in order.
  std::vector<std::chrono::steady_clock::time_point> persistent_times() {
    std::lock_guard lock(mu_);
    return persistent_times_;
  }

private:
  std::vector<std::chrono::steady_clock::time_point> persistent_times_;
  std::mutex mu_;
  std::deque<int> script_;
  std::atomic<int> persistent_{0};
};

// The waits a Device asks for between reads that go on failing (DeviceOptions::
// error_backoff), in order, by reading thread. It sleeps 1 ms for each instead: a test
// checks the backoff by the waits asked for, which load cannot change, and a reader that
// fails every call still does not take a core.
class BackoffLog {
public:
  std::function<void(std::chrono::milliseconds)> hook() {
    return [this](std::chrono::milliseconds wait) {
      {
        std::lock_guard lock(mu_);
        auto& waits = waits_[std::this_thread::get_id()];
        if (waits.size() < kKept) waits.push_back(wait.count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
  }
  // In milliseconds, the first kKept waits of the thread that asked for the most.
  std::vector<int64_t> longest() {
    std::lock_guard lock(mu_);
    std::vector<int64_t> out;
    for (auto& [id, waits] : waits_)
      if (waits.size() > out.size()) out = waits;
    return out;
  }

private:
  static constexpr size_t kKept = 64;
  std::mutex mu_;
  std::map<std::thread::id, std::vector<int64_t>> waits_;
};

inline std::error_code sys(int e) { return {e, std::system_category()}; }

class FaultyBind final : public conn::Bind {
public:
  explicit FaultyBind(conn::Bind& real) : real_(real) {}
  std::vector<conn::ReceiveFn> open(uint16_t port, uint16_t& actual, std::error_code& ec) override {
    auto fns = real_.open(port, actual, ec);
    for (auto& fn : fns)
      fn = [this, fn](std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at, std::span<size_t> sizes,
                      std::span<conn::Endpoint> eps, std::error_code& e) -> size_t {
        if (int err = receive_faults.next()) {
          e = sys(err);
          return 0;
        }
        return fn(bufs, at, sizes, eps, e);
      };
    return fns;
  }
  void close() override { real_.close(); }
  void send(std::span<const std::span<const uint8_t>> bufs, conn::Endpoint& ep, std::error_code& ec) override {
    if (int err = send_faults.next()) {
      ec = sys(err);  // the batch is lost, as when the kernel refuses it
      return;
    }
    real_.send(bufs, ep, ec);
  }
  void set_mark(uint32_t mark, std::error_code& ec) override { real_.set_mark(mark, ec); }
  size_t batch_size() const override { return real_.batch_size(); }
  void set_unreachable(conn::UnreachableFn fn) override { real_.set_unreachable(std::move(fn)); }

  FaultPlan receive_faults, send_faults;

private:
  conn::Bind& real_;
};

class FaultyTun final : public tun::Device {
public:
  explicit FaultyTun(tun::Device& real) : real_(real) {}
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override {
    if (int err = read_faults.next()) {
      ec = sys(err);
      return 0;
    }
    return real_.read(bufs, sizes, offset, ec);
  }
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override {
    if (int err = write_faults.next()) {
      ec = sys(err);
      return 0;
    }
    return real_.write(bufs, offset, ec);
  }
  size_t batch_size() const override { return real_.batch_size(); }
  int mtu() const override { return real_.mtu(); }
  void set_event_handler(std::function<void(tun::Event)> h) override { real_.set_event_handler(std::move(h)); }
  void close() override { real_.close(); }

  FaultPlan read_faults, write_faults;

private:
  tun::Device& real_;
};

}  // namespace wgnet_test

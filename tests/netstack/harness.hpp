// The fixture of netstack_tests, without root: this process's Stack and wg::Device
// against wgnet_netstack_peer (a second process, as separate as a real peer; several
// Stacks in one process are multi_stack_test.cpp's), WireGuard over UDP on 127.0.0.1. Topology and the peer's services: see peer_main.cpp.
//
//   netstack_tests                                     wgnet_netstack_peer
//   Stack ─ CaptureTun ─ wg::Device ─ LinuxBind <══ 127.0.0.1 ══> LinuxBind ─ wg::Device ─ Stack
//   198.19.0.1, fd00:19::1     (notes SYN options)                        198.19.0.2, fd00:19::2
//
// Every test body is a coroutine on the Stack's thread (run()) with a watchdog that
// closes its sockets when time is up, so a lost packet fails a test instead of hanging
// it. Catch's assertions run on the test thread only (Catch2 v2 is not thread-safe).
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/base/ip.hpp"
#include "wg/device.hpp"

namespace netstack_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using asio::awaitable;
using netstack::Endpoint;
using netstack::error_code;
using netstack::TcpStream;
using Clock = std::chrono::steady_clock;
inline constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

inline wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }
inline const wg::IpAddress kPeer4 = ip("198.19.0.2"), kPeer6 = ip("fd00:19::2");
// Routed through the tunnel, answered by no one: a SYN, a datagram or an echo request
// to it is never answered.
inline const wg::IpAddress kSilent4 = ip("198.19.0.3");

// The byte at offset i of the peer's source stream (peer_main.cpp has the same).
inline uint8_t pattern(uint64_t i) { return static_cast<uint8_t>((i * 0x9E3779B97F4A7C15ull) >> 56); }

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

inline void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

// Resident set size of this process, from /proc/self/statm.
size_t rss_bytes();

class PeerProcess;  // harness.cpp

// --- seeing what the Stack sends ---

struct TcpOptions {
  bool seen = false;
  uint16_t mss = 0;
  int window_scale = -1;
  bool sack_permitted = false;
};

// Reads the options of a TCP segment with SYN set (and ACK as given); nullopt otherwise.
std::optional<TcpOptions> syn_options(const uint8_t* pkt, size_t len, bool ack);

// The tun::Device the test's wg::Device sees: the Stack, with the first SYN it sends
// and the first SYN-ACK it receives noted per IP version, and how many packets the
// Device has read for each destination.
class CaptureTun final : public tun::Device {
public:
  explicit CaptureTun(netstack::Stack& s) : s_(s) {}

  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override {
    size_t n = s_.read(bufs, sizes, offset, ec);
    for (size_t i = 0; i < n; ++i) note(bufs[i].data() + offset, sizes[i], false);
    return n;
  }
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override {
    for (auto& b : bufs) note(b.data() + offset, b.size() - offset, true);
    return s_.write(bufs, offset, ec);
  }
  size_t batch_size() const override { return s_.batch_size(); }
  int mtu() const override { return s_.mtu(); }
  void set_event_handler(std::function<void(tun::Event)> h) override { s_.set_event_handler(std::move(h)); }
  void close() override { s_.close(); }

  TcpOptions syn_sent(int version) {
    std::lock_guard lock(mu_);
    return sent_[version == 6];
  }
  TcpOptions syn_ack_received(int version) {
    std::lock_guard lock(mu_);
    return received_[version == 6];
  }
  // The Stack's packets the Device has read so far, to `to`. The Stack hands them out
  // in the order it sent them.
  uint64_t sent_to(const wg::IpAddress& to) {
    std::lock_guard lock(mu_);
    for (auto& [dst, n] : sent_to_)
      if (dst == to) return n;
    return 0;
  }

private:
  void note(const uint8_t* pkt, size_t len, bool inbound);

  netstack::Stack& s_;
  std::mutex mu_;
  TcpOptions sent_[2], received_[2];
  std::vector<std::pair<wg::IpAddress, uint64_t>> sent_to_;  // a few destinations
};

// --- the fixture: one per process, made on first use ---

struct Harness {
  Harness();
  ~Harness();

  std::unique_ptr<netstack::Stack> stack;
  std::unique_ptr<CaptureTun> tun;
  conn::LinuxBind bind;
  std::unique_ptr<wg::Device> device;
  std::unique_ptr<PeerProcess> peer;
};

Harness& harness();

// Closes the sockets it watches when `limit` has passed, so every pending operation of
// the coroutine ends (operation_aborted) and the coroutine with it. Lives in the
// coroutine's frame, on the Stack's thread, declared before what it watches.
class Watchdog {
public:
  Watchdog(asio::any_io_executor ex, Clock::duration limit) : state_(std::make_shared<State>(ex)) {
    state_->timer.expires_after(limit);
    state_->timer.async_wait([s = state_](const error_code& ec) {
      if (ec) return;
      for (auto& close : s->closers) close();
    });
  }
  ~Watchdog() {
    state_->closers.clear();
    state_->timer.cancel();
  }
  template <class Socket>
  void watch(Socket& s) {
    state_->closers.push_back([&s] { s.close(); });
  }
private:
  struct State {
    explicit State(asio::any_io_executor ex) : timer(ex) {}
    asio::steady_timer timer;
    std::vector<std::function<void()>> closers;
  };
  std::shared_ptr<State> state_;
};

// Runs a test coroutine on the Stack's thread and returns its result. The coroutine's
// own Watchdog bounds it; `limit` is the last resort (it should never trigger).
template <class T>
T run(awaitable<T> op, Clock::duration limit = 60s) {
  auto f = asio::co_spawn(harness().stack->get_executor(), std::move(op), asio::use_future);
  if (f.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "netstack_tests: a test coroutine outlived its watchdog; aborting\n");
    std::abort();
  }
  return f.get();
}

awaitable<std::tuple<error_code, TcpStream>> dial(const Endpoint& to);

// Reads until EOF (or error, or `max` bytes) into a string.
awaitable<std::pair<error_code, std::string>> read_all(TcpStream& s, size_t max = 1 << 20);

std::string error_text(const error_code& ec);

}  // namespace netstack_test

// Lifetimes of the dialer API, in a process of its own (no peer): closing a listener or
// socket, and destroying the Stack, while operations are pending. Each pending operation
// completes once, with operation_aborted, on the program's own executor; the objects
// that outlive the Stack can still be used (their operations fail the same way) and
// destroyed. Run under ASan and TSan in CI: nothing may touch freed memory.
#include <catch2/catch.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../support/eventually.hpp"
#include "netstack/stack.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using netstack::Endpoint;
using netstack::error_code;

wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }

// The program's own io_context on its own thread, and what the handlers reported.
struct Program {
  Program() : guard(asio::make_work_guard(io)), thread([this] { io.run(); }) {}
  ~Program() {
    guard.reset();
    thread.join();
  }
  // A handler on the program's executor that notes (what, error, on which thread).
  auto note(std::string what) {
    return asio::bind_executor(io, [this, what](error_code ec, auto&&...) {
      std::lock_guard lock(mu);
      results.emplace_back(what, ec);
      on_program_thread = on_program_thread && std::this_thread::get_id() == thread.get_id();
    });
  }
  // Waits (up to 10 s) until n results have come; returns them.
  std::vector<std::pair<std::string, error_code>> wait_for(size_t n) {
    wgtest::eventually(
        [&] {
          std::lock_guard lock(mu);
          return results.size() >= n;
        },
        10s, 10ms);
    std::lock_guard lock(mu);
    return results;
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::thread thread;
  std::mutex mu;
  std::vector<std::pair<std::string, error_code>> results;
  bool on_program_thread = true;
};

netstack::StackOptions options() {
  netstack::StackOptions so;
  so.addresses = {*wg::IpPrefix::parse("198.19.0.1/24")};
  so.dns_servers = {ip("198.19.0.5")};  // no one answers (nothing reads the Stack's packets)
  return so;
}

std::string describe(const std::vector<std::pair<std::string, error_code>>& rs) {
  std::string out;
  for (auto& [what, ec] : rs) out += what + ": " + (ec ? ec.message() : "ok") + "; ";
  return out;
}

}  // namespace

TEST_CASE("netstack lifetime: closing a listener or a socket ends its pending operation", "[netstack][lifetime]") {
  Program prog;
  std::error_code sec;
  auto st = netstack::Stack::create(options(), sec);
  REQUIRE(st);
  error_code ec;
  auto l = st->listen_tcp({ip("198.19.0.1"), 7000}, ec);
  REQUIRE(!ec);
  auto u = st->listen_udp({ip("198.19.0.1"), 7001}, ec);
  REQUIRE(!ec);
  auto w = st->listen_udp({ip("198.19.0.1"), 7002}, ec);
  REQUIRE(!ec);
  char buf[64];
  Endpoint from;
  l.async_accept(prog.note("accept"));
  u.async_receive_from(asio::buffer(buf), from, prog.note("receive"));
  w.async_wait_readable(prog.note("wait"));
  l.close();
  u.close();
  w.close();
  auto rs = prog.wait_for(3);
  INFO(describe(rs));
  REQUIRE(rs.size() == 3);
  for (auto& [what, e] : rs) CHECK(e == asio::error::operation_aborted);
  CHECK(prog.on_program_thread);
}

TEST_CASE("netstack lifetime: destroying the Stack with operations pending aborts each once", "[netstack][lifetime]") {
  Program prog;
  std::error_code sec;
  auto st = netstack::Stack::create(options(), sec);
  REQUIRE(st);
  error_code ec;
  auto l = st->listen_tcp({ip("198.19.0.1"), 7000}, ec);
  REQUIRE(!ec);
  auto u = st->listen_udp({ip("198.19.0.1"), 7001}, ec);
  REQUIRE(!ec);
  char buf[64];
  Endpoint from;
  // Every kind of operation, pending: nothing answers (the Stack's packets are never read).
  l.async_accept(prog.note("accept"));
  u.async_receive_from(asio::buffer(buf), from, prog.note("receive"));
  st->async_dial_tcp(Endpoint{ip("198.19.0.5"), 80}, prog.note("dial"));
  st->async_ping(ip("198.19.0.5"), 30000ms, prog.note("ping"));
  st->async_resolve("name.test", prog.note("resolve"));
  st->async_dial_tcp("name.test", 80, prog.note("dial by name"));
  // Pending either way; destroyed once each has sent its first packet (the SYN, the echo
  // request, each lookup's first query), so that the lookups are under way.
  REQUIRE(wgtest::eventually([&] { return st->counters().packets_out >= 4; }));
  {
    std::lock_guard lock(prog.mu);
    REQUIRE(prog.results.empty());
  }
  st.reset();
  auto rs = prog.wait_for(6);
  INFO(describe(rs));
  REQUIRE(rs.size() == 6);
  for (auto& [what, e] : rs) CHECK(e == asio::error::operation_aborted);
  CHECK(prog.on_program_thread);

  // The listener and the socket outlived the Stack: their operations fail the same way,
  // close() does nothing, and they can be destroyed.
  l.async_accept(prog.note("accept after"));
  u.async_receive_from(asio::buffer(buf), from, prog.note("receive after"));
  rs = prog.wait_for(8);
  REQUIRE(rs.size() == 8);
  CHECK(rs[6].second == asio::error::operation_aborted);
  CHECK(rs[7].second == asio::error::operation_aborted);
  l.close();
  u.close();

  // And a new Stack can be made.
  st = netstack::Stack::create(options(), sec);
  REQUIRE(st);
  // Every operation completed exactly once: a marker sent through the new Stack's
  // thread to the program's comes after anything either thread had queued, the old
  // Stack's completions and whatever the closes above completed.
  st->async_resolve("198.19.0.9", prog.note("marker"));
  rs = prog.wait_for(9);
  INFO(describe(rs));
  REQUIRE(rs.size() == 9);
  CHECK(rs[8].first == "marker");
  CHECK(!rs[8].second);
}

TEST_CASE("netstack lifetime: the up event comes from the Stack's thread, as tun::Device promises", "[netstack][lifetime]") {
  // It was called on the caller's thread, inside set_event_handler: a Device that holds
  // its own lock while it sets the handler would have taken the event under that lock.
  std::error_code sec;
  auto st = netstack::Stack::create(options(), sec);
  REQUIRE(st);
  std::mutex mu;
  std::condition_variable cv;
  int ups = 0, others = 0;
  bool on_stack_thread = false, on_caller_thread = false;
  const auto caller = std::this_thread::get_id();
  netstack::Stack& stack = *st;
  stack.set_event_handler([&](tun::Event e) {
    const bool stack_thread = stack.get_executor().running_in_this_thread();
    const bool caller_thread = std::this_thread::get_id() == caller;
    std::lock_guard l(mu);
    if (e == tun::Event::up) ++ups;
    else ++others;
    on_stack_thread = stack_thread;
    on_caller_thread = caller_thread;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return ups > 0; }));
  CHECK(ups == 1);
  CHECK(others == 0);
  CHECK(on_stack_thread);
  CHECK_FALSE(on_caller_thread);
}

TEST_CASE("netstack lifetime: writes racing close() end with operation_canceled, and close() wakes a reader",
          "[netstack][lifetime]") {
  // wg::Device's TUN writer calls write() while the owner closes the Stack. close() set
  // closed_ under the outgoing queue's lock only, and write() read it under the incoming
  // one: a data race (TSan, in CI's lifetime stage) found on reading the code.
  std::error_code sec;
  auto st = netstack::Stack::create(options(), sec);
  REQUIRE(st);
  // An ICMP echo request to the Stack's own address: lwIP takes it and answers.
  std::vector<uint8_t> ping = {0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 198, 19, 0, 2, 198, 19, 0, 1,
                               8,    0, 0, 0,  0, 1, 0, 1};
  const std::span<uint8_t> one(ping);
  std::atomic<bool> writer_saw_close{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    for (int i = 0; i < 200000; ++i) {
      std::error_code ec;
      st->write(std::span<const std::span<uint8_t>>(&one, 1), 0, ec);
      writes.fetch_add(1);
      if (ec == std::errc::operation_canceled) {
        writer_saw_close = true;
        return;
      }
    }
  });
  std::error_code rec;
  std::thread reader([&] {
    std::vector<uint8_t> buf(2048);
    std::span<uint8_t> b(buf);
    size_t size = 0;
    while (!rec) st->read(std::span<const std::span<uint8_t>>(&b, 1), std::span<size_t>(&size, 1), 0, rec);
  });
  while (writes.load() < 100) std::this_thread::yield();
  st->close();
  writer.join();
  reader.join();
  CHECK(writer_saw_close);
  CHECK(rec == std::errc::operation_canceled);
}

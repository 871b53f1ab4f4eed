// The programs' accept loop (accept_loop.hpp).
#include "accept_loop.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/eventfd.h>

#include <chrono>
#include <memory>

#include "wg/base/fd.hpp"
#include "wg/base/log.hpp"

namespace programs {
namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kTry = asio::as_tuple(asio::use_awaitable);
// How long an accept loop out of descriptors waits before trying again: long enough that
// a listener nobody can be served on costs no CPU, short enough that a client arriving
// once descriptors are free again hardly notices.
constexpr auto kOutOfDescriptorsPause = std::chrono::milliseconds(100);
// Waiting connections reset per episode step, so that clients reconnecting as fast as
// they are reset cannot keep the loop from its pause.
constexpr int kMaxDropped = 64;

// The reserve is an eventfd: no file the sandbox would have to allow (Asio makes them
// too, so every system-call filter lets them through), and unlike a duplicate of the
// listening socket it does not keep the port open when the loop is never resumed after
// its acceptor closed (an io_context stopped at once).
wg::UniqueFd take_reserve() { return wg::UniqueFd(::eventfd(0, EFD_CLOEXEC)); }

// A reset rather than a FIN: the client's first read or write fails at once.
void reset(tcp::socket& s) {
  error_code ec;
  s.set_option(asio::socket_base::linger(true, 0), ec);
  s.close(ec);
}

bool out_of_descriptors(const error_code& ec) {
  return ec == asio::error::no_descriptors || ec == error_code(ENFILE, boost::system::system_category());
}

// Accepts the connections waiting on `a` with the descriptor the reserve leaves free and
// resets them. Their number.
int reset_waiting(tcp::acceptor& a, const AcceptOptions& options) {
  error_code ec;
  a.non_blocking(true, ec);  // the async accepts are unaffected
  int n = 0;
  while (n < kMaxDropped) {
    tcp::socket s(a.get_executor());
    a.accept(s, ec);
    if (ec) break;
    if (options.on_refused) options.on_refused();  // counted before the client can see it
    reset(s);
    ++n;
  }
  return n;
}

}  // namespace

bool ConnectionCap::admit() {
  if (max_ > 0 && *open_ >= max_) {
    if (!at_cap_)
      wg::log::error("{}: {} connections open, the most allowed: refusing new ones until some close", name_,
                     *open_);
    at_cap_ = true;
    return false;
  }
  if (at_cap_) {
    at_cap_ = false;
    wg::log::error("{}: below {} connections again: accepting", name_, max_);
  }
  return true;
}

std::shared_ptr<void> ConnectionCap::slot() {
  ++*open_;
  return std::shared_ptr<void>(nullptr, [open = open_](void*) { --*open; });
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, AcceptOptions options,
                                  std::function<asio::awaitable<void>(tcp::socket)> serve) {
  auto ex = acceptor.get_executor();
  ConnectionCap cap(options.name, options.max_connections);
  wg::UniqueFd reserve = take_reserve();
  asio::steady_timer pause(ex);
  bool out_of_fds = false;
  for (;;) {
    if (!reserve) reserve = take_reserve();
    auto [ec, s] = co_await acceptor.async_accept(kTry);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec == asio::error::connection_aborted) continue;  // that client gave up: no cause to wait
    if (ec) {
      if (out_of_descriptors(ec) && !out_of_fds)
        wg::log::error("{}: out of file descriptors ({}): refusing connections until some close", options.name,
                       ec.message());
      else if (!out_of_descriptors(ec))
        wg::log::verbose("{}: accept: {}", options.name, ec.message());
      out_of_fds = out_of_fds || out_of_descriptors(ec);
      reserve.reset();
      const int dropped = reset_waiting(acceptor, options);
      reserve = take_reserve();
      if (dropped > 0) wg::log::verbose("{}: {} connections reset for want of descriptors", options.name, dropped);
      pause.expires_after(kOutOfDescriptorsPause);
      co_await pause.async_wait(kTry);
      if (!acceptor.is_open()) co_return;
      continue;
    }
    if (out_of_fds) {
      out_of_fds = false;
      wg::log::error("{}: file descriptors free again: accepting connections", options.name);
    }
    if (!cap.admit()) {
      if (options.on_refused) options.on_refused();
      reset(s);
      continue;
    }
    s.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(ex, serve(std::move(s)), [slot = cap.slot()](std::exception_ptr) {});
  }
}

}  // namespace programs

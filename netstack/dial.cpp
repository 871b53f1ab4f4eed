// Dialing by name: a lookup through the tunnel, then Happy Eyeballs (RFC 8305) over the
// addresses. Coroutines on the Stack's thread, built on the cancellable async_dial_tcp.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "netstack/stack_impl.hpp"

namespace netstack {
namespace {

using asio::awaitable;
constexpr auto kTry = asio::as_tuple(asio::use_awaitable);
constexpr auto kForever = std::chrono::hours(24 * 365);

bool keep(const wg::IpAddress& a, DialOptions::Family f) {
  return f == DialOptions::Family::any || a.is_v4() == (f == DialOptions::Family::ipv4);
}

// The attempts of one dial: started one by one, the first to connect wins.
struct Race {
  explicit Race(Executor ex) : wake(ex) {}
  asio::steady_timer wake;  // cancelled when an attempt completes
  std::optional<TcpStream> winner;
  error_code last = asio::error::host_not_found;
  size_t running = 0;
  struct Attempt {
    asio::cancellation_signal stop;
    bool done = false;
  };
  std::vector<std::unique_ptr<Attempt>> attempts;
};

awaitable<bool> cancelled() {
  co_return (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
}

// Happy Eyeballs over `targets` in order: attempt i+1 starts attempt_delay after attempt
// i, or as soon as an attempt fails; the first connection wins and the rest are
// abandoned (cancelled, and awaited, so that nothing outlives the dial).
awaitable<std::pair<error_code, TcpStream>> happy_eyeballs(Stack& st, std::vector<Endpoint> targets,
                                                           std::chrono::milliseconds delay) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto race = std::make_shared<Race>(st.get_executor());
  for (size_t i = 0; i < targets.size() && !race->winner && !co_await cancelled(); ++i) {
    race->attempts.push_back(std::make_unique<Race::Attempt>());
    auto* attempt = race->attempts.back().get();
    ++race->running;
    asio::co_spawn(st.get_executor(), st.async_dial_tcp(targets[i], kTry),
                   asio::bind_cancellation_slot(attempt->stop.slot(), [race, attempt](std::exception_ptr,
                                                                                      std::tuple<error_code, TcpStream> r) {
                     attempt->done = true;
                     --race->running;
                     auto& [ec, s] = r;
                     if (!ec && !race->winner) race->winner.emplace(std::move(s));
                     else if (ec && ec != asio::error::operation_aborted) race->last = ec;
                     race->wake.cancel();
                   }));
    if (i + 1 == targets.size()) break;
    // Until the delay has passed or an attempt completed (won, or failed: then the next
    // goes at once).
    race->wake.expires_after(delay);
    co_await race->wake.async_wait(kTry);
  }
  while (!race->winner && race->running > 0 && !co_await cancelled()) {
    race->wake.expires_after(kForever);
    co_await race->wake.async_wait(kTry);
  }
  for (auto& a : race->attempts)
    if (!a->done) a->stop.emit(asio::cancellation_type::terminal);
  while (race->running > 0) {
    race->wake.expires_after(kForever);
    co_await race->wake.async_wait(kTry);
  }
  if (co_await cancelled()) co_return std::pair{error_code(asio::error::operation_aborted), TcpStream{}};
  if (race->winner) co_return std::pair{error_code{}, std::move(*race->winner)};
  co_return std::pair{race->last, TcpStream{}};
}

awaitable<std::pair<error_code, std::vector<wg::IpAddress>>> lookup(Stack& st, std::string host,
                                                                   DialOptions::Family family) {
  auto [ec, addrs] = co_await st.async_resolve(host, kTry);
  if (ec) co_return std::pair{ec, std::vector<wg::IpAddress>{}};
  // A literal (bare or in brackets) is dialed whatever its family.
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (wg::IpAddress::parse(bracketed ? std::string_view(host).substr(1, host.size() - 2) : std::string_view(host)))
    co_return std::pair{ec, addrs};
  addrs = dial_order(addrs, family);
  if (addrs.empty()) ec = asio::error::host_not_found;
  co_return std::pair{ec, addrs};
}

awaitable<std::pair<error_code, TcpStream>> dial_name(Stack& st, std::string host, uint16_t port, DialOptions o) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto [ec, addrs] = co_await lookup(st, host, o.family);
  if (ec) co_return std::pair{ec, TcpStream{}};
  std::vector<Endpoint> targets;
  for (auto& a : addrs) targets.push_back({a, port});
  co_return co_await happy_eyeballs(st, std::move(targets), o.attempt_delay);
}

awaitable<std::pair<error_code, UdpSocket>> dial_udp_name(Stack& st, std::string host, uint16_t port,
                                                          DialOptions o) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto [ec, addrs] = co_await lookup(st, host, o.family);
  if (ec) co_return std::pair{ec, UdpSocket{}};
  auto u = st.dial_udp({addrs.front(), port}, ec);
  co_return std::pair{ec, std::move(u)};
}

}  // namespace

std::vector<wg::IpAddress> dial_order(const std::vector<wg::IpAddress>& addrs, DialOptions::Family family) {
  std::vector<wg::IpAddress> v6, v4, out;
  for (auto& a : addrs)
    if (keep(a, family)) (a.is_v6() ? v6 : v4).push_back(a);
  for (size_t i = 0; i < std::max(v6.size(), v4.size()); ++i) {
    if (i < v6.size()) out.push_back(v6[i]);
    if (i < v4.size()) out.push_back(v4[i]);
  }
  return out;
}

void Stack::dial_name_impl(std::string host, uint16_t port, DialOptions o,
                           asio::any_completion_handler<void(error_code, TcpStream)> h) {
  detail::spawn_cancellable(*impl_, dial_name(*this, std::move(host), port, o), std::move(h));
}

void Stack::dial_candidates_impl(std::vector<Endpoint> c, DialOptions o,
                                 asio::any_completion_handler<void(error_code, TcpStream)> h) {
  detail::spawn_cancellable(*impl_, happy_eyeballs(*this, std::move(c), o.attempt_delay), std::move(h));
}

void Stack::dial_udp_name_impl(std::string host, uint16_t port, DialOptions o,
                               asio::any_completion_handler<void(error_code, UdpSocket)> h) {
  detail::spawn_cancellable(*impl_, dial_udp_name(*this, std::move(host), port, o), std::move(h));
}

}  // namespace netstack

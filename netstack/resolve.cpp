// DNS through the tunnel: A and AAAA queries to the configured servers over UDP, with a
// TCP retry when the answer is truncated. Runs as a coroutine on the Stack's thread.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "netstack/dns_message.hpp"
#include "netstack/stack_impl.hpp"
#include "wg/base/random.hpp"

namespace netstack {
namespace {

using asio::awaitable;
using asio::use_awaitable;
constexpr auto kTry = asio::as_tuple(use_awaitable);
constexpr auto kQueryTimeout = std::chrono::seconds(2);

struct QueryResult {
  error_code ec;
  std::optional<dns::Answer> answer;
};

// Closes `target` if the timer fires first: the pending operation then completes with
// operation_aborted, which the caller reports as a timeout.
template <class T>
void arm_timeout(asio::steady_timer& t, std::shared_ptr<T> target) {
  t.expires_after(kQueryTimeout);
  t.async_wait([target](const error_code& ec) {
    if (!ec) target->close();
  });
}

awaitable<QueryResult> query_tcp(Stack& st, const wg::IpAddress& server, const std::vector<uint8_t>& query,
                                 uint16_t id, uint16_t qtype) {
  auto ex = co_await asio::this_coro::executor;
  auto [dial_ec, stream] = co_await st.async_dial_tcp(Endpoint{server, 53}, kTry);
  if (dial_ec) co_return QueryResult{dial_ec, {}};
  auto s = std::make_shared<TcpStream>(std::move(stream));
  asio::steady_timer t(ex);
  arm_timeout(t, s);
  auto frame = dns::tcp_frame(query);
  auto [wec, wn] = co_await asio::async_write(*s, asio::buffer(frame), kTry);
  uint8_t len[2];
  error_code ec = wec;
  std::vector<uint8_t> reply;
  if (!ec) std::tie(ec, std::ignore) = co_await asio::async_read(*s, asio::buffer(len), kTry);
  if (!ec) {
    reply.resize(static_cast<size_t>(len[0] << 8 | len[1]));
    std::tie(ec, std::ignore) = co_await asio::async_read(*s, asio::buffer(reply), kTry);
  }
  t.cancel();
  s->close();
  if (ec) co_return QueryResult{ec == asio::error::operation_aborted ? error_code(asio::error::timed_out) : ec, {}};
  auto a = dns::parse_response(reply, id, qtype);
  if (!a) co_return QueryResult{asio::error::host_not_found_try_again, {}};
  co_return QueryResult{{}, a};
}

awaitable<QueryResult> query(Stack& st, const wg::IpAddress& server, const std::string& host, uint16_t qtype) {
  auto ex = co_await asio::this_coro::executor;
  error_code last = asio::error::timed_out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint16_t id;
    wg::random_bytes(&id, sizeof id);
    auto q = dns::build_query(id, host, qtype);
    if (q.empty()) co_return QueryResult{asio::error::invalid_argument, {}};
    error_code ec;
    auto sock = std::make_shared<UdpSocket>(st.dial_udp(Endpoint{server, 53}, ec));
    if (ec) co_return QueryResult{ec, {}};
    auto [sec, sn] = co_await sock->async_send_to(asio::buffer(q), Endpoint{}, kTry);
    if (sec) co_return QueryResult{sec, {}};
    asio::steady_timer t(ex);
    arm_timeout(t, sock);
    std::vector<uint8_t> buf(4096);
    Endpoint from;
    // Skip stray datagrams (wrong id) until the timer closes the socket.
    for (;;) {
      auto [rec, n] = co_await sock->async_receive_from(asio::buffer(buf), from, kTry);
      if (rec) {
        last = rec == asio::error::operation_aborted ? error_code(asio::error::timed_out) : rec;
        break;
      }
      auto a = dns::parse_response(std::span(buf.data(), n), id, qtype);
      if (!a) continue;
      t.cancel();
      sock->close();
      if (a->truncated) co_return co_await query_tcp(st, server, q, id, qtype);
      co_return QueryResult{{}, a};
    }
  }
  co_return QueryResult{last, {}};
}

awaitable<std::pair<error_code, std::vector<wg::IpAddress>>> resolve_coro(Stack& st, std::string host) {
  error_code last = asio::error::host_not_found;
  for (auto& server : st.options().dns_servers) {
    std::vector<wg::IpAddress> out;
    bool answered = false, nxdomain = false;
    error_code err;
    for (uint16_t qtype : {uint16_t{1}, uint16_t{28}}) {
      auto r = co_await query(st, server, host, qtype);
      if (r.ec) {
        err = r.ec;
        continue;
      }
      answered = true;
      if (r.answer->rcode == 3) nxdomain = true;
      out.insert(out.end(), r.answer->addresses.begin(), r.answer->addresses.end());
    }
    if (!out.empty()) co_return std::pair{error_code{}, out};
    if (answered) co_return std::pair{error_code(nxdomain ? asio::error::host_not_found : asio::error::no_data),
                                      std::vector<wg::IpAddress>{}};
    last = err;  // this server did not answer: try the next
  }
  co_return std::pair{last, std::vector<wg::IpAddress>{}};
}

}  // namespace

void Stack::resolve_impl(std::string host,
                         asio::any_completion_handler<void(error_code, std::vector<wg::IpAddress>)> h) {
  auto ex = impl_->executor();
  if (auto literal = wg::IpAddress::parse(host.size() > 2 && host.front() == '[' && host.back() == ']'
                                               ? std::string_view(host).substr(1, host.size() - 2)
                                               : std::string_view(host))) {
    detail::complete(ex, std::move(h), error_code{}, std::vector<wg::IpAddress>{*literal});
    return;
  }
  if (impl_->options.dns_servers.empty()) {
    detail::complete(ex, std::move(h), error_code(asio::error::host_not_found), std::vector<wg::IpAddress>{});
    return;
  }
  detail::spawn_cancellable(*impl_, resolve_coro(*this, std::move(host)), std::move(h));
}

std::vector<wg::IpAddress> Stack::resolve(const std::string& host, error_code& ec) {
  std::promise<std::pair<error_code, std::vector<wg::IpAddress>>> done;
  auto fut = done.get_future();
  async_resolve(host, [&done](error_code e, std::vector<wg::IpAddress> a) { done.set_value({e, std::move(a)}); });
  auto [e, a] = fut.get();
  ec = e;
  return a;
}

}  // namespace netstack

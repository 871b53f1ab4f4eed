// HTTP CONNECT: parse the request with Beast, dial through the tunnel, answer 200 and
// relay. Other methods get 405, a header over 16 KiB 431, a malformed one 400, the
// proxy's own address 403, other failures 502/504 (the body says why).
#include "http_proxy.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "handshake.hpp"
#include "http_request.hpp"
#include "wg/log.hpp"

namespace wgns {
namespace http = boost::beast::http;
namespace {

// Answers an error and closes (after the client had the time to read the answer).
awaitable<void> refuse(tcp::socket& s, http::status status, const std::string& body,
                        bool want_auth = false) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "wg-netstack");
  res.set(http::field::content_type, "text/plain");
  if (want_auth) res.set(http::field::proxy_authenticate, "Basic realm=\"wg-netstack\"");
  res.set(http::field::connection, "close");
  res.body() = body + "\n";
  res.prepare_payload();
  co_await http::async_write(s, res, kTry);
  co_await close_after_reply(s);
}

awaitable<void> serve(Context& ctx, tcp::socket s) {
  ActiveConnection active(ctx.metrics);

  boost::beast::flat_buffer buf;
  http::request_parser<http::empty_body> parser;
  parser.header_limit(kHeaderLimit);
  Deadline deadline(s, ctx.handshake_timeout);
  auto [ec, n] = co_await http::async_read_header(s, buf, parser, kTry);
  deadline.disarm();
  if (deadline.expired()) {
    ctx.metrics.handshake_timeouts.fetch_add(1);
    wg::log::verbose("http: no complete request header within the handshake timeout: closed");
    co_return;
  }
  const auto verdict = ec ? verdict_for_read_error(ec) : verdict_for_request(parser.get(), ctx.user, ctx.password);
  if (!verdict) co_return;  // the client went away
  if (verdict->status != http::status::ok) {
    co_await refuse(s, verdict->status, verdict->reason, verdict->want_auth);
    co_return;
  }
  const std::string& host = verdict->host;
  const uint16_t port = verdict->port;
  auto [derr, stream] = co_await dial_host(ctx, host, port);
  if (derr) {
    ctx.metrics.connections_failed.fetch_add(1);
    auto status = derr == ProxyError::own_address ? http::status::forbidden
                  : derr == asio::error::timed_out ? http::status::gateway_timeout
                                                   : http::status::bad_gateway;
    co_await refuse(s, status, host + ":" + std::to_string(port) + ": " + derr.message());
    co_return;
  }
  auto [werr, wn] = co_await asio::async_write(s, asio::buffer(std::string_view("HTTP/1.1 200 Connection established\r\n\r\n")), kTry);
  if (werr) co_return;
  // Bytes the client sent after the header belong to the tunnel.
  if (buf.size() > 0) {
    auto [e2, n2] = co_await asio::async_write(stream, buf.data(), kTry);
    if (e2) co_return;
  }
  // The header's buffer would otherwise stay with the connection as long as it lasts.
  buf.consume(buf.size());
  buf.shrink_to_fit();
  co_await relay(s, stream);
}

}  // namespace

awaitable<void> http_proxy_server(Context& ctx, tcp::acceptor& acceptor) {
  return accept_loop(acceptor, [&ctx](tcp::socket s) { return serve(ctx, std::move(s)); });
}

}  // namespace wgns

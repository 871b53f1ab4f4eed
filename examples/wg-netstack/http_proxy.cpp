// The HTTP proxy: CONNECT (dial through the tunnel, answer 200, relay), and plain
// requests of every method with an absolute http:// URI, forwarded (http_forward.cpp) on
// a kept-alive client connection; over TLS when [http] has CertFile/KeyFile
// (tls_stream.hpp). A header over 16 KiB gets 431, a malformed one 400, the proxy's own
// address 403, other dial failures 502/504 (the body says why).
#include "http_proxy.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "dial.hpp"
#include "listener.hpp"
#include "proxy_client.hpp"
#include "http_forward.hpp"
#include "http_request.hpp"
#include "tls_stream.hpp"
#include "wg/base/log.hpp"
#include "wg/base/shown.hpp"

namespace wgns {
namespace http = boost::beast::http;
namespace {

// CONNECT: dial, answer 200, relay. Bytes the client sent after the header belong to the
// tunnel.
template <class Client>
awaitable<void> tunnel(Context& ctx, Client& s, boost::beast::flat_buffer& buf, const HttpVerdict& v) {
  auto [derr, stream] = co_await dial_host(ctx, v.host, v.port);
  if (derr) {
    ctx.metrics.connections_failed.fetch_add(1);
    wg::log::verbose("http: CONNECT {}:{}: {}", wg::escaped(v.host), v.port, derr.message());
    co_await refuse(s, status_for_dial_error(derr), v.host + ":" + std::to_string(v.port) + ": " + derr.message());
    co_return;
  }
  auto [werr, wn] = co_await asio::async_write(s, asio::buffer(std::string_view("HTTP/1.1 200 Connection established\r\n\r\n")), kTry);
  if (werr) co_return;
  if (buf.size() > 0) {
    auto [e2, n2] = co_await asio::async_write(stream, buf.data(), kTry);
    if (e2) co_return;
  }
  // The header's buffer would otherwise stay with the connection as long as it lasts.
  buf.consume(buf.size());
  buf.shrink_to_fit();
  co_await relay(s, stream);
}

// The request's method and target as the client sent them (escaped, the target cut at 256
// bytes), for log lines; "(no request line)" when the header did not parse that far.
std::string request_line(const http::request_parser<http::empty_body>& parser) {
  constexpr size_t kMaxTarget = 256;
  const auto& req = parser.get();
  const std::string_view method = req.method_string(), target = req.target();
  if (method.empty() && target.empty()) return "(no request line)";
  std::string line = "'";
  line += wg::escaped(method);
  line += ' ';
  line += wg::escaped(target.substr(0, kMaxTarget));
  if (target.size() > kMaxTarget) line += "...";
  line += '\'';
  return line;
}

// Reads the next request header within the handshake timeout (for the first request, and
// for each later one on a kept-alive connection: an idle one is closed after as long).
// The verdict, or nullopt when the connection is done with.
template <class Client>
awaitable<std::optional<HttpVerdict>> read_request(Context& ctx, Client& s, boost::beast::flat_buffer& buf,
                                                   http::request_parser<http::empty_body>& parser) {
  prepare_request_parser(parser);
  Deadline deadline(lowest_socket(s), ctx.handshake_timeout);
  auto [ec, n] = co_await http::async_read_header(s, buf, parser, kTry);
  deadline.disarm();
  if (deadline.expired()) {
    ctx.metrics.handshake_timeouts.fetch_add(1);
    wg::log::verbose("http: no complete request header within the handshake timeout: closed");
    co_return std::nullopt;
  }
  co_return ec ? verdict_for_read_error(ec) : verdict_for_request(parser.get(), ctx.http.user, ctx.http.password);
}

template <class Client>
awaitable<void> serve(Context& ctx, Client& s) {
  boost::beast::flat_buffer buf;
  Upstream upstream;
  for (;;) {
    http::request_parser<http::empty_body> parser;
    auto verdict = co_await read_request(ctx, s, buf, parser);
    if (!verdict) co_return;  // the client went away, or was too slow
    if (verdict->status != http::status::ok) {
      wg::log::verbose("http: {}: {} {}", request_line(parser), static_cast<unsigned>(verdict->status),
                       verdict->reason);
      co_await refuse(s, verdict->status, verdict->reason, verdict->want_auth);
      co_return;
    }
    if (!verdict->forward) {
      upstream = {};
      co_await tunnel(ctx, s, buf, *verdict);
      co_return;
    }
    if (!co_await forward(ctx, s, buf, parser, *verdict, upstream)) co_return;
  }
}

awaitable<void> serve_plain(Context& ctx, tcp::socket s) {
  ActiveConnection active(ctx.metrics);
  co_await serve(ctx, s);
}

// The TLS handshake shares the deadline of the first request header: a client that
// connects and then says nothing, or half a ClientHello, is closed as slowloris.
awaitable<void> serve_tls(Context& ctx, tcp::socket s, const TlsServerContext& tls) {
  ActiveConnection active(ctx.metrics);
  TlsStream ts(std::move(s), tls);
  Deadline deadline(ts.socket(), ctx.handshake_timeout);
  auto [ec] = co_await ts.async_handshake(kTry);
  deadline.disarm();
  if (ec || deadline.expired()) {
    if (deadline.expired()) ctx.metrics.handshake_timeouts.fetch_add(1);
    wg::log::verbose("https proxy: TLS handshake: {}", deadline.expired() ? "timed out" : ec.message());
    ts.abort();
    co_return;
  }
  co_await serve(ctx, ts);
}

}  // namespace

awaitable<void> http_proxy_server(Context& ctx, tcp::acceptor& acceptor, const TlsServerContext* tls) {
  if (tls)
    return accept_loop(ctx, acceptor, "HTTPS proxy",
                       [&ctx, tls](tcp::socket s) { return serve_tls(ctx, std::move(s), *tls); });
  return accept_loop(ctx, acceptor, "HTTP proxy", [&ctx](tcp::socket s) { return serve_plain(ctx, std::move(s)); });
}

}  // namespace wgns

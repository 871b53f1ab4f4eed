// Plain HTTP requests through the proxy; see http_forward.hpp. Beast parses and
// serialises both messages; bodies pass through in pieces of kPiece bytes, never whole.
#include "http_forward.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <vector>

#include "dial.hpp"
#include "proxy_client.hpp"
#include "tls_stream.hpp"
#include "wg/base/ascii.hpp"
#include "wg/base/log.hpp"
#include "wg/base/shown.hpp"

namespace wgns {
namespace http = boost::beast::http;
namespace {

constexpr size_t kPiece = 16 * 1024;
constexpr std::string_view kVia = "1.1 wg-netstack";

// The field names a Connection header lists (RFC 9110 §7.6.1: hop-by-hop too).
std::vector<std::string> connection_options(const http::fields& f) {
  std::vector<std::string> out;
  for (auto it = f.find(http::field::connection); it != f.end() && it->name() == http::field::connection; ++it) {
    std::string_view v(it->value().data(), it->value().size());
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view token = v.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
      if (!token.empty()) out.emplace_back(token);
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    }
  }
  return out;
}

// Copies the end-to-end fields of `from` to `to`: not the hop-by-hop ones, not those the
// serializer or the proxy sets itself (length, framing, Host, Expect), not the proxy's
// credentials.
void copy_end_to_end(const http::fields& from, http::fields& to) {
  const auto listed = connection_options(from);
  using F = http::field;
  static constexpr F kNotCopied[] = {F::connection,        F::keep_alive, F::proxy_connection, F::proxy_authorization,
                                     F::proxy_authenticate, F::te,         F::trailer,          F::transfer_encoding,
                                     F::upgrade,            F::content_length, F::host,         F::expect};
  for (const auto& f : from) {
    if (std::find(std::begin(kNotCopied), std::end(kNotCopied), f.name()) != std::end(kNotCopied)) continue;
    std::string_view name(f.name_string().data(), f.name_string().size());
    if (std::any_of(listed.begin(), listed.end(), [&](const std::string& o) { return wg::ascii_iequals(o, name); }))
      continue;
    to.insert(f.name_string(), f.value());
  }
  to.insert(http::field::via, kVia);
}

// How a relayed message ended: ec set when it failed, at_dst when that was the write to
// dst (else the read from src).
struct Relayed {
  error_code ec;
  bool at_dst = false;
};

// The body of the message `in` is parsing, written behind `out`'s header to `dst`, piece
// by piece. `out` carries the header to send; its body is set here.
template <bool isRequest, class Src, class Dst>
awaitable<Relayed> relay_message(Src& src, boost::beast::flat_buffer& src_buf,
                                 http::parser<isRequest, http::buffer_body>& in, Dst& dst,
                                 http::message<isRequest, http::buffer_body>& out) {
  http::serializer<isRequest, http::buffer_body> sr{out};
  std::array<char, kPiece> piece;
  out.body().data = nullptr;
  out.body().size = 0;
  out.body().more = !in.is_done();
  for (;;) {
    auto [wec, wn] = co_await http::async_write(dst, sr, kTry);
    if (wec == http::error::need_buffer) wec = {};
    if (wec) co_return Relayed{wec, true};
    if (sr.is_done()) co_return Relayed{};
    in.get().body().data = piece.data();
    in.get().body().size = piece.size();
    auto [rec, rn] = co_await http::async_read_some(src, src_buf, in, kTry);
    if (rec == http::error::need_buffer) rec = {};
    if (rec) co_return Relayed{rec, false};
    // No data this time (the read only parsed a chunk's header, say): a null buffer, which
    // the serializer waits on; an empty one would end a chunked body ("0\r\n\r\n").
    out.body().size = piece.size() - in.get().body().size;
    out.body().data = out.body().size ? piece.data() : nullptr;
    out.body().more = !in.is_done();
  }
}

// RFC 9110 §9.2.2.
bool is_idempotent(http::verb m) {
  switch (m) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::put:
    case http::verb::delete_:
      return true;
    default:
      return false;
  }
}

}  // namespace

http::status status_for_dial_error(const error_code& e) {
  return e == ProxyError::own_address    ? http::status::forbidden
         : e == asio::error::timed_out ? http::status::gateway_timeout
                                       : http::status::bad_gateway;
}

template <class Client>
awaitable<void> refuse(Client& s, http::status status, const std::string& body, bool want_auth) {
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

template <class Client>
awaitable<bool> forward(Context& ctx, Client& client, boost::beast::flat_buffer& buf,
                        http::request_parser<http::empty_body>& header, const HttpVerdict& v, Upstream& up) {
  http::request_parser<http::buffer_body> req_in{std::move(header)};
  req_in.body_limit(boost::none);
  const auto& in = req_in.get();
  const bool client_keep_alive = in.keep_alive();
  const bool head = in.method() == http::verb::head;

  // The request, in origin-form.
  const std::string key = v.host + ":" + std::to_string(v.port);
  const std::string logged = wg::escaped(key);  // the client's text, for log lines
  http::request<http::buffer_body> req_out;
  req_out.method_string(in.method_string());
  req_out.target(v.path);
  req_out.version(11);
  copy_end_to_end(in, req_out);
  req_out.set(http::field::host, v.authority);
  if (in.chunked()) req_out.chunked(true);
  else if (auto len = req_in.content_length()) req_out.content_length(*len);
  // The proxy answers 100-continue itself, so the origin never has to.
  if (auto e = in.find(http::field::expect); e != in.end() && wg::ascii_iequals(e->value(), "100-continue")) {
    auto [cec, cn] = co_await asio::async_write(client, asio::buffer(std::string_view("HTTP/1.1 100 Continue\r\n\r\n")), kTry);
    if (cec) co_return false;
  }
  // An origin may close a kept connection whenever it is idle (RFC 9112 §9.5), and the
  // proxy learns it only when the next request on it fails. A request that can be sent
  // again, idempotent and without a body (RFC 9110 §9.2.2), then goes once more on a new
  // connection, as a browser does; any other gets 502.
  const bool resendable = is_idempotent(in.method()) && !in.chunked() && req_in.content_length().value_or(0) == 0;
  std::optional<http::response_parser<http::buffer_body>> res_in;
  for (bool retried = false;; retried = true) {
    const bool reused = up.stream && up.key == key;
    if (!reused) {
      up = {};
      auto [derr, stream] = co_await dial_host(ctx, v.host, v.port);
      if (derr) {
        ctx.metrics.connections_failed.fetch_add(1);
        wg::log::verbose("http: {}: {}", logged, derr.message());
        co_await refuse(client, status_for_dial_error(derr), key + ": " + derr.message());
        co_return false;
      }
      up.stream.emplace(std::move(stream));
      up.key = key;
    }
    const bool may_resend = reused && resendable && !retried;
    if (auto r = co_await relay_message(client, buf, req_in, *up.stream, req_out); r.ec) {
      wg::log::verbose("http: request to {}: {}", logged, r.ec.message());
      up = {};
      if (!r.at_dst) co_return false;  // the client's side failed: nobody to answer
      if (may_resend) continue;
      // The origin failed while the request went to it (a kept connection it had closed
      // and reset, say): nothing of a response has reached the client yet.
      co_await refuse(client, http::status::bad_gateway, key + ": sending the request: " + r.ec.message());
      co_return false;
    }
    // The response: informational ones (1xx but 101) passed on as they come, then the
    // final one.
    bool first = true, resend = false;
    for (;; first = false) {
      res_in.emplace();
      res_in->body_limit(boost::none);
      if (head) res_in->skip(true);
      auto [rec, rn] = co_await http::async_read_header(*up.stream, up.buf, *res_in, kTry);
      if (rec) {
        wg::log::verbose("http: response from {}: {}", logged, rec.message());
        up = {};
        const bool closed = rec == http::error::end_of_stream || rec == asio::error::eof ||
                            rec == asio::error::connection_reset;
        if (first && closed && may_resend) {
          resend = true;
          break;
        }
        co_await refuse(client, http::status::bad_gateway, key + ": no valid response: " + rec.message());
        co_return false;
      }
      const unsigned code = res_in->get().result_int();
      if (code < 100 || code >= 200 || code == 101) break;
      http::response<http::empty_body> interim{res_in->get().result(), 11};
      copy_end_to_end(res_in->get(), interim);
      auto [iec, in_n] = co_await http::async_write(client, interim, kTry);
      if (iec) co_return false;
    }
    if (!resend) break;
    wg::log::verbose("http: {} closed the kept connection: the request again on a new one", logged);
  }
  const auto& res = res_in->get();
  http::response<http::buffer_body> res_out;
  res_out.result(res.result_int());
  res_out.reason(res.reason());
  res_out.version(11);
  copy_end_to_end(res, res_out);
  const unsigned code = res.result_int();
  const bool bodiless = head || code == 204 || code == 304;
  bool keep_alive = client_keep_alive;
  if (bodiless) {
    // No body follows, whatever the header says: its Content-Length (the size a GET would
    // have) is passed on as written.
    if (auto len = res.find(http::field::content_length); len != res.end())
      res_out.set(http::field::content_length, len->value());
  } else if (res.chunked()) {
    res_out.chunked(true);
  } else if (auto len = res_in->content_length()) {
    res_out.content_length(*len);
  } else if (in.version() >= 11) {
    // A body that ends when the origin closes: chunked to an HTTP/1.1 client, else the
    // end of this connection too.
    res_out.chunked(true);
  } else {
    keep_alive = false;
  }
  res_out.keep_alive(keep_alive);
  const bool origin_reusable = res.keep_alive() && !res_in->need_eof();
  if (auto r = co_await relay_message(*up.stream, up.buf, *res_in, client, res_out); r.ec) {
    wg::log::verbose("http: response from {}: {}", logged, r.ec.message());
    up = {};
    co_return false;
  }
  if (!origin_reusable) up = {};
  if (!keep_alive) {
    co_await close_after_reply(client);
  }
  co_return keep_alive;
}

template awaitable<void> refuse(tcp::socket&, http::status, const std::string&, bool);
template awaitable<void> refuse(TlsStream&, http::status, const std::string&, bool);
template awaitable<bool> forward(Context&, tcp::socket&, boost::beast::flat_buffer&,
                                 http::request_parser<http::empty_body>&, const HttpVerdict&, Upstream&);
template awaitable<bool> forward(Context&, TlsStream&, boost::beast::flat_buffer&,
                                 http::request_parser<http::empty_body>&, const HttpVerdict&, Upstream&);

}  // namespace wgns

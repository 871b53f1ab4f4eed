// What the HTTP proxy makes of a client's request header, decided without sockets: a
// refusal (status and reason), the CONNECT target, or where to forward a plain request. The server and the fuzz target share
// it, and the parser's settings (kHeaderLimit) with it.
#pragma once

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace wgns {

// A request header larger than this gets 431.
inline constexpr size_t kHeaderLimit = 16 * 1024;
// So does one whose folded field line (obs-fold, RFC 7230 3.2.4) is longer than this,
// however small the header: Beast unfolds it in a fixed buffer of this size
// (beast::http::detail::basic_parser_base::max_obs_fold) and reports header_limit past
// it. RFC 6585 lets 431 answer for a single field too large.
inline constexpr size_t kFoldedLineLimit = 4096;

using HttpRequest = boost::beast::http::request<boost::beast::http::empty_body>;

// The server's settings of the parser that reads a request header: kHeaderLimit, and no
// limit on the body that follows (a forwarded upload streams through; Beast would
// otherwise refuse a Content-Length over 1 MB while still reading the header).
template <class Parser>
void prepare_request_parser(Parser& p) {
  p.header_limit(kHeaderLimit);
  p.body_limit(boost::none);
}

struct HttpVerdict {
  // ok: dial host:port; anything else is the refusal's status, with `reason` as its body.
  boost::beast::http::status status = boost::beast::http::status::ok;
  std::string reason;
  bool want_auth = false;  // a 407 asks for Basic credentials
  std::string host;
  uint16_t port = 0;
  // A plain request (absolute-form, RFC 9112 §3.2.2), to forward to host:port with this
  // origin-form target ("/path?query", "*" for OPTIONS *), and this Host value; false: a
  // CONNECT.
  bool forward = false;
  std::string path;
  std::string authority;
};

// After reading the header failed: the refusal to answer, or nullopt to close without one
// (the client went away).
std::optional<HttpVerdict> verdict_for_read_error(const boost::system::error_code& ec);

// A whole header: authorized (user empty: no credentials required), then CONNECT
// host:port, or any other method with an absolute http:// URI (https:// ones go through
// CONNECT; an origin-form "/path" is not for a proxy: 400).
HttpVerdict verdict_for_request(const HttpRequest& req, const std::string& user, const std::string& password);

}  // namespace wgns

// The HTTP proxy's decisions on a request header (authorization, method, target).
#include "http_request.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <sodium.h>

#include <algorithm>
#include <string_view>

#include "context.hpp"
#include "wg/base/ascii.hpp"
#include "wg/crypto.hpp"

namespace wgns {
namespace http = boost::beast::http;
namespace {

bool authorized(const HttpRequest& req, const std::string& user, const std::string& password) {
  if (user.empty()) return true;
  auto it = req.find(http::field::proxy_authorization);
  if (it == req.end()) return false;
  std::string_view v(it->value().data(), it->value().size());
  if (v.substr(0, 6) != "Basic ") return false;
  v.remove_prefix(6);
  std::string decoded(v.size(), '\0');
  size_t len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(decoded.data()), decoded.size(), v.data(), v.size(),
                        nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return false;
  decoded.resize(len);
  std::string expected = user + ":" + password;
  uint8_t a[wg::kHashLen], b[wg::kHashLen];
  wg::crypto::hash(a, {reinterpret_cast<const uint8_t*>(decoded.data()), decoded.size()});
  wg::crypto::hash(b, {reinterpret_cast<const uint8_t*>(expected.data()), expected.size()});
  wg::secure_wipe(decoded.data(), decoded.size());
  wg::secure_wipe(expected.data(), expected.size());
  return wg::ct_equal(a, b, sizeof a);
}

HttpVerdict refusal(http::status status, std::string reason, bool want_auth = false) {
  HttpVerdict v;
  v.status = status;
  v.reason = std::move(reason);
  v.want_auth = want_auth;
  return v;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && wg::ascii_iequals(s.substr(0, prefix.size()), prefix);
}

// "http://authority[/path][?query][#fragment]" → where to forward it. The fragment is
// never sent (RFC 9110 §4.2.4); userinfo is refused (RFC 9110 §4.2.4 deprecates it).
HttpVerdict absolute_form(std::string_view target, bool options) {
  if (!target.empty() && (target[0] == '/' || target == "*"))
    return refusal(http::status::bad_request, "a request to a proxy needs an absolute URI (http://host/...)");
  if (starts_with_nocase(target, "https://"))
    return refusal(http::status::bad_request, "https:// goes through CONNECT");
  if (!starts_with_nocase(target, "http://"))
    return refusal(http::status::bad_request, "only http:// URIs are forwarded");
  target.remove_prefix(7);
  if (auto hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  const size_t end = std::min(target.find('/'), target.find('?'));
  std::string_view authority = target.substr(0, end), rest = end == std::string_view::npos ? "" : target.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return refusal(http::status::bad_request, "user information in a URI is not forwarded");
  HttpVerdict v;
  std::string with_port(authority);
  // A port is there when the last ':' comes after any ']' of an IPv6 literal.
  const size_t colon = with_port.rfind(':'), bracket = with_port.rfind(']');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) with_port += ":80";
  if (authority.empty() || !split_host_port(with_port, v.host, v.port) || v.port == 0)
    return refusal(http::status::bad_request, "the URI's host must be host or host:port");
  v.forward = true;
  v.authority = std::string(authority);
  // An empty path is "/" (RFC 9112 §3.2.1), or "*" for OPTIONS (§3.2.4).
  if (rest.empty()) v.path.assign(1, options ? '*' : '/');
  else if (rest[0] == '?') v.path.append("/").append(rest);
  else v.path = std::string(rest);
  return v;
}

}  // namespace

std::optional<HttpVerdict> verdict_for_read_error(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit)
    return refusal(http::status::request_header_fields_too_large,
                   "request header larger than " + std::to_string(kHeaderLimit) + " bytes, or a folded line over " +
                       std::to_string(kFoldedLineLimit));
  // Closed before the first byte: Beast says end_of_stream (asio's eof never reaches
  // here); a reply would only linger on a connection nobody reads.
  if (ec == http::error::end_of_stream || ec == boost::asio::error::eof ||
      ec == boost::asio::error::connection_reset || ec == boost::asio::error::operation_aborted)
    return std::nullopt;
  return refusal(http::status::bad_request, "malformed request: " + ec.message());
}

HttpVerdict verdict_for_request(const HttpRequest& req, const std::string& user, const std::string& password) {
  if (!authorized(req, user, password))
    return refusal(http::status::proxy_authentication_required, "proxy authentication required", true);
  HttpVerdict v;
  if (req.method() == http::verb::connect) {
    if (!split_host_port(std::string(req.target()), v.host, v.port) || v.port == 0)
      return refusal(http::status::bad_request, "CONNECT target must be host:port (port 1-65535)");
    return v;
  }
  return absolute_form(std::string_view(req.target().data(), req.target().size()),
                       req.method() == http::verb::options);
}

}  // namespace wgns

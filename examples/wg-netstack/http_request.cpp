// The HTTP proxy's decisions on a request header (authorization, method, target).
#include "http_request.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <sodium.h>

#include "common.hpp"
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

}  // namespace

std::optional<HttpVerdict> verdict_for_read_error(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit)
    return refusal(http::status::request_header_fields_too_large,
                   "request header larger than " + std::to_string(kHeaderLimit) + " bytes");
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
  if (req.method() != http::verb::connect)
    return refusal(http::status::method_not_allowed, "only CONNECT is supported");
  HttpVerdict v;
  if (!split_host_port(std::string(req.target()), v.host, v.port))
    return refusal(http::status::bad_request, "CONNECT target must be host:port");
  return v;
}

}  // namespace wgns

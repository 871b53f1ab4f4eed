// Fuzzes wg-netstack's HTTP proxy request handling: the bytes a client sends are read
// with Beast's request parser under the server's settings (kHeaderLimit) and judged by
// the server's own decision functions (examples/wg-netstack/http_request.cpp). The first
// input byte says whether the proxy wants credentials ("u"/"p") and how many bytes each
// read returns (1-128, at least a 64th of the input), the rest is the client's stream.
// Checked beyond "no crash": a header within the limit never gets 431 (unless a line of
// it is folded: kFoldedLineLimit) and none parsed is over twice the limit; otherwise
// reading in small pieces and all at once give the same verdict (a malformed header
// may get 400 or 431 either way); the verdict is CONNECT (to a host:port that is the
// request target) or one of the refusals the server documents (400, 407, 431), or a
// plain request to forward (its URI's authority and an origin-form path); 407 only when
// credentials are wanted, and a CONNECT past them carries exactly those credentials.
//   cmake --preset fuzz && cmake --build build-fuzz --target http_proxy_fuzz
//   build-fuzz/bin/http_proxy_fuzz -max_total_time=60 tests/fuzz/corpus/http_proxy
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http_request.hpp"

namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

// A SyncReadStream over the input that returns at most `piece` bytes per read, then EOF.
class PieceStream {
public:
  PieceStream(std::string_view data, size_t piece) : data_(data), piece_(piece) {}

  template <class Buffers>
  size_t read_some(const Buffers& buffers, error_code& ec) {
    if (data_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    size_t n = boost::asio::buffer_copy(buffers, boost::asio::buffer(data_.data(), std::min(piece_, data_.size())));
    data_.remove_prefix(n);
    return n;
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers) {
    error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

private:
  std::string_view data_;
  size_t piece_;
};

struct Result {
  std::optional<wgns::HttpVerdict> verdict;
  std::string auth;  // the Proxy-Authorization value of a parsed request
  bool parsed = false;  // the header was read whole
  bool connect = false;
  std::string target;
};

Result judge(std::string_view stream, size_t piece, const std::string& user, const std::string& password) {
  PieceStream s(stream, piece);
  boost::beast::flat_buffer buf;
  http::request_parser<http::empty_body> parser;
  wgns::prepare_request_parser(parser);
  error_code ec;
  http::read_header(s, buf, parser, ec);  // what async_read_header does, without a socket
  Result r;
  if (ec) {
    r.verdict = wgns::verdict_for_read_error(ec);
    return r;
  }
  const auto& req = parser.get();
  r.parsed = true;
  r.verdict = wgns::verdict_for_request(req, user, password);
  if (auto it = req.find(http::field::proxy_authorization); it != req.end()) r.auth = std::string(it->value());
  r.connect = req.method() == http::verb::connect;
  r.target = std::string(req.target());
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool creds = data[0] & 1;
  // Small pieces on long inputs would make each run cost thousands of reads: at most 64.
  const size_t piece = std::max<size_t>(1 + (data[0] >> 1), size / 64);
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string user = creds ? "u" : "", password = creds ? "p" : "";

  Result a = judge(stream, piece, user, password);
  Result b = judge(stream, stream.size() + 1, user, password);
  if (a.verdict.has_value() != b.verdict.has_value()) __builtin_trap();
  if (!a.verdict) return 0;  // the client went away: no reply
  const auto& v = *a.verdict;
  // The header as the client sent it: through its blank line; one that never ends is
  // longer than all the client sent (at least its last line break is missing), so all of
  // it at exactly the limit is over it (Beast refuses n >= limit unparsed bytes: 16,384
  // bytes with no line break get 431).
  const size_t eoh = stream.find("\r\n\r\n");
  const size_t header_len = eoh == std::string_view::npos ? stream.size() + 1 : eoh + 4;
  const auto too_large = http::status::request_header_fields_too_large;
  // A header within the limit never gets 431, however it is read, unless it folds a line
  // (obs-fold) and so may hold one over kFoldedLineLimit. One past the limit may: Beast
  // applies the limit to what it holds unparsed at each read, so where the reads end
  // moves the line by a few hundred bytes, but a header parsed whole stays within twice
  // the limit.
  const std::string_view header = stream.substr(0, header_len);
  const bool folded = header_len > wgns::kFoldedLineLimit &&
                      (header.find("\r\n ") != std::string_view::npos || header.find("\r\n\t") != std::string_view::npos);
  if ((v.status == too_large || b.verdict->status == too_large) && header_len <= wgns::kHeaderLimit && !folded)
    __builtin_trap();
  if ((a.parsed || b.parsed) && header_len > 2 * wgns::kHeaderLimit) __builtin_trap();
  // Otherwise a header that parses, parses the same in pieces. One that is malformed
  // may get 400 or 431 depending on where the reads end: both refuse a bad request.
  auto parse_refusal = [](http::status s) { return s == http::status::bad_request || s == too_large; };
  const bool both_refused = !a.parsed && !b.parsed && parse_refusal(v.status) && parse_refusal(b.verdict->status);
  const bool limit_moved = (v.status == too_large) != (b.verdict->status == too_large);
  if (!both_refused && !limit_moved &&
      (v.status != b.verdict->status || v.host != b.verdict->host || v.port != b.verdict->port || a.target != b.target))
    __builtin_trap();

  switch (v.status) {
    case http::status::ok: {
      if (v.host.empty()) __builtin_trap();
      if (creds) {
        std::string_view auth = a.auth;
        if (auth.substr(0, 6) != "Basic ") __builtin_trap();
        auth.remove_prefix(6);
        unsigned char dec[64];
        size_t len = 0;
        if (sodium_base642bin(dec, sizeof dec, auth.data(), auth.size(), nullptr, &len, nullptr,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            std::string_view(reinterpret_cast<char*>(dec), len) != "u:p")
          __builtin_trap();
      }
      if (!a.connect) {
        // A plain request: an absolute http:// URI whose authority is host[:port], sent on
        // in origin-form.
        if (!v.forward || a.target.size() < 7 || v.path.empty() || (v.path[0] != '/' && v.path != "*")) __builtin_trap();
        std::string scheme = a.target.substr(0, 7);
        for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (scheme != "http://" || a.target.compare(7, v.authority.size(), v.authority) != 0) __builtin_trap();
        if (v.authority.find('@') != std::string::npos || v.port == 0) __builtin_trap();
        break;
      }
      if (v.forward) __builtin_trap();
      // The target is host:port (a v6 host in brackets), the port in decimal.
      const bool bracketed = !a.target.empty() && a.target.front() == '[';
      std::string expect_prefix = bracketed ? "[" + v.host + "]:" : v.host + ":";
      if (a.target.rfind(expect_prefix, 0) != 0) __builtin_trap();
      const std::string digits = a.target.substr(expect_prefix.size());
      if (digits.empty() || digits.size() > 5 || std::stoul(digits) != v.port) __builtin_trap();
      break;
    }
    case http::status::proxy_authentication_required:
      if (!creds || !v.want_auth) __builtin_trap();
      break;
    case http::status::request_header_fields_too_large:
      break;
    case http::status::bad_request:
      break;
    default:
      __builtin_trap();  // a status the server does not document
  }
  if (v.status != http::status::proxy_authentication_required && v.want_auth) __builtin_trap();
  return 0;
}

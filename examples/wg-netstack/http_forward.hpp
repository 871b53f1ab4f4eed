// Plain HTTP requests through the proxy (RFC 9112 §3.2.2 absolute-form): each forwarded
// to its origin server in the tunnel in origin-form, bodies streamed both ways (fixed
// length, chunked, or to the end of the response), hop-by-hop header fields dropped
// (RFC 9110 §7.6.1), Via added, and the connection to the origin kept for the next
// request to the same host:port.
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>

#include <optional>
#include <string>

#include "context.hpp"
#include "http_request.hpp"

namespace wgns {

// The client connection's current connection to an origin server.
struct Upstream {
  std::optional<netstack::TcpStream> stream;
  std::string key;  // "host:port" it was dialed for
  boost::beast::flat_buffer buf;
};

// Forwards the request whose header `parser` holds (its body still to read from the
// client through `buf`) and relays the response. True when the client connection stays
// open for another request.
// Client: tcp::socket or TlsStream.
template <class Client>
awaitable<bool> forward(Context& ctx, Client& client, boost::beast::flat_buffer& buf,
                        boost::beast::http::request_parser<boost::beast::http::empty_body>& parser,
                        const HttpVerdict& v, Upstream& upstream);

// Answers an error and closes (after the client had the time to read the answer).
template <class Client>
awaitable<void> refuse(Client& s, boost::beast::http::status status, const std::string& body,
                       bool want_auth = false);

// 403 for the proxy's own address, 504 for a timeout, 502 for the rest.
boost::beast::http::status status_for_dial_error(const error_code& e);

}  // namespace wgns

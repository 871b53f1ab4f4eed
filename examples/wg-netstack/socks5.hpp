// SOCKS5 (RFC 1928) with username/password (RFC 1929): CONNECT and UDP ASSOCIATE into
// the tunnel. Host names are resolved through the tunnel's DNS, never the system's.
#pragma once

#include "context.hpp"

namespace wgns {

// Reply codes of RFC 1928 section 6.
enum class SocksReply : uint8_t {
  succeeded = 0,
  general_failure = 1,
  not_allowed = 2,
  network_unreachable = 3,
  host_unreachable = 4,
  connection_refused = 5,
  ttl_expired = 6,
  command_not_supported = 7,
  address_type_not_supported = 8,
};

// Maps a dial or resolve failure to the reply a client should see.
SocksReply socks_reply_for(const error_code& ec);

// Accepts on `acceptor` forever (until it is closed).
awaitable<void> socks5_server(Context& ctx, tcp::acceptor& acceptor);

}  // namespace wgns

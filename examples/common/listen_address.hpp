// The listening addresses the programs take (--health, the proxies' BindAddress).
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace programs {

// "ADDR:PORT" or "[V6]:PORT" ("localhost" is 127.0.0.1); throws std::invalid_argument
// ("'S' is not ADDR:PORT", "'HOST' is not an IP address").
boost::asio::ip::tcp::endpoint parse_listen(const std::string& s);

}  // namespace programs

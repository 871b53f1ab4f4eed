#include "listen_address.hpp"

#include <stdexcept>

#include "wg/base/host_port.hpp"

namespace programs {

boost::asio::ip::tcp::endpoint parse_listen(const std::string& s) {
  std::string host;
  uint16_t port = 0;
  if (!wg::split_host_port(s, host, port)) throw std::invalid_argument("'" + s + "' is not ADDR:PORT");
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("'" + host + "' is not an IP address");
  return {a, port};
}

}  // namespace programs

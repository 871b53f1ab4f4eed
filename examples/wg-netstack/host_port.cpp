// "host:port" and "[v6]:port" split for the command line, forwards and HTTP CONNECT.
#include <string>

#include "host_port.hpp"

namespace wgns {

bool split_host_port(const std::string& s, std::string& host, uint16_t& port) {
  std::string p;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    host = s.substr(1, close - 1);
    p = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) return false;
    host = s.substr(0, colon);
    p = s.substr(colon + 1);
  }
  if (host.empty() || p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  unsigned v = static_cast<unsigned>(std::stoul(p));
  if (v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace wgns

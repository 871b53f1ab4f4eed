#include "wg/base/host_port.hpp"

#include <charconv>

namespace wg {

bool split_host_port(std::string_view s, std::string& host, uint16_t& port) {
  std::string_view p;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    host = s.substr(1, close - 1);
    p = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon) return false;
    host = s.substr(0, colon);
    p = s.substr(colon + 1);
  }
  if (host.empty() || p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  unsigned v = 0;
  std::from_chars(p.data(), p.data() + p.size(), v);  // at most 5 digits: no overflow
  if (v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace wg

// Endpoint names on the underlay, through the system resolver (getaddrinfo).
#include "bind/resolve.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "wg/base/host_port.hpp"

namespace conn {

std::optional<Endpoint> resolve_endpoint(const std::string& text, std::string& error) {
  if (auto ep = Endpoint::parse(text)) return ep;
  std::string host;
  uint16_t port_number = 0;
  if (!wg::split_host_port(text, host, port_number)) {
    error = text.find(':') == std::string::npos ? "endpoint '" + text + "' has no port"
                                                 : "endpoint '" + text + "' is not HOST:PORT";
    return std::nullopt;
  }
  const std::string port = std::to_string(port_number);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    error = "cannot resolve endpoint '" + text + "': " + gai_strerror(rc);
    return std::nullopt;
  }
  std::optional<Endpoint> best;
  for (auto* ai = res; ai; ai = ai->ai_next) {
    Endpoint ep;
    if (ai->ai_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
      ep.family = 4;
      std::memcpy(ep.addr.data(), &sa->sin_addr, 4);
      ep.port = ntohs(sa->sin_port);
      best = ep;
      break;  // IPv4 preferred, as wg(8) does
    }
    if (ai->ai_family == AF_INET6 && !best) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
      ep.family = 6;
      std::memcpy(ep.addr.data(), &sa->sin6_addr, 16);
      ep.port = ntohs(sa->sin6_port);
      ep.scope_id = sa->sin6_scope_id;
      best = ep;
    }
  }
  freeaddrinfo(res);
  if (!best || best->port == 0) error = "cannot resolve endpoint '" + text + "'";
  return best && best->port ? best : std::nullopt;
}

}  // namespace conn

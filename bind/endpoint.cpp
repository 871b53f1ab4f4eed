// Endpoint parsing and formatting (numeric addresses only).
#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstring>

#include "bind/bind.hpp"
#include "wg/base/host_port.hpp"

namespace conn {

std::optional<Endpoint> Endpoint::parse(std::string_view s) {
  std::string host_text;
  uint16_t port = 0;
  if (!wg::split_host_port(s, host_text, port) || port == 0) return std::nullopt;
  std::string_view host = host_text;

  Endpoint ep;
  ep.port = port;
  std::string_view zone;
  if (auto pct = host.find('%'); pct != std::string_view::npos) {
    zone = host.substr(pct + 1);
    host = host.substr(0, pct);
    if (zone.empty()) return std::nullopt;
  }
  if (host.empty() || host.size() > 45 || zone.size() >= IF_NAMESIZE) return std::nullopt;
  char buf[64];
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = 0;
  if (zone.empty() && inet_pton(AF_INET, buf, ep.addr.data()) == 1) {
    ep.family = 4;
    return ep;
  }
  if (inet_pton(AF_INET6, buf, ep.addr.data()) != 1) return std::nullopt;
  ep.family = 6;
  if (!zone.empty()) {
    char z[IF_NAMESIZE];
    std::memcpy(z, zone.data(), zone.size());
    z[zone.size()] = 0;
    unsigned idx = if_nametoindex(z);
    if (idx == 0) {
      // A numeric zone is an interface index.
      auto [zend, zerr] = std::from_chars(zone.data(), zone.data() + zone.size(), idx);
      if (zerr != std::errc{} || zend != zone.data() + zone.size()) return std::nullopt;
    }
    ep.scope_id = idx;
  }
  return ep;
}

std::string Endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == 4) {
    inet_ntop(AF_INET, addr.data(), buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port);
  }
  if (family == 6) {
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
    std::string s = "[";
    s += buf;
    if (scope_id != 0) {
      char name[IF_NAMESIZE];
      s += '%';
      s += if_indextoname(scope_id, name) ? std::string(name) : std::to_string(scope_id);
    }
    s += "]:";
    s += std::to_string(port);
    return s;
  }
  return "(none)";
}

size_t Endpoint::destination_bytes(uint8_t out[18]) const {
  size_t n = family == 4 ? 4 : 16;
  std::memcpy(out, addr.data(), n);
  out[n] = static_cast<uint8_t>(port >> 8);
  out[n + 1] = static_cast<uint8_t>(port);
  return n + 2;
}

}  // namespace conn

// IP address and prefix parsing/formatting, and header peeking for routing.
#include "wg/base/ip.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace wg {

IpAddress IpAddress::v4(const uint8_t* p) {
  IpAddress a;
  a.family = 4;
  std::memcpy(a.bytes.data(), p, 4);
  return a;
}

IpAddress IpAddress::v6(const uint8_t* p) {
  IpAddress a;
  a.family = 6;
  std::memcpy(a.bytes.data(), p, 16);
  return a;
}

std::optional<IpAddress> IpAddress::parse(std::string_view s) {
  if (s.empty() || s.size() > 45) return std::nullopt;
  char buf[64];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = 0;
  IpAddress a;
  if (inet_pton(AF_INET, buf, a.bytes.data()) == 1) {
    a.family = 4;
    return a;
  }
  if (inet_pton(AF_INET6, buf, a.bytes.data()) == 1) {
    a.family = 6;
    return a;
  }
  return std::nullopt;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == 4) inet_ntop(AF_INET, bytes.data(), buf, sizeof buf);
  else if (family == 6) inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  else return "(none)";
  return buf;
}

std::optional<IpPrefix> IpPrefix::parse(std::string_view s) {
  auto slash = s.find('/');
  auto addr = IpAddress::parse(s.substr(0, slash));
  if (!addr) return std::nullopt;
  IpPrefix p{*addr, static_cast<uint8_t>(addr->is_v4() ? 32 : 128)};
  if (slash != std::string_view::npos) {
    auto bits = s.substr(slash + 1);
    unsigned v = 0;
    auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), v);
    if (bits.empty() || ec != std::errc{} || end != bits.data() + bits.size() ||
        v > (addr->is_v4() ? 32u : 128u))
      return std::nullopt;
    p.bits = static_cast<uint8_t>(v);
  }
  return p;
}

std::string IpPrefix::to_string() const { return addr.to_string() + "/" + std::to_string(bits); }

IpPrefix IpPrefix::masked() const {
  IpPrefix p = *this;
  for (size_t i = 0; i < 16; ++i) {
    size_t bit = i * 8;
    if (bit >= bits) p.addr.bytes[i] = 0;
    else if (bit + 8 > bits) p.addr.bytes[i] &= static_cast<uint8_t>(0xff00u >> (bits - bit));
  }
  return p;
}

bool IpPrefix::contains(const IpAddress& a) const {
  if (a.family != addr.family) return false;
  IpPrefix probe{a, bits};
  return probe.masked().addr == masked().addr;
}

namespace {

// The address at `v4_at` of an IPv4 header or `v6_at` of an IPv6 header.
std::optional<IpAddress> header_address(const uint8_t* pkt, size_t len, size_t v4_at, size_t v6_at) {
  if (len < 1) return std::nullopt;
  switch (pkt[0] >> 4) {
    case 4: if (len >= 20) return IpAddress::v4(pkt + v4_at); break;
    case 6: if (len >= 40) return IpAddress::v6(pkt + v6_at); break;
  }
  return std::nullopt;
}

}  // namespace

std::optional<IpAddress> packet_destination(const uint8_t* pkt, size_t len) { return header_address(pkt, len, 16, 24); }

std::optional<IpAddress> packet_source(const uint8_t* pkt, size_t len) { return header_address(pkt, len, 12, 8); }

}  // namespace wg

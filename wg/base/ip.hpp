// IP addresses and prefixes as plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wg {

struct IpAddress {
  uint8_t family = 0;                // 4 or 6; 0 = none
  std::array<uint8_t, 16> bytes{};   // IPv4: the first 4, the rest zero

  static IpAddress v4(const uint8_t* p);
  static IpAddress v6(const uint8_t* p);
  // "198.19.0.1" or "fd00:19::1" (no brackets, no zone).
  static std::optional<IpAddress> parse(std::string_view s);
  std::string to_string() const;
  size_t size() const { return family == 4 ? 4 : 16; }
  bool is_v4() const { return family == 4; }
  bool is_v6() const { return family == 6; }
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct IpPrefix {
  IpAddress addr;
  uint8_t bits = 0;

  // "198.19.0.0/24", "fd00:19::/64"; a bare address is a host prefix.
  static std::optional<IpPrefix> parse(std::string_view s);
  std::string to_string() const;
  // The same prefix with host bits cleared.
  IpPrefix masked() const;
  bool contains(const IpAddress& a) const;
  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;
};

// nullopt if too short for its header.
std::optional<IpAddress> packet_destination(const uint8_t* pkt, size_t len);
std::optional<IpAddress> packet_source(const uint8_t* pkt, size_t len);

}  // namespace wg

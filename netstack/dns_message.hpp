// DNS wire format for the stub resolver (RFC 1035, 3596): A/AAAA queries and the
// addresses of responses. No I/O; every read is bounds-checked.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "wg/base/ip.hpp"

namespace netstack::dns {

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeCname = 5;
inline constexpr uint16_t kTypeAaaa = 28;
inline constexpr uint16_t kClassIn = 1;

inline constexpr uint8_t kRcodeNoError = 0;
inline constexpr uint8_t kRcodeServFail = 2;
inline constexpr uint8_t kRcodeNxDomain = 3;

inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kMaxNameChars = 253;
inline constexpr size_t kMaxNameWireSize = 255;
inline constexpr size_t kMaxLabelSize = 63;
inline constexpr int kMaxPointerFollows = 128;    // per name

// A recursive query for an A or AAAA record; empty if the name (labels of letters,
// digits, '-', '_') or the type is not acceptable.
std::vector<uint8_t> build_query(uint16_t id, std::string_view name, uint16_t qtype);

struct Answer {
  std::vector<wg::IpAddress> addresses;
  uint8_t rcode = 0;
  bool truncated = false;                // retry over TCP
  uint32_t ttl = 0;                      // smallest, 0 when none
};

// nullopt unless a well-formed response with expected_id and one (qtype, IN) question,
// whose name is not compared. CNAMEs are not followed; with TC, returns what fit.
std::optional<Answer> parse_response(std::span<const uint8_t> msg, uint16_t expected_id,
                                     uint16_t qtype);

// Prefixes the 16-bit length (RFC 1035 §4.2.2); empty if over 65535 bytes.
std::vector<uint8_t> tcp_frame(std::span<const uint8_t> msg);

// The first message in `stream`, or nullopt while incomplete; it consumed 2 + size.
std::optional<std::span<const uint8_t>> tcp_unframe(std::span<const uint8_t> stream);

}  // namespace netstack::dns

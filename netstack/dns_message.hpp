// DNS wire format for the stub resolver (RFC 1035, AAAA from RFC 3596): builds A/AAAA
// queries and reads the addresses out of responses. Pure bytes in, values out: no I/O,
// no clock. Every read of a response is bounds-checked; names may use compression.
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
inline constexpr size_t kMaxNameChars = 253;      // presentation form, without trailing dot
inline constexpr size_t kMaxNameWireSize = 255;   // RFC 1035 §3.1, length bytes included
inline constexpr size_t kMaxLabelSize = 63;
inline constexpr int kMaxPointerFollows = 128;    // per name; real names need a handful

// A query for `name` with type kTypeA or kTypeAaaa, class IN, RD set, one question.
// `name` is dotted, an optional trailing dot allowed; labels are 1..63 bytes of letters,
// digits, '-' or '_', at most 253 characters in all. Returns an empty vector when the
// name or the type is not acceptable.
std::vector<uint8_t> build_query(uint16_t id, std::string_view name, uint16_t qtype);

struct Answer {
  std::vector<wg::IpAddress> addresses;  // all IN records of the asked type, in order
  uint8_t rcode = 0;                     // kRcodeNoError, kRcodeNxDomain, ...
  bool truncated = false;                // TC: retry over TCP (RFC 2181 §9)
  uint32_t ttl = 0;                      // the smallest TTL of `addresses`, 0 when none
};

// Reads a response to the query build_query(expected_id, ..., qtype) made. nullopt when
// it is malformed, not a response (QR clear, opcode not QUERY), carries another id, or
// its single question is not (qtype, IN). The question name is not compared: the caller
// who cares compares it.
//
// The answer section is walked record by record; A (rdlength 4) or AAAA (rdlength 16)
// records of class IN whose type is qtype are collected, everything else (CNAMEs among
// them) is skipped without following names. A matching record of the wrong rdlength is
// malformed. Authority and additional sections are not read.
//
// When TC is set the server may have cut the answer section short: parsing stops at the
// first record that does not fit and what came before is returned, with truncated set.
std::optional<Answer> parse_response(std::span<const uint8_t> msg, uint16_t expected_id,
                                     uint16_t qtype);

// DNS over TCP (RFC 1035 §4.2.2): each message is preceded by its length as two
// big-endian bytes. tcp_frame returns the framed message, or an empty vector when the
// message is over 65535 bytes.
std::vector<uint8_t> tcp_frame(std::span<const uint8_t> msg);

// The first message in `stream` (bytes read so far from a TCP connection), as a view
// into `stream`, or nullopt while its length prefix or its body is incomplete. The
// frame consumed is 2 + the returned size bytes.
std::optional<std::span<const uint8_t>> tcp_unframe(std::span<const uint8_t> stream);

}  // namespace netstack::dns

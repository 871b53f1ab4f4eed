// The SOCKS5 client messages (RFC 1928, with RFC 1929 authentication) as pure parsers of
// the bytes received so far: the server reads exactly one message and not a byte of what
// follows, and the fuzz target drives the same code without sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace wgns::socks5 {

inline constexpr uint8_t kVersion = 5;
inline constexpr uint8_t kAuthVersion = 1;
inline constexpr uint8_t kMethodNone = 0, kMethodUserPass = 2, kMethodRefused = 0xff;
inline constexpr uint8_t kCmdConnect = 1, kCmdBind = 2, kCmdUdpAssociate = 3;
inline constexpr uint8_t kAtypV4 = 1, kAtypName = 3, kAtypV6 = 4;

// What a parser made of the bytes so far.
enum class Status {
  complete,    // one whole message of `size` bytes (outputs are set)
  incomplete,  // read until there are `size` bytes in all (always more than given), then again
  malformed,   // a wrong version byte or an empty method list: close without a reply
  bad_type,    // a request with an ATYP that RFC 1928 does not define (0x02, 0xff...):
               // its length is unknown, so nothing more can be read; reply 08
  empty_name,  // a request for a domain name of length 0 (whole, `size` bytes): reply 04
};

struct Parsed {
  Status status;
  size_t size;
};

struct Target {
  std::string host;  // an address literal or a name
  uint16_t port = 0;
};

// VER NMETHODS METHODS. On complete, `chosen` is `want` if the client offers it, else
// kMethodRefused.
Parsed parse_greeting(std::span<const uint8_t> in, uint8_t want, uint8_t& chosen);

// RFC 1929: VER(1) ULEN UNAME PLEN PASSWD.
Parsed parse_auth(std::span<const uint8_t> in, std::string& user, std::string& password);

// VER CMD RSV ATYP DST.ADDR DST.PORT (RSV is not checked).
Parsed parse_request(std::span<const uint8_t> in, uint8_t& cmd, Target& target);

// A client datagram of UDP ASSOCIATE: RSV(2) FRAG ATYP DST.ADDR DST.PORT DATA. False for a
// fragment (unsupported) or anything malformed; else the target and the header's length.
bool parse_udp_header(std::span<const uint8_t> in, Target& target, size_t& header_len);

}  // namespace wgns::socks5

// A TLS client's first flight as a pure parser of the bytes received so far: the
// handshake records (RFC 8446 section 5.1, RFC 5246 section 6.2) that carry the
// ClientHello (RFC 8446 section 4.1.2, RFC 5246 section 7.4.1.2) and its server_name
// extension (RFC 6066 section 3). The [SNI] service (sni.cpp) routes by the name; the fuzz
// target drives the same code without sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace wgns::tls {

inline constexpr uint8_t kContentHandshake = 22;
inline constexpr uint8_t kHandshakeClientHello = 1;
inline constexpr uint16_t kExtensionServerName = 0;
inline constexpr uint8_t kNameTypeHostName = 0;
inline constexpr size_t kRecordHeaderSize = 5;
inline constexpr size_t kMaxRecordLength = size_t{1} << 14;  // TLSPlaintext.length
inline constexpr size_t kMaxHostName = 253;                   // a DNS name without its dot

// Our bounds: a ClientHello body (the handshake length field) of at most kMaxHelloLength
// bytes, carried by records of at most kMaxHelloBytes in all, headers included. Browsers'
// hellos with post-quantum key shares are under 2 KiB; the slack leaves room for hellos
// cut into many small records (a known way around middleboxes).
inline constexpr size_t kMaxHelloLength = 16 * 1024;
inline constexpr size_t kMaxHelloBytes = 32 * 1024;

enum class HelloStatus {
  complete,    // the whole ClientHello is in the records of the first `size` bytes
  incomplete,  // at least `size` bytes are needed in all (more than given, at most
               // kMaxHelloBytes): parse again when more have come
  malformed,   // not a TLS handshake record, not a ClientHello, or one that breaks the
               // grammar (lengths, duplicate extensions, a server_name list that is not one
               // host_name, a name that is not a DNS host name)
  too_large,   // a ClientHello over kMaxHelloLength, or records past kMaxHelloBytes
};

struct ClientHello {
  HelloStatus status = HelloStatus::incomplete;
  // complete: the end of the record that completed the ClientHello (what follows it is not
  // looked at); incomplete: the bytes needed; malformed, too_large: the bytes that decided
  // it (any input that starts with them gets the same verdict).
  size_t size = 0;
  // complete: the host_name of the server_name extension as sent (1-253 characters of
  // letters, digits, '-', '_' in dot-separated labels of 1-63); empty when there is none.
  std::string server_name;
};

// Parses the bytes a client sent so far. Reads nothing past in.size(); no allocation
// unless the ClientHello spans records (then one copy of it) or is complete.
ClientHello parse_client_hello(std::span<const uint8_t> in);

}  // namespace wgns::tls

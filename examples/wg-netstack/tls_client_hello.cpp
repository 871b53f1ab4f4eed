// The ClientHello parser: walks the records as they arrive, checking each header byte as
// soon as it is in, and parses the ClientHello once its last byte is.
#include "tls_client_hello.hpp"

#include <algorithm>
#include <bitset>
#include <optional>
#include <vector>

namespace wgns::tls {
namespace {

constexpr ClientHello verdict(HelloStatus s, size_t size) { return {s, size, {}}; }
constexpr ClientHello need(size_t n) { return verdict(HelloStatus::incomplete, n); }

// TLS 1.0 (3,1) to 1.3 (3,4), as record and as ClientHello legacy_version.
constexpr bool tls_version(uint8_t major, uint8_t minor) { return major == 3 && minor >= 1 && minor <= 4; }

// Bounds-checked reads from the front of a span; every miss leaves ok() false.
class Reader {
public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool ok() const { return ok_; }
  bool empty() const { return b_.empty(); }

  uint32_t u8() { return take(1) ? taken_[0] : 0; }
  uint32_t u16() { return take(2) ? uint32_t{taken_[0]} << 8 | taken_[1] : 0; }
  std::span<const uint8_t> bytes(size_t n) { return take(n) ? taken_ : std::span<const uint8_t>{}; }
  // A vector with a length prefix of `width` bytes, of `min` to `max` bytes.
  std::span<const uint8_t> vec(int width, size_t min, size_t max) {
    size_t n = width == 1 ? u8() : u16();
    if (n < min || n > max) ok_ = false;
    return ok_ ? bytes(n) : std::span<const uint8_t>{};
  }

private:
  bool take(size_t n) {
    if (!ok_ || b_.size() < n) {
      ok_ = false;
      return false;
    }
    taken_ = b_.first(n);
    b_ = b_.subspan(n);
    return true;
  }
  std::span<const uint8_t> b_, taken_;
  bool ok_ = true;
};

// RFC 6066: a host name without the trailing dot; never an IPv6 literal (no ':'). IPv4
// literals pass this (digits and dots): the service refuses them (sni.cpp).
bool is_host_name(std::span<const uint8_t> s) {
  if (s.empty() || s.size() > kMaxHostName) return false;
  size_t label = 0;
  for (uint8_t c : s) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok || ++label > 63) return false;
  }
  return label != 0;
}

// The server_name extension's data (RFC 6066 section 3): a ServerNameList of exactly one
// host_name, as OpenSSL accepts it (no other name_type was ever defined, and an unknown
// one's length could not be known). nullopt when malformed.
std::optional<std::string> server_name(std::span<const uint8_t> data) {
  Reader r(data);
  Reader list(r.vec(2, 1, 0xffff));
  if (!r.ok() || !r.empty()) return std::nullopt;
  if (list.u8() != kNameTypeHostName) return std::nullopt;
  auto name = list.vec(2, 1, 0xffff);
  if (!list.ok() || !list.empty() || !is_host_name(name)) return std::nullopt;
  return std::string(name.begin(), name.end());
}

// The ClientHello's body (after type and length). nullopt when malformed; else the
// server name, empty when there is none.
std::optional<std::string> parse_body(std::span<const uint8_t> body) {
  Reader r(body);
  const uint32_t major = r.u8(), minor = r.u8();
  if (!tls_version(static_cast<uint8_t>(major), static_cast<uint8_t>(minor))) return std::nullopt;
  r.bytes(32);                         // random
  r.vec(1, 0, 32);                     // legacy_session_id
  auto suites = r.vec(2, 2, 0xfffe);   // cipher_suites
  r.vec(1, 1, 0xff);                   // legacy_compression_methods
  if (!r.ok() || suites.size() % 2 != 0) return std::nullopt;
  std::string name;
  if (r.empty()) return name;  // TLS 1.0-1.2 may end here: no extensions
  Reader exts(r.vec(2, 0, 0xffff));
  if (!r.ok() || !r.empty()) return std::nullopt;
  std::bitset<0x10000> seen;  // RFC 8446 4.2 and RFC 5246 7.4.1.4: each type at most once
  while (!exts.empty()) {
    const uint32_t type = exts.u16();
    auto data = exts.vec(2, 0, 0xffff);
    if (!exts.ok() || seen.test(type)) return std::nullopt;
    seen.set(type);
    if (type == kExtensionServerName) {
      auto n = server_name(data);
      if (!n) return std::nullopt;
      name = std::move(*n);
    }
  }
  return name;
}

}  // namespace

// A record's payload counts towards the handshake message as soon as its bytes are in, so
// that the handshake type and length are judged early; the message is parsed once the
// record that holds its last byte is whole.
ClientHello parse_client_hello(std::span<const uint8_t> in) {
  size_t off = 0;          // the current record's header
  size_t payload = 0;      // handshake bytes in the records before it
  uint8_t header[4] = {};  // the handshake message's type and length
  size_t message = 0;      // the message's size, header included (0: not known yet)
  for (;;) {
    // Every record from here ends past kMaxHelloBytes.
    if (off + kRecordHeaderSize > kMaxHelloBytes) return verdict(HelloStatus::too_large, off);
    if (in.size() <= off) return need(off + 1);
    if (in[off] != kContentHandshake) return verdict(HelloStatus::malformed, off + 1);
    if (in.size() < off + 3) return need(off + 3);
    if (!tls_version(in[off + 1], in[off + 2])) return verdict(HelloStatus::malformed, off + 3);
    if (in.size() < off + kRecordHeaderSize) return need(off + kRecordHeaderSize);
    const size_t length = size_t{in[off + 3]} << 8 | in[off + 4];
    const size_t start = off + kRecordHeaderSize, end = start + length;
    // RFC 8446 5.1: no record over 2^14; no empty handshake fragments.
    if (length == 0 || length > kMaxRecordLength) return verdict(HelloStatus::malformed, start);
    if (end > kMaxHelloBytes) return verdict(HelloStatus::too_large, start);

    // The handshake header, from the bytes of this record that are in.
    const size_t in_end = std::min(end, in.size());
    for (size_t i = start; message == 0 && i < in_end; ++i) {
      const size_t at = payload + (i - start);
      if (at >= 4) break;
      header[at] = in[i];
      if (at == 0 && header[0] != kHandshakeClientHello) return verdict(HelloStatus::malformed, i + 1);
      if (at == 3) {
        const size_t body = size_t{header[1]} << 16 | size_t{header[2]} << 8 | header[3];
        if (body > kMaxHelloLength) return verdict(HelloStatus::too_large, i + 1);
        message = 4 + body;
      }
    }
    if (in.size() < end) return need(end);
    payload += length;
    if (message == 0 || payload < message) {
      off = end;
      continue;
    }

    // The record is whole and holds the message's last byte.
    std::span<const uint8_t> msg;
    std::vector<uint8_t> joined;
    if (payload - length == 0) {
      msg = in.subspan(start, message);  // one record
    } else {
      joined.reserve(message);
      for (size_t r = 0; joined.size() < message; r += kRecordHeaderSize + (size_t{in[r + 3]} << 8 | in[r + 4])) {
        const size_t n = std::min(size_t{in[r + 3]} << 8 | in[r + 4], message - joined.size());
        joined.insert(joined.end(), in.begin() + static_cast<ptrdiff_t>(r + kRecordHeaderSize),
                      in.begin() + static_cast<ptrdiff_t>(r + kRecordHeaderSize + n));
      }
      msg = joined;
    }
    auto name = parse_body(msg.subspan(4));
    if (!name) return verdict(HelloStatus::malformed, end);
    return {HelloStatus::complete, end, std::move(*name)};
  }
}

}  // namespace wgns::tls

// SOCKS5 message parsers: each looks at the bytes so far and says how many it needs.
#include "socks5_parse.hpp"

#include <algorithm>

#include "wg/base/ip.hpp"

namespace wgns::socks5 {
namespace {

constexpr Parsed need(size_t n) { return {Status::incomplete, n}; }

// ATYP DST.ADDR DST.PORT at in[off...]: the message's total size, or what is missing.
Parsed parse_address(std::span<const uint8_t> in, size_t off, Target& target) {
  if (in.size() < off + 1) return need(off + 1);
  const uint8_t atyp = in[off];
  size_t addr_len;
  if (atyp == kAtypV4 || atyp == kAtypV6) {
    addr_len = atyp == kAtypV4 ? 4 : 16;
  } else if (atyp == kAtypName) {
    if (in.size() < off + 2) return need(off + 2);
    addr_len = 1 + in[off + 1];
  } else {
    return {Status::bad_type, off + 1};
  }
  const size_t total = off + 1 + addr_len + 2;
  if (in.size() < total) return need(total);
  const uint8_t* a = in.data() + off + 1;
  if (atyp == kAtypV4) target.host = wg::IpAddress::v4(a).to_string();
  else if (atyp == kAtypV6) target.host = wg::IpAddress::v6(a).to_string();
  else target.host.assign(reinterpret_cast<const char*>(a + 1), a[0]);
  target.port = static_cast<uint16_t>(in[total - 2] << 8 | in[total - 1]);
  return {atyp == kAtypName && addr_len == 1 ? Status::empty_name : Status::complete, total};
}

}  // namespace

Parsed parse_greeting(std::span<const uint8_t> in, uint8_t want, uint8_t& chosen) {
  if (in.size() < 2) return need(2);
  if (in[0] != kVersion || in[1] == 0) return {Status::malformed, 2};
  const size_t total = 2 + size_t{in[1]};
  if (in.size() < total) return need(total);
  auto methods = in.subspan(2, in[1]);
  chosen = std::find(methods.begin(), methods.end(), want) != methods.end() ? want : kMethodRefused;
  return {Status::complete, total};
}

Parsed parse_auth(std::span<const uint8_t> in, std::string& user, std::string& password) {
  if (in.size() < 2) return need(2);
  if (in[0] != kAuthVersion) return {Status::malformed, 2};
  const size_t ulen = in[1];
  if (in.size() < 2 + ulen + 1) return need(2 + ulen + 1);
  const size_t plen = in[2 + ulen];
  const size_t total = 2 + ulen + 1 + plen;
  if (in.size() < total) return need(total);
  user.assign(reinterpret_cast<const char*>(in.data() + 2), ulen);
  password.assign(reinterpret_cast<const char*>(in.data() + 3 + ulen), plen);
  return {Status::complete, total};
}

Parsed parse_request(std::span<const uint8_t> in, uint8_t& cmd, Target& target) {
  if (in.size() < 3) return need(3);
  if (in[0] != kVersion) return {Status::malformed, 3};
  Parsed r = parse_address(in, 3, target);
  if (r.status == Status::complete) cmd = in[1];
  return r;
}

bool parse_udp_header(std::span<const uint8_t> in, Target& target, size_t& header_len) {
  if (in.size() < 4 || in[0] != 0 || in[1] != 0 || in[2] != 0) return false;  // fragments unsupported: drop
  Parsed r = parse_address(in, 3, target);
  if (r.status != Status::complete) return false;  // short, unknown ATYP, or an empty name
  header_len = r.size;
  return true;
}

}  // namespace wgns::socks5

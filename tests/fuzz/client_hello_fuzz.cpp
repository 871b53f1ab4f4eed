// Fuzzes the ClientHello parser of wg-netstack's [SNI] service
// (examples/wg-netstack/tls_client_hello.cpp): the input is what a client sends.
// Checked beyond "no crash": an incomplete verdict asks for more than it has and no more
// than kMaxHelloBytes; every other verdict was reached within the input, holds for every
// input that starts with the bytes that decided it, and was incomplete one byte short of
// them; every shorter prefix is incomplete, asking no less than a still shorter one; the
// parser read exactly as the server does (growing reads of the sizes it asks for) gives
// the same verdict; a server name is a host name of at most 253 characters whose bytes
// are in the input; and a ClientHello cut into records of another size (its first byte
// picks it) says the same.
//   cmake --preset fuzz && cmake --build build-fuzz --target client_hello_fuzz
//   build-fuzz/bin/client_hello_fuzz -max_total_time=60 tests/fuzz/corpus/client_hello
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tls_client_hello.hpp"

using namespace wgns::tls;

namespace {

bool same(const ClientHello& a, const ClientHello& b) {
  return a.status == b.status && a.size == b.size && a.server_name == b.server_name;
}

bool host_name_chars(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

// The handshake bytes of the records in in.first(end), cut again into records of
// `fragment` bytes.
std::vector<uint8_t> refragment(std::span<const uint8_t> in, size_t end, size_t fragment) {
  std::vector<uint8_t> payload, out;
  for (size_t at = 0; at + kRecordHeaderSize <= end;) {
    const size_t n = size_t{in[at + 3]} << 8 | in[at + 4];
    payload.insert(payload.end(), in.begin() + static_cast<ptrdiff_t>(at + kRecordHeaderSize),
                   in.begin() + static_cast<ptrdiff_t>(at + kRecordHeaderSize + n));
    at += kRecordHeaderSize + n;
  }
  for (size_t at = 0; at < payload.size(); at += fragment) {
    const size_t n = std::min(fragment, payload.size() - at);
    out.insert(out.end(), {kContentHandshake, 3, 3, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
    out.insert(out.end(), payload.begin() + static_cast<ptrdiff_t>(at), payload.begin() + static_cast<ptrdiff_t>(at + n));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  const ClientHello r = parse_client_hello(in);

  if (r.status == HelloStatus::incomplete) {
    if (r.size <= size || r.size > kMaxHelloBytes) __builtin_trap();
  } else {
    if (r.size == 0 || r.size > size) __builtin_trap();  // judged bytes it never saw
    if (!same(parse_client_hello(in.first(r.size)), r)) __builtin_trap();
    if (parse_client_hello(in.first(r.size - 1)).status != HelloStatus::incomplete) __builtin_trap();
  }
  if (r.status != HelloStatus::complete && !r.server_name.empty()) __builtin_trap();
  if (r.status == HelloStatus::complete && !r.server_name.empty()) {
    if (r.server_name.size() > kMaxHostName || !host_name_chars(r.server_name)) __builtin_trap();
    std::string_view all(reinterpret_cast<const char*>(data), r.size);
    if (all.find(r.server_name) == std::string_view::npos) __builtin_trap();
  }

  // Shorter prefixes: incomplete, each asking for more than it has and no less than the
  // one before (all of them for short inputs, a sample for long ones).
  const size_t decided = r.status == HelloStatus::incomplete ? size : r.size - 1;
  const size_t step = decided <= 2048 ? 1 : decided / 256;
  size_t last_need = 0;
  for (size_t k = 0; k <= decided; k += step) {
    const ClientHello p = parse_client_hello(in.first(k));
    if (p.status != HelloStatus::incomplete || p.size <= k || p.size < last_need) __builtin_trap();
    if (r.status == HelloStatus::complete && p.size > r.size) __builtin_trap();  // asked past the hello's end
    last_need = p.size;
  }

  // As the server reads (sni.cpp): reads of at least what was asked for, or 2048 bytes,
  // each returning what the client sent so far.
  size_t have = 0;
  ClientHello s = parse_client_hello(in.first(0));
  while (s.status == HelloStatus::incomplete && have < size) {
    have = std::min(size, std::max(s.size, have + 2048));
    s = parse_client_hello(in.first(have));
  }
  if (s.status != r.status || s.server_name != r.server_name) __builtin_trap();

  // The same ClientHello in records of another size.
  if (r.status == HelloStatus::complete && size > 0) {
    const size_t fragment = 1 + data[0] % 64;
    const auto again = refragment(in, r.size, fragment);
    if (again.size() <= kMaxHelloBytes) {
      const ClientHello q = parse_client_hello(again);
      if (q.status != HelloStatus::complete || q.server_name != r.server_name) __builtin_trap();
    }
  }
  return 0;
}

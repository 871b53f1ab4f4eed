// Fuzzes the DNS response parser with the input as a whole response; the expected id is
// the input's own first two bytes, so the fuzzer gets past the id check. Also checks
// that what comes back is consistent with the question asked.
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     netstack/dns_message.cpp wg/base/ip.cpp tests/fuzz/dns_message_fuzz.cpp -o /tmp/dns_message_fuzz
//   /tmp/dns_message_fuzz tests/fuzz/corpus/dns_message
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "netstack/dns_message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace netstack::dns;
  if (size < 2) return 0;
  const std::span<const uint8_t> msg(data, size);
  const auto id = static_cast<uint16_t>(data[0] << 8 | data[1]);

  for (uint16_t qtype : {kTypeA, kTypeAaaa}) {
    const auto answer = parse_response(msg, id, qtype);
    if (!answer) continue;
    if (answer->rcode > 15) __builtin_trap();
    for (const auto& a : answer->addresses)
      if (a.family != (qtype == kTypeA ? 4 : 6)) __builtin_trap();
    // Each address needs at least a 1-byte name, 10 fixed bytes and 4 bytes of rdata.
    if (answer->addresses.size() > size / 15) __builtin_trap();
  }

  // A query is never mistaken for a response.
  const std::string_view name(reinterpret_cast<const char*>(data) + 2, size - 2);
  const auto query = build_query(id, name, kTypeA);
  if (!query.empty() && parse_response(query, id, kTypeA)) __builtin_trap();

  (void)tcp_unframe(msg);
  return 0;
}

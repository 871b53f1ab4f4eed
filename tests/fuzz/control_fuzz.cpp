// Fuzzes conn::parse_control with the input as the control buffer of one received
// datagram: it must stay inside the buffer (ASan), end, and leave a consistent endpoint
// and GRO size. The first input byte picks a misalignment (0-7), so unaligned reads
// show under UBSan; the rest is the buffer, copied to the end of an exact-size block.
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     bind/linux.cpp bind/endpoint.cpp tests/fuzz/control_fuzz.cpp -o /tmp/control_fuzz
//   /tmp/control_fuzz -max_total_time=60 tests/fuzz/corpus/control
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "bind/linux.hpp"

namespace {

// Whether a control message header with this level and type starts somewhere the
// parser could look: headers sit at multiples of CMSG_ALIGN from the start.
bool has_header(const uint8_t* p, size_t len, int level, int type) {
  for (size_t off = 0; len >= sizeof(cmsghdr) && off <= len - sizeof(cmsghdr); off += CMSG_ALIGN(1)) {
    cmsghdr h;
    std::memcpy(&h, p + off, sizeof h);
    if (h.cmsg_level == level && h.cmsg_type == type) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t shift = data[0] % 8;
  ++data;
  --size;
  auto block = std::make_unique<uint8_t[]>(shift + size);  // ends where the buffer ends
  uint8_t* control = block.get() + shift;
  if (size) std::memcpy(control, data, size);

  conn::Endpoint ep = *conn::Endpoint::parse("198.18.0.9:51820");
  const conn::Endpoint before = ep;
  ep.has_source = true;  // stale: parsing must replace or clear it
  ep.source = {7, 7, 7, 7};
  ep.source_ifindex = 7;
  uint16_t gso = 1234;
  conn::parse_control(control, size, ep, gso);

  if (!ep.same_destination(before)) __builtin_trap();
  if (!ep.has_source && (ep.source_ifindex != 0 || ep.source != std::array<uint8_t, 16>{})) __builtin_trap();
  if (ep.has_source && !has_header(control, size, IPPROTO_IP, IP_PKTINFO) &&
      !has_header(control, size, IPPROTO_IPV6, IPV6_PKTINFO))
    __builtin_trap();
  // A GRO size comes only from a UDP_GRO message, and is never 0-as-garbage: 0 means absent.
  if (gso != 0 && !has_header(control, size, SOL_UDP, UDP_GRO)) __builtin_trap();

  // The same bytes parse the same way again (no hidden state).
  conn::Endpoint again = before;
  uint16_t gso2 = 0;
  conn::parse_control(control, size, again, gso2);
  if (gso2 != gso || again.has_source != ep.has_source || again.source != ep.source ||
      again.source_ifindex != ep.source_ifindex)
    __builtin_trap();
  return 0;
}

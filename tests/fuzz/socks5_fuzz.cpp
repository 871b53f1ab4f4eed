// Fuzzes wg-netstack's SOCKS5 parsers (examples/wg-netstack/socks5_parse.cpp) the way
// the server drives them: the input's first byte picks the authentication the server
// wants, the rest is what the client sends — greeting, RFC 1929 authentication, request,
// read message by message with exactly the counts the parsers ask for. Then the whole
// rest is also parsed as one UDP ASSOCIATE datagram.
// Checked beyond "no crash": every prefix of a message gets "incomplete" with a need
// that grows and ends at the message's size; extra bytes after a message change nothing
// (the server never reads past it); the reply the server would send is one of RFC 1928's
// codes; address targets format back to their bytes and names are the bytes sent.
//   cmake --preset fuzz && cmake --build build-fuzz --target socks5_fuzz
//   build-fuzz/bin/socks5_fuzz -max_total_time=60 tests/fuzz/corpus/socks5
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "socks5_parse.hpp"
#include "wg/base/ip.hpp"

using namespace wgns::socks5;

namespace {

// The outputs a parser produced, compared across calls.
struct Out {
  uint8_t byte = 0xaa;  // chosen method or command
  std::string a, b;     // user and password, or the target host
  uint16_t port = 0;
  bool operator==(const Out&) const = default;
};

template <class F>
Parsed run(F& parse, std::span<const uint8_t> in, Out& out) {
  out = Out{};
  return parse(in, out);
}

// Reads one message from `stream` as read_message in socks5.cpp does, checking the
// parser's consistency on the way. Returns the final result (incomplete when the stream
// ended first) and leaves `out` as the final call left it.
template <class F>
Parsed read_one(std::span<const uint8_t> stream, F parse, Out& out) {
  size_t have = 0;
  for (;;) {
    Parsed r = run(parse, stream.first(have), out);
    if (r.status != Status::incomplete) {
      if (r.size > have || r.size == 0) __builtin_trap();  // it judged bytes it never saw
      // Any further bytes give the same verdict on the same message.
      Out again;
      for (size_t extra : {size_t{1}, size_t{7}, stream.size() - have}) {
        if (have + extra > stream.size()) continue;
        Parsed r2 = run(parse, stream.first(have + extra), again);
        if (r2.status != r.status || r2.size != r.size || !(again == out)) __builtin_trap();
      }
      return r;
    }
    if (r.size <= have || r.size > 600) __builtin_trap();  // no progress, or an unbounded need
    // Every length in between is still incomplete, asking no less than before.
    for (size_t k = have + 1; k < r.size && k <= stream.size(); ++k) {
      Out tmp;
      Parsed mid = run(parse, stream.first(k), tmp);
      if (mid.status != Status::incomplete || mid.size < r.size) __builtin_trap();
    }
    if (r.size > stream.size()) return r;  // the client stopped sending
    have = r.size;
  }
}

bool defined_reply(uint8_t code) { return code <= 8; }  // RFC 1928 section 6: 00-08

void check_target(std::span<const uint8_t> msg, size_t atyp_at, const std::string& host, uint16_t port,
                  size_t size) {
  const uint8_t atyp = msg[atyp_at];
  const uint8_t* a = msg.data() + atyp_at + 1;
  if (atyp == kAtypV4 || atyp == kAtypV6) {
    auto ip = wg::IpAddress::parse(host);
    size_t len = atyp == kAtypV4 ? 4 : 16;
    if (!ip || ip->size() != len || std::memcmp(ip->bytes.data(), a, len) != 0) __builtin_trap();
    if (size != atyp_at + 1 + len + 2) __builtin_trap();
  } else if (atyp == kAtypName) {
    if (host.size() != a[0] || std::memcmp(host.data(), a + 1, a[0]) != 0) __builtin_trap();
    if (size != atyp_at + 2 + a[0] + 2) __builtin_trap();
  } else {
    __builtin_trap();  // a target from an undefined ATYP
  }
  if (port != (msg[size - 2] << 8 | msg[size - 1])) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t want = data[0] & 1 ? kMethodUserPass : kMethodNone;
  std::span<const uint8_t> stream(data + 1, size - 1);
  const std::span<const uint8_t> all = stream;

  // Greeting.
  Out out;
  Parsed g = read_one(stream, [want](std::span<const uint8_t> in, Out& o) { return parse_greeting(in, want, o.byte); }, out);
  if (g.status == Status::complete) {
    if (out.byte != want && out.byte != kMethodRefused) __builtin_trap();
    bool offered = false;
    for (size_t i = 2; i < g.size; ++i) offered |= stream[i] == want;
    if (offered != (out.byte == want)) __builtin_trap();
  } else if (g.status != Status::incomplete && g.status != Status::malformed) {
    __builtin_trap();  // greetings have no address
  }
  bool go_on = g.status == Status::complete && out.byte == want;
  if (go_on) stream = stream.subspan(g.size);

  // Authentication, when the server asked for it.
  if (go_on && want == kMethodUserPass) {
    Parsed a = read_one(stream, [](std::span<const uint8_t> in, Out& o) { return parse_auth(in, o.a, o.b); }, out);
    if (a.status == Status::complete) {
      if (a.size != 3 + out.a.size() + out.b.size()) __builtin_trap();
      if (std::memcmp(out.a.data(), stream.data() + 2, out.a.size()) != 0 ||
          std::memcmp(out.b.data(), stream.data() + 3 + out.a.size(), out.b.size()) != 0)
        __builtin_trap();
      stream = stream.subspan(a.size);
    } else {
      if (a.status != Status::incomplete && a.status != Status::malformed) __builtin_trap();
      go_on = false;
    }
  }

  // Request, and the reply the server would give it.
  if (go_on) {
    Parsed r = read_one(stream, [](std::span<const uint8_t> in, Out& o) {
      Target t;
      Parsed p = parse_request(in, o.byte, t);
      o.a = t.host;
      o.port = t.port;
      return p;
    }, out);
    int reply = -1;  // -1: closed without a reply
    switch (r.status) {
      case Status::complete:
        check_target(stream, 3, out.a, out.port, r.size);
        if (out.byte != stream[1]) __builtin_trap();
        // CONNECT and UDP ASSOCIATE reply after dialing (any code of socks_reply_for);
        // everything else is answered here.
        if (out.byte != kCmdConnect && out.byte != kCmdUdpAssociate) reply = 7;
        break;
      case Status::bad_type:
        if (r.size != 4 || stream[3] == kAtypV4 || stream[3] == kAtypV6 || stream[3] == kAtypName) __builtin_trap();
        reply = 8;
        break;
      case Status::empty_name:
        if (r.size != 7 || stream[3] != kAtypName || stream[4] != 0) __builtin_trap();
        reply = 4;
        break;
      case Status::malformed:
        if (stream[0] == kVersion) __builtin_trap();
        break;
      case Status::incomplete:
        break;
    }
    if (reply != -1 && !defined_reply(static_cast<uint8_t>(reply))) __builtin_trap();
  }

  // The whole stream as one UDP ASSOCIATE datagram.
  wgns::socks5::Target t;
  size_t header_len = 0;
  if (parse_udp_header(all, t, header_len)) {
    if (header_len > all.size() || all[0] || all[1] || all[2]) __builtin_trap();
    check_target(all, 3, t.host, t.port, header_len);
    if (all[3] == kAtypName && all[4] == 0) __builtin_trap();  // an empty name is dropped
  }
  return 0;
}

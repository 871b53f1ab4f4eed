// DNS message codec: byte-exact queries, name validation, hand-built responses (A, AAAA,
// CNAME chains, compression, rcode, TC), and malformed responses that must be refused
// without reading out of bounds (run under ASan/UBSan).
#include "netstack/dns_message.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace netstack::dns;
using Bytes = std::vector<uint8_t>;

constexpr uint16_t kId = 0xbeef;
constexpr uint16_t kFlagsOk = 0x8180;        // QR RD RA, rcode 0
constexpr uint16_t kFlagsNxDomain = 0x8183;  // QR RD RA, rcode 3
constexpr uint16_t kFlagsTruncated = 0x8380; // QR TC RD RA
constexpr uint16_t kTypeTxt = 16;
constexpr uint16_t kTypePrivate = 0xff00;    // RFC 6895 private use: opaque rdata
constexpr uint16_t kClassCh = 3;

// A message under construction; every response below is spelled out with these calls.
struct Msg {
  Bytes b;

  Msg& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Msg& u16(uint16_t v) { return u8(static_cast<uint8_t>(v >> 8)).u8(static_cast<uint8_t>(v)); }
  Msg& u32(uint32_t v) { return u16(static_cast<uint16_t>(v >> 16)).u16(static_cast<uint16_t>(v)); }
  Msg& raw(std::initializer_list<uint8_t> bytes) {
    b.insert(b.end(), bytes);
    return *this;
  }
  // Labels only, no terminator: follow with .u8(0) or .ptr(...).
  Msg& labels(std::string_view dotted) {
    while (!dotted.empty()) {
      auto dot = dotted.find('.');
      auto label = dotted.substr(0, dot);
      u8(static_cast<uint8_t>(label.size()));
      b.insert(b.end(), label.begin(), label.end());
      dotted.remove_prefix(dot == std::string_view::npos ? dotted.size() : dot + 1);
    }
    return *this;
  }
  Msg& name(std::string_view dotted) { return labels(dotted).u8(0); }
  Msg& ptr(uint16_t offset) { return u16(static_cast<uint16_t>(0xc000 | offset)); }
  Msg& header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an) {
    return u16(id).u16(flags).u16(qd).u16(an).u16(0).u16(0);
  }
  Msg& question(std::string_view dotted, uint16_t qtype) {
    return name(dotted).u16(qtype).u16(kClassIn);
  }
  // The part of a resource record after its name.
  Msg& rr(uint16_t type, uint16_t rclass, std::initializer_list<uint8_t> rdata, uint32_t ttl = 300) {
    u16(type).u16(rclass).u32(ttl).u16(static_cast<uint16_t>(rdata.size()));
    return raw(rdata);
  }
  Msg& a(std::initializer_list<uint8_t> addr) { return rr(kTypeA, kClassIn, addr); }
  size_t size() const { return b.size(); }
};

wg::IpAddress ip(const char* s) {
  auto a = wg::IpAddress::parse(s);
  REQUIRE(a);
  return *a;
}

std::vector<std::string> strings(const std::vector<wg::IpAddress>& v) {
  std::vector<std::string> out;
  for (auto& a : v) out.push_back(a.to_string());
  return out;
}

// www.example.com A, answered through a CNAME chain with compressed names:
//   12  question  www.example.com A IN
//   33  answer    www.example.com  CNAME  a.example.net
//   60  answer    a.example.net    CNAME  b.example.net
//   76  answer    b.example.net    A      192.0.2.7
// rdata of the first CNAME starts at 45 ("a" at 45, "example" at 47); of the second at 72.
Bytes cname_chain_response() {
  Msg m;
  m.header(kId, kFlagsOk, 1, 3).question("www.example.com", kTypeA);
  REQUIRE(m.size() == 33);
  m.ptr(12).u16(kTypeCname).u16(kClassIn).u32(60).u16(15).name("a.example.net");
  REQUIRE(m.size() == 60);
  m.ptr(45).u16(kTypeCname).u16(kClassIn).u32(60).u16(4).labels("b").ptr(47);
  REQUIRE(m.size() == 76);
  m.ptr(72).a({192, 0, 2, 7});
  return m.b;
}

}  // namespace

// --- build_query ---

TEST_CASE("dns: query for example.com A is byte-exact", "[dns]") {
  const Bytes expected = {
      0x12, 0x34,  // id
      0x01, 0x00,  // flags: RD
      0x00, 0x01,  // qdcount
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // an, ns, ar
      0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,  // 7 "example"
      0x03, 0x63, 0x6f, 0x6d,                          // 3 "com"
      0x00,                                            // root
      0x00, 0x01,  // qtype A
      0x00, 0x01,  // qclass IN
  };
  CHECK(build_query(0x1234, "example.com", kTypeA) == expected);
  CHECK(build_query(0x1234, "example.com.", kTypeA) == expected);

  Bytes aaaa = expected;
  aaaa[aaaa.size() - 3] = 0x1c;
  CHECK(build_query(0x1234, "example.com", kTypeAaaa) == aaaa);
}

TEST_CASE("dns: query accepts names at the limits", "[dns]") {
  const std::string label63(63, 'a');
  // 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 characters, 255 bytes on the wire.
  const std::string longest = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  REQUIRE(longest.size() == 253);

  auto name = GENERATE_COPY(as<std::string>{}, "a", "_dns._udp.Example-1.COM", "a.b.c.d.e",
                            label63, longest, longest + ".");
  CAPTURE(name);
  auto q = build_query(1, name, kTypeA);
  REQUIRE_FALSE(q.empty());
  CHECK(q.size() <= kHeaderSize + kMaxNameWireSize + 4);
}

TEST_CASE("dns: query rejects invalid names and types", "[dns]") {
  const std::string label63(63, 'a');
  const std::string longest = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');

  auto name = GENERATE_COPY(as<std::string>{}, "", ".", "..", "a..b", ".a", "a..", "a b",
                            "ex!ample.com", "exa\\mple.com", "caf\xc3\xa9.fr", "a*.com",
                            std::string("a\0b", 3), label63 + "a", longest + "b",
                            longest + "..");
  CAPTURE(name);
  CHECK(build_query(1, name, kTypeA).empty());

  CHECK(build_query(1, "example.com", kTypeCname).empty());
  CHECK(build_query(1, "example.com", 0).empty());
}

// --- parse_response: well-formed ---

TEST_CASE("dns: single A answer with the name compressed to the question", "[dns]") {
  Msg m;
  m.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeA).ptr(12).a({93, 184, 216, 34});

  auto ans = parse_response(m.b, kId, kTypeA);
  REQUIRE(ans);
  CHECK(ans->rcode == kRcodeNoError);
  CHECK_FALSE(ans->truncated);
  REQUIRE(ans->addresses.size() == 1);
  CHECK(ans->addresses[0] == ip("93.184.216.34"));
  CHECK(ans->addresses[0].is_v4());
}

TEST_CASE("dns: AAAA answer", "[dns]") {
  Msg m;
  m.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeAaaa).ptr(12);
  m.rr(kTypeAaaa, kClassIn,
       {0x26, 0x06, 0x28, 0x00, 0x02, 0x20, 0x00, 0x01, 0x02, 0x48, 0x18, 0x93, 0x25, 0xc8,
        0x19, 0x46});

  auto ans = parse_response(m.b, kId, kTypeAaaa);
  REQUIRE(ans);
  REQUIRE(ans->addresses.size() == 1);
  CHECK(ans->addresses[0] == ip("2606:2800:220:1:248:1893:25c8:1946"));
  CHECK(ans->addresses[0].is_v6());

  // The same bytes do not answer an A question.
  CHECK_FALSE(parse_response(m.b, kId, kTypeA));
}

TEST_CASE("dns: several answers keep their order, other types and classes are skipped",
          "[dns]") {
  Msg m;
  m.header(kId, kFlagsOk, 1, 6).question("example.com", kTypeA);
  m.ptr(12).a({198, 19, 0, 3});
  m.ptr(12).rr(kTypeAaaa, kClassIn, {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  m.ptr(12).a({198, 19, 0, 1});
  m.ptr(12).rr(kTypeA, kClassCh, {198, 19, 9, 9});
  m.ptr(12).rr(kTypeTxt, kClassIn, {5, 'h', 'e', 'l', 'l', 'o'});
  m.ptr(12).a({198, 19, 0, 2});

  auto ans = parse_response(m.b, kId, kTypeA);
  REQUIRE(ans);
  CHECK(strings(ans->addresses) == std::vector<std::string>{"198.19.0.3", "198.19.0.1", "198.19.0.2"});
}

TEST_CASE("dns: the answer's TTL is the smallest of the records collected", "[dns]") {
  Msg m;
  m.header(kId, kFlagsOk, 1, 4).question("example.com", kTypeA);
  m.ptr(12).rr(kTypeA, kClassIn, {198, 19, 0, 3}, 600);
  m.ptr(12).rr(kTypeTxt, kClassIn, {1, 'x'}, 5);  // not collected: its TTL does not count
  m.ptr(12).rr(kTypeA, kClassIn, {198, 19, 0, 1}, 120);
  m.ptr(12).rr(kTypeA, kClassIn, {198, 19, 0, 2}, 900);
  auto ans = parse_response(m.b, kId, kTypeA);
  REQUIRE(ans);
  CHECK(ans->addresses.size() == 3);
  CHECK(ans->ttl == 120);

  // RFC 2181 §8: a TTL with the top bit set counts as 0.
  Msg big;
  big.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeA).ptr(12).rr(kTypeA, kClassIn, {198, 19, 0, 3}, 0x80000000u);
  auto zero = parse_response(big.b, kId, kTypeA);
  REQUIRE(zero);
  CHECK(zero->ttl == 0);

  Msg none;
  none.header(kId, kFlagsOk, 1, 0).question("example.com", kTypeA);
  auto empty = parse_response(none.b, kId, kTypeA);
  REQUIRE(empty);
  CHECK(empty->ttl == 0);
}

TEST_CASE("dns: CNAME chain is skipped and the target's address collected", "[dns]") {
  auto ans = parse_response(cname_chain_response(), kId, kTypeA);
  REQUIRE(ans);
  CHECK(strings(ans->addresses) == std::vector<std::string>{"192.0.2.7"});
}

TEST_CASE("dns: compression pointers into the middle of names and chained", "[dns]") {
  // 12: question www.example.com; 16 is "example.com" inside it, 24 is "com".
  Msg m;
  m.header(kId, kFlagsOk, 1, 4).question("www.example.com", kTypeA);
  m.ptr(16).a({198, 51, 100, 1});                    // example.com
  m.ptr(24).a({198, 51, 100, 2});                    // com
  const uint16_t mail = static_cast<uint16_t>(m.size());
  m.labels("mail").ptr(16).a({198, 51, 100, 3});     // mail.example.com
  m.labels("x").ptr(mail).a({198, 51, 100, 4});      // x.mail.example.com, two jumps

  auto ans = parse_response(m.b, kId, kTypeA);
  REQUIRE(ans);
  CHECK(strings(ans->addresses) ==
        std::vector<std::string>{"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"});
}

TEST_CASE("dns: NXDOMAIN is an answer with rcode 3 and no addresses", "[dns]") {
  Msg m;
  m.header(kId, kFlagsNxDomain, 1, 0).question("nope.example", kTypeA);
  // An SOA in the authority section, which is not read.
  m.b[9] = 1;  // nscount
  m.ptr(17).u16(6).u16(kClassIn).u32(60).u16(3).raw({0xde, 0xad, 0xbe});

  auto ans = parse_response(m.b, kId, kTypeA);
  REQUIRE(ans);
  CHECK(ans->rcode == kRcodeNxDomain);
  CHECK(ans->addresses.empty());
  CHECK_FALSE(ans->truncated);
}

TEST_CASE("dns: TC is reported, and a cut answer section keeps the records that fit",
          "[dns]") {
  SECTION("no answers") {
    Msg m;
    m.header(kId, kFlagsTruncated, 1, 0).question("big.example", kTypeA);
    auto ans = parse_response(m.b, kId, kTypeA);
    REQUIRE(ans);
    CHECK(ans->truncated);
    CHECK(ans->addresses.empty());
  }
  SECTION("ancount says 3, one and a half records present") {
    Msg m;
    m.header(kId, kFlagsTruncated, 1, 3).question("big.example", kTypeA);
    m.ptr(12).a({192, 0, 2, 1});
    m.ptr(12).u16(kTypeA).u16(kClassIn);
    auto ans = parse_response(m.b, kId, kTypeA);
    REQUIRE(ans);
    CHECK(ans->truncated);
    CHECK(strings(ans->addresses) == std::vector<std::string>{"192.0.2.1"});
  }
  SECTION("the question must still be whole") {
    Msg m;
    m.header(kId, kFlagsTruncated, 1, 0).question("big.example", kTypeA);
    m.b.pop_back();
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
}

TEST_CASE("dns: a 128-pointer name is followed, a 129-pointer name is not", "[dns]") {
  // 12: question "a"; 19: an opaque record whose rdata is a root byte at 31 followed by
  // k pointers, each to the one before; then an A record named by a pointer to the last.
  // That name takes 1 + k pointer follows.
  auto build = [](int k) {
    Msg m;
    m.header(kId, kFlagsOk, 1, 2).question("a", kTypeA);
    m.ptr(12).u16(kTypePrivate).u16(kClassIn).u32(0).u16(static_cast<uint16_t>(1 + 2 * k));
    REQUIRE(m.size() == 31);
    m.u8(0);
    for (int i = 0; i < k; ++i) m.ptr(static_cast<uint16_t>(i == 0 ? 31 : 32 + 2 * (i - 1)));
    m.ptr(static_cast<uint16_t>(32 + 2 * (k - 1))).a({192, 0, 2, 99});
    return m.b;
  };
  auto ok = parse_response(build(kMaxPointerFollows - 1), kId, kTypeA);
  REQUIRE(ok);
  CHECK(strings(ok->addresses) == std::vector<std::string>{"192.0.2.99"});
  CHECK_FALSE(parse_response(build(kMaxPointerFollows), kId, kTypeA));
}

TEST_CASE("dns: a 255-byte name is accepted, 257 bytes through a pointer is not", "[dns]") {
  const std::string label63(63, 'a');
  const std::string longest = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  Msg m;
  m.header(kId, kFlagsOk, 1, 1).question(longest, kTypeA);
  Msg ok = m;
  ok.ptr(12).a({192, 0, 2, 1});
  CHECK(parse_response(ok.b, kId, kTypeA));

  Msg too_long = m;
  too_long.labels("x").ptr(12).a({192, 0, 2, 1});
  CHECK_FALSE(parse_response(too_long.b, kId, kTypeA));
}

// --- parse_response: malformed ---

TEST_CASE("dns: a response cut at any byte is refused", "[dns]") {
  const Bytes full = cname_chain_response();
  REQUIRE(parse_response(full, kId, kTypeA));
  for (size_t n = 0; n < full.size(); ++n) {
    const Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));  // exact size for ASan
    CAPTURE(n);
    CHECK_FALSE(parse_response(cut, kId, kTypeA));
  }
}

TEST_CASE("dns: pointer loops are refused", "[dns]") {
  SECTION("question name points at itself") {
    Msg m;
    m.header(kId, kFlagsOk, 1, 0).ptr(12).u16(kTypeA).u16(kClassIn);
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
  SECTION("two pointers pointing at each other") {
    Msg m;
    m.header(kId, kFlagsOk, 1, 1).question("a", kTypeA);
    const auto at = static_cast<uint16_t>(m.size());
    m.ptr(static_cast<uint16_t>(at + 2)).ptr(at);
    m.b.resize(m.size() + 14);
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
  SECTION("backward pointers that loop through a label") {
    // rdata at 31: [31] label of 3 covering 32..34, [32] ptr->31, [35] ptr->32.
    // Walking from 35: ->32 ->31, label to 35, ->32 ... every jump goes backwards.
    Msg m;
    m.header(kId, kFlagsOk, 1, 2).question("a", kTypeA);
    m.ptr(12).rr(kTypePrivate, kClassIn, {0x03, 0xc0, 31, 0x00, 0xc0, 32});
    REQUIRE(m.size() == 37);
    m.ptr(35).a({192, 0, 2, 1});
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
}

TEST_CASE("dns: bad pointers and labels are refused", "[dns]") {
  Msg base;
  base.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeA);
  auto with_name = [&](std::initializer_list<uint8_t> name) {
    Msg m = base;
    m.raw(name).a({192, 0, 2, 1});
    return m.b;
  };
  CHECK(parse_response(with_name({0xc0, 12}), kId, kTypeA));  // control

  CHECK_FALSE(parse_response(with_name({0xc0, 0xff}), kId, kTypeA));  // forward, past end
  CHECK_FALSE(parse_response(with_name({0xff, 0xff}), kId, kTypeA));  // 0x3fff
  CHECK_FALSE(parse_response(with_name({0xc0, 31}), kId, kTypeA));    // forward, inside
  CHECK_FALSE(parse_response(with_name({0xc0, 4}), kId, kTypeA));     // into the header
  CHECK_FALSE(parse_response(with_name({0x40, 0}), kId, kTypeA));     // extended label type
  CHECK_FALSE(parse_response(with_name({0x80, 0}), kId, kTypeA));     // reserved label type

  Msg ptr_cut = base;
  ptr_cut.u8(0xc0);  // pointer missing its second byte, at the end of the message
  CHECK_FALSE(parse_response(ptr_cut.b, kId, kTypeA));

  Msg label_past_end = base;
  label_past_end.u8(40).raw({'a', 'b'});
  CHECK_FALSE(parse_response(label_past_end.b, kId, kTypeA));
}

TEST_CASE("dns: bad rdlength is refused", "[dns]") {
  Msg base;
  base.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeA).ptr(12);

  SECTION("rdlength past the end") {
    Msg m = base;
    m.u16(kTypeA).u16(kClassIn).u32(60).u16(4).raw({192, 0});
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
  SECTION("rdlength 0xffff on a skipped record") {
    Msg m = base;
    m.u16(kTypeTxt).u16(kClassIn).u32(60).u16(0xffff).raw({1, 'x'});
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
  SECTION("A record with 5 bytes of rdata") {
    Msg m = base;
    m.rr(kTypeA, kClassIn, {192, 0, 2, 1, 0});
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
  SECTION("AAAA record with 4 bytes of rdata") {
    Msg m;
    m.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeAaaa).ptr(12);
    m.rr(kTypeAaaa, kClassIn, {192, 0, 2, 1});
    CHECK_FALSE(parse_response(m.b, kId, kTypeAaaa));
  }
  SECTION("fewer records than ancount, TC clear") {
    Msg m = base;
    m.a({192, 0, 2, 1});
    m.b[7] = 2;  // ancount
    CHECK_FALSE(parse_response(m.b, kId, kTypeA));
  }
}

TEST_CASE("dns: header and question that are not ours are refused", "[dns]") {
  Msg good;
  good.header(kId, kFlagsOk, 1, 1).question("example.com", kTypeA).ptr(12).a({192, 0, 2, 1});
  REQUIRE(parse_response(good.b, kId, kTypeA));

  CHECK_FALSE(parse_response(good.b, kId + 1, kTypeA));      // id mismatch
  CHECK_FALSE(parse_response(good.b, kId, kTypeAaaa));       // question is A
  CHECK_FALSE(parse_response(good.b, kId, kTypeCname));      // unsupported qtype

  auto edited = [&](size_t at, uint8_t v) {
    Bytes b = good.b;
    b[at] = v;
    return b;
  };
  CHECK_FALSE(parse_response(edited(2, 0x01), kId, kTypeA));  // QR clear
  CHECK_FALSE(parse_response(edited(2, 0x81 | 0x10), kId, kTypeA));  // opcode 2 (STATUS)
  CHECK_FALSE(parse_response(edited(5, 0), kId, kTypeA));     // qdcount 0
  CHECK_FALSE(parse_response(edited(5, 2), kId, kTypeA));     // qdcount 2
  CHECK_FALSE(parse_response(edited(28, kClassCh), kId, kTypeA));  // question class CH

  CHECK_FALSE(parse_response(Bytes{}, kId, kTypeA));
  // Our own query is not a response.
  CHECK_FALSE(parse_response(build_query(kId, "example.com", kTypeA), kId, kTypeA));
}

// --- TCP framing ---

TEST_CASE("dns: TCP frames carry a big-endian length", "[dns]") {
  const Bytes msg = {0xaa, 0xbb, 0xcc};
  CHECK(tcp_frame(msg) == Bytes{0x00, 0x03, 0xaa, 0xbb, 0xcc});
  CHECK(tcp_frame({}) == Bytes{0x00, 0x00});

  const Bytes big(0x1234, 7);
  auto framed = tcp_frame(big);
  REQUIRE(framed.size() == 2 + 0x1234);
  CHECK(framed[0] == 0x12);
  CHECK(framed[1] == 0x34);

  CHECK(tcp_frame(Bytes(0xffff, 0)).size() == 0x10001);
  CHECK(tcp_frame(Bytes(0x10000, 0)).empty());
}

TEST_CASE("dns: TCP unframe waits for the whole message", "[dns]") {
  Bytes stream = tcp_frame(Bytes{1, 2, 3});
  stream.push_back(0x00);  // start of the next frame

  auto first = tcp_unframe(stream);
  REQUIRE(first);
  CHECK(Bytes(first->begin(), first->end()) == Bytes{1, 2, 3});

  for (size_t n = 0; n < 5; ++n) {
    const Bytes partial(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(n));
    CAPTURE(n);
    CHECK_FALSE(tcp_unframe(partial));
  }
  auto empty = tcp_unframe(Bytes{0, 0});
  REQUIRE(empty);
  CHECK(empty->empty());
}

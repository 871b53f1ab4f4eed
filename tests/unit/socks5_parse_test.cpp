// Tests for wg-netstack's SOCKS5 message parsers (examples/wg-netstack/socks5_parse.cpp):
// how many bytes each asks for, what each makes of a whole message, and the replies its
// statuses stand for. The server reads exactly those counts, so a client's next message
// (or its relayed data) is never swallowed.
#include <catch2/catch.hpp>

#include <vector>

#include "socks5_parse.hpp"

using namespace wgns::socks5;

namespace {

using Bytes = std::vector<uint8_t>;

Parsed request(const Bytes& b, uint8_t& cmd, Target& t) { return parse_request(b, cmd, t); }

}  // namespace

TEST_CASE("socks5 parse: a greeting is read in two steps and picks the wanted method", "[socks5]") {
  uint8_t chosen = 0x77;
  Bytes g{5, 2, 0, 2};
  CHECK(parse_greeting(Bytes{}, kMethodNone, chosen).status == Status::incomplete);
  CHECK(parse_greeting(Bytes{}, kMethodNone, chosen).size == 2);
  auto head = parse_greeting(Bytes{5, 2}, kMethodNone, chosen);
  CHECK(head.status == Status::incomplete);
  CHECK(head.size == 4);
  auto whole = parse_greeting(g, kMethodUserPass, chosen);
  CHECK(whole.status == Status::complete);
  CHECK(whole.size == 4);
  CHECK(chosen == kMethodUserPass);
  parse_greeting(Bytes{5, 1, 0}, kMethodUserPass, chosen);
  CHECK(chosen == kMethodRefused);
  CHECK(parse_greeting(Bytes{4, 1}, kMethodNone, chosen).status == Status::malformed);
  CHECK(parse_greeting(Bytes{5, 0}, kMethodNone, chosen).status == Status::malformed);
}

TEST_CASE("socks5 parse: RFC 1929 user and password", "[socks5]") {
  std::string user, pass;
  CHECK(parse_auth(Bytes{1, 2, 'u'}, user, pass).size == 5);
  auto r = parse_auth(Bytes{1, 2, 'u', 's', 1, 'p', 0xee}, user, pass);
  CHECK(r.status == Status::complete);
  CHECK(r.size == 6);
  CHECK(user == "us");
  CHECK(pass == "p");
  CHECK(parse_auth(Bytes{1, 0, 0}, user, pass).status == Status::complete);
  CHECK(user.empty());
  CHECK(parse_auth(Bytes{5, 1}, user, pass).status == Status::malformed);
}

TEST_CASE("socks5 parse: request targets of each address type", "[socks5]") {
  uint8_t cmd = 0;
  Target t;
  auto v4 = request({5, kCmdConnect, 0, kAtypV4, 198, 19, 0, 2, 0x01, 0xbb, 'x'}, cmd, t);
  CHECK(v4.status == Status::complete);
  CHECK(v4.size == 10);
  CHECK(cmd == kCmdConnect);
  CHECK(t.host == "198.19.0.2");
  CHECK(t.port == 443);

  Bytes v6{5, kCmdUdpAssociate, 0, kAtypV6, 0xfd, 0, 0, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 53};
  CHECK(request(Bytes(v6.begin(), v6.end() - 1), cmd, t).size == v6.size());
  CHECK(request(v6, cmd, t).status == Status::complete);
  CHECK(t.host == "fd00:19::2");
  CHECK(cmd == kCmdUdpAssociate);

  CHECK(request({5, 1, 0, kAtypName}, cmd, t).size == 5);  // the name's length first
  CHECK(request({5, 1, 0, kAtypName, 3}, cmd, t).size == 10);
  auto name = request({5, 1, 0, kAtypName, 3, 'a', '.', 'b', 0, 80}, cmd, t);
  CHECK(name.status == Status::complete);
  CHECK(t.host == "a.b");
  CHECK(t.port == 80);
}

TEST_CASE("socks5 parse: requests answered with an error, read no further than needed", "[socks5]") {
  uint8_t cmd = 0;
  Target t;
  // An undefined ATYP: its length is unknown, so the 4 bytes read are all there is.
  for (uint8_t atyp : {0, 2, 5, 0xff}) {
    auto r = request({5, 1, 0, atyp, 1, 2, 3, 4, 5, 6}, cmd, t);
    CHECK(r.status == Status::bad_type);
    CHECK(r.size == 4);
  }
  // A name of length 0 (reply 04) after its port, so the reply comes after the request.
  CHECK(request({5, 1, 0, kAtypName, 0}, cmd, t).status == Status::incomplete);
  auto empty = request({5, 1, 0, kAtypName, 0, 0, 80}, cmd, t);
  CHECK(empty.status == Status::empty_name);
  CHECK(empty.size == 7);
  CHECK(request({4, 1, 0, kAtypV4}, cmd, t).status == Status::malformed);
}

TEST_CASE("socks5 parse: UDP ASSOCIATE datagram headers", "[socks5]") {
  Target t;
  size_t hl = 0;
  CHECK(parse_udp_header(Bytes{0, 0, 0, kAtypV4, 198, 19, 0, 2, 0, 53, 'd'}, t, hl));
  CHECK(hl == 10);
  CHECK(t.host == "198.19.0.2");
  CHECK(t.port == 53);
  CHECK(parse_udp_header(Bytes{0, 0, 0, kAtypName, 1, 'h', 0, 7}, t, hl));
  CHECK(hl == 8);
  CHECK(t.host == "h");
  CHECK_FALSE(parse_udp_header(Bytes{0, 0, 1, kAtypV4, 1, 2, 3, 4, 0, 53}, t, hl));  // a fragment
  CHECK_FALSE(parse_udp_header(Bytes{0, 0, 0, kAtypName, 0, 0, 53}, t, hl));        // an empty name
  CHECK_FALSE(parse_udp_header(Bytes{0, 0, 0, kAtypV6, 1, 2}, t, hl));              // short
  CHECK_FALSE(parse_udp_header(Bytes{0, 0, 0, 2, 1, 2, 3, 4, 0, 53}, t, hl));       // ATYP 2
  CHECK_FALSE(parse_udp_header(Bytes{1, 0, 0, kAtypV4, 1, 2, 3, 4, 0, 53}, t, hl)); // RSV
}

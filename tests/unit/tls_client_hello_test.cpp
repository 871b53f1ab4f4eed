// Tests for the ClientHello parser of wg-netstack's [SNI] service
// (examples/wg-netstack/tls_client_hello.cpp): real ClientHellos (tests/vectors/
// client_hello.txt), the same cut at every byte and split across records, and built ones
// that break each rule of the grammar.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tls_client_hello.hpp"

using namespace wgns::tls;
using Bytes = std::vector<uint8_t>;

namespace {

// --- tests/vectors/client_hello.txt ---

struct Vector {
  std::string name, server_name;
  Bytes hello;
};

Bytes from_hex(const std::string& hex) {
  Bytes out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string unquote(const std::string& v) { return v.size() >= 2 && v.front() == '"' ? v.substr(1, v.size() - 2) : v; }

// Blocks of `key = value` lines; an indented line continues the hex value above it.
std::vector<Vector> load_vectors() {
  std::ifstream in(std::string(WGNET_VECTORS_DIR) + "/client_hello.txt");
  REQUIRE(in);
  std::vector<Vector> out;
  std::map<std::string, std::string> block;
  std::string last_key, line;
  auto flush = [&] {
    if (block.empty()) return;
    out.push_back({block["name"], unquote(block["server_name"]), from_hex(block["hello"])});
    block.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '#') continue;
    if (line.empty()) {
      flush();
      continue;
    }
    if (line[0] == ' ') {
      block[last_key] += line.substr(line.find_first_not_of(' '));
      continue;
    }
    auto eq = line.find(" = ");
    REQUIRE(eq != std::string::npos);
    last_key = line.substr(0, eq);
    block[last_key] = line.substr(eq + 3);
  }
  flush();
  return out;
}

// --- building ClientHellos ---

struct Extension {
  uint16_t type;
  Bytes data;
};

void put16(Bytes& b, size_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

Bytes sni_data(const std::string& name, uint8_t name_type = kNameTypeHostName) {
  Bytes entry{name_type};
  put16(entry, name.size());
  entry.insert(entry.end(), name.begin(), name.end());
  Bytes d;
  put16(d, entry.size());
  d.insert(d.end(), entry.begin(), entry.end());
  return d;
}

struct HelloSpec {
  uint16_t version = 0x0303;
  size_t session_id = 32;
  size_t suites = 2;       // cipher_suites bytes
  size_t compression = 1;  // legacy_compression_methods bytes
  bool has_extensions = true;
  std::vector<Extension> extensions{{0x000a, {0, 2, 0, 0x1d}}, {kExtensionServerName, sni_data("web.test")}};
  Bytes after;  // bytes after the extensions, inside the message
};

// The handshake message: type, 24-bit length, body.
Bytes message(const HelloSpec& s) {
  Bytes body;
  put16(body, s.version);
  body.insert(body.end(), 32, 0x5a);  // random
  body.push_back(static_cast<uint8_t>(s.session_id));
  body.insert(body.end(), s.session_id, 0x11);
  put16(body, s.suites);
  for (size_t i = 0; i < s.suites; ++i) body.push_back(i % 2 ? 0x01 : 0x13);
  body.push_back(static_cast<uint8_t>(s.compression));
  body.insert(body.end(), s.compression, 0);
  if (s.has_extensions) {
    Bytes exts;
    for (auto& e : s.extensions) {
      put16(exts, e.type);
      put16(exts, e.data.size());
      exts.insert(exts.end(), e.data.begin(), e.data.end());
    }
    put16(body, exts.size());
    body.insert(body.end(), exts.begin(), exts.end());
  }
  body.insert(body.end(), s.after.begin(), s.after.end());
  Bytes m{kHandshakeClientHello, static_cast<uint8_t>(body.size() >> 16), static_cast<uint8_t>(body.size() >> 8),
          static_cast<uint8_t>(body.size())};
  m.insert(m.end(), body.begin(), body.end());
  return m;
}

// The message in handshake records of at most `fragment` payload bytes each.
Bytes records(const Bytes& msg, size_t fragment = kMaxRecordLength, uint16_t version = 0x0301) {
  Bytes out;
  for (size_t at = 0; at < msg.size(); at += fragment) {
    const size_t n = std::min(fragment, msg.size() - at);
    out.push_back(kContentHandshake);
    put16(out, version);
    put16(out, n);
    out.insert(out.end(), msg.begin() + static_cast<ptrdiff_t>(at), msg.begin() + static_cast<ptrdiff_t>(at + n));
  }
  return out;
}

// The handshake message inside records (their payloads joined).
Bytes payloads(const Bytes& recs) {
  Bytes out;
  for (size_t at = 0; at + kRecordHeaderSize <= recs.size();) {
    const size_t n = size_t{recs[at + 3]} << 8 | recs[at + 4];
    out.insert(out.end(), recs.begin() + static_cast<ptrdiff_t>(at + kRecordHeaderSize),
               recs.begin() + static_cast<ptrdiff_t>(at + kRecordHeaderSize + n));
    at += kRecordHeaderSize + n;
  }
  return out;
}

ClientHello parse(const Bytes& b) { return parse_client_hello(b); }

// Every proper prefix of a whole hello is incomplete, asking for more than it has and no
// more than the whole, and never less than a shorter prefix asked for.
void check_prefixes(const Bytes& whole) {
  size_t last_need = 0;
  for (size_t k = 0; k < whole.size(); ++k) {
    auto r = parse_client_hello(std::span(whole).first(k));
    INFO("prefix of " << k << " bytes");
    REQUIRE(r.status == HelloStatus::incomplete);
    REQUIRE(r.size > k);
    REQUIRE(r.size <= whole.size());
    REQUIRE(r.size >= last_need);
    last_need = r.size;
  }
}

}  // namespace

TEST_CASE("client hello: real ClientHellos give their server name", "[sni]") {
  auto vectors = load_vectors();
  REQUIRE(vectors.size() == 4);
  for (auto& v : vectors) {
    INFO(v.name);
    auto r = parse(v.hello);
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.size == v.hello.size());
    CHECK(r.server_name == v.server_name);
  }
}

TEST_CASE("client hello: cut at every byte, a real ClientHello says it needs more", "[sni]") {
  for (auto& v : load_vectors()) {
    INFO(v.name);
    check_prefixes(v.hello);
  }
}

TEST_CASE("client hello: split across records, a real ClientHello parses the same", "[sni]") {
  const size_t fragment = GENERATE(1, 2, 3, 4, 5, 7, 64, 100, 255);
  for (auto& v : load_vectors()) {
    INFO(v.name << " in records of " << fragment);
    auto split = records(payloads(v.hello), fragment, 0x0303);
    auto r = parse(split);
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.size == split.size());
    CHECK(r.server_name == v.server_name);
    if (fragment <= 7) check_prefixes(split);
  }
}

TEST_CASE("client hello: bytes after the ClientHello's record change nothing", "[sni]") {
  auto v = load_vectors().front();
  for (Bytes more : {Bytes{20, 3, 3, 0, 1, 1}, Bytes{23, 3, 3, 0, 3, 'a', 'b', 'c'}, Bytes{0xff}, Bytes(40000, 0)}) {
    Bytes in = v.hello;
    in.insert(in.end(), more.begin(), more.end());
    auto r = parse(in);
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.size == v.hello.size());
    CHECK(r.server_name == "x.test");
  }
}

TEST_CASE("client hello: a built ClientHello in every record version of TLS 1.0-1.3", "[sni]") {
  const uint16_t version = GENERATE(0x0301, 0x0302, 0x0303, 0x0304);
  HelloSpec s;
  s.version = version;  // also as legacy_version
  auto in = records(message(s), kMaxRecordLength, version);
  auto r = parse(in);
  CHECK(r.status == HelloStatus::complete);
  CHECK(r.server_name == "web.test");
  CHECK(r.size == in.size());
}

TEST_CASE("client hello: no server name", "[sni]") {
  SECTION("no extensions at all (TLS 1.0-1.2 allow it)") {
    HelloSpec s;
    s.has_extensions = false;
    auto r = parse(records(message(s)));
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.server_name.empty());
  }
  SECTION("an empty extension list") {
    HelloSpec s;
    s.extensions.clear();
    auto r = parse(records(message(s)));
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.server_name.empty());
  }
  SECTION("extensions without server_name") {
    HelloSpec s;
    s.extensions.pop_back();
    auto r = parse(records(message(s)));
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.server_name.empty());
  }
}

TEST_CASE("client hello: host names the parser takes", "[sni]") {
  const std::string name = GENERATE(std::string("a"), std::string("WEB.Test"), std::string("xn--bcher-kva.example"),
                                    std::string("_acme-challenge.web.test"), std::string(63, 'a') + ".test",
                                    std::string("198.19.0.2"),  // an IPv4 literal: the service refuses it
                                    [] {
                                      std::string n;
                                      while (n.size() + 50 <= kMaxHostName) n += std::string(49, 'b') + ".";
                                      return n + std::string(kMaxHostName - n.size(), 'c');
                                    }());
  HelloSpec s;
  s.extensions.back().data = sni_data(name);
  auto r = parse(records(message(s)));
  CAPTURE(name);
  CHECK(r.status == HelloStatus::complete);
  CHECK(r.server_name == name);
}

TEST_CASE("client hello: grammar errors are malformed", "[sni]") {
  using Edit = void (*)(HelloSpec&);
  auto [what, edit] = GENERATE(table<std::string, Edit>({
      {"legacy_version SSL 3.0", [](HelloSpec& s) { s.version = 0x0300; }},
      {"legacy_version 4.1", [](HelloSpec& s) { s.version = 0x0401; }},
      {"a session id of 33 bytes", [](HelloSpec& s) { s.session_id = 33; }},
      {"no cipher suites", [](HelloSpec& s) { s.suites = 0; }},
      {"an odd cipher_suites length", [](HelloSpec& s) { s.suites = 3; }},
      {"no compression methods", [](HelloSpec& s) { s.compression = 0; }},
      {"a byte after the extensions", [](HelloSpec& s) { s.after = {0}; }},
      {"one byte where the extensions' length goes", [](HelloSpec& s) {
         s.has_extensions = false;
         s.after = {0};
       }},
      {"an extension twice", [](HelloSpec& s) { s.extensions.push_back(s.extensions.front()); }},
      {"server_name twice", [](HelloSpec& s) { s.extensions.push_back(s.extensions.back()); }},
      {"an empty server_name extension", [](HelloSpec& s) { s.extensions.back().data.clear(); }},
      {"an empty server name list", [](HelloSpec& s) { s.extensions.back().data = {0, 0}; }},
      {"a list longer than its extension", [](HelloSpec& s) { s.extensions.back().data[1] += 1; }},
      {"a list shorter than its extension", [](HelloSpec& s) { s.extensions.back().data.push_back(0); }},
      {"two host names", [](HelloSpec& s) {
         auto d = sni_data("a.test"), e = sni_data("b.test");
         d.insert(d.end(), e.begin() + 2, e.end());
         d[1] = static_cast<uint8_t>(d.size() - 2);
         s.extensions.back().data = d;
       }},
      {"name_type 1", [](HelloSpec& s) { s.extensions.back().data = sni_data("web.test", 1); }},
      {"an empty host name", [](HelloSpec& s) { s.extensions.back().data = sni_data(""); }},
      {"a trailing dot", [](HelloSpec& s) { s.extensions.back().data = sni_data("web.test."); }},
      {"a leading dot", [](HelloSpec& s) { s.extensions.back().data = sni_data(".web.test"); }},
      {"an empty label", [](HelloSpec& s) { s.extensions.back().data = sni_data("web..test"); }},
      {"a label of 64", [](HelloSpec& s) { s.extensions.back().data = sni_data(std::string(64, 'a') + ".test"); }},
      {"a name of 254", [](HelloSpec& s) {
         std::string n;
         while (n.size() < 254) n += std::string(40, 'a') + ".";
         s.extensions.back().data = sni_data(n.substr(0, 253) + "a");
       }},
      {"an IPv6 literal", [](HelloSpec& s) { s.extensions.back().data = sni_data("fd00:19::2"); }},
      {"a space", [](HelloSpec& s) { s.extensions.back().data = sni_data("web test"); }},
      {"a NUL", [](HelloSpec& s) { s.extensions.back().data = sni_data(std::string("web\0.test", 9)); }},
      {"a byte over 127", [](HelloSpec& s) { s.extensions.back().data = sni_data("b\xc3\xbc" "cher.test"); }},
      {"an extension longer than the list", [](HelloSpec& s) { s.extensions.push_back({0x0017, {}}); }},
  }));
  HelloSpec s;
  edit(s);
  Bytes msg = message(s);
  if (what == "an extension longer than the list") msg.back() = 4;  // the empty extension claims 4 bytes
  const Bytes in = records(msg);
  auto r = parse(in);
  CAPTURE(what);
  CHECK(r.status == HelloStatus::malformed);
  CHECK(r.size == in.size());  // judged once the ClientHello was whole
  check_prefixes(in);
}

TEST_CASE("client hello: what is not a TLS handshake is malformed at once", "[sni]") {
  auto [what, bytes, size] = GENERATE(table<std::string, Bytes, size_t>({
      {"an HTTP request", {'G', 'E', 'T', ' ', '/'}, 1},
      {"an SSL 2.0 ClientHello", {0x80, 0x2e, 0x01, 0x03, 0x01}, 1},
      {"an alert record", {21, 3, 1, 0, 2, 2, 40}, 1},
      {"application data", {23, 3, 3, 0, 1, 0}, 1},
      {"record version SSL 3.0", {22, 3, 0, 0, 4}, 3},
      {"record version 2.1", {22, 2, 1}, 3},
      {"record version 3.5", {22, 3, 5, 0, 4}, 3},
      {"an empty record", {22, 3, 1, 0, 0, 1}, 5},
      {"a record over 2^14", {22, 3, 3, 0x40, 0x01}, 5},
      {"a ServerHello", {22, 3, 3, 0, 4, 2, 0, 0, 0}, 6},
      {"a Finished", {22, 3, 3, 0, 4, 20}, 6},
      {"an alert after the first record", {22, 3, 1, 0, 1, 1, 21, 3, 1, 0, 2, 2, 40}, 7},
  }));
  CAPTURE(what);
  auto r = parse(bytes);
  CHECK(r.status == HelloStatus::malformed);
  CHECK(r.size == size);
  // The verdict needed no more than `size` bytes.
  auto again = parse_client_hello(std::span(bytes).first(size));
  CHECK(again.status == HelloStatus::malformed);
}

TEST_CASE("client hello: size limits", "[sni]") {
  SECTION("a body of kMaxHelloLength bytes is taken") {
    HelloSpec s;
    Bytes probe = message(s);
    // Padding (RFC 7685, type 21) up to exactly kMaxHelloLength bytes of body.
    s.extensions.push_back({21, Bytes(kMaxHelloLength - (probe.size() - 4) - 4, 0)});
    Bytes msg = message(s);
    REQUIRE(msg.size() == 4 + kMaxHelloLength);
    auto in = records(msg);
    REQUIRE(in.size() > kMaxRecordLength);  // two records
    auto r = parse(in);
    CHECK(r.status == HelloStatus::complete);
    CHECK(r.server_name == "web.test");
  }
  SECTION("one byte more is too large, known from the handshake header") {
    Bytes head{22, 3, 1, 0x40, 0x00, 1, 0, 0x40, 0x01};
    auto r = parse(head);
    CHECK(r.status == HelloStatus::too_large);
    CHECK(r.size == 9);
  }
  SECTION("a 24-bit length of 16 MiB") {
    auto r = parse(Bytes{22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff});
    CHECK(r.status == HelloStatus::too_large);
  }
  SECTION("records past kMaxHelloBytes are too large") {
    HelloSpec s;
    s.extensions.push_back({21, Bytes(6000, 0)});
    Bytes msg = message(s);
    auto in = records(msg, 1);  // 6 bytes a payload byte: over 36 KB
    REQUIRE(in.size() > kMaxHelloBytes);
    auto r = parse(in);
    CHECK(r.status == HelloStatus::too_large);
    CHECK(r.size <= kMaxHelloBytes);
    // Every input that starts with the bytes that decided it gets the same verdict.
    CHECK(parse_client_hello(std::span(in).first(r.size)).status == HelloStatus::too_large);
    // Below that, incomplete, and never asking for more than the bound.
    auto before = parse_client_hello(std::span(in).first(r.size - 1));
    CHECK(before.status == HelloStatus::incomplete);
    CHECK(before.size <= kMaxHelloBytes);
  }
  SECTION("a record that would end past kMaxHelloBytes is too large") {
    HelloSpec s;
    s.extensions.push_back({21, Bytes(5000, 0)});
    const Bytes msg = message(s);
    const Bytes head = records(Bytes(msg.begin(), msg.begin() + 3000), 1);  // 18,000 bytes
    // The rest in one record: whole within the bound.
    Bytes in = head, rest = records(Bytes(msg.begin() + 3000, msg.end()));
    in.insert(in.end(), rest.begin(), rest.end());
    CHECK(parse(in).status == HelloStatus::complete);
    // A record of 16,000 bytes instead: it would end past 32 KiB.
    Bytes big = head, huge = records(Bytes(16000, 0));
    big.insert(big.end(), huge.begin(), huge.begin() + kRecordHeaderSize);
    auto r = parse(big);
    CHECK(r.status == HelloStatus::too_large);
    CHECK(r.size == head.size() + kRecordHeaderSize);
  }
}

TEST_CASE("client hello: random bytes never crash, and the verdicts keep their promises", "[sni]") {
  std::mt19937 rng(20251205);
  auto v = load_vectors();
  for (int i = 0; i < 20000; ++i) {
    Bytes in;
    if (i % 2) {  // a real hello with a few bytes changed, then cut
      in = v[static_cast<size_t>(i) % v.size()].hello;
      for (int k = 0; k < 3; ++k) in[rng() % in.size()] = static_cast<uint8_t>(rng());
      in.resize(rng() % (in.size() + 1));
    } else {
      in.resize(rng() % 64);
      for (auto& b : in) b = static_cast<uint8_t>(rng());
      if (!in.empty() && rng() % 2) in[0] = kContentHandshake;
    }
    auto r = parse(in);
    switch (r.status) {
      case HelloStatus::incomplete:
        REQUIRE(r.size > in.size());
        REQUIRE(r.size <= kMaxHelloBytes);
        break;
      case HelloStatus::complete:
        REQUIRE(r.size <= in.size());
        REQUIRE(r.server_name.size() <= kMaxHostName);
        break;
      default:
        REQUIRE(r.size <= in.size());
        REQUIRE(parse_client_hello(std::span(in).first(r.size)).status == r.status);
    }
  }
}

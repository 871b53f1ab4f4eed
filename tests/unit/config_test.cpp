// Tests for the wg-quick .conf parser: one full valid file, a table of malformed inputs
// checked for line number and message, and load_config's file handling and mode warning.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "wg/base/shown.hpp"
#include "wg/config.hpp"
#include "wg/crypto.hpp"

using namespace wg;

namespace {

// Made with `wg genkey | tee >(wg pubkey)` and `wg genpsk`; test-only.
constexpr const char* kPriv = "8KxyZrTLgHvr1xyi7Qv2YPa5lWOAAOdlv7DcvQoDvE0=";
constexpr const char* kPub1 = "YEuBz+mBGWhZ+CGdmyGWfAw9dUQjeA0vJwSkImdoV18=";
constexpr const char* kPub2 = "6LYL/u0UjhCMX2rYWfq8BRXEspnzvgJeQztRdfN++1A=";
constexpr const char* kPub3 = "cwvsfqOLPgwIheQnov+ckdDG1hATGbICItXnmi1ciDo=";
constexpr const char* kPsk = "JdsurUJ0InKJIVM7QUMm6ihNlgX6s44BBHZVgdEjB8Y=";

IpPrefix prefix(const char* s) { return *IpPrefix::parse(s); }
IpAddress address(const char* s) { return *IpAddress::parse(s); }

// The message of the ConfigError that parse_config throws; fails the test if none.
std::pair<size_t, std::string> error_of(const std::string& text) {
  try {
    parse_config(text);
  } catch (const ConfigError& e) {
    return {e.line(), e.what()};
  }
  FAIL("parse_config accepted:\n" << text);
  return {};
}

// A temporary directory removed (with its files) at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/wgnet_config_test.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    auto file = path + "/" + name;
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
};

// Runs f with stderr redirected to a file and returns what was written there.
template <class F>
std::string capture_stderr(F&& f) {
  std::fflush(stderr);
  FILE* sink = std::tmpfile();
  REQUIRE(sink != nullptr);
  int saved = ::dup(2);
  ::dup2(::fileno(sink), 2);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::fclose(sink);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  std::rewind(sink);
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, sink)) out.append(buf, n);
  std::fclose(sink);
  return out;
}

}  // namespace

TEST_CASE("config: parses a full file with every key", "[config]") {
  std::string text = std::string() +
                     "# wg0: two sites and a laptop\n"
                     "[Interface]\n"
                     "  PrivateKey = " + kPriv + "   # trailing comment\n"
                     "listenport=51820\n"
                     "FwMark = 0x1234\n"
                     "Address = 198.19.0.1/24, fd00::1/64\n"
                     "ADDRESS = 198.19.1.1\n"
                     "DNS = 1.1.1.1, 2606:4700:4700::1111, corp.example\n"
                     "dns = lan\n"
                     "MTU = 1420\n"
                     "Table = off\n"
                     "PostUp = iptables -A FORWARD -i %i -j ACCEPT\n"
                     "PostUp = echo up\n"
                     "SaveConfig = false\n"
                     "\n"
                     "[peer]\n"
                     "PublicKey = " + kPub1 + "\n"
                     "PresharedKey = " + kPsk + "\n"
                     "Endpoint = vpn.example.com:51820\n"
                     "AllowedIPs = 198.19.0.2/32, 198.18.1.77/24\n"
                     "AllowedIPs = fd00::2/128, 2001:db8::1/32\n"
                     "PersistentKeepalive = 25\n"
                     "\t# whole-line comment\n"
                     "[PEER]\n"
                     "publickey=" + kPub2 + "\n"
                     "endpoint = [2001:db8::5]:443\n"
                     "allowedips = 0.0.0.0/0, ::/0\n"
                     "persistentkeepalive = off\n"
                     "[Peer]\n"
                     "PublicKey = " + kPub3 + "\n"
                     "Endpoint = [fe80::1%eth0]:51820\n"
                     "AllowedIPs =\n";
  Config c = parse_config(text);

  const auto& i = c.iface;
  REQUIRE(i.private_key);
  CHECK(*i.private_key == *PrivateKey::from_base64(kPriv));
  CHECK(i.listen_port == 51820);
  CHECK(i.fwmark == 0x1234u);
  CHECK(i.addresses == std::vector<IpPrefix>{prefix("198.19.0.1/24"), prefix("fd00::1/64"),
                                             prefix("198.19.1.1/32")});
  CHECK(i.dns_servers ==
        std::vector<IpAddress>{address("1.1.1.1"), address("2606:4700:4700::1111")});
  CHECK(i.dns_search == std::vector<std::string>{"corp.example", "lan"});
  CHECK(i.mtu == 1420u);
  using Extras = std::vector<std::pair<std::string, std::string>>;
  CHECK(i.wg_quick_extras == Extras{{"Table", "off"},
                                    {"PostUp", "iptables -A FORWARD -i %i -j ACCEPT"},
                                    {"PostUp", "echo up"},
                                    {"SaveConfig", "false"}});

  REQUIRE(c.peers.size() == 3);
  const auto& a = c.peers[0];
  CHECK(a.public_key == *PublicKey::from_base64(kPub1));
  REQUIRE(a.preshared_key);
  CHECK(*a.preshared_key == *PresharedKey::from_base64(kPsk));
  CHECK(a.endpoint == "vpn.example.com:51820");
  // Host bits are cleared, as wg does.
  CHECK(a.allowed_ips == std::vector<IpPrefix>{prefix("198.19.0.2/32"), prefix("198.18.1.0/24"),
                                               prefix("fd00::2/128"), prefix("2001:db8::/32")});
  CHECK(a.persistent_keepalive == 25);

  const auto& b = c.peers[1];
  CHECK(b.public_key == *PublicKey::from_base64(kPub2));
  CHECK_FALSE(b.preshared_key);
  CHECK(b.endpoint == "[2001:db8::5]:443");
  CHECK(b.allowed_ips == std::vector<IpPrefix>{prefix("0.0.0.0/0"), prefix("::/0")});
  CHECK(b.persistent_keepalive == 0);

  const auto& d = c.peers[2];
  CHECK(d.endpoint == "[fe80::1%eth0]:51820");
  CHECK(d.allowed_ips.empty());
}

TEST_CASE("config: optional keys stay unset and edge values are accepted", "[config]") {
  SECTION("empty text is an empty config") {
    Config c = parse_config("");
    CHECK_FALSE(c.iface.private_key);
    CHECK(c.peers.empty());
  }
  SECTION("peers only, CRLF line ends, no trailing newline") {
    Config c = parse_config(std::string("[Peer]\r\nPublicKey = ") + kPub1 + "\r\nEndpoint=h:1");
    CHECK_FALSE(c.iface.listen_port);
    CHECK_FALSE(c.iface.fwmark);
    CHECK_FALSE(c.iface.mtu);
    REQUIRE(c.peers.size() == 1);
    CHECK(c.peers[0].endpoint == "h:1");
  }
  SECTION("limits") {
    Config c = parse_config(std::string("[Interface]\nListenPort = 0\nFwMark = off\nMTU = 576\n"
                                        "[Peer]\nPublicKey = ") +
                            kPub1 + "\nEndpoint = 1.2.3.4:65535\nPersistentKeepalive = 65535\n");
    CHECK(c.iface.listen_port == 0);
    CHECK(c.iface.fwmark == 0u);
    CHECK(c.iface.mtu == 576u);
    CHECK(c.peers[0].persistent_keepalive == 65535);
  }
  SECTION("decimal fwmark and the largest one") {
    CHECK(parse_config("[Interface]\nFwMark = 51820\n").iface.fwmark == 51820u);
    CHECK(parse_config("[Interface]\nFwMark = 0xffffffff\n").iface.fwmark == 0xffffffffu);
  }
}

TEST_CASE("config: malformed input names the line and the problem", "[config]") {
  const std::string peer1 = std::string("[Peer]\nPublicKey = ") + kPub1 + "\n";
  const std::string truncated = std::string(kPub1).substr(0, 43);
  const std::string of31 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==";  // 31 bytes
  const std::string of33 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g";  // 33 bytes
  const std::string notb64 = std::string(43, '!') + "=";

  struct Case {
    std::string text;
    size_t line;
    std::string fragment;
  };
  auto c = GENERATE_COPY(values<Case>({
      // Keys: wrong length, wrong decoded size, not base64.
      {"[Interface]\nPrivateKey = " + truncated + "\n", 2,
       "invalid key in PrivateKey: wrong length"},
      {"[Interface]\nPrivateKey = " + of31 + "\n", 2, "invalid key in PrivateKey"},
      {"[Peer]\nPublicKey = " + of33 + "\n", 2, "invalid key in PublicKey"},
      {"\n\n[Peer]\n#\nPublicKey = " + notb64 + "\n", 5, "invalid key in PublicKey"},
      {peer1 + "PresharedKey = abc\n", 3, "invalid key in PresharedKey: wrong length"},
      {"[Interface]\nPrivateKey =\n", 2, "missing value for PrivateKey"},
      // Ports and numbers.
      {"[Interface]\nListenPort = x\n", 2, "invalid ListenPort 'x'"},
      {"[Interface]\nListenPort = 65536\n", 2, "invalid ListenPort '65536'"},
      {"[Interface]\nListenPort = -1\n", 2, "invalid ListenPort '-1'"},
      {"[Interface]\nFwMark = 0x\n", 2, "invalid FwMark '0x'"},
      {"[Interface]\nFwMark = 0x1ffffffff\n", 2, "invalid FwMark"},
      {"[Interface]\nFwMark = on\n", 2, "invalid FwMark 'on'"},
      {"[Interface]\nMTU = 575\n", 2, "MTU 575 out of range (576-65535)"},
      {"[Interface]\nMTU = 65536\n", 2, "MTU 65536 out of range"},
      {"[Interface]\nMTU = big\n", 2, "invalid MTU 'big'"},
      {peer1 + "PersistentKeepalive = 65536\n", 3, "invalid PersistentKeepalive '65536'"},
      {peer1 + "PersistentKeepalive = 1s\n", 3, "invalid PersistentKeepalive '1s'"},
      // Addresses.
      {"[Interface]\nAddress = 198.19.0.1/33\n", 2, "invalid Address '198.19.0.1/33'"},
      {"[Interface]\nAddress = 198.19.0.1/24, nope\n", 2, "invalid Address 'nope'"},
      {peer1 + "AllowedIPs = 198.19.0.0/16\nAllowedIPs = 198.19.0/16\n", 4,
       "invalid AllowedIPs entry '198.19.0/16'"},
      {peer1 + "AllowedIPs = fd00::/129\n", 3, "invalid AllowedIPs entry 'fd00::/129'"},
      {"[Interface]\nDNS = 1.1.1.1, bad domain!\n", 2, "invalid DNS entry 'bad domain!'"},
      // Endpoints.
      {peer1 + "Endpoint = 1.2.3.4\n", 3, "invalid Endpoint '1.2.3.4': missing port"},
      {peer1 + "Endpoint = 1.2.3.4:0\n", 3, "port must be 1-65535"},
      {peer1 + "Endpoint = 1.2.3.4:70000\n", 3, "port must be 1-65535"},
      {peer1 + "Endpoint = 1.2.3.4:\n", 3, "missing port"},
      {peer1 + "Endpoint = :51820\n", 3, "missing host"},
      {peer1 + "Endpoint = [::1:51820\n", 3, "invalid Endpoint '[::1:51820': missing ']'"},
      {peer1 + "Endpoint = [::1]\n", 3, "missing port"},
      {peer1 + "Endpoint = [::1]51820\n", 3, "expected ':' after ']'"},
      {peer1 + "Endpoint = [1.2.3.4]:51820\n", 3, "not an IPv6 address"},
      {peer1 + "Endpoint = ::1:51820\n", 3, "need brackets"},
      {peer1 + "Endpoint =\n", 3, "missing value for Endpoint"},
      // Structure.
      {"[Interface]\nListenPort = 1\nFoo = bar\n", 3, "unknown key 'Foo' in [Interface]"},
      {peer1 + "ListenPort = 1\n", 3, "unknown key 'ListenPort' in [Peer]"},
      {"# hi\nListenPort = 1\n", 2, "key outside of a section"},
      {"[Interface]\n[Tunnel]\n", 2, "unknown section '[Tunnel]'"},
      {"[Interface\n", 1, "malformed section header"},
      {"[Interface]\nListenPort 1\n", 2, "expected 'Key = Value'"},
      {"[Interface]\n= 1\n", 2, "missing key"},
      {"[Interface]\nListenPort = 1\n[Interface]\n", 3, "second [Interface] section"},
      {"[Interface]\nListenPort = 1\nlistenport = 2\n", 3, "duplicate ListenPort"},
      {peer1 + "PublicKey = " + kPub2 + "\n", 3, "duplicate PublicKey"},
      // A peer without a key is reported at its header, wherever the section ends.
      {"[Interface]\nListenPort = 1\n[Peer]\nAllowedIPs = 198.19.0.0/16\n", 3,
       "[Peer] without PublicKey"},
      {peer1 + "\n[Peer]\nEndpoint = h:1\n\n" + peer1, 4, "[Peer] without PublicKey"},
      // Two peers with one key: reported at the second PublicKey, naming the first peer.
      {"[Interface]\n" + peer1 + "[Peer]\n\nPublicKey = " + kPub1 + "\n", 6,
       "duplicate PublicKey: same peer as the [Peer] at line 2"},
  }));

  INFO("input:\n" << c.text);
  auto [line, what] = error_of(c.text);
  CHECK(line == c.line);
  CHECK_THAT(what, Catch::StartsWith("line " + std::to_string(c.line) + ": "));
  CHECK_THAT(what, Catch::Contains(c.fragment));
  // Key material never appears in an error.
  for (const auto& secret : {std::string(kPriv), std::string(kPub1), truncated, of31, of33})
    CHECK_THAT(what, !Catch::Contains(secret));
}

TEST_CASE("config: config_mode_is_loose flags group and other access", "[config]") {
  CHECK_FALSE(config_mode_is_loose(S_IFREG | 0600));
  CHECK_FALSE(config_mode_is_loose(S_IFREG | 0400));
  CHECK_FALSE(config_mode_is_loose(S_IFREG | 0700));
  CHECK(config_mode_is_loose(S_IFREG | 0640));
  CHECK(config_mode_is_loose(S_IFREG | 0604));
  CHECK(config_mode_is_loose(S_IFREG | 0620));
  CHECK(config_mode_is_loose(S_IFREG | 0602));
  CHECK(config_mode_is_loose(S_IFREG | 0644));
}

TEST_CASE("config: load_config reads a file and warns when it exposes a private key",
          "[config]") {
  TempDir dir;
  const std::string with_key = std::string("[Interface]\nPrivateKey = ") + kPriv +
                               "\nListenPort = 51820\n" + "[Peer]\nPublicKey = " + kPub1 + "\n";
  const std::string warning = "is readable by group or others; private keys should be mode 0600";

  // The warning is returned, and the library prints nothing (it once wrote to stderr
  // itself, past the logger and the program).
  SECTION("mode 0644 with a PrivateKey: one warning line naming the file") {
    auto path = dir.write("wg0.conf", with_key, 0644);
    Config c;
    auto err = capture_stderr([&] { c = load_config(path); });
    CHECK(c.iface.listen_port == 51820);
    CHECK(c.peers.size() == 1);
    CHECK(c.warnings == std::vector<std::string>{"warning: " + path + " " + warning});
    CHECK(err.empty());
  }
  SECTION("mode 0600: silent") {
    auto path = dir.write("wg0.conf", with_key, 0600);
    Config c;
    CHECK(capture_stderr([&] { c = load_config(path); }).empty());
    CHECK(c.warnings.empty());
  }
  SECTION("mode 0644 without a PrivateKey: silent") {
    auto path = dir.write("peers.conf", std::string("[Peer]\nPublicKey = ") + kPub1 + "\n", 0644);
    Config c;
    CHECK(capture_stderr([&] { c = load_config(path); }).empty());
    CHECK(c.warnings.empty());
  }
  SECTION("a parse error names the file and the line") {
    auto path = dir.write("bad.conf", "[Interface]\n\nMTU = 9\n", 0600);
    try {
      load_config(path);
      FAIL("load_config accepted a bad file");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()) == path + ": line 3: MTU 9 out of range (576-65535)");
      CHECK(e.line() == 3);
    }
  }
  SECTION("a missing file names the file") {
    auto path = dir.path + "/absent.conf";
    try {
      load_config(path);
      FAIL("load_config opened a missing file");
    } catch (const ConfigError& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(path + ": cannot open"));
      CHECK(e.line() == 0);
    }
  }
}

namespace {

// Any 16-character run of `key` in `text`.
bool holds_key_run(const std::string& text, const std::string& key) {
  for (size_t i = 0; i + 16 <= key.size(); ++i)
    if (text.find(key.substr(i, 16)) != std::string::npos) return true;
  return false;
}

}  // namespace

// A key pasted where a name or a value belongs must not come back in the error: a base64
// key ends in '=', so on a line of its own it is the "name".
TEST_CASE("config: errors never quote key material", "[config]") {
  const std::string key = kPsk;
  const std::string hex = [] {
    auto k = PresharedKey::from_base64(kPsk);
    return k->to_hex();
  }();
  const std::string text = GENERATE_COPY(
      "[Interface]\n" + key + "\n",                                           // a bare key line
      key + "\n",                                                              // a key file as the config
      "[Interface]\nPrivateKey: " + key + "\n",                                // a typo
      "[Interface]\nPresharedKey = " + key + "\n",                             // the wrong section
      "[" + key + "]\n",                                                       // as a section
      std::string("[Interface]\nPrivateKey = ") + kPriv + "\nListenPort = " + key + "\n",
      std::string("[Interface]\nPrivateKey = ") + kPriv + "\nDNS = " + key + "\n",
      std::string("[Interface]\nPrivateKey = ") + kPriv + "\nAddress = " + hex + "\n",
      std::string("[Interface]\nPrivateKey = ") + kPriv + "\n[Peer]\nPublicKey = " + kPub1 + "\nEndpoint = " + key + "\n",
      std::string("[Interface]\nPrivateKey = ") + kPriv + "\n[Peer]\nPublicKey = " + kPub1 + "\nAllowedIPs = " + key +
          "\n");
  auto [line, message] = error_of(text);
  INFO(message);
  CHECK(line >= 1);
  CHECK_FALSE(holds_key_run(message, key));
  CHECK_FALSE(holds_key_run(message, hex));
}

// What is not key-shaped is still quoted: the typo a user must see.
TEST_CASE("config: a misspelt name or a bad value is still quoted", "[config]") {
  CHECK(error_of("[Interface]\nPersistentKeepalivee = 5\n").second ==
        "line 2: unknown key 'PersistentKeepalivee' in [Interface]");
  CHECK(error_of(std::string("[Interface]\nPrivateKey = ") + kPriv + "\nListenPort = 70000\n").second ==
        "line 3: invalid ListenPort '70000' (0-65535)");
  CHECK(error_of(std::string("[Interface]\nPrivateKey = ") + kPriv +
                 "\n[Peer]\nPublicKey = " + kPub1 + "\nEndpoint = vpn.example.com\n")
            .second == "line 5: invalid Endpoint 'vpn.example.com': missing port");
}

TEST_CASE("config: looks_like_key tells keys from names, addresses and host names", "[config]") {
  for (const char* s : {kPriv, kPub1, kPsk, "8KxyZrTLgHvr1xyi", "0123456789abcdef0123456789abcdef",
                        "ABCDEFGHIJKLMNOPQRSTUVWX"})
    CHECK(looks_like_key(s));
  for (const char* s : {"PersistentKeepalive", "CheckAliveInterval", "fd00:19::1/64", "198.19.0.1/24",
                        "ec2-54-123-45-67.compute-1.amazonaws.com", "wireguard.example.com:51820", "8KxyZrTLgHvr1xy"})
    CHECK_FALSE(looks_like_key(s));
}

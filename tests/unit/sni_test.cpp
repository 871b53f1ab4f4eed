// Tests for wg-netstack's [SNI] section (examples/wg-netstack/proxy_config.cpp): its key,
// its errors, and wireproxy 1.1.3's README sample (tests/netns/wireproxy-1.1.3-sample.conf),
// which holds one, read as published (but for its addresses, in the test network).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "proxy_config.hpp"

using namespace wgns;

namespace {

constexpr const char* kPriv = "8KxyZrTLgHvr1xyi7Qv2YPa5lWOAAOdlv7DcvQoDvE0=";  // test-only

const Env kNoEnv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };

std::string with_interface(const std::string& rest) {
  return std::string("[Interface]\nPrivateKey = ") + kPriv + "\nAddress = 198.19.0.1/32\n\n" + rest;
}

ProxyConfig parse(const std::string& text) { return parse_proxy_config(text, "test.conf", kNoEnv); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const wg::ConfigError& e) {
    return e.what();
  }
  FAIL("parse_proxy_config accepted:\n" << text);
  return {};
}

}  // namespace

TEST_CASE("sni config: BindAddress, in every section, in file order", "[sni]") {
  auto c = parse(with_interface("[SNI]\nBindAddress = 127.0.0.1:8443\n\n[sni]\nbindaddress = 0.0.0.0:443\n\n"
                                "[Sni]\nBindAddress = [::]:443 # every interface\n"));
  REQUIRE(c.sni.size() == 3);
  CHECK(c.sni[0].line == 5);
  CHECK(c.sni[0].bind.ip == *wg::IpAddress::parse("127.0.0.1"));
  CHECK(c.sni[0].bind.port == 8443);
  CHECK(c.sni[0].bind.text == "127.0.0.1:8443");
  CHECK(c.sni[1].line == 8);
  CHECK(c.sni[1].bind.text == "0.0.0.0:443");
  CHECK(c.sni[2].bind.ip == *wg::IpAddress::parse("::"));
  CHECK(c.sni[2].bind.text == "[::]:443");
  CHECK(c.socks5.empty());
}

TEST_CASE("sni config: localhost and $NAME, as for the other BindAddress keys", "[sni]") {
  auto env = [](const std::string& n) -> std::optional<std::string> {
    if (n == "SNI_BIND") return "127.0.0.2:9443";
    return std::nullopt;
  };
  auto c = parse_proxy_config(with_interface("[SNI]\nBindAddress = localhost:443\n[SNI]\nBindAddress = $SNI_BIND\n"),
                              "test.conf", env);
  REQUIRE(c.sni.size() == 2);
  CHECK(c.sni[0].bind.ip == *wg::IpAddress::parse("127.0.0.1"));
  CHECK(c.sni[1].bind.text == "127.0.0.2:9443");
}

TEST_CASE("sni config: errors name the line and the problem", "[sni]") {
  auto [text, message] = GENERATE(table<std::string, std::string>({
      {"[SNI]\n", "test.conf: line 1: [SNI] without BindAddress"},
      {"\n[SNI]\n# nothing\n[Socks5]\nBindAddress = 127.0.0.1:1\n", "test.conf: line 2: [SNI] without BindAddress"},
      {"[SNI]\nBindAddress =\n", "test.conf: line 2: missing value for BindAddress"},
      {"[SNI]\nBindAddress = :443\n",
       "test.conf: line 2: invalid BindAddress ':443': no address: write 0.0.0.0:443 or [::]:443 to listen on every "
       "interface"},
      {"[SNI]\nBindAddress = 127.0.0.1\n",
       "test.conf: line 2: invalid BindAddress '127.0.0.1': expected ADDR:PORT or [IPv6]:PORT"},
      {"[SNI]\nBindAddress = web.test:443\n",
       "test.conf: line 2: invalid BindAddress 'web.test:443': not an IP address or localhost"},
      {"[SNI]\nBindAddress = 127.0.0.1:0\n", "test.conf: line 2: invalid BindAddress '127.0.0.1:0': port must be 1-65535"},
      {"[SNI]\nBindAddress = 127.0.0.1:65536\n",
       "test.conf: line 2: invalid BindAddress '127.0.0.1:65536': expected ADDR:PORT or [IPv6]:PORT"},
      {"[SNI]\nBindAddress = [127.0.0.1]:443\n",
       "test.conf: line 2: invalid BindAddress '[127.0.0.1]:443': only IPv6 addresses go inside [ ]"},
      {"[SNI]\nBindAddress = 127.0.0.1:443\nBindAddress = 127.0.0.1:444\n",
       "test.conf: line 3: duplicate BindAddress in this section (first at line 2)"},
      {"[SNI]\nBindAddress = 127.0.0.1:443\nTarget = web.test:443\n", "test.conf: line 3: unknown key 'Target' in [SNI]"},
      {"[SNI]\nBindAdress = 127.0.0.1:443\n", "test.conf: line 2: unknown key 'BindAdress' in [SNI]"},
      {"[SNI]\nUsername = u\n", "test.conf: line 2: unknown key 'Username' in [SNI]"},
  }));
  CAPTURE(text);
  CHECK(error_of(text) == message);
}

TEST_CASE("sni config: a WGConfig file may not hold [SNI]", "[sni]") {
  char dir[] = "/tmp/wgnet_sni_test.XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string wg_path = std::string(dir) + "/wg.conf";
  std::ofstream(wg_path) << "[Interface]\nPrivateKey = " << kPriv << "\nAddress = 198.19.0.1/32\n[SNI]\nBindAddress = 127.0.0.1:443\n";
  std::string err;
  try {
    parse("WGConfig = " + wg_path + "\n");
  } catch (const wg::ConfigError& e) {
    err = e.what();
  }
  std::remove(wg_path.c_str());
  rmdir(dir);
  CHECK(err == wg_path + ": line 4: [SNI] belongs in the wireproxy file, not in a WGConfig file");
}

TEST_CASE("sni config: wireproxy 1.1.3's README sample is read as published", "[sni]") {
  std::ifstream in(std::string(WGNET_VECTORS_DIR) + "/../netns/wireproxy-1.1.3-sample.conf");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto c = parse(text.str());
  // The comment after Address is cut off, as go-ini cuts it.
  CHECK(c.wg.iface.addresses == std::vector{*wg::IpPrefix::parse("198.19.0.2/32")});
  CHECK(c.wg.iface.dns_servers == std::vector{*wg::IpAddress::parse("198.19.0.1")});
  REQUIRE(c.wg.peers.size() == 1);
  CHECK(c.wg.peers[0].endpoint == "my.ddns.example.com:51820");
  CHECK(c.wg.peers[0].allowed_ips.empty());
  REQUIRE(c.tcp_client_tunnels.size() == 1);
  CHECK(c.tcp_client_tunnels[0].target.text == "play.cubecraft.net:25565");
  REQUIRE(c.tcp_server_tunnels.size() == 1);
  CHECK(c.tcp_server_tunnels[0].listen_port == 3422);
  REQUIRE(c.stdio_tunnels.size() == 1);
  CHECK(c.stdio_tunnels[0].target.text == "ssh.myserver.net:22");
  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].bind.text == "127.0.0.1:25344");
  CHECK(c.socks5[0].username.empty());
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].bind.text == "127.0.0.1:25345");
  REQUIRE(c.sni.size() == 1);
  CHECK(c.sni[0].line == 70);
  CHECK(c.sni[0].bind.text == "0.0.0.0:443");
  CHECK(c.sni[0].bind.port == 443);
  CHECK(c.warnings.empty());
}

// Tests for wg-netstack's reader of wireproxy's config format: wireproxy's README sample,
// every section and key, its INI dialect ($NAME, comments, case), WGConfig, and the errors
// (with their line numbers) and warnings.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "proxy_config.hpp"

using namespace wgns;

namespace {

// Test-only keys (the same as tests/unit/config_test.cpp's).
constexpr const char* kPriv = "8KxyZrTLgHvr1xyi7Qv2YPa5lWOAAOdlv7DcvQoDvE0=";
constexpr const char* kPub1 = "YEuBz+mBGWhZ+CGdmyGWfAw9dUQjeA0vJwSkImdoV18=";
constexpr const char* kPub2 = "6LYL/u0UjhCMX2rYWfq8BRXEspnzvgJeQztRdfN++1A=";
constexpr const char* kPsk = "JdsurUJ0InKJIVM7QUMm6ihNlgX6s44BBHZVgdEjB8Y=";

wg::IpPrefix prefix(const char* s) { return *wg::IpPrefix::parse(s); }
wg::IpAddress address(const char* s) { return *wg::IpAddress::parse(s); }

// An environment of fixed variables.
Env env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const Env kNoEnv = env_of({});

ProxyConfig parse(const std::string& text, const Env& env = kNoEnv) {
  return parse_proxy_config(text, "test.conf", env);
}

// The what() of the ConfigError that parsing throws; fails the test if none.
std::string error_of(const std::string& text, const Env& env = kNoEnv) {
  try {
    parse(text, env);
  } catch (const wg::ConfigError& e) {
    return e.what();
  }
  FAIL("parse_proxy_config accepted:\n" << text);
  return {};
}

// A temporary directory removed (with its files) at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/wgnet_proxy_config_test.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    auto file = path + "/" + name;
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
};

// The current directory changed for the scope.
struct InDirectory {
  std::string saved;
  explicit InDirectory(const std::string& dir) {
    char buf[4096];
    REQUIRE(::getcwd(buf, sizeof buf) != nullptr);
    saved = buf;
    REQUIRE(::chdir(dir.c_str()) == 0);
  }
  ~InDirectory() { (void)::chdir(saved.c_str()); }
};

void require_same(const wg::Config& a, const wg::Config& b) {
  CHECK(a.iface.private_key == b.iface.private_key);
  CHECK(a.iface.listen_port == b.iface.listen_port);
  CHECK(a.iface.fwmark == b.iface.fwmark);
  CHECK(a.iface.mtu == b.iface.mtu);
  CHECK(a.iface.addresses == b.iface.addresses);
  CHECK(a.iface.dns_servers == b.iface.dns_servers);
  CHECK(a.iface.dns_search == b.iface.dns_search);
  CHECK(a.iface.wg_quick_extras == b.iface.wg_quick_extras);
  REQUIRE(a.peers.size() == b.peers.size());
  for (size_t i = 0; i < a.peers.size(); ++i) {
    CHECK(a.peers[i].public_key == b.peers[i].public_key);
    CHECK(a.peers[i].preshared_key == b.peers[i].preshared_key);
    CHECK(a.peers[i].endpoint == b.peers[i].endpoint);
    CHECK(a.peers[i].allowed_ips == b.peers[i].allowed_ips);
    CHECK(a.peers[i].persistent_keepalive == b.peers[i].persistent_keepalive);
  }
}

// wireproxy's README sample, line for line, with our test addresses and names.
std::string readme_sample() {
  return std::string() +
         "# The [Interface] and [Peer] configurations follow the same semantics and meaning\n"  // 1
         "# of a wg-quick configuration.\n"
         "[Interface]\n"
         "Address = 198.19.0.2/32 # The subnet should be /32 and /128 for IPv4 and v6 respectively\n"
         "# MTU = 1420 (optional)\n"  // 5
         "PrivateKey = " + kPriv + "\n"
         "# PrivateKey = $MY_WIREGUARD_PRIVATE_KEY # Alternatively, reference environment variables\n"
         "DNS = 198.19.0.1\n"
         "\n"
         "[Peer]\n"  // 10
         "PublicKey = " + kPub1 + "\n"
         "# PresharedKey = " + kPsk + " (optional)\n"
         "Endpoint = peer.example.test:51820\n"
         "# PersistentKeepalive = 25 (optional)\n"
         "\n"  // 15
         "# TCPClientTunnel is a tunnel listening on your machine,\n"
         "[TCPClientTunnel]\n"
         "BindAddress = 127.0.0.1:25565\n"
         "Target = game.example.test:25565\n"
         "\n"  // 20
         "[TCPServerTunnel]\n"
         "ListenPort = 3422\n"
         "Target = localhost:25545\n"
         "\n"
         "#    ssh -o ProxyCommand='wireproxy -c myconfig.conf' ssh.example.test\n"  // 25
         "[STDIOTunnel]\n"
         "Target = ssh.example.test:22\n"
         "\n"
         "[Socks5]\n"
         "BindAddress = 127.0.0.1:25344\n"  // 30
         "\n"
         "#Username = ...\n"
         "# Avoid using spaces in the password field\n"
         "#Password = ...\n"
         "\n"  // 35
         "[http]\n"
         "BindAddress = 127.0.0.1:25345\n"
         "\n"
         "#Username = ...\n"
         "#Password = ...\n"  // 40
         "\n"
         "# Specifying certificate and key enables HTTPS\n"
         "#CertFile = ...\n"
         "#KeyFile = ...\n";
}

}  // namespace

TEST_CASE("proxy config: wireproxy's README sample is read in full", "[proxy config]") {
  auto c = parse(readme_sample());
  REQUIRE(c.wg.iface.private_key);
  CHECK(c.wg.iface.private_key->to_base64() == kPriv);
  CHECK(c.wg.iface.addresses == std::vector{prefix("198.19.0.2/32")});
  CHECK(c.wg.iface.dns_servers == std::vector{address("198.19.0.1")});
  CHECK_FALSE(c.wg.iface.mtu);
  REQUIRE(c.wg.peers.size() == 1);
  CHECK(c.wg.peers[0].public_key.to_base64() == kPub1);
  CHECK_FALSE(c.wg.peers[0].preshared_key);
  CHECK(c.wg.peers[0].endpoint == "peer.example.test:51820");
  CHECK(c.wg.peers[0].persistent_keepalive == 0);

  REQUIRE(c.tcp_client_tunnels.size() == 1);
  CHECK(c.tcp_client_tunnels[0].line == 17);
  CHECK(c.tcp_client_tunnels[0].bind.ip == address("127.0.0.1"));
  CHECK(c.tcp_client_tunnels[0].bind.port == 25565);
  CHECK(c.tcp_client_tunnels[0].target.host == "game.example.test");
  CHECK(c.tcp_client_tunnels[0].target.port == 25565);
  REQUIRE(c.tcp_server_tunnels.size() == 1);
  CHECK(c.tcp_server_tunnels[0].listen_port == 3422);
  CHECK(c.tcp_server_tunnels[0].target.host == "localhost");
  CHECK(c.tcp_server_tunnels[0].target.port == 25545);
  REQUIRE(c.stdio_tunnels.size() == 1);
  CHECK(c.stdio_tunnels[0].target.text == "ssh.example.test:22");
  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].line == 29);
  CHECK(c.socks5[0].bind.text == "127.0.0.1:25344");
  CHECK(c.socks5[0].bind.port == 25344);
  CHECK(c.socks5[0].username.empty());
  CHECK(c.socks5[0].password.empty());
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].bind.port == 25345);
  CHECK(c.http[0].cert_file.empty());
  CHECK(c.http[0].key_file.empty());
  CHECK(c.udp_proxy_tunnels.empty());
  CHECK(c.resolve == ResolveStrategy::automatic);
  CHECK(c.check_alive.empty());
  CHECK(c.check_alive_interval == std::chrono::seconds(5));
  CHECK(c.wg_config_path.empty());
  CHECK(c.warnings.empty());
}

TEST_CASE("proxy config: a plain wg-quick file gives what wg::parse_config gives", "[proxy config]") {
  std::string text = std::string() +
                     "[Interface]\n"
                     "PrivateKey = " + kPriv + "\n"
                     "ListenPort = 51820\n"
                     "FwMark = 0x20\n"
                     "MTU = 1380\n"
                     "Address = 198.19.0.2/24, fd00:19::2/64\n"
                     "Address = 198.19.0.3/32\n"
                     "DNS = 198.19.0.1, corp.test\n"
                     "PostUp = iptables -A FORWARD -i %i -j ACCEPT; echo $HOME # done\n"
                     "Table = off\n"
                     "\n"
                     "[Peer]\n"
                     "PublicKey = " + kPub1 + "\n"
                     "PresharedKey = " + kPsk + "\n"
                     "Endpoint = [fd00:18::1]:51820\n"
                     "AllowedIPs = 198.19.0.0/24\n"
                     "AllowedIPs = fd00:19::/64\n"
                     "PersistentKeepalive = 25\n"
                     "[Peer]\n"
                     "PublicKey = " + kPub2 + "\n"
                     "Endpoint = 198.18.0.2:51820\n";
  auto c = parse(text);
  require_same(c.wg, wg::parse_config(text));
  CHECK(c.socks5.empty());
  CHECK(c.http.empty());

  SECTION("load_proxy_config and wg::load_config agree on the file") {
    TempDir dir;
    auto file = dir.write("wg0.conf", text);
    auto loaded = load_proxy_config(file, kNoEnv);
    require_same(loaded.wg, wg::load_config(file));
    CHECK(loaded.warnings == std::vector<std::string>{
                                 file + ": line 9: PostUp is a wg-quick key and is ignored",
                                 file + ": line 10: Table is a wg-quick key and is ignored"});
  }
}

TEST_CASE("proxy config: every key of every section", "[proxy config]") {
  std::string text = std::string() +
                     "[Interface]\n"                               // 1
                     "PrivateKey = " + kPriv + "\n"
                     "Address = 198.19.0.2/32, fd00:19::2/128\n"
                     "CheckAlive = 198.19.0.1, fd00:19::1\n"
                     "CheckAlive = 198.19.0.9\n"                   // 5
                     "CheckAliveInterval = 3\n"
                     "[Peer]\n"
                     "PublicKey = " + kPub1 + "\n"
                     "AllowedIPs = 198.19.0.0/24, fd00:19::/64\n"
                     "[Socks5]\n"                                  // 10
                     "BindAddress = 127.0.0.1:1080\n"
                     "Username = alice\n"
                     "Password = s3cret\n"
                     "[http]\n"
                     "BindAddress = [::1]:8080\n"                  // 15
                     "Username = bob\n"
                     "Password = hunter2\n"
                     "CertFile = /etc/wg-netstack/cert.pem\n"
                     "KeyFile = key.pem\n"
                     "[TCPClientTunnel]\n"                         // 20
                     "BindAddress = localhost:2222\n"
                     "Target = [fd00:19::5]:22\n"
                     "[TCPServerTunnel]\n"
                     "ListenPort = 8443\n"
                     "Target = 127.0.0.1:443\n"                    // 25
                     "[UDPProxyTunnel]\n"
                     "BindAddress = 127.0.0.1:5353\n"
                     "Target = 198.19.0.1:53\n"
                     "InactivityTimeout = 30\n"
                     "[STDIOTunnel]\n"                             // 30
                     "Target = 198.19.0.5:22\n"
                     "[Resolve]\n"
                     "ResolveStrategy = ipv6\n";
  auto c = parse(text);
  CHECK(c.wg.iface.addresses == std::vector{prefix("198.19.0.2/32"), prefix("fd00:19::2/128")});
  CHECK(c.check_alive == std::vector{address("198.19.0.1"), address("fd00:19::1"), address("198.19.0.9")});
  CHECK(c.check_alive_interval == std::chrono::seconds(3));
  REQUIRE(c.wg.peers.size() == 1);
  CHECK(c.wg.peers[0].allowed_ips == std::vector{prefix("198.19.0.0/24"), prefix("fd00:19::/64")});

  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].line == 10);
  CHECK(c.socks5[0].bind.ip == address("127.0.0.1"));
  CHECK(c.socks5[0].bind.port == 1080);
  CHECK(c.socks5[0].username == "alice");
  CHECK(c.socks5[0].password.str() == "s3cret");
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].bind.ip == address("::1"));
  CHECK(c.http[0].bind.port == 8080);
  CHECK(c.http[0].bind.text == "[::1]:8080");
  CHECK(c.http[0].username == "bob");
  CHECK(c.http[0].password.str() == "hunter2");
  CHECK(c.http[0].cert_file == "/etc/wg-netstack/cert.pem");
  CHECK(c.http[0].key_file == "key.pem");
  REQUIRE(c.tcp_client_tunnels.size() == 1);
  CHECK(c.tcp_client_tunnels[0].bind.ip == address("127.0.0.1"));  // localhost
  CHECK(c.tcp_client_tunnels[0].bind.text == "localhost:2222");
  CHECK(c.tcp_client_tunnels[0].target.host == "fd00:19::5");
  CHECK(c.tcp_client_tunnels[0].target.port == 22);
  REQUIRE(c.tcp_server_tunnels.size() == 1);
  CHECK(c.tcp_server_tunnels[0].listen_port == 8443);
  CHECK(c.tcp_server_tunnels[0].target.host == "127.0.0.1");
  CHECK(c.tcp_server_tunnels[0].target.port == 443);
  REQUIRE(c.udp_proxy_tunnels.size() == 1);
  CHECK(c.udp_proxy_tunnels[0].line == 26);
  CHECK(c.udp_proxy_tunnels[0].bind.port == 5353);
  CHECK(c.udp_proxy_tunnels[0].target.host == "198.19.0.1");
  CHECK(c.udp_proxy_tunnels[0].target.port == 53);
  CHECK(c.udp_proxy_tunnels[0].inactivity_timeout == std::chrono::seconds(30));
  REQUIRE(c.stdio_tunnels.size() == 1);
  CHECK(c.stdio_tunnels[0].target.host == "198.19.0.5");
  CHECK(c.resolve == ResolveStrategy::ipv6);
  CHECK(c.warnings.empty());
}

TEST_CASE("proxy config: defaults of the optional keys", "[proxy config]") {
  auto c = parse("[UDPProxyTunnel]\nBindAddress = 127.0.0.1:5353\nTarget = 198.19.0.1:53\n"
                 "[Resolve]\n[http]\nBindAddress = 127.0.0.1:8080\nUsername = u\n");
  REQUIRE(c.udp_proxy_tunnels.size() == 1);
  CHECK(c.udp_proxy_tunnels[0].inactivity_timeout == std::chrono::seconds(0));  // never expires
  CHECK(c.resolve == ResolveStrategy::automatic);
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].username == "u");
  CHECK(c.http[0].password.empty());
  CHECK(parse("[Resolve]\nResolveStrategy = auto\n").resolve == ResolveStrategy::automatic);
  CHECK(parse("[Resolve]\nResolveStrategy = ipv4\n").resolve == ResolveStrategy::ipv4);
  CHECK(parse("[UDPProxyTunnel]\nBindAddress = 127.0.0.1:1\nTarget = h:1\nInactivityTimeout = 0\n")
            .udp_proxy_tunnels[0]
            .inactivity_timeout == std::chrono::seconds(0));
  // No [Interface] at all: an empty WireGuard part, left for the caller to refuse.
  CHECK_FALSE(c.wg.iface.private_key);
  CHECK(c.wg.peers.empty());
}

TEST_CASE("proxy config: proxy and tunnel sections repeat, in file order", "[proxy config]") {
  auto c = parse(
      "[Socks5]\nBindAddress = 127.0.0.1:1080\n"                              // 1
      "[TCPServerTunnel]\nListenPort = 5000\nTarget = service-one.test:5000\n"  // 3
      "[Socks5]\nBindAddress = [::1]:1080\n"                                  // 6
      "[TCPServerTunnel]\nListenPort = 5001\nTarget = service-two.test:5001\n"  // 8
      "[TCPServerTunnel]\nListenPort = 5080\nTarget = service-three.test:80\n"  // 11
      "[http]\nBindAddress = 127.0.0.1:8080\n[http]\nBindAddress = 127.0.0.1:8081\n"
      "[STDIOTunnel]\nTarget = a.test:22\n[STDIOTunnel]\nTarget = b.test:22\n"
      "[TCPClientTunnel]\nBindAddress = 127.0.0.1:1\nTarget = a.test:1\n"
      "[TCPClientTunnel]\nBindAddress = 127.0.0.1:2\nTarget = a.test:2\n"
      "[UDPProxyTunnel]\nBindAddress = 127.0.0.1:1\nTarget = a.test:1\n"
      "[UDPProxyTunnel]\nBindAddress = 127.0.0.1:2\nTarget = a.test:2\n"
      "[Resolve]\n[Resolve]\nResolveStrategy = ipv4\n");
  REQUIRE(c.socks5.size() == 2);
  CHECK(c.socks5[0].line == 1);
  CHECK(c.socks5[1].line == 6);
  CHECK(c.socks5[1].bind.ip == address("::1"));
  REQUIRE(c.tcp_server_tunnels.size() == 3);
  CHECK(c.tcp_server_tunnels[0].listen_port == 5000);
  CHECK(c.tcp_server_tunnels[1].line == 8);
  CHECK(c.tcp_server_tunnels[1].target.host == "service-two.test");
  CHECK(c.tcp_server_tunnels[2].listen_port == 5080);
  CHECK(c.tcp_server_tunnels[2].target.port == 80);
  REQUIRE(c.http.size() == 2);
  CHECK(c.http[1].bind.port == 8081);
  REQUIRE(c.stdio_tunnels.size() == 2);
  CHECK(c.stdio_tunnels[1].target.host == "b.test");
  REQUIRE(c.tcp_client_tunnels.size() == 2);
  CHECK(c.tcp_client_tunnels[1].target.port == 2);
  REQUIRE(c.udp_proxy_tunnels.size() == 2);
  CHECK(c.udp_proxy_tunnels[1].bind.port == 2);
  CHECK(c.resolve == ResolveStrategy::ipv4);
}

TEST_CASE("proxy config: section and key names are case-insensitive", "[proxy config]") {
  auto c = parse(std::string() +
                 "[INTERFACE]\nprivatekey = " + kPriv + "\nADDRESS = 198.19.0.2/32\ncheckalive = 198.19.0.1\n"
                 "CHECKALIVEINTERVAL = 7\n"
                 "[peer]\npublickey = " + kPub1 + "\n"
                 "[SOCKS5]\nbindaddress = 127.0.0.1:1080\nUSERNAME = a\npassword = b\n"
                 "[HTTP]\nBindaddress = 127.0.0.1:8080\ncertfile = c.pem\nKEYFILE = k.pem\n"
                 "[tcpclienttunnel]\nBINDADDRESS = 127.0.0.1:1\ntarget = h.test:1\n"
                 "[tcpSERVERtunnel]\nlistenport = 9\nTARGET = h.test:9\n"
                 "[udpproxytunnel]\nbindaddress = 127.0.0.1:2\ntarget = h.test:2\ninactivitytimeout = 4\n"
                 "[stdiotunnel]\ntarget = h.test:22\n"
                 "[RESOLVE]\nresolvestrategy = IPv4\n");
  CHECK(c.wg.iface.private_key);
  CHECK(c.wg.peers.size() == 1);
  CHECK(c.check_alive == std::vector{address("198.19.0.1")});
  CHECK(c.check_alive_interval == std::chrono::seconds(7));
  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].password.str() == "b");
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].key_file == "k.pem");
  CHECK(c.tcp_client_tunnels.size() == 1);
  CHECK(c.tcp_server_tunnels.at(0).listen_port == 9);
  CHECK(c.udp_proxy_tunnels.at(0).inactivity_timeout == std::chrono::seconds(4));
  CHECK(c.stdio_tunnels.size() == 1);
  CHECK(c.resolve == ResolveStrategy::ipv4);
}

TEST_CASE("proxy config: comments, inline comments and quoted values", "[proxy config]") {
  auto c = parse(std::string() +
                 "; a comment in go-ini's other style\n"
                 "  # an indented comment\n"
                 "[Interface] # the interface\n"
                 "PrivateKey = " + kPriv + " ; inline\n"
                 "Address = 198.19.0.2/32 # inline\n"
                 "CheckAlive = 198.19.0.1 ; inline\n"
                 "[Socks5] ; proxy\n"
                 "BindAddress = \"127.0.0.1:1080\" # quotes go\n"
                 "Username = 'alice'\n"
                 "Password = `p#ss;word` # backquotes keep '#' and ';'\n"
                 "[http]\n"
                 "BindAddress = 127.0.0.1:8080;no space needed\n"
                 "Username = bob#comment\n"
                 "Password = \"\"\"tri;ple\"\"\"\n"
                 "CertFile = \"a\"b\"\n"
                 "KeyFile = \"k.pem\"\n");
  CHECK(c.wg.iface.private_key->to_base64() == kPriv);
  CHECK(c.wg.iface.addresses == std::vector{prefix("198.19.0.2/32")});
  CHECK(c.check_alive == std::vector{address("198.19.0.1")});
  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].bind.port == 1080);
  CHECK(c.socks5[0].username == "alice");
  CHECK(c.socks5[0].password.str() == "p#ss;word");
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].bind.port == 8080);
  CHECK(c.http[0].username == "bob");
  CHECK(c.http[0].password.str() == "tri;ple");
  CHECK(c.http[0].cert_file == "\"a\"b\"");  // not one pair of quotes: kept
  CHECK(c.http[0].key_file == "k.pem");
}

TEST_CASE("proxy config: $NAME takes the environment's value and $$ stands for $", "[proxy config]") {
  auto env = env_of({{"WG_KEY", kPriv},
                     {"WG_ADDR", "198.19.0.2/32, fd00:19::2/128"},
                     {"WG_DNS", "198.19.0.1"},
                     {"WG_PEER", kPub1},
                     {"WG_PSK", kPsk},
                     {"WG_IPS", "198.19.0.0/24"},
                     {"WG_EP", "198.18.0.1:51820"},
                     {"CHECK", "198.19.0.1, 198.19.0.7"},
                     {"EVERY", "9"},
                     {"BIND", "127.0.0.1:1080"},
                     {"USER", "alice"},
                     {"PASS", "p#ss ;word"},  // verbatim: no comment, no quotes
                     {"TARGET", "[fd00:19::9]:22"},
                     {"PORT", "8022"},
                     {"STRATEGY", "ipv6"},
                     {"CERT", "/c.pem"}});
  auto c = parse("[Interface]\nPrivateKey = $WG_KEY\nAddress = $WG_ADDR # a comment\nDNS = $WG_DNS\n"
                 "CheckAlive = $CHECK\nCheckAliveInterval = $EVERY\nPostUp = $HOME/up.sh\n"
                 "[Peer]\nPublicKey = $WG_PEER\nPresharedKey = $WG_PSK\nAllowedIPs = $WG_IPS\nEndpoint = $WG_EP\n"
                 "[Socks5]\nBindAddress = $BIND\nUsername = $USER\nPassword = $PASS\n"
                 "[http]\nBindAddress = 127.0.0.1:8080\nUsername = $$USER\nPassword = $$$PASS\n"
                 "CertFile = $CERT\nKeyFile = $$k.pem\n"
                 "[TCPServerTunnel]\nListenPort = $PORT\nTarget = $TARGET\n"
                 "[Resolve]\nResolveStrategy = $STRATEGY\n",
                 env);
  CHECK(c.wg.iface.private_key->to_base64() == kPriv);
  CHECK(c.wg.iface.addresses == std::vector{prefix("198.19.0.2/32"), prefix("fd00:19::2/128")});
  CHECK(c.wg.iface.dns_servers == std::vector{address("198.19.0.1")});
  // wg-quick's hooks are shell commands, never looked up.
  CHECK(c.wg.iface.wg_quick_extras == std::vector<std::pair<std::string, std::string>>{{"PostUp", "$HOME/up.sh"}});
  CHECK(c.check_alive == std::vector{address("198.19.0.1"), address("198.19.0.7")});
  CHECK(c.check_alive_interval == std::chrono::seconds(9));
  REQUIRE(c.wg.peers.size() == 1);
  CHECK(c.wg.peers[0].public_key.to_base64() == kPub1);
  CHECK(c.wg.peers[0].preshared_key->to_base64() == kPsk);
  CHECK(c.wg.peers[0].allowed_ips == std::vector{prefix("198.19.0.0/24")});
  CHECK(c.wg.peers[0].endpoint == "198.18.0.1:51820");
  REQUIRE(c.socks5.size() == 1);
  CHECK(c.socks5[0].bind.port == 1080);
  CHECK(c.socks5[0].username == "alice");
  CHECK(c.socks5[0].password.str() == "p#ss ;word");
  REQUIRE(c.http.size() == 1);
  CHECK(c.http[0].username == "$USER");
  CHECK(c.http[0].password.str() == "$$PASS");
  CHECK(c.http[0].cert_file == "/c.pem");
  CHECK(c.http[0].key_file == "$k.pem");
  CHECK(c.tcp_server_tunnels.at(0).listen_port == 8022);
  CHECK(c.tcp_server_tunnels.at(0).target.host == "fd00:19::9");
  CHECK(c.resolve == ResolveStrategy::ipv6);
  CHECK(c.warnings == std::vector<std::string>{"test.conf: line 7: PostUp is a wg-quick key and is ignored"});
}

TEST_CASE("proxy config: $NAME errors name the key and the variable, never a secret", "[proxy config]") {
  CHECK(error_of("[Interface]\nPrivateKey = $NOPE\n") ==
        "test.conf: line 2: PrivateKey references unset environment variable NOPE");
  CHECK(error_of("[Socks5]\nBindAddress = 127.0.0.1:1\nUsername = u\nPassword = $NOPE\n") ==
        "test.conf: line 4: Password references unset environment variable NOPE");
  CHECK(error_of("[Socks5]\nBindAddress = 127.0.0.1:1\nUsername = u\nPassword = $s3cr-t\n") ==
        "test.conf: line 4: Password: '$' must be followed by an environment variable name "
        "(write $$ for a literal '$')");
  CHECK(error_of("[STDIOTunnel]\nTarget = $\n") ==
        "test.conf: line 2: Target: '$' must be followed by an environment variable name "
        "(write $$ for a literal '$')");
  // A bad key from the environment: wg::parse_config's message and the variable, no value.
  auto bad = env_of({{"KEY", "c2VjcmV0LWJ1dC10b28tc2hvcnQ="}, {"ADDR", "198.19.0.2/32\nPrivateKey = x"}});
  auto e = error_of("[Interface]\nPrivateKey = $KEY\n", bad);
  CHECK(e == "test.conf: line 2: invalid key in PrivateKey: wrong length (want 44 base64 characters) "
             "(the value came from environment variable KEY)");
  CHECK(e.find("c2VjcmV0") == std::string::npos);
  // A line break from the environment would add a line for wg::parse_config: refused.
  CHECK(error_of("[Interface]\nAddress = $ADDR\n", bad) ==
        "test.conf: line 2: the value of 'Address' (from environment variable ADDR) holds a '#' or a line break");
  auto pw = error_of("[http]\nBindAddress = 127.0.0.1:8080\nPassword = `hunter2`\n");
  CHECK(pw == "test.conf: line 3: Password without Username");
}

TEST_CASE("proxy config: WGConfig reads [Interface] and [Peer] from a wg-quick file", "[proxy config]") {
  TempDir dir;
  std::string wg_text = std::string() +
                        "[Interface]\n"
                        "PrivateKey = $WG_KEY\n"
                        "Address = 198.19.0.2/32\n"
                        "CheckAlive = 198.19.0.1\n"
                        "CheckAliveInterval = 2\n"
                        "SaveConfig = true\n"
                        "[Peer]\n"
                        "PublicKey = " + kPub1 + "\n"
                        "AllowedIPs = 198.19.0.0/24\n";
  auto wg_file = dir.write("wg0.conf", wg_text);
  auto env = env_of({{"WG_KEY", kPriv}});
  std::string main_text = "# wireproxy\nWGConfig = " + wg_file + "\n\n[Socks5]\nBindAddress = 127.0.0.1:1080\n";

  SECTION("an absolute path") {
    auto c = parse(main_text, env);
    CHECK(c.wg_config_path == wg_file);
    CHECK(c.wg.iface.private_key->to_base64() == kPriv);
    CHECK(c.wg.iface.addresses == std::vector{prefix("198.19.0.2/32")});
    REQUIRE(c.wg.peers.size() == 1);
    CHECK(c.wg.peers[0].public_key.to_base64() == kPub1);
    CHECK(c.check_alive == std::vector{address("198.19.0.1")});
    CHECK(c.check_alive_interval == std::chrono::seconds(2));
    CHECK(c.socks5.size() == 1);
    CHECK(c.warnings == std::vector<std::string>{wg_file + ": line 6: SaveConfig is a wg-quick key and is ignored"});
  }
  SECTION("a relative path is taken from the current directory") {
    InDirectory in(dir.path);
    auto c = parse("WGConfig = wg0.conf\n", env);
    CHECK(c.wg_config_path == "wg0.conf");
    CHECK(c.wg.iface.private_key->to_base64() == kPriv);
  }
  SECTION("the path from the environment") {
    auto c = parse("WGConfig = $WGC\n", env_of({{"WGC", wg_file}, {"WG_KEY", kPriv}}));
    CHECK(c.wg.peers.size() == 1);
  }
  SECTION("errors in the wg-quick file name that file and its line") {
    dir.write("bad.conf", "[Interface]\nAddress = 198.19.0.2/32\nListenPort = 99999\n");
    CHECK(error_of("WGConfig = " + dir.path + "/bad.conf\n") ==
          dir.path + "/bad.conf: line 3: invalid ListenPort '99999' (0-65535)");
    dir.write("proxy.conf", "[Interface]\nAddress = 198.19.0.2/32\n[Socks5]\nBindAddress = 127.0.0.1:1\n");
    CHECK(error_of("WGConfig = " + dir.path + "/proxy.conf\n") ==
          dir.path + "/proxy.conf: line 3: [Socks5] belongs in the wireproxy file, not in a WGConfig file");
    dir.write("top.conf", "WGConfig = other.conf\n");
    CHECK(error_of("WGConfig = " + dir.path + "/top.conf\n") ==
          dir.path + "/top.conf: line 1: key 'WGConfig' outside of a section");
  }
  SECTION("a missing file") {
    auto e = error_of("WGConfig = " + dir.path + "/none.conf\n");
    CHECK(e == "test.conf: WGConfig " + dir.path + "/none.conf: cannot open: No such file or directory");
  }
  SECTION("WGConfig with inline [Interface] or [Peer], twice, late or empty") {
    CHECK(error_of("WGConfig = " + wg_file + "\n[Peer]\nPublicKey = " + kPub2 + "\n", env) ==
          "test.conf: line 2: [Peer] and WGConfig (line 1) both given: [Interface] and [Peer] go in the "
          "WGConfig file");
    CHECK(error_of("WGConfig = a\nWGConfig = b\n") ==
          "test.conf: line 2: duplicate WGConfig (first at line 1)");
    CHECK(error_of("[Socks5]\nBindAddress = 127.0.0.1:1\nWGConfig = " + wg_file + "\n") ==
          "test.conf: line 3: unknown key 'WGConfig' in [Socks5]");
    CHECK(error_of("WGConfig =\n") == "test.conf: line 1: missing value for WGConfig");
  }
}

TEST_CASE("proxy config: a missing required key is reported at its section's header", "[proxy config]") {
  auto [text, message] = GENERATE(table<std::string, std::string>({
      {"\n[Socks5]\nUsername = a\n", "test.conf: line 2: [Socks5] without BindAddress"},
      {"[http]\n", "test.conf: line 1: [http] without BindAddress"},
      {"[TCPClientTunnel]\nTarget = a.test:1\n", "test.conf: line 1: [TCPClientTunnel] without BindAddress"},
      {"[TCPClientTunnel]\nBindAddress = 127.0.0.1:1\n[Socks5]\nBindAddress = 127.0.0.1:2\n",
       "test.conf: line 1: [TCPClientTunnel] without Target"},
      {"[TCPServerTunnel]\nTarget = a.test:1\n", "test.conf: line 1: [TCPServerTunnel] without ListenPort"},
      {"[TCPServerTunnel]\nListenPort = 1\n", "test.conf: line 1: [TCPServerTunnel] without Target"},
      {"[UDPProxyTunnel]\nTarget = a.test:1\n", "test.conf: line 1: [UDPProxyTunnel] without BindAddress"},
      {"[UDPProxyTunnel]\nBindAddress = 127.0.0.1:1\n", "test.conf: line 1: [UDPProxyTunnel] without Target"},
      {"[STDIOTunnel]\n\n", "test.conf: line 1: [STDIOTunnel] without Target"},
      {"[http]\nBindAddress = 127.0.0.1:1\nCertFile = c.pem\n",
       "test.conf: line 1: [http] needs both CertFile and KeyFile for TLS, or neither"},
      {"[http]\nBindAddress = 127.0.0.1:1\nKeyFile = k.pem\n",
       "test.conf: line 1: [http] needs both CertFile and KeyFile for TLS, or neither"},
      {"[Socks5]\nBindAddress = 127.0.0.1:1\nPassword = p\n", "test.conf: line 3: Password without Username"},
      {"[Interface]\nCheckAliveInterval = 5\n",
       "test.conf: line 2: CheckAliveInterval without CheckAlive (it sets how often those addresses are pinged)"},
      {"[Peer]\nAllowedIPs = 198.19.0.0/24\n", "test.conf: line 1: [Peer] without PublicKey"},
  }));
  CAPTURE(text);
  CHECK(error_of(text) == message);
}

TEST_CASE("proxy config: a malformed value names its line and the problem", "[proxy config]") {
  auto [text, message] = GENERATE(table<std::string, std::string>({
      {"[Socks5]\nBindAddress = 127.0.0.1\n",
       "line 2: invalid BindAddress '127.0.0.1': expected ADDR:PORT or [IPv6]:PORT"},
      {"[Socks5]\nBindAddress = :1080\n",
       "line 2: invalid BindAddress ':1080': no address: write 0.0.0.0:1080 or [::]:1080 to listen on every "
       "interface"},
      {"[Socks5]\nBindAddress = proxy.test:1080\n",
       "line 2: invalid BindAddress 'proxy.test:1080': not an IP address or localhost"},
      {"[Socks5]\nBindAddress = 127.0.0.1:0\n", "line 2: invalid BindAddress '127.0.0.1:0': port must be 1-65535"},
      {"[Socks5]\nBindAddress = 127.0.0.1:65536\n",
       "line 2: invalid BindAddress '127.0.0.1:65536': expected ADDR:PORT or [IPv6]:PORT"},
      {"[http]\nBindAddress = [127.0.0.1]:80\n",
       "line 2: invalid BindAddress '[127.0.0.1]:80': only IPv6 addresses go inside [ ]"},
      {"[http]\nBindAddress = ::1:80\n", "line 2: invalid BindAddress '::1:80': expected ADDR:PORT or [IPv6]:PORT"},
      {"[Socks5]\nBindAddress =\n", "line 2: missing value for BindAddress"},
      {"\n\n[TCPClientTunnel]\nBindAddress = 127.0.0.1:1\nTarget = a.test\n",
       "line 5: invalid Target 'a.test': expected HOST:PORT or [IPv6]:PORT"},
      {"[STDIOTunnel]\nTarget = bad host:22\n", "line 2: invalid Target 'bad host:22': not a host name or IP address"},
      {"[STDIOTunnel]\nTarget = [a.test]:22\n", "line 2: invalid Target '[a.test]:22': not an IPv6 address inside [ ]"},
      {"[STDIOTunnel]\nTarget = a.test:0\n", "line 2: invalid Target 'a.test:0': port must be 1-65535"},
      {"[STDIOTunnel]\nTarget = a.test:ssh\n", "line 2: invalid Target 'a.test:ssh': expected HOST:PORT or [IPv6]:PORT"},
      {"[TCPServerTunnel]\nListenPort = 0\n", "line 2: invalid ListenPort '0' (1-65535)"},
      {"[TCPServerTunnel]\nListenPort = 65536\n", "line 2: invalid ListenPort '65536' (1-65535)"},
      {"[TCPServerTunnel]\nListenPort = -1\n", "line 2: invalid ListenPort '-1' (1-65535)"},
      {"[UDPProxyTunnel]\nInactivityTimeout = -5\n",
       "line 2: invalid InactivityTimeout '-5' (seconds, 0 or more; 0: never)"},
      {"[UDPProxyTunnel]\nInactivityTimeout = 1.5\n",
       "line 2: invalid InactivityTimeout '1.5' (seconds, 0 or more; 0: never)"},
      {"[Interface]\nCheckAlive = 198.19.0.1, peer.test\n",
       "line 2: invalid CheckAlive entry 'peer.test' (IP addresses only)"},
      {"[Interface]\nCheckAlive = 198.19.0.1\nCheckAliveInterval = 0\n",
       "line 3: invalid CheckAliveInterval '0' (seconds, 1 or more)"},
      {"[Interface]\nCheckAlive = 198.19.0.1\nCheckAliveInterval = 5s\n",
       "line 3: invalid CheckAliveInterval '5s' (seconds, 1 or more)"},
      {"[Resolve]\nResolveStrategy = ipv4first\n", "line 2: invalid ResolveStrategy 'ipv4first' (auto, ipv4 or ipv6)"},
      {"[Resolve]\nResolveStrategy = ipv4\n[Resolve]\nResolveStrategy = ipv6\n",
       "line 4: duplicate ResolveStrategy (first at line 2)"},
      {"[Socks5]\nBindAddress = 127.0.0.1:1\nbindaddress = 127.0.0.1:2\n",
       "line 3: duplicate BindAddress in this section (first at line 2)"},
      {"[Interface]\nCheckAlive = 198.19.0.1\nCheckAliveInterval = 1\nCheckAliveInterval = 2\n",
       "line 4: duplicate CheckAliveInterval in this section (first at line 3)"},
      {"[Socks5]\nPassword = `unterminated\n", "line 2: malformed value of Password: no closing ` (values cannot span lines)"},
      {"[Socks5]\nPassword = `a` b\n", "line 2: malformed value of Password: text after the closing `"},
      {"[Socks5\n", "line 1: malformed section header"},
      {"[Socks5] x\n", "line 1: malformed section header"},
      {"[Socks5]\nBindAddress\n", "line 2: expected 'Key = Value'"},
      {"[Socks5]\n = 1\n", "line 2: missing key before '='"},
      // wg::parse_config's own errors keep their line numbers among wireproxy's lines.
      {"[Socks5]\nBindAddress = 127.0.0.1:1\n[Interface]\nCheckAlive = 198.19.0.1\nMTU = 100\n",
       "line 5: MTU 100 out of range (576-65535)"},
      {"[Interface]\n[Socks5]\nBindAddress = 127.0.0.1:1\n[Interface]\n",
       "line 4: second [Interface] section (first at line 1)"},
      {std::string("[Interface]\nPrivateKey = ") + kPriv + "\nPrivateKey = " + kPriv + "\n",
       "line 3: duplicate PrivateKey in this section (first at line 2)"},
  }));
  CAPTURE(text);
  CHECK(error_of(text) == "test.conf: " + message);
}

TEST_CASE("proxy config: unknown sections and keys are one error line", "[proxy config]") {
  CHECK(error_of("[Socks5]\nBindAddress = 127.0.0.1:1\n\n[Socks4]\n") == "test.conf: line 4: unknown section '[Socks4]'");
  CHECK(error_of("[Socks5]\nBindAddres = 127.0.0.1:1\n") == "test.conf: line 2: unknown key 'BindAddres' in [Socks5]");
  CHECK(error_of("[http]\nListenPort = 1\n") == "test.conf: line 2: unknown key 'ListenPort' in [http]");
  CHECK(error_of("[TCPClientTunnel]\nListenPort = 1\n") ==
        "test.conf: line 2: unknown key 'ListenPort' in [TCPClientTunnel]");
  CHECK(error_of("[TCPServerTunnel]\nBindAddress = 127.0.0.1:1\n") ==
        "test.conf: line 2: unknown key 'BindAddress' in [TCPServerTunnel]");
  CHECK(error_of("[UDPProxyTunnel]\nTimeout = 1\n") == "test.conf: line 2: unknown key 'Timeout' in [UDPProxyTunnel]");
  CHECK(error_of("[STDIOTunnel]\nBindAddress = 127.0.0.1:1\n") ==
        "test.conf: line 2: unknown key 'BindAddress' in [STDIOTunnel]");
  CHECK(error_of("[Resolve]\nStrategy = ipv4\n") == "test.conf: line 2: unknown key 'Strategy' in [Resolve]");
  CHECK(error_of("[Interface]\nCheckAlive = 198.19.0.1\nTimeout = 3\n") ==
        "test.conf: line 3: unknown key 'Timeout' in [Interface]");
  CHECK(error_of(std::string("[Peer]\nPublicKey = ") + kPub1 + "\nCheckAlive = 198.19.0.1\n") ==
        "test.conf: line 3: unknown key 'CheckAlive' in [Peer]");
  CHECK(error_of("Silent = true\n") ==
        "test.conf: line 1: key 'Silent' outside of a section (only WGConfig may come before the first section)");
}

TEST_CASE("proxy config: wg-quick's own keys are warnings, not errors", "[proxy config]") {
  auto c = parse(std::string() + "[Interface]\nPrivateKey = " + kPriv + "\nTable = off\npreup = true\n"
                 "PostUp = ip rule add table 200; true\nPostUp = echo two\nPreDown = true\nPostDown = true\n"
                 "SaveConfig = true\n");
  CHECK(c.warnings == std::vector<std::string>{
                          "test.conf: line 3: Table is a wg-quick key and is ignored",
                          "test.conf: line 4: PreUp is a wg-quick key and is ignored",
                          "test.conf: line 5: PostUp is a wg-quick key and is ignored",
                          "test.conf: line 6: PostUp is a wg-quick key and is ignored",
                          "test.conf: line 7: PreDown is a wg-quick key and is ignored",
                          "test.conf: line 8: PostDown is a wg-quick key and is ignored",
                          "test.conf: line 9: SaveConfig is a wg-quick key and is ignored"});
  REQUIRE(c.wg.iface.wg_quick_extras.size() == 7);
  CHECK(c.wg.iface.wg_quick_extras[2] == std::pair<std::string, std::string>{"PostUp", "ip rule add table 200; true"});
}

TEST_CASE("proxy config: load_proxy_config warns when a file with secrets is readable by others",
          "[proxy config]") {
  TempDir dir;
  auto with_key = std::string("[Interface]\nPrivateKey = ") + kPriv + "\n";
  auto with_password = std::string("[Socks5]\nBindAddress = 127.0.0.1:1\nUsername = u\nPassword = p\n");
  auto warning = [](const std::string& f) {
    return "warning: " + f + " is readable by group or others; files with keys or passwords should be mode 0600";
  };
  auto loose_key = dir.write("a.conf", with_key, 0644);
  CHECK(load_proxy_config(loose_key, kNoEnv).warnings == std::vector{warning(loose_key)});
  auto loose_password = dir.write("b.conf", with_password, 0640);
  CHECK(load_proxy_config(loose_password, kNoEnv).warnings == std::vector{warning(loose_password)});
  CHECK(load_proxy_config(dir.write("c.conf", with_key, 0600), kNoEnv).warnings.empty());
  // Secrets from the environment are not in the file.
  auto from_env = dir.write("d.conf", "[Interface]\nPrivateKey = $K\n", 0644);
  CHECK(load_proxy_config(from_env, env_of({{"K", kPriv}})).warnings.empty());
  // A WGConfig file is checked too.
  auto wg_file = dir.write("wg.conf", with_key, 0604);
  auto main_file = dir.write("main.conf", "WGConfig = " + wg_file + "\n", 0644);
  CHECK(load_proxy_config(main_file, kNoEnv).warnings == std::vector{warning(wg_file)});

  CHECK_THROWS_WITH(load_proxy_config(dir.path + "/none.conf", kNoEnv),
                    dir.path + "/none.conf: cannot open: No such file or directory");
  CHECK_THROWS_WITH(load_proxy_config(dir.path, kNoEnv), dir.path + ": not a regular file");
  std::string big(1 << 20, '#');
  CHECK_THROWS_WITH(load_proxy_config(dir.write("big.conf", big + "\n"), kNoEnv),
                    dir.path + "/big.conf: larger than 1048576 bytes");
  CHECK(load_proxy_config(dir.write("limit.conf", big), kNoEnv).warnings.empty());
}

TEST_CASE("proxy config: a SecretString is empty once moved from", "[proxy config]") {
  SecretString a("hunter2");
  SecretString b(std::move(a));
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): the contract under test
  CHECK(b.str() == "hunter2");
  SecretString c;
  c = std::move(b);
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move)
  CHECK(c.str() == "hunter2");
  SecretString d(c);
  CHECK(d.str() == c.str());
}

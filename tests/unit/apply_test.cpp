// wg::apply_config and wg::sync_config on real Devices over the in-memory Bind and TUN:
// what `wg setconf` and `wg syncconf` do to a running device.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "bind/memory.hpp"
#include "bind/resolve.hpp"
#include "tun/memory.hpp"
#include "wg/apply.hpp"

using namespace wg;
using namespace std::chrono_literals;

namespace {

struct Node {
  explicit Node(conn::MemoryNetwork& net) : bind(net), dev(tun, bind) {}
  tun::MemoryDevice tun;
  conn::MemoryBind bind;
  Device dev;
};

PublicKey some_public_key() { return crypto::public_key(crypto::generate_private_key()); }

std::set<std::string> allowed(Device& d, Peer& p) {
  std::set<std::string> out;
  for (auto& prefix : d.allowed_ips(p)) out.insert(prefix.to_string());
  return out;
}

// An IPv4 UDP-shaped packet 198.19.0.src → 198.19.0.dst with a marker byte.
std::vector<uint8_t> packet(uint8_t src, uint8_t dst, uint8_t mark) {
  std::vector<uint8_t> p(60, 0);
  p[0] = 0x45;
  p[3] = static_cast<uint8_t>(p.size());
  p[8] = 64;
  p[9] = 17;
  const uint8_t s[4] = {198, 19, 0, src}, d[4] = {198, 19, 0, dst};
  std::memcpy(&p[12], s, 4);
  std::memcpy(&p[16], d, 4);
  p[40] = mark;
  return p;
}

}  // namespace

TEST_CASE("apply: sync_config adds, updates and removes peers as wg syncconf does", "[apply]") {
  conn::MemoryNetwork net;
  Node n(net);
  const PrivateKey key = crypto::generate_private_key();
  const PublicKey p1 = some_public_key(), p2 = some_public_key(), p3 = some_public_key();
  const std::string head = "[Interface]\nPrivateKey = " + key.to_base64() + "\n";
  apply_config(n.dev, parse_config(head + "[Peer]\nPublicKey = " + p1.to_base64() +
                                   "\nAllowedIPs = 198.19.0.11/32\n[Peer]\nPublicKey = " + p2.to_base64() +
                                   "\nAllowedIPs = 198.19.0.12/32, fd00:19::12/128\nPersistentKeepalive = 25\n"));
  REQUIRE(n.dev.peers().size() == 2);
  const PeerPtr before = n.dev.lookup_peer(p2);
  REQUIRE(before);

  const std::string psk = PresharedKey(std::array<uint8_t, kKeyLen>{7}).to_base64();
  sync_config(n.dev, parse_config(head + "[Peer]\nPublicKey = " + p2.to_base64() +
                                  "\nAllowedIPs = 198.19.0.22/32, 198.19.0.12/32\n[Peer]\nPublicKey = " +
                                  p3.to_base64() + "\nPresharedKey = " + psk +
                                  "\nAllowedIPs = 198.19.0.13/32\nEndpoint = 198.18.0.3:51820\n"));
  CHECK(n.dev.peers().size() == 2);
  CHECK_FALSE(n.dev.lookup_peer(p1));
  CHECK_FALSE(n.dev.routable(*IpAddress::parse("198.19.0.11")));
  // p2: the same peer object, its allowed IPs replaced, its keepalive as written (none).
  const PeerPtr after = n.dev.lookup_peer(p2);
  REQUIRE(after);
  CHECK(after == before);
  CHECK(allowed(n.dev, *after) == std::set<std::string>{"198.19.0.12/32", "198.19.0.22/32"});
  CHECK(after->persistent_keepalive() == 0);
  const PeerPtr added = n.dev.lookup_peer(p3);
  REQUIRE(added);
  CHECK(added->preshared_key().to_base64() == psk);
  REQUIRE(added->endpoint());
  CHECK(added->endpoint()->to_string() == "198.18.0.3:51820");
  CHECK(allowed(n.dev, *added) == std::set<std::string>{"198.19.0.13/32"});

  // A preshared key left out of the file is none (as with wg setconf), not "unchanged".
  sync_config(n.dev, parse_config(head + "[Peer]\nPublicKey = " + p3.to_base64() + "\nAllowedIPs = 198.19.0.13/32\n"));
  CHECK(n.dev.peers().size() == 1);
  CHECK(added->preshared_key().is_zero());
  // No Endpoint line: the current one stays.
  REQUIRE(added->endpoint());
  CHECK(added->endpoint()->to_string() == "198.18.0.3:51820");
}

TEST_CASE("apply: sync_config with an unchanged peer keeps its session (no new handshake)", "[apply]") {
  conn::MemoryNetwork net;
  Node a(net), b(net);
  const PrivateKey ka = crypto::generate_private_key(), kb = crypto::generate_private_key();
  const std::string a_conf = "[Interface]\nPrivateKey = " + ka.to_base64() + "\n[Peer]\nPublicKey = " +
                             crypto::public_key(kb).to_base64() + "\nAllowedIPs = 198.19.0.2/32\n";
  apply_config(a.dev, parse_config(a_conf));
  apply_config(b.dev, parse_config("[Interface]\nPrivateKey = " + kb.to_base64() + "\n[Peer]\nPublicKey = " +
                                   crypto::public_key(ka).to_base64() + "\nAllowedIPs = 198.19.0.1/32\n"));
  REQUIRE(!a.dev.up());
  REQUIRE(!b.dev.up());
  a.dev.set_endpoint(*a.dev.lookup_peer(crypto::public_key(kb)), conn::MemoryBind::endpoint_for(b.dev.listen_port()));

  a.tun.inject(packet(1, 2, 1));
  REQUIRE(b.tun.take(5s));
  const uint64_t handshakes = a.dev.stats().handshakes_completed.load() + b.dev.stats().handshakes_completed.load();
  REQUIRE(handshakes == 2);

  // The same file again, and once more with a changed peer beside it: a's session with b
  // goes on, so the next packet needs no handshake.
  sync_config(a.dev, parse_config(a_conf));
  sync_config(a.dev, parse_config(a_conf + "[Peer]\nPublicKey = " + some_public_key().to_base64() +
                                  "\nAllowedIPs = 198.19.0.3/32\n"));
  a.tun.inject(packet(1, 2, 2));
  auto got = b.tun.take(5s);
  REQUIRE(got);
  CHECK((*got)[40] == 2);
  CHECK(a.dev.stats().handshakes_completed.load() + b.dev.stats().handshakes_completed.load() == handshakes);

  // A changed preshared key is a change: the session goes and the next packet handshakes.
  const std::string psk = PresharedKey(std::array<uint8_t, kKeyLen>{9}).to_base64();
  sync_config(a.dev, parse_config(a_conf + "PresharedKey = " + psk + "\n"));
  sync_config(b.dev, parse_config("[Interface]\nPrivateKey = " + kb.to_base64() + "\n[Peer]\nPublicKey = " +
                                  crypto::public_key(ka).to_base64() + "\nAllowedIPs = 198.19.0.1/32\nPresharedKey = " +
                                  psk + "\n"));
  // (An initiation follows the last one sent no sooner than REKEY_TIMEOUT, 5 s, as in
  // the kernel: the first handshake was just now.)
  a.tun.inject(packet(1, 2, 3));
  got = b.tun.take(kRekeyTimeout + 5s);
  REQUIRE(got);
  CHECK((*got)[40] == 3);
  CHECK(a.dev.stats().handshakes_completed.load() + b.dev.stats().handshakes_completed.load() == handshakes + 2);
  a.dev.close();
  b.dev.close();
}

TEST_CASE("apply: endpoint names are the caller's resolver's to look up, never the core's", "[apply]") {
  conn::MemoryNetwork net;
  Node n(net);
  const std::string peer = "[Peer]\nPublicKey = " + some_public_key().to_base64() + "\n";

  // The default takes numeric endpoints and refuses a name with a reason (apply_config
  // called getaddrinfo itself, blocking inside the core).
  apply_config(n.dev, parse_config(peer + "Endpoint = 198.18.0.2:51820\n"));
  REQUIRE(n.dev.peers().size() == 1);
  CHECK(n.dev.peers()[0]->endpoint()->to_string() == "198.18.0.2:51820");
  try {
    apply_config(n.dev, parse_config(peer + "Endpoint = localhost:51820\n"));
    FAIL("a host name was resolved without a resolver");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "endpoint 'localhost:51820' is not a numeric ADDRESS:PORT (host names need a resolver)");
  }

  // The caller's resolver is asked for exactly the text of each Endpoint line.
  std::vector<std::string> asked;
  auto resolver = [&](const std::string& text, std::string&) -> std::optional<conn::Endpoint> {
    asked.push_back(text);
    return conn::Endpoint::parse("198.18.0.7:4000");
  };
  sync_config(n.dev, parse_config(peer + "Endpoint = peer.test:4000\n"), resolver);
  CHECK(asked == std::vector<std::string>{"peer.test:4000"});
  CHECK(n.dev.peers()[0]->endpoint()->to_string() == "198.18.0.7:4000");

  // The system resolver the programs pass: /etc/hosts' localhost, no network.
  std::string err;
  auto ep = conn::resolve_endpoint("localhost:51820", err);
  REQUIRE(ep);
  CHECK(ep->port == 51820);
  CHECK_FALSE(conn::resolve_endpoint("localhost", err));
  CHECK(err == "endpoint 'localhost' has no port");
}

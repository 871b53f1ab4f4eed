// Allowed IPs: table tests of longest-prefix routing, and a randomized comparison of the
// trie against a deliberately naive linear-scan table.
#include "wg/allowed_ips.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using wg::AllowedIps;
using wg::IpAddress;
using wg::IpPrefix;

struct FakePeer {
  char name;
};

FakePeer a{'a'}, b{'b'}, c{'c'}, d{'d'}, e{'e'}, f{'f'}, g{'g'}, h{'h'};

IpPrefix prefix(const char* s) {
  auto p = IpPrefix::parse(s);
  REQUIRE(p);
  return *p;
}

IpAddress address(const char* s) {
  auto ip = IpAddress::parse(s);
  REQUIRE(ip);
  return *ip;
}

std::string name_of(const FakePeer* p) { return p ? std::string(1, p->name) : "none"; }

template <class V>
std::vector<std::string> prefixes_of(const AllowedIps<V>& t, V v) {
  std::vector<std::string> out;
  t.for_each(v, [&](const IpPrefix& p) { out.push_back(p.to_string()); });
  return out;
}

struct Route {
  const char* prefix;
  FakePeer* peer;
};

struct Expect {
  const char* address;
  FakePeer* peer;  // nullptr: no route
};

void insert_all(AllowedIps<FakePeer*>& t, const std::vector<Route>& routes) {
  for (const auto& r : routes) t.insert(prefix(r.prefix), r.peer);
}

void check_all(const AllowedIps<FakePeer*>& t, const std::vector<Expect>& expects) {
  for (const auto& x : expects) {
    INFO("lookup " << x.address);
    CHECK(name_of(t.lookup(address(x.address))) == name_of(x.peer));
  }
}

// Overlapping routes in the spirit of the kernel's allowedips selftest; later lines replace
// earlier ones where the masked prefixes coincide.
const std::vector<Route> kOverlapping = {
    {"198.19.4.0/24", &a},
    {"198.19.4.4/32", &b},
    {"198.19.0.0/17", &c},
    {"198.19.133.64/27", &d},
    {"198.19.133.65/27", &c},  // same /27 as the line above: c takes it over
    {"0.0.0.0/0", &e},
    {"198.19.208.0/20", &g},
    {"198.19.219.211/25", &h},  // host bits set: stored as 198.19.219.128/25
    {"198.18.0.0/25", &a},
    {"198.18.0.128/25", &b},
    {"198.18.128.0/30", &a},
    {"198.18.128.4/30", &b},
    {"198.18.128.8/29", &c},
    {"198.18.128.16/29", &d},
    {"fd00:19:0:6b00::c05f:543/128", &d},
    {"fd00:19:0:6b00::/64", &c},
    {"::/0", &e},
    {"::/0", &f},  // replaces e
    {"fd00:18::/32", &g},
    {"fd00:18:4004:800:dead:beef:dead:beef/64", &h},
    {"fd00:18:4004:800:dead:beef:dead:beef/128", &a},
    {"fd00:18:4004:800:dead:beef:dead:bee0/124", &b},
    {"fd00:18:4004:800:dead:beef:dead:beef/96", &c},
};

const std::vector<Expect> kOverlappingExpect = {
    {"198.19.4.20", &a},
    {"198.19.4.0", &a},
    {"198.19.4.4", &b},
    {"198.19.4.5", &a},
    {"198.19.100.182", &c},
    {"198.19.133.68", &c},
    {"198.19.133.64", &c},
    {"198.19.133.95", &c},
    {"198.19.133.96", &e},
    {"198.19.212.26", &g},
    {"198.19.223.3", &g},
    {"198.19.219.1", &g},
    {"198.19.219.128", &h},
    {"198.19.219.255", &h},
    {"198.19.224.0", &e},
    {"198.18.0.52", &a},
    {"198.18.0.220", &b},
    {"198.18.128.1", &a},
    {"198.18.128.5", &b},
    {"198.18.128.9", &c},
    {"198.18.128.20", &d},
    {"198.18.128.24", &e},
    {"255.255.255.255", &e},
    {"0.0.0.0", &e},
    {"fd00:19:0:6b00::c05f:543", &d},
    {"fd00:19:0:6b00::c02e:1ee", &c},
    {"fd00:19:0:6b01::", &f},
    {"fd00:18:4004:806::1006", &g},
    {"fd00:18:4004:800::1", &h},
    {"fd00:18:4004:800:dead:beef::", &c},
    {"fd00:18:4004:800:dead:beef:dead:beef", &a},
    {"fd00:18:4004:800:dead:beef:dead:beee", &b},
    {"fd00:18:4004:800:dead:beef:dead:bef0", &c},
    {"fd00:18:4004:800:dead:beee::", &h},
    {"fd00:17::", &f},
    {"::", &f},
    {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &f},
};

}  // namespace

TEST_CASE("allowed_ips: an empty table routes nothing", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  CHECK(t.lookup(address("198.18.0.1")) == nullptr);
  CHECK(t.lookup(address("fd00::1")) == nullptr);
  CHECK(t.lookup(IpAddress{}) == nullptr);
  CHECK(t.size() == 0);
  CHECK(t.node_count() == 0);
  CHECK_FALSE(t.remove(prefix("198.18.0.0/15"), &a));
}

TEST_CASE("allowed_ips: overlapping prefixes resolve to the longest match", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  insert_all(t, kOverlapping);
  check_all(t, kOverlappingExpect);
  // 14 IPv4 lines with one replacement, 9 IPv6 lines with one replacement.
  CHECK(t.size() == 13 + 8);
  CHECK(t.node_count() <= 2 * t.size());

  SECTION("insertion order does not matter") {
    // Drop the lines that a later line overrides, then shuffle the rest: the trie is
    // canonical, so even the node count must come out the same.
    std::vector<Route> last_wins;
    for (size_t i = 0; i < kOverlapping.size(); ++i) {
      bool overridden = false;
      for (size_t j = i + 1; j < kOverlapping.size(); ++j)
        overridden |=
            prefix(kOverlapping[i].prefix).masked() == prefix(kOverlapping[j].prefix).masked();
      if (!overridden) last_wins.push_back(kOverlapping[i]);
    }
    std::mt19937 rng(7);
    for (int round = 0; round < 20; ++round) {
      std::shuffle(last_wins.begin(), last_wins.end(), rng);
      AllowedIps<FakePeer*> u;
      insert_all(u, last_wins);
      check_all(u, kOverlappingExpect);
      CHECK(u.size() == t.size());
      CHECK(u.node_count() == t.node_count());
    }
  }

  SECTION("clear empties both families") {
    t.clear();
    CHECK(t.size() == 0);
    CHECK(t.node_count() == 0);
    CHECK(t.lookup(address("198.18.128.1")) == nullptr);
    CHECK(t.lookup(address("fd00:18::1")) == nullptr);
  }
}

TEST_CASE("allowed_ips: /0 routes catch every address of their family only", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("0.0.0.0/0"), &a);
  CHECK(t.lookup(address("0.0.0.0")) == &a);
  CHECK(t.lookup(address("1.2.3.4")) == &a);
  CHECK(t.lookup(address("255.255.255.255")) == &a);
  CHECK(t.lookup(address("::")) == nullptr);
  CHECK(t.lookup(address("2001:db8::1")) == nullptr);

  t.insert(prefix("::/0"), &b);
  CHECK(t.lookup(address("::")) == &b);
  CHECK(t.lookup(address("ffff::")) == &b);
  CHECK(t.lookup(address("1.2.3.4")) == &a);

  t.insert(prefix("1.2.3.4/32"), &c);
  CHECK(t.lookup(address("1.2.3.4")) == &c);
  CHECK(t.lookup(address("1.2.3.5")) == &a);

  CHECK(t.remove(prefix("0.0.0.0/0"), &a));
  CHECK(t.lookup(address("1.2.3.4")) == &c);
  CHECK(t.lookup(address("1.2.3.5")) == nullptr);
  CHECK(t.lookup(address("::")) == &b);
  CHECK(t.node_count() == 2);
}

TEST_CASE("allowed_ips: host routes match exactly one address", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("198.18.0.1"), &a);  // bare address = /32
  t.insert(prefix("198.18.0.2/32"), &b);
  t.insert(prefix("fd00::1"), &c);  // /128
  t.insert(prefix("fd00::2/128"), &d);
  CHECK(t.lookup(address("198.18.0.1")) == &a);
  CHECK(t.lookup(address("198.18.0.2")) == &b);
  CHECK(t.lookup(address("198.18.0.3")) == nullptr);
  CHECK(t.lookup(address("198.18.0.0")) == nullptr);
  CHECK(t.lookup(address("fd00::1")) == &c);
  CHECK(t.lookup(address("fd00::2")) == &d);
  CHECK(t.lookup(address("fd00::3")) == nullptr);
  CHECK(t.lookup(address("fd00::1:1")) == nullptr);
  CHECK(t.lookup(address("7d00::1")) == nullptr);  // differs in the first bit only
  CHECK(t.lookup(address("fd00::")) == nullptr);

  SECTION("the raw-bytes lookup agrees") {
    const uint8_t v4[4] = {198, 18, 0, 2};
    uint8_t v6[16] = {0xfd, 0};
    v6[15] = 1;
    CHECK(t.lookup(v4, 4) == &b);
    CHECK(t.lookup(v6, 6) == &c);
    CHECK(t.lookup(v6, 0) == nullptr);
    CHECK(t.lookup(v6, 5) == nullptr);
  }
}

TEST_CASE("allowed_ips: re-inserting a prefix replaces its owner", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("198.19.0.0/17"), &a);
  t.insert(prefix("198.19.1.0/24"), &a);
  t.insert(prefix("198.19.77.1/17"), &b);  // same /17 after masking
  CHECK(t.size() == 2);
  CHECK(t.lookup(address("198.19.2.1")) == &b);
  CHECK(t.lookup(address("198.19.1.1")) == &a);
  CHECK(prefixes_of(t, &a) == std::vector<std::string>{"198.19.1.0/24"});
  CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.19.0.0/17"});
  // The old owner no longer owns it, so it cannot remove it.
  CHECK_FALSE(t.remove(prefix("198.19.0.0/17"), &a));
  CHECK(t.remove(prefix("198.19.0.0/17"), &b));
  CHECK(t.lookup(address("198.19.2.1")) == nullptr);
}

TEST_CASE("allowed_ips: host bits are cleared on insert and remove", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("198.18.130.3/15"), &a);
  t.insert(prefix("fd00:1:ffff:3:4:5:6:7/33"), &a);
  CHECK(prefixes_of(t, &a) == std::vector<std::string>{"198.18.0.0/15", "fd00:1:8000::/33"});
  CHECK(t.lookup(address("198.19.200.1")) == &a);
  CHECK(t.lookup(address("fd00:1:8000::")) == &a);
  CHECK(t.lookup(address("fd00:1:7fff:ffff::")) == nullptr);
  CHECK(t.remove(prefix("198.18.99.99/15"), &a));
  CHECK(t.remove(prefix("fd00:1:c234::/33"), &a));
  CHECK(t.size() == 0);
  CHECK(t.node_count() == 0);
  CHECK(t.check());
}

TEST_CASE("allowed_ips: remove takes out one prefix, only for its owner", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  insert_all(t, kOverlapping);
  size_t before = t.size();

  CHECK_FALSE(t.remove(prefix("198.19.4.0/24"), &b));  // owned by a
  CHECK_FALSE(t.remove(prefix("198.19.4.0/25"), &a));  // not present
  CHECK_FALSE(t.remove(prefix("198.19.4.0/23"), &a));  // not present
  CHECK_FALSE(t.remove(prefix("198.19.4.0/24"), nullptr));
  CHECK_FALSE(t.remove(prefix("::/0"), &e));  // taken over by f
  CHECK(t.size() == before);
  check_all(t, kOverlappingExpect);

  CHECK(t.remove(prefix("198.19.4.0/24"), &a));
  CHECK_FALSE(t.remove(prefix("198.19.4.0/24"), &a));  // already gone
  CHECK(t.size() == before - 1);
  CHECK(t.lookup(address("198.19.4.20")) == &c);  // falls back to the /17
  CHECK(t.lookup(address("198.19.4.4")) == &b);   // the /32 inside it stays
  CHECK(t.lookup(address("198.18.0.52")) == &a);     // a's other prefixes stay

  CHECK(t.remove(prefix("fd00:18:4004:800:dead:beef:dead:beef/128"), &a));
  CHECK(t.lookup(address("fd00:18:4004:800:dead:beef:dead:beef")) == &b);
  CHECK(t.remove(prefix("::/0"), &f));
  CHECK(t.lookup(address("fd00:19:0:6b01::")) == nullptr);
  CHECK(t.lookup(address("255.255.255.255")) == &e);
  CHECK(t.node_count() <= 2 * t.size());
}

TEST_CASE("allowed_ips: remove_by_peer drops all of a peer's prefixes", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  insert_all(t, kOverlapping);
  CHECK(prefixes_of(t, &a) ==
        std::vector<std::string>{"198.18.0.0/25", "198.18.128.0/30", "198.19.4.0/24",
                                 "fd00:18:4004:800:dead:beef:dead:beef/128"});
  size_t before = t.size();

  t.remove_by_peer(&a);
  CHECK(prefixes_of(t, &a).empty());
  CHECK(t.size() == before - 4);
  CHECK(t.lookup(address("198.19.4.20")) == &c);
  CHECK(t.lookup(address("198.18.0.52")) == &e);
  CHECK(t.lookup(address("198.18.128.1")) == &e);
  CHECK(t.lookup(address("198.18.128.5")) == &b);
  CHECK(t.lookup(address("fd00:18:4004:800:dead:beef:dead:beef")) == &b);
  CHECK(t.node_count() <= 2 * t.size());

  t.remove_by_peer(&a);  // nothing left: no-op
  CHECK(t.size() == before - 4);

  for (FakePeer* p : {&b, &c, &d, &e, &f, &g, &h}) t.remove_by_peer(p);
  CHECK(t.size() == 0);
  CHECK(t.node_count() == 0);
  CHECK(t.check());
}

TEST_CASE("allowed_ips: IPv4 and IPv6 never mix", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  // The same leading bytes in both families.
  t.insert(prefix("198.18.0.0/15"), &a);
  t.insert(prefix("c612::/15"), &b);
  t.insert(prefix("::ffff:0:0/96"), &c);  // IPv4-mapped IPv6 stays IPv6
  CHECK(t.lookup(address("198.18.130.3")) == &a);
  CHECK(t.lookup(address("c612:8203::")) == &b);
  CHECK(t.lookup(address("::ffff:198.18.130.3")) == &c);
  CHECK(t.lookup(address("127.0.0.1")) == nullptr);

  // Removing a prefix of one family leaves the other alone, even with equal bytes.
  IpPrefix v6_twin = prefix("198.18.0.0/15");
  v6_twin.addr.family = 6;
  CHECK_FALSE(t.remove(v6_twin, &a));
  CHECK(t.remove(prefix("198.18.0.0/15"), &a));
  CHECK(t.lookup(address("c612:8203::")) == &b);
  CHECK(t.lookup(address("198.18.130.3")) == nullptr);
}

TEST_CASE("allowed_ips: invalid input is ignored", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(IpPrefix{}, &a);  // family 0
  IpPrefix too_long = prefix("198.18.0.0/15");
  too_long.bits = 33;
  t.insert(too_long, &a);
  IpPrefix v6_too_long = prefix("fd00::/8");
  v6_too_long.bits = 129;
  t.insert(v6_too_long, &a);
  t.insert(prefix("198.18.0.0/15"), nullptr);  // "no peer" is never stored
  CHECK(t.size() == 0);
  CHECK(t.node_count() == 0);
  CHECK_FALSE(t.remove(too_long, &a));
  t.remove_by_peer(nullptr);
  CHECK(t.lookup(address("198.18.0.1")) == nullptr);
}

TEST_CASE("allowed_ips: for_each lists a peer's prefixes in address order", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("fd00::/64"), &a);
  t.insert(prefix("198.19.0.0/17"), &a);
  t.insert(prefix("198.18.0.0/15"), &a);
  t.insert(prefix("198.18.128.0/17"), &b);
  t.insert(prefix("0.0.0.0/0"), &a);
  t.insert(prefix("198.18.128.0/24"), &a);
  CHECK(prefixes_of(t, &a) == std::vector<std::string>{"0.0.0.0/0", "198.18.0.0/15",
                                                       "198.18.128.0/24", "198.19.0.0/17",
                                                       "fd00::/64"});
  CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.18.128.0/17"});
  CHECK(prefixes_of(t, &c).empty());
}

// --- the per-peer lists (each peer's nodes, so listing and removal cost what it owns) ---

TEST_CASE("allowed_ips: per-peer lists follow insert, takeover and remove", "[allowed_ips]") {
  AllowedIps<FakePeer*> t;
  t.insert(prefix("198.18.0.0/15"), &a);
  t.insert(prefix("198.18.128.0/17"), &a);
  t.insert(prefix("fd00:19::1/128"), &a);
  t.insert(prefix("198.18.128.0/24"), &b);
  REQUIRE(t.check());
  CHECK(prefixes_of(t, &a) == std::vector<std::string>{"198.18.0.0/15", "198.18.128.0/17", "fd00:19::1/128"});
  CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.18.128.0/24"});

  SECTION("re-inserting for the same peer changes nothing") {
    t.insert(prefix("198.18.128.0/17"), &a);
    CHECK(t.check());
    CHECK(t.size() == 4);
    CHECK(prefixes_of(t, &a).size() == 3);
  }
  SECTION("a takeover moves the prefix from one list to the other") {
    t.insert(prefix("198.18.128.0/17"), &b);
    REQUIRE(t.check());
    CHECK(prefixes_of(t, &a) == std::vector<std::string>{"198.18.0.0/15", "fd00:19::1/128"});
    CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.18.128.0/17", "198.18.128.0/24"});
    t.remove_by_peer(&a);  // must not take the prefix a no longer owns
    CHECK(t.lookup(address("198.18.133.5")) == &b);
    CHECK(t.lookup(address("198.19.0.0")) == nullptr);
    CHECK(t.check());
  }
  SECTION("taking over a peer's only prefix empties its list") {
    t.insert(prefix("198.18.128.0/24"), &a);
    REQUIRE(t.check());
    CHECK(prefixes_of(t, &b).empty());
    t.remove_by_peer(&b);
    CHECK(t.size() == 4);
    CHECK(t.lookup(address("198.18.128.9")) == &a);
  }
  SECTION("removing the head, the middle and the tail of a list") {
    for (const char* p : {"fd00:19::1/128", "198.18.0.0/15", "198.18.128.0/17"}) {
      INFO(p);
      REQUIRE(t.remove(prefix(p), &a));
      REQUIRE(t.check());
    }
    CHECK(prefixes_of(t, &a).empty());
    CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.18.128.0/24"});
    CHECK(t.node_count() == 1);
  }
  SECTION("a wrong owner removes nothing") {
    CHECK_FALSE(t.remove(prefix("198.18.128.0/24"), &a));
    CHECK_FALSE(t.remove(prefix("198.18.128.0/23"), &b));  // not present at all
    CHECK(t.check());
    CHECK(t.size() == 4);
  }
}

TEST_CASE("allowed_ips: removing nodes keeps the other peers' lists right", "[allowed_ips]") {
  // Removal rebuilds the trie around the removed node: a valueless parent left with one
  // child is replaced by that child, which moves up a level; the moved node must stay on
  // its owner's list and keep a correct parent.
  //
  //   198.18.0.0/15 (a) ─┬─ branch 198.18.0.0/16 ─┬─ 198.18.0.0/17 (b)
  //                      │                          └─ 198.18.128.0/17 (c) ── 198.18.129.0/24 (a)
  //                      └─ 198.19.128.0/17 (b)
  AllowedIps<FakePeer*> t;
  insert_all(t, {{"198.18.0.0/15", &a}, {"198.18.0.0/17", &b}, {"198.18.128.0/17", &c},
                 {"198.18.129.0/24", &a}, {"198.19.128.0/17", &b}});
  REQUIRE(t.check());
  REQUIRE(t.node_count() == 6);

  t.remove(prefix("198.18.0.0/17"), &b);  // the branch goes, 198.18.128.0/17 moves up under the /15
  REQUIRE(t.check());
  CHECK(t.node_count() == 4);
  CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.19.128.0/17"});
  CHECK(prefixes_of(t, &c) == std::vector<std::string>{"198.18.128.0/17"});

  t.remove_by_peer(&c);  // a valued node with one child becomes a branch-free chain
  REQUIRE(t.check());
  CHECK(t.node_count() == 3);
  CHECK(t.lookup(address("198.18.129.1")) == &a);
  CHECK(t.lookup(address("198.18.130.1")) == &a);  // the /15

  t.remove_by_peer(&a);  // the root and a leaf: only b's 198.19.128.0/17 is left, as the root
  REQUIRE(t.check());
  CHECK(t.node_count() == 1);
  CHECK(prefixes_of(t, &b) == std::vector<std::string>{"198.19.128.0/17"});
  CHECK(t.lookup(address("198.19.200.1")) == &b);
  CHECK(t.lookup(address("198.18.129.1")) == nullptr);

  // Re-insert after collapse: lists and parents still consistent.
  insert_all(t, {{"198.18.0.0/15", &c}, {"198.19.255.0/24", &a}});
  REQUIRE(t.check());
  t.remove_by_peer(&b);
  REQUIRE(t.check());
  CHECK(prefixes_of(t, &a) == std::vector<std::string>{"198.19.255.0/24"});
  CHECK(t.lookup(address("198.19.255.1")) == &a);
  CHECK(t.lookup(address("198.19.200.1")) == &c);
}

TEST_CASE("allowed_ips: 65,536 peers with one /128 each, replaced one by one", "[allowed_ips]") {
  // wg setconf at scale: every peer's allowed IPs replaced (remove_by_peer, insert).
  constexpr int kPeers = 65536;
  AllowedIps<int> t;
  std::mt19937_64 rng(19);
  auto host = [&] {
    IpPrefix p = prefix("fd00:19::/128");
    uint64_t r = rng();
    for (int k = 0; k < 8; ++k) p.addr.bytes[8 + k] = static_cast<uint8_t>(r >> (8 * k));
    return p;
  };
  std::vector<IpPrefix> hosts;
  for (int i = 0; i < kPeers; ++i) hosts.push_back(host());
  for (int i = 0; i < kPeers; ++i) t.insert(hosts[i], i + 1);
  for (int i = 0; i < kPeers; ++i) {
    t.remove_by_peer(i + 1);
    t.insert(hosts[i], i + 1);
  }
  REQUIRE(t.check());
  CHECK(t.size() == static_cast<size_t>(kPeers));
  for (int i : {0, 1, kPeers / 2, kPeers - 1}) {
    CHECK(t.lookup(hosts[i].addr) == i + 1);
    CHECK(prefixes_of(t, i + 1) == std::vector<std::string>{hosts[i].to_string()});
  }
  for (int i = 0; i < kPeers; i += 2) t.remove_by_peer(i + 1);
  REQUIRE(t.check());
  CHECK(t.size() == static_cast<size_t>(kPeers / 2));
  CHECK(t.node_count() <= 2 * t.size());
  CHECK(t.lookup(hosts[0].addr) == 0);
  CHECK(t.lookup(hosts[1].addr) == 2);
}

TEST_CASE("allowed_ips: removing everything leaves no nodes", "[allowed_ips]") {
  std::mt19937_64 rng(42);
  std::vector<IpPrefix> prefixes;
  for (int i = 0; i < 2000; ++i) {
    IpPrefix p;
    p.addr.family = i % 2 ? 6 : 4;
    for (size_t k = 0; k < p.addr.size(); ++k) p.addr.bytes[k] = static_cast<uint8_t>(rng());
    // Cluster half of them under a few short prefixes so that branches nest.
    if (i % 4 < 2) p.addr.bytes[0] = p.addr.bytes[1] = 0x20;
    p.bits = static_cast<uint8_t>(rng() % (p.addr.size() * 8 + 1));
    prefixes.push_back(p.masked());
  }
  std::sort(prefixes.begin(), prefixes.end(), [](const IpPrefix& x, const IpPrefix& y) {
    return std::tie(x.addr.family, x.addr.bytes, x.bits) <
           std::tie(y.addr.family, y.addr.bytes, y.bits);
  });
  prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());

  AllowedIps<FakePeer*> t;
  FakePeer* owners[] = {&a, &b, &c};
  std::shuffle(prefixes.begin(), prefixes.end(), rng);
  for (size_t i = 0; i < prefixes.size(); ++i) t.insert(prefixes[i], owners[i % 3]);
  REQUIRE(t.size() == prefixes.size());
  CHECK(t.node_count() <= 2 * t.size());

  SECTION("one prefix at a time") {
    // Remove in a different order than the insertions.
    std::vector<size_t> order(prefixes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    size_t left = prefixes.size();
    for (size_t i : order) {
      REQUIRE(t.remove(prefixes[i], owners[i % 3]));
      --left;
      REQUIRE(t.size() == left);
      REQUIRE(t.node_count() <= 2 * left);
    }
    CHECK(t.node_count() == 0);
  }

  SECTION("by peer") {
    t.remove_by_peer(&b);
    CHECK(t.node_count() <= 2 * t.size());
    t.remove_by_peer(&a);
    t.remove_by_peer(&c);
    CHECK(t.size() == 0);
    CHECK(t.node_count() == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Randomized comparison against a naive table.

namespace {

// The reference: a flat list, scanned in full for every lookup, matched byte by byte.
// It shares no code with the trie beyond IpPrefix::masked().
class NaiveTable {
public:
  struct Entry {
    IpPrefix prefix;  // masked
    int peer;
  };

  void insert(const IpPrefix& p, int peer) {
    IpPrefix m = p.masked();
    for (auto& entry : entries_) {
      if (entry.prefix == m) {
        entry.peer = peer;
        return;
      }
    }
    entries_.push_back({m, peer});
  }

  bool remove(const IpPrefix& p, int peer) {
    IpPrefix m = p.masked();
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].prefix == m && entries_[i].peer == peer) {
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    }
    return false;
  }

  void remove_by_peer(int peer) {
    std::erase_if(entries_, [&](const Entry& entry) { return entry.peer == peer; });
  }

  int lookup(const IpAddress& ip) const {
    int best = 0;
    int best_bits = -1;
    for (const auto& entry : entries_) {
      const IpPrefix& p = entry.prefix;
      if (p.addr.family == ip.family && p.bits > best_bits && matches(p, ip)) {
        best = entry.peer;
        best_bits = p.bits;
      }
    }
    return best;
  }

  std::vector<std::string> prefixes_of(int peer) const {
    std::vector<std::string> out;
    for (const auto& entry : entries_)
      if (entry.peer == peer) out.push_back(entry.prefix.to_string());
    std::sort(out.begin(), out.end());
    return out;
  }

  const std::vector<Entry>& entries() const { return entries_; }

private:
  static bool matches(const IpPrefix& p, const IpAddress& ip) {
    size_t i = 0;
    for (; i < p.bits / 8u; ++i)
      if (ip.bytes[i] != p.addr.bytes[i]) return false;
    unsigned rest = p.bits % 8u;
    if (rest == 0) return true;
    auto mask = static_cast<uint8_t>(0xff00u >> rest);
    return (ip.bytes[i] & mask) == p.addr.bytes[i];
  }

  std::vector<Entry> entries_;
};

class Fuzzer {
public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  uint64_t next() { return rng_(); }
  size_t below(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool coin(unsigned one_in) { return below(one_in) == 0; }

  IpAddress random_address(uint8_t family) {
    IpAddress ip;
    ip.family = family;
    for (size_t k = 0; k < ip.size(); ++k) ip.bytes[k] = static_cast<uint8_t>(rng_());
    return ip;
  }

  // Keeps the first `keep` bits of `ip` and randomizes the rest.
  IpAddress randomize_after(IpAddress ip, unsigned keep) {
    IpAddress r = random_address(ip.family);
    for (unsigned bit = keep; bit < ip.size() * 8; ++bit) {
      auto m = static_cast<uint8_t>(0x80u >> (bit % 8));
      ip.bytes[bit / 8] = static_cast<uint8_t>((ip.bytes[bit / 8] & ~m) | (r.bytes[bit / 8] & m));
    }
    return ip;
  }

  IpAddress flip_bit(IpAddress ip, unsigned bit) {
    ip.bytes[bit / 8] ^= static_cast<uint8_t>(0x80u >> (bit % 8));
    return ip;
  }

  // Random prefixes, half of them grown from an existing one so that prefixes nest and
  // share long paths, with some /0 and host routes.
  IpPrefix random_prefix(uint8_t family, const NaiveTable& ref) {
    unsigned width = family == 4 ? 32 : 128;
    IpPrefix p;
    const auto& es = ref.entries();
    if (!es.empty() && coin(2)) {
      const auto& base = es[below(es.size())].prefix;
      if (base.addr.family == family) {
        p.addr = randomize_after(base.addr, static_cast<unsigned>(below(width + 1)));
        p.bits = static_cast<uint8_t>(below(width + 1));
        return p;
      }
    }
    p.addr = random_address(family);
    if (coin(50)) p.bits = 0;
    else if (coin(10)) p.bits = static_cast<uint8_t>(width);
    else p.bits = static_cast<uint8_t>(1 + below(width));
    return p;
  }

  // Query addresses: a third uniformly random, the rest inside (or one bit off) a prefix in
  // the table, so that deep nodes get exercised.
  IpAddress random_query(uint8_t family, const NaiveTable& ref) {
    const auto& es = ref.entries();
    if (es.empty() || coin(3)) return random_address(family);
    const auto& base = es[below(es.size())].prefix;
    if (base.addr.family != family) return random_address(family);
    IpAddress ip = randomize_after(base.addr, base.bits);
    if (base.bits > 0 && coin(4)) ip = flip_bit(ip, static_cast<unsigned>(below(base.bits)));
    return ip;
  }

private:
  std::mt19937_64 rng_;
};

uint64_t fuzz_seed() {
  if (const char* s = std::getenv("WGNET_ALLOWED_IPS_SEED")) return std::strtoull(s, nullptr, 0);
  return 0x77676e6574;  // fixed by default; set WGNET_ALLOWED_IPS_SEED to explore
}

}  // namespace

TEST_CASE("allowed_ips: randomized against a naive table", "[allowed_ips]") {
  constexpr int kPeers = 1000;
  constexpr int kInitialRoutesPerFamily = 1200;
  constexpr int kRounds = 10;
  constexpr int kLookupsPerRound = 100'000;  // both families: 10^6 in all
  constexpr int kRemovalsPerRound = 150;
  constexpr int kPeersRemovedPerRound = 10;
  constexpr int kInsertsPerRound = 250;

  const uint64_t seed = fuzz_seed();
  std::ostringstream seed_hex;
  seed_hex << "0x" << std::hex << seed;
  INFO("seed " << seed_hex.str() << " (rerun with WGNET_ALLOWED_IPS_SEED=" << seed_hex.str()
               << ")");
  Fuzzer fz(seed);
  AllowedIps<int> t;
  NaiveTable ref;

  auto insert_both = [&](const IpPrefix& p, int peer) {
    t.insert(p, peer);
    ref.insert(p, peer);
  };
  auto random_peer = [&] { return 1 + static_cast<int>(fz.below(kPeers)); };

  for (int i = 0; i < kInitialRoutesPerFamily; ++i) {
    // Round-robin owners first so that every one of the kPeers peers holds routes.
    insert_both(fz.random_prefix(4, ref), i % kPeers + 1);
    insert_both(fz.random_prefix(6, ref), random_peer());
  }

  size_t mismatches = 0;
  auto compare = [&](const IpAddress& ip, int got) {
    int want = ref.lookup(ip);
    if (got == want) return;
    if (++mismatches <= 10)
      FAIL_CHECK("lookup " << ip.to_string() << ": trie says peer " << got << ", naive says peer "
                           << want);
  };

  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    REQUIRE(t.size() == ref.entries().size());
    REQUIRE(t.node_count() <= 2 * t.size());
    REQUIRE(t.check());  // parents, branch nodes and every peer's list

    for (int i = 0; i < kLookupsPerRound; i += 2) {
      IpAddress v4 = fz.random_query(4, ref);
      IpAddress v6 = fz.random_query(6, ref);
      compare(v4, t.lookup(v4));
      compare(v6, t.lookup(v6.bytes.data(), 6));
    }
    REQUIRE(mismatches == 0);

    for (int peer = 1; peer <= kPeers; ++peer) {
      std::vector<std::string> got;
      t.for_each(peer, [&](const IpPrefix& p) { got.push_back(p.to_string()); });
      std::sort(got.begin(), got.end());
      REQUIRE(got == ref.prefixes_of(peer));
    }

    // Mutate: single removals (with a wrong owner first), removals of absent prefixes,
    // whole peers, fresh prefixes and takeovers of existing ones.
    for (int i = 0; i < kRemovalsPerRound && !ref.entries().empty(); ++i) {
      auto victim = ref.entries()[fz.below(ref.entries().size())];
      IpPrefix p = fz.coin(2) ? victim.prefix
                              : IpPrefix{fz.randomize_after(victim.prefix.addr, victim.prefix.bits),
                                         victim.prefix.bits};  // host bits set
      int wrong = victim.peer % kPeers + 1;
      REQUIRE_FALSE(t.remove(p, wrong));
      REQUIRE(t.remove(p, victim.peer));
      REQUIRE(ref.remove(p, victim.peer));
      IpPrefix absent = fz.random_prefix(fz.coin(2) ? 4 : 6, ref);
      REQUIRE(t.remove(absent, victim.peer) == ref.remove(absent, victim.peer));
    }
    for (int i = 0; i < kPeersRemovedPerRound; ++i) {
      int peer = random_peer();
      t.remove_by_peer(peer);
      ref.remove_by_peer(peer);
    }
    for (int i = 0; i < kInsertsPerRound; ++i) {
      if (fz.coin(5) && !ref.entries().empty())
        insert_both(ref.entries()[fz.below(ref.entries().size())].prefix, random_peer());
      else
        insert_both(fz.random_prefix(fz.coin(2) ? 4 : 6, ref), random_peer());
    }
  }

  // Drain: every prefix removed by its owner leaves an empty trie behind.
  std::vector<NaiveTable::Entry> rest = ref.entries();
  for (const auto& entry : rest) REQUIRE(t.remove(entry.prefix, entry.peer));
  CHECK(t.size() == 0);
  CHECK(t.node_count() == 0);
  CHECK(t.check());
}

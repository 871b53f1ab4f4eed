// The UAPI codec (wg/uapi.hpp) on a wg::Device in memory: get -> set -> get is a fixed
// point, malformed lines get errno replies, a dump in pieces stops when the client does,
// update_only. The server on a Unix socket is uapi_server_test.cpp.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "bind/memory.hpp"
#include "wg/device.hpp"
#include "wg/uapi.hpp"
#include "../support/device_pair.hpp"

using namespace wg;

namespace {

using Node = wgtest::DeviceNode;
using Pair = wgtest::DevicePair;

}  // namespace

TEST_CASE("device: UAPI get → set → get is a fixed point", "[device][uapi]") {
  Pair pr;
  std::string err;
  REQUIRE(uapi::set(pr.a.dev,
                    "fwmark=51\npublic_key=" + pr.b.pub().to_hex() +
                        "\npersistent_keepalive_interval=25\nallowed_ip=fd00:19::2/128\n"
                        "preshared_key=" + std::string(64, 'a') + "\n",
                    &err) == 0);
  std::string first = uapi::get(pr.a.dev);
  // Keep only settable keys (stats lines are read-only), as `wg showconf` does.
  auto settable = [](const std::string& s) {
    std::string out;
    size_t pos = 0;
    while (pos < s.size()) {
      auto nl = s.find('\n', pos);
      std::string line = s.substr(pos, nl - pos);
      pos = nl + 1;
      auto key = line.substr(0, line.find('='));
      if (key != "last_handshake_time_sec" && key != "last_handshake_time_nsec" && key != "tx_bytes" &&
          key != "rx_bytes" && key != "listen_port")
        out += line + "\n";
    }
    return out;
  };
  conn::MemoryNetwork net;
  Node c(net);
  REQUIRE(uapi::set(c.dev, settable(first), &err) == 0);
  CHECK(settable(uapi::get(c.dev)) == settable(first));
  CHECK(first.find("fwmark=51\n") != std::string::npos);
  CHECK(first.find("allowed_ip=fd00:19::2/128\n") != std::string::npos);
  CHECK(first.find("allowed_ip=198.19.0.2/32\n") != std::string::npos);
  CHECK(first.find("persistent_keepalive_interval=25\n") != std::string::npos);
}

TEST_CASE("device: malformed UAPI lines get errno replies and change nothing after them", "[device][uapi]") {
  conn::MemoryNetwork net;
  Node n(net);
  std::string before = uapi::get(n.dev);
  struct Case {
    const char* request;
    int code;
  } cases[] = {
      {"garbage\n", uapi::kErrorProtocol},
      {"private_key=zz\n", uapi::kErrorInvalid},
      {"private_key=abcd\n", uapi::kErrorInvalid},
      {"listen_port=65536\n", uapi::kErrorInvalid},
      {"listen_port=-1\n", uapi::kErrorInvalid},
      {"fwmark=x\n", uapi::kErrorInvalid},
      {"replace_peers=yes\n", uapi::kErrorInvalid},
      {"bogus_key=1\n", uapi::kErrorInvalid},
      {"public_key=123\n", uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nendpoint=nohost\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nallowed_ip=300.1.1.1/32\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nallowed_ip=198.19.0.0/33\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\npersistent_keepalive_interval=70000\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nprotocol_version=2\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nremove=maybe\n",
       uapi::kErrorInvalid},
      {"public_key=0101010101010101010101010101010101010101010101010101010101010101\nunknown=1\n",
       uapi::kErrorInvalid},
  };
  for (auto& c : cases) {
    INFO(c.request);
    CHECK(uapi::set(n.dev, c.request) == c.code);
    // A peer created by an earlier line of a failed request stays (as in wireguard-go);
    // remove it so every case starts from the same state.
    n.dev.remove_all_peers();
    CHECK(uapi::get(n.dev) == before);
  }
}

TEST_CASE("device: a UAPI dump stops at the first piece the client does not take", "[device][uapi]") {
  // 4,000 peers make a dump of several 64 KiB pieces; a sink that fails (the client hung
  // up) must end the formatting at once, and a sink that takes everything gets what the
  // one-string form returns.
  conn::MemoryNetwork net;
  Node n(net);
  std::string request;
  for (int i = 0; i < 4000; ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "public_key=%04x%059d1\nallowed_ip=fd00:19::%x/128\n", i, 0, i + 16);
    request += line;
  }
  REQUIRE(uapi::set(n.dev, request) == 0);
  std::string whole = uapi::get(n.dev);
  REQUIRE(whole.size() > 3 * 64 * 1024);

  int calls = 0;
  CHECK_FALSE(uapi::get(n.dev, [&](std::string_view) { return ++calls, false; }));
  CHECK(calls == 1);

  std::string pieces;
  calls = 0;
  CHECK(uapi::get(n.dev, [&](std::string_view s) {
    pieces.append(s);
    return ++calls, true;
  }));
  CHECK(calls > 3);
  CHECK(pieces == whole);
}

TEST_CASE("device: UAPI update_only twice for an unknown peer creates nothing and applies none of its lines",
          "[device][uapi]") {
  conn::MemoryNetwork net;
  Node n(net);
  // The input uapi_fuzz found: the second update_only met the peer the first had removed.
  const std::string key = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
  CHECK(uapi::set(n.dev, "public_key=" + key + "\nupdate_only=true\nallowed_ip=198.19.0.2/32\nupdate_only=true\n"
                         "allowed_ip=198.19.0.2/32\nremove=true\n") == 0);
  CHECK(n.dev.peers().empty());
  CHECK_FALSE(n.dev.routable(*IpAddress::parse("198.19.0.2")));
  // An existing peer is updated as usual.
  auto p = n.dev.add_peer(*PublicKey::from_hex(key));
  REQUIRE(p);
  CHECK(uapi::set(n.dev, "public_key=" + key + "\nupdate_only=true\nupdate_only=true\nallowed_ip=198.19.0.2/32\n") == 0);
  CHECK(n.dev.routable(*IpAddress::parse("198.19.0.2")));
}

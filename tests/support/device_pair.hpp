// Two wg::Devices over the in-memory Bind and TUN, configured as each other's peer:
// a (198.19.0.1) knows b's endpoint, b (198.19.0.2) learns a's from the handshake.
// Shared by the tests of a Device in memory (tests/unit/device_test.cpp,
// device_clock_test.cpp, key_zeroing_test.cpp, uapi_test.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"

namespace wgtest {

// An IPv4 packet src→dst whose payload starts with a 64-bit sequence number.
inline std::vector<uint8_t> ip4_packet(uint8_t src_last, uint8_t dst_last, uint64_t seq, size_t payload = 100) {
  std::vector<uint8_t> p(20 + payload, 0);
  p[0] = 0x45;
  p[2] = static_cast<uint8_t>(p.size() >> 8);
  p[3] = static_cast<uint8_t>(p.size());
  p[8] = 64;
  p[9] = 17;
  uint8_t src[4] = {198, 19, 0, src_last}, dst[4] = {198, 19, 0, dst_last};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  std::memcpy(&p[20], &seq, 8);
  for (size_t i = 28; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i + seq);
  return p;
}

inline uint64_t seq_of(const std::vector<uint8_t>& p) {
  uint64_t s = 0;
  if (p.size() >= 28) std::memcpy(&s, &p[20], 8);
  return s;
}

struct DeviceNode {
  explicit DeviceNode(conn::MemoryNetwork& net, wg::DeviceOptions options = {}) : bind(net), dev(tun, bind, options) {}
  tun::MemoryDevice tun;
  conn::MemoryBind bind;
  wg::Device dev;
  wg::PrivateKey key = wg::crypto::generate_private_key();
  wg::PublicKey pub() const { return wg::crypto::public_key(key); }
};

struct DevicePair {
  conn::MemoryNetwork net;
  DeviceNode a, b;
  wg::PeerPtr a_to_b, b_to_a;

  explicit DevicePair(wg::DeviceOptions options = {}) : a(net, options), b(net, options) {
    a.dev.set_private_key(a.key);
    b.dev.set_private_key(b.key);
    REQUIRE(!a.dev.up());
    REQUIRE(!b.dev.up());
    a_to_b = a.dev.add_peer(b.pub());
    b_to_a = b.dev.add_peer(a.pub());
    a.dev.add_allowed_ip(*a_to_b, *wg::IpPrefix::parse("198.19.0.2/32"));
    b.dev.add_allowed_ip(*b_to_a, *wg::IpPrefix::parse("198.19.0.1/32"));
    a.dev.set_endpoint(*a_to_b, conn::MemoryBind::endpoint_for(b.dev.listen_port()));
  }
};

}  // namespace wgtest

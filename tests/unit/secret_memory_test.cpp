// Key-holding objects live in memory kept out of core dumps: the mapping of a peer or a
// keypair (and the device identity, allocated alike) carries VmFlags "dd" in
// /proc/self/smaps, and a freed block is wiped before it is reused.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "wg/base/secret_memory.hpp"
#include "wg/device.hpp"
#include "../support/device_pair.hpp"
#include "../support/peer_access.hpp"

using namespace wg;

namespace {

const PeerAccess kAccess = PeerTestAccess::key();

// The VmFlags line of the mapping that holds `p`, or "" if none does.
std::string vm_flags_of(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long b = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &b, &e) == 2) {  // a mapping's first line
      inside = at >= b && at < e;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return {};
}

bool not_dumped(const void* p) {
  const std::string flags = vm_flags_of(p);
  INFO(flags);
  return flags.find(" dd") != std::string::npos;
}

}  // namespace

TEST_CASE("secret memory: peers and keypairs are kept out of core dumps", "[keypair][device]") {
  wgtest::DevicePair pair;
  pair.a.tun.inject(wgtest::ip4_packet(1, 2, 0));
  REQUIRE(pair.b.tun.take(std::chrono::seconds(5)));
  CHECK(not_dumped(pair.a_to_b.get()));
  const KeypairPtr kp = pair.a_to_b->current_keypair(kAccess);
  REQUIRE(kp);
  CHECK(not_dumped(kp.get()));
  CHECK(secret_memory_stats().mapped > 0);
  // A plain heap object is dumped as usual: the check tells the two apart.
  auto plain = std::make_unique<uint64_t>(1);
  CHECK_FALSE(not_dumped(plain.get()));
}

TEST_CASE("secret memory: a freed block is wiped before it is reused", "[keypair]") {
  constexpr size_t kSize = 200;
  auto* p = static_cast<uint8_t*>(secret_allocate(kSize));
  std::memset(p, 0xa5, kSize);
  secret_deallocate(p, kSize);
  auto* q = static_cast<uint8_t*>(secret_allocate(kSize));
  CHECK(q == p);  // the same size takes the block just freed
  size_t nonzero = 0;
  for (size_t i = 0; i < kSize; ++i) nonzero += q[i] != 0;
  CHECK(nonzero == 0);
  secret_deallocate(q, kSize);
}

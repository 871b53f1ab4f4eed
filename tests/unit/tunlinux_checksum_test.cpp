// tunlinux's Internet checksum (tunlinux/checksum.hpp) against the naive RFC 1071
// reference of tests/support/packet_bytes.hpp: every length and alignment, the
// pseudo-header sums, and inputs long enough to cross the vector path's rounds.
#include <catch2/catch.hpp>

#include <netinet/in.h>

#include <cstdint>
#include <random>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "tunlinux/checksum.hpp"

namespace {

using wgtest::naive_checksum;
using Bytes = std::vector<uint8_t>;

}  // namespace

TEST_CASE("checksum: RFC 1071 example", "[tunlinux][checksum]") {
  // RFC 1071 section 3: the sum of 0001 f203 f4f5 f6f7 is ddf2.
  const uint8_t bytes[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  CHECK(tunlinux::checksum(bytes, sizeof bytes, 0) == 0xddf2);
  CHECK(tunlinux::checksum(bytes, 0, 0) == 0);
  CHECK(tunlinux::checksum(bytes, 0, 0x1ffff) == 0x0001);  // initial is folded too
}

TEST_CASE("checksum: matches the naive reference at every length and alignment", "[tunlinux][checksum]") {
  std::mt19937_64 rng(1071);
  std::vector<uint8_t> buf(2000 + 16);
  std::vector<uint8_t> ones(2000 + 16, 0xff);  // every carry path at once
  for (size_t len = 0; len <= 2000; ++len) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    const size_t align = rng() % 16;
    const uint32_t initial = len % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
    const uint8_t* p = buf.data() + align;
    INFO("len " << len << " align " << align << " initial " << initial);
    REQUIRE(tunlinux::checksum(p, len, initial) == naive_checksum(p, len, initial));
    REQUIRE(tunlinux::checksum(ones.data() + align, len, initial) ==
            naive_checksum(ones.data() + align, len, initial));
  }
}

TEST_CASE("checksum: pseudo-header sums for IPv4 and IPv6", "[tunlinux][checksum]") {
  std::mt19937 rng(768);
  for (int round = 0; round < 200; ++round) {
    const size_t alen = round % 2 ? 16 : 4;
    std::vector<uint8_t> src(alen), dst(alen);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (auto& b : dst) b = static_cast<uint8_t>(rng());
    const uint32_t l4 = alen == 4 ? rng() & 0xffff : rng();
    const uint8_t proto = round % 3 ? IPPROTO_UDP : IPPROTO_TCP;
    // RFC 768 / RFC 8200 section 8.1 layouts.
    std::vector<uint8_t> ph(src);
    ph.insert(ph.end(), dst.begin(), dst.end());
    if (alen == 4) {
      ph.insert(ph.end(), {0, proto, static_cast<uint8_t>(l4 >> 8), static_cast<uint8_t>(l4)});
    } else {
      ph.insert(ph.end(), {static_cast<uint8_t>(l4 >> 24), static_cast<uint8_t>(l4 >> 16),
                           static_cast<uint8_t>(l4 >> 8), static_cast<uint8_t>(l4), 0, 0, 0, proto});
    }
    REQUIRE(tunlinux::pseudo_header_checksum(proto, src, dst, l4) == naive_checksum(ph.data(), ph.size()));
  }
}

TEST_CASE("offload: checksum of inputs past the vector path's 1 MB rounds", "[offload][checksum]") {
  // All ones is the worst case for the lanes' carries; 3 MB + 37 bytes crosses rounds.
  for (uint8_t fill : {uint8_t{0xff}, uint8_t{0x5a}}) {
    Bytes big((3 << 20) + 37, fill);
    for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<uint8_t>(i);
    for (size_t skip : {0, 1, 3}) {
      INFO("fill " << int{fill} << " skip " << skip);
      CHECK(tunlinux::checksum(big.data() + skip, big.size() - skip, 0x1234) ==
            naive_checksum(big.data() + skip, big.size() - skip, 0x1234));
    }
  }
}

// The transport AEAD (OpenSSL) must equal libsodium's ChaCha20-Poly1305 byte for byte
// with WireGuard's nonce, and reject any tampering.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "wg/crypto.hpp"
#include "wg/transport_aead.hpp"

using namespace wg;

TEST_CASE("transport aead: equals libsodium for random keys, counters and sizes", "[transport_aead]") {
  std::mt19937_64 rng(42);
  for (size_t size : {0, 1, 15, 16, 17, 63, 64, 65, 1419, 1420, 1500, 9000, 65535}) {
    for (int round = 0; round < 4; ++round) {
      uint8_t key[32];
      for (auto& k : key) k = static_cast<uint8_t>(rng());
      uint64_t counter = round == 3 ? ~0ull - 8192 : rng();
      std::vector<uint8_t> pt(size);
      for (auto& b : pt) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> a(size + 16), b(size + 16);
      transport::seal(a.data(), key, counter, pt);
      crypto::aead_seal(b.data(), key, counter, pt, {});
      INFO("size " << size);
      REQUIRE(a == b);
      std::vector<uint8_t> out(size);
      REQUIRE(transport::open(out.data(), key, counter, a));
      CHECK(out == pt);
      // In place, as the pipeline does.
      std::vector<uint8_t> inplace = pt;
      inplace.resize(size + 16);
      transport::seal(inplace.data(), key, counter, std::span(inplace.data(), size));
      CHECK(inplace == b);
      REQUIRE(transport::open(inplace.data(), key, counter, inplace));
      CHECK(std::equal(pt.begin(), pt.end(), inplace.begin()));
    }
  }
}

TEST_CASE("transport aead: tampering, wrong counter or key, short input are rejected", "[transport_aead]") {
  uint8_t key[32] = {1, 2, 3};
  std::vector<uint8_t> pt(100, 0x5a), ct(116), out(100);
  transport::seal(ct.data(), key, 7, pt);
  for (size_t i = 0; i < ct.size(); i += 7) {
    auto bad = ct;
    bad[i] ^= 0x01;
    CHECK_FALSE(transport::open(out.data(), key, 7, bad));
  }
  CHECK_FALSE(transport::open(out.data(), key, 8, ct));
  uint8_t other[32] = {1, 2, 4};
  CHECK_FALSE(transport::open(out.data(), other, 7, ct));
  CHECK_FALSE(transport::open(out.data(), key, 7, std::span(ct.data(), 15)));
  CHECK(transport::open(out.data(), key, 7, ct));
}

// The contexts keep the last key and set only the nonce while it stays: every sequence
// that could leave a stale key or state behind must still equal libsodium.
TEST_CASE("transport aead: a kept key - runs, alternation, a failed open, a key changed in place", "[transport_aead]") {
  std::mt19937_64 rng(7);
  uint8_t k1[32], k2[32];
  for (auto& k : k1) k = static_cast<uint8_t>(rng());
  for (auto& k : k2) k = static_cast<uint8_t>(rng());
  std::vector<uint8_t> pt(333), a(349), b(349), out(333);
  for (auto& x : pt) x = static_cast<uint8_t>(rng());
  auto same = [&](const uint8_t* key, uint64_t counter) {
    transport::seal(a.data(), key, counter, pt);
    crypto::aead_seal(b.data(), key, counter, pt, {});
    return a == b;
  };
  for (uint64_t n = 0; n < 5; ++n) CHECK(same(k1, n));  // a run under one key
  for (uint64_t n = 0; n < 6; ++n) CHECK(same(n % 2 ? k2 : k1, n));  // alternating keys
  // Opening: under the kept key, after a failed open, after a key change.
  transport::seal(a.data(), k1, 9, pt);
  REQUIRE(transport::open(out.data(), k1, 9, a));
  auto bad = a;
  bad[3] ^= 1;
  CHECK_FALSE(transport::open(out.data(), k1, 9, bad));
  std::fill(out.begin(), out.end(), 0);
  REQUIRE(transport::open(out.data(), k1, 9, a));
  CHECK(out == pt);
  CHECK_FALSE(transport::open(out.data(), k2, 9, a));
  REQUIRE(transport::open(out.data(), k1, 9, a));
  // The same buffer given new contents (as a keypair slot reused): the new key is used.
  uint8_t slot[32];
  std::copy_n(k1, 32, slot);
  CHECK(same(slot, 1));
  slot[31] ^= 0x80;
  CHECK(same(slot, 1));
  transport::seal(a.data(), slot, 2, pt);
  CHECK_FALSE(transport::open(out.data(), k1, 2, a));
  CHECK(transport::open(out.data(), slot, 2, a));
}

// Reads the RFC 8439 blocks of tests/vectors/chacha20poly1305.txt whose nonce has
// WireGuard's layout (four zero bytes, then a little-endian counter): Appendix A.5.
TEST_CASE("transport aead: RFC 8439 vectors with WireGuard's nonce layout", "[transport_aead][vectors]") {
  std::ifstream in(std::string(WGNET_VECTORS_DIR) + "/chacha20poly1305.txt");
  REQUIRE(in);
  std::map<std::string, std::string> block;
  std::vector<std::map<std::string, std::string>> blocks;
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      if (line.empty() && !block.empty()) blocks.push_back(std::exchange(block, {}));
      continue;
    }
    auto eq = line.find(" = ");
    if (eq == std::string::npos) {  // continuation of a long hex value
      auto first = line.find_first_not_of(' ');
      if (first != std::string::npos && !last.empty()) block[last] += line.substr(first);
      continue;
    }
    last = line.substr(0, eq);
    block[last] = line.substr(eq + 3);
  }
  if (!block.empty()) blocks.push_back(block);
  auto bytes = [](const std::string& hex) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
  };
  int checked = 0;
  for (auto& b : blocks) {
    if (b["kind"] != "aead" || b["nonce"].substr(0, 8) != "00000000") continue;
    auto key = bytes(b["key"]), nonce = bytes(b["nonce"]), ad = bytes(b["ad"]), pt = bytes(b["pt"]),
         ct = bytes(b["ct"]), tag = bytes(b["tag"]);
    uint64_t counter = 0;
    for (int i = 0; i < 8; ++i) counter |= uint64_t{nonce[4 + i]} << (8 * i);
    std::vector<uint8_t> sealed(pt.size() + 16), expect = ct;
    expect.insert(expect.end(), tag.begin(), tag.end());
    transport::seal(sealed.data(), key.data(), counter, pt, ad);
    CHECK(sealed == expect);
    std::vector<uint8_t> opened(pt.size());
    REQUIRE(transport::open(opened.data(), key.data(), counter, expect, ad));
    CHECK(opened == pt);
    ++checked;
  }
  CHECK(checked >= 1);
}

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

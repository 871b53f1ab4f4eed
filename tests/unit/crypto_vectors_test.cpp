// Known-answer tests for wg/crypto: published vectors kept in tests/vectors/ (RFC 7693,
// the BLAKE2 KATs, RFC 8439, RFC 7748, draft-irtf-cfrg-xchacha-03), plus cross-checks of
// the wrappers against libb2, libsodium and OpenSSL called directly.
#include "wg/crypto.hpp"

#include <blake2.h>
#include <openssl/evp.h>
#include <sodium.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------------------------------
// Hex, written out here rather than borrowed from libsodium, so the expected values do
// not pass through the library under test.

std::string hex(std::span<const uint8_t> b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t c : b) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Bytes unhex(const std::string& s) {
  if (s.size() % 2 != 0) throw std::runtime_error("odd-length hex: " + s);
  Bytes out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) throw std::runtime_error("bad hex: " + s);
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes random_buffer(size_t n) {
  Bytes b(n);
  // An empty vector's data() is null, which libsodium's randombytes_buf() must not get.
  if (n > 0) wg::random_bytes(b.data(), b.size());
  return b;
}

template <class K>
K key_from(const Bytes& b) {
  REQUIRE(b.size() == wg::kKeyLen);
  return K(std::span<const uint8_t, wg::kKeyLen>(b.data(), wg::kKeyLen));
}

template <class K>
Bytes bytes_of(const K& k) {
  return Bytes(k.data(), k.data() + k.size());
}

// ---------------------------------------------------------------------------------------
// Vector files. A file is blocks of `name = value` lines separated by blank lines; `#`
// starts a comment line; an indented line continues the hex value above it. A value is
// hex, or a "double-quoted" ASCII string.

struct Vector {
  std::string file;
  int line = 0;  // where the block starts, for failure messages
  std::map<std::string, std::string> fields;

  std::string where() const { return file + ":" + std::to_string(line); }

  const std::string& text(const std::string& name) const {
    auto it = fields.find(name);
    if (it == fields.end()) throw std::runtime_error(where() + ": no field " + name);
    return it->second;
  }

  Bytes bytes(const std::string& name) const {
    const std::string& v = text(name);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
      return Bytes(v.begin() + 1, v.end() - 1);
    return unhex(v);
  }
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<Vector> load_vectors(const std::string& name) {
  const std::string path = std::string(WGNET_VECTORS_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);

  std::vector<Vector> out;
  Vector cur;
  std::string last;  // field a continuation line appends to
  std::string raw;
  int lineno = 0;
  auto finish = [&] {
    if (!cur.fields.empty()) out.push_back(cur);
    cur = Vector{};
    last.clear();
  };
  while (std::getline(in, raw)) {
    ++lineno;
    const std::string line = trim(raw);
    if (line.empty()) {
      finish();
      continue;
    }
    if (line[0] == '#') continue;
    const std::string at = name + ":" + std::to_string(lineno);
    if (raw[0] == ' ' || raw[0] == '\t') {
      if (last.empty()) throw std::runtime_error(at + ": continuation without a field");
      cur.fields[last] += line;
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw std::runtime_error(at + ": expected name = value");
    const std::string key = trim(line.substr(0, eq));
    if (cur.fields.empty()) {
      cur.file = name;
      cur.line = lineno;
    }
    if (!cur.fields.emplace(key, trim(line.substr(eq + 1))).second)
      throw std::runtime_error(at + ": duplicate field " + key);
    last = key;
  }
  finish();
  return out;
}

std::vector<Vector> of_kind(const std::vector<Vector>& all, const std::string& kind) {
  std::vector<Vector> out;
  for (const Vector& v : all)
    if (v.text("kind") == kind) out.push_back(v);
  return out;
}

// ---------------------------------------------------------------------------------------
// BLAKE2s references.

Bytes libb2_blake2s(const Bytes& in, const Bytes& key = {}, size_t outlen = 32) {
  Bytes out(outlen);
  REQUIRE(blake2s(out.data(), in.data(), key.data(), outlen, in.size(), key.size()) == 0);
  return out;
}

// RFC 7693 Appendix E: deterministic input from a Fibonacci generator.
void selftest_seq(uint8_t* out, size_t len, uint32_t seed) {
  uint32_t a = 0xDEAD4BAD * seed;  // prime
  uint32_t b = 1;
  for (size_t i = 0; i < len; ++i) {
    const uint32_t t = a + b;
    a = b;
    b = t;
    out[i] = static_cast<uint8_t>(t >> 24);
  }
}

// One BLAKE2s call of the self-test: out[outlen] = BLAKE2s-outlen(key[keylen], in[inlen]).
using Blake2sCall = std::function<void(uint8_t* out, size_t outlen, const uint8_t* key,
                                       size_t keylen, const uint8_t* in, size_t inlen)>;

// RFC 7693 Appendix E, blake2s_selftest(): hashes unkeyed and keyed (key length = output
// length) at four output and six input lengths, and returns the hash of all the results.
Bytes rfc7693_selftest(const Blake2sCall& call) {
  const size_t md_len[] = {16, 20, 28, 32};
  const size_t in_len[] = {0, 3, 64, 65, 255, 1024};
  uint8_t in[1024], md[32], key[32];
  blake2s_state ctx;
  REQUIRE(blake2s_init(&ctx, 32) == 0);
  for (size_t outlen : md_len) {
    for (size_t inlen : in_len) {
      selftest_seq(in, inlen, static_cast<uint32_t>(inlen));  // unkeyed hash
      call(md, outlen, nullptr, 0, in, inlen);
      blake2s_update(&ctx, md, outlen);  // hash the hash

      selftest_seq(key, outlen, static_cast<uint32_t>(outlen));  // keyed hash
      call(md, outlen, key, outlen, in, inlen);
      blake2s_update(&ctx, md, outlen);
    }
  }
  Bytes out(32);
  blake2s_final(&ctx, out.data(), out.size());
  return out;
}

// HMAC (RFC 2104) over BLAKE2s-256 with its 64-byte block, spelled out with libb2's
// one-shot call: a different path from wg::crypto::hmac's streaming one.
Bytes reference_hmac(Bytes key, const Bytes& data) {
  if (key.size() > 64) key = libb2_blake2s(key);
  key.resize(64, 0);
  Bytes ipad(64), opad(64);
  for (size_t i = 0; i < 64; ++i) {
    ipad[i] = key[i] ^ 0x36;
    opad[i] = key[i] ^ 0x5c;
  }
  return libb2_blake2s(concat(opad, libb2_blake2s(concat(ipad, data))));
}

// The WireGuard paper, section 5.4: Kdf_n(key, input) = (t1, ..., tn) where
// t0 = Hmac(key, input), t1 = Hmac(t0, 0x1), ti = Hmac(t0, t(i-1) || i).
std::array<Bytes, 3> reference_kdf(const Bytes& key, const Bytes& input) {
  const Bytes t0 = reference_hmac(key, input);
  const Bytes t1 = reference_hmac(t0, Bytes{0x1});
  const Bytes t2 = reference_hmac(t0, concat(t1, Bytes{0x2}));
  const Bytes t3 = reference_hmac(t0, concat(t2, Bytes{0x3}));
  return {t1, t2, t3};
}

// ---------------------------------------------------------------------------------------
// ChaCha20-Poly1305 (IETF) references with an arbitrary 12-byte nonce.

Bytes sodium_seal(const Bytes& key, const Bytes& nonce, const Bytes& pt, const Bytes& ad) {
  REQUIRE(key.size() == 32);
  REQUIRE(nonce.size() == 12);
  Bytes out(pt.size() + 16);
  unsigned long long len = 0;
  REQUIRE(crypto_aead_chacha20poly1305_ietf_encrypt(out.data(), &len, pt.data(), pt.size(),
                                                    ad.data(), ad.size(), nullptr,
                                                    nonce.data(), key.data()) == 0);
  REQUIRE(len == out.size());
  return out;
}

std::optional<Bytes> sodium_open(const Bytes& key, const Bytes& nonce, const Bytes& sealed,
                                 const Bytes& ad) {
  REQUIRE(sealed.size() >= 16);
  Bytes out(sealed.size() - 16 + 1);  // +1: never a zero-length buffer
  unsigned long long len = 0;
  if (crypto_aead_chacha20poly1305_ietf_decrypt(out.data(), &len, nullptr, sealed.data(),
                                                sealed.size(), ad.data(), ad.size(),
                                                nonce.data(), key.data()) != 0)
    return std::nullopt;
  out.resize(len);
  return out;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

CipherCtx openssl_ctx(bool encrypt, const Bytes& key, const Bytes& nonce, const Bytes& ad) {
  REQUIRE(key.size() == 32);
  REQUIRE(nonce.size() == 12);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  REQUIRE(ctx);
  const int enc = encrypt ? 1 : 0;
  REQUIRE(EVP_CipherInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, nullptr, nullptr, enc) ==
          1);
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_IVLEN, 12, nullptr) == 1);
  REQUIRE(EVP_CipherInit_ex(ctx.get(), nullptr, nullptr, key.data(), nonce.data(), enc) == 1);
  int len = 0;
  if (!ad.empty())
    REQUIRE(EVP_CipherUpdate(ctx.get(), nullptr, &len, ad.data(), static_cast<int>(ad.size())) ==
            1);
  return ctx;
}

Bytes openssl_seal(const Bytes& key, const Bytes& nonce, const Bytes& pt, const Bytes& ad) {
  CipherCtx ctx = openssl_ctx(true, key, nonce, ad);
  Bytes out(pt.size() + 16);
  int n = 0, len = 0;
  if (!pt.empty()) {
    REQUIRE(EVP_EncryptUpdate(ctx.get(), out.data(), &len, pt.data(),
                              static_cast<int>(pt.size())) == 1);
    n = len;
  }
  REQUIRE(EVP_EncryptFinal_ex(ctx.get(), out.data() + n, &len) == 1);
  n += len;
  REQUIRE(static_cast<size_t>(n) == pt.size());
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, 16, out.data() + n) == 1);
  return out;
}

std::optional<Bytes> openssl_open(const Bytes& key, const Bytes& nonce, const Bytes& sealed,
                                  const Bytes& ad) {
  REQUIRE(sealed.size() >= 16);
  const size_t ct_len = sealed.size() - 16;
  CipherCtx ctx = openssl_ctx(false, key, nonce, ad);
  Bytes out(ct_len + 16);
  int n = 0, len = 0;
  if (ct_len > 0) {
    REQUIRE(EVP_DecryptUpdate(ctx.get(), out.data(), &len, sealed.data(),
                              static_cast<int>(ct_len)) == 1);
    n = len;
  }
  uint8_t tag[16];
  std::memcpy(tag, sealed.data() + ct_len, sizeof tag);
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, 16, tag) == 1);
  if (EVP_DecryptFinal_ex(ctx.get(), out.data() + n, &len) <= 0) return std::nullopt;
  out.resize(static_cast<size_t>(n + len));
  return out;
}

// WireGuard's nonce: 32 zero bits, then the counter as 64 bits little-endian.
Bytes wg_nonce(uint64_t counter) {
  Bytes n(12, 0);
  for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
  return n;
}

Bytes wg_seal(const Bytes& key, uint64_t counter, const Bytes& pt, const Bytes& ad) {
  Bytes out(pt.size() + wg::kAeadTagLen);
  wg::crypto::aead_seal(out.data(), key.data(), counter, pt, ad);
  return out;
}

std::optional<Bytes> wg_open(const Bytes& key, uint64_t counter, const Bytes& sealed,
                             const Bytes& ad) {
  Bytes out(sealed.size() >= 16 ? sealed.size() - 16 + 1 : 1);
  if (!wg::crypto::aead_open(out.data(), key.data(), counter, sealed, ad)) return std::nullopt;
  out.resize(sealed.size() - 16);
  return out;
}

Bytes wg_xseal(const Bytes& key, const Bytes& nonce, const Bytes& pt, const Bytes& ad) {
  REQUIRE(nonce.size() == wg::kXNonceLen);
  Bytes out(pt.size() + wg::kAeadTagLen);
  wg::crypto::xaead_seal(out.data(), key.data(), nonce.data(), pt, ad);
  return out;
}

std::optional<Bytes> wg_xopen(const Bytes& key, const Bytes& nonce, const Bytes& sealed,
                              const Bytes& ad) {
  REQUIRE(nonce.size() == wg::kXNonceLen);
  Bytes out(sealed.size() >= 16 ? sealed.size() - 16 + 1 : 1);
  if (!wg::crypto::xaead_open(out.data(), key.data(), nonce.data(), sealed, ad))
    return std::nullopt;
  out.resize(sealed.size() - 16);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// BLAKE2s: hash, mac, hmac, kdf

TEST_CASE("vectors: BLAKE2s-256 hash matches RFC 7693, the BLAKE2 KAT and WireGuard",
          "[vectors][blake2s]") {
  const auto all = load_vectors("blake2s.txt");

  const auto hashes = of_kind(all, "hash");
  REQUIRE(hashes.size() >= 15);
  for (const Vector& v : hashes) {
    INFO(v.where());
    const Bytes in = v.bytes("in"), want = v.bytes("out");
    uint8_t out[wg::kHashLen];
    wg::crypto::hash(out, in);
    CHECK(hex(out) == hex(want));
    CHECK(hex(libb2_blake2s(in)) == hex(want));
    // Hash(a || b) is the two-span form; every split must give the same digest.
    for (size_t cut : {size_t{0}, size_t{1}, in.size() / 2, in.size()}) {
      if (cut > in.size()) continue;
      const std::span<const uint8_t> whole(in);
      wg::crypto::hash(out, whole.first(cut), whole.subspan(cut));
      CHECK(hex(out) == hex(want));
    }
  }

  const auto pairs = of_kind(all, "hash2");
  REQUIRE(pairs.size() >= 1);
  for (const Vector& v : pairs) {
    INFO(v.where());
    const Bytes a = v.bytes("a"), b = v.bytes("b"), want = v.bytes("out");
    uint8_t out[wg::kHashLen];
    wg::crypto::hash(out, a, b);
    CHECK(hex(out) == hex(want));
    wg::crypto::hash(out, concat(a, b));
    CHECK(hex(out) == hex(want));
  }
}

TEST_CASE("vectors: keyed BLAKE2s-256 in libb2 matches the BLAKE2 KAT",
          "[vectors][blake2s]") {
  // wg::crypto::mac is libb2's keyed BLAKE2s; this pins the library it stands on.
  const auto keyed = of_kind(load_vectors("blake2s.txt"), "keyed");
  REQUIRE(keyed.size() >= 10);
  for (const Vector& v : keyed) {
    INFO(v.where());
    const Bytes key = v.bytes("key"), in = v.bytes("in"), want = v.bytes("out");
    CHECK(hex(libb2_blake2s(in, key)) == hex(want));

    blake2s_state s;
    REQUIRE(blake2s_init_key(&s, 32, key.data(), key.size()) == 0);
    const size_t half = in.size() / 2;
    blake2s_update(&s, in.data(), half);
    blake2s_update(&s, in.data() + half, in.size() - half);
    uint8_t out[32];
    REQUIRE(blake2s_final(&s, out, sizeof out) == 0);
    CHECK(hex(out) == hex(want));
  }
}

TEST_CASE("vectors: RFC 7693 Appendix E self-test, through libb2 and through wg::crypto",
          "[vectors][blake2s]") {
  const auto selftest = of_kind(load_vectors("blake2s.txt"), "selftest");
  REQUIRE(selftest.size() == 1);
  const Bytes want = selftest[0].bytes("out");

  SECTION("libb2 directly") {
    const Bytes got = rfc7693_selftest([](uint8_t* out, size_t outlen, const uint8_t* key,
                                          size_t keylen, const uint8_t* in, size_t inlen) {
      REQUIRE(blake2s(out, in, key, outlen, inlen, keylen) == 0);
    });
    CHECK(hex(got) == hex(want));
  }

  SECTION("unkeyed 32-byte calls via hash, keyed 16-byte calls via mac") {
    // The self-test's keyed hashes use a key as long as the output, so its 16-byte case
    // is exactly WireGuard's MAC (keyed BLAKE2s-128): the grand hash then vouches for
    // wg::crypto::mac over six input lengths (0 to 1024 bytes).
    int via_hash = 0, via_mac = 0;
    const Bytes got = rfc7693_selftest([&](uint8_t* out, size_t outlen, const uint8_t* key,
                                           size_t keylen, const uint8_t* in, size_t inlen) {
      const std::span<const uint8_t> data(in, inlen);
      if (keylen == 0 && outlen == wg::kHashLen) {
        wg::crypto::hash(out, data);
        ++via_hash;
      } else if (keylen == wg::kMacLen && outlen == wg::kMacLen) {
        wg::crypto::mac(out, std::span<const uint8_t>(key, keylen), data);
        ++via_mac;
      } else {
        REQUIRE(blake2s(out, in, key, outlen, inlen, keylen) == 0);
      }
    });
    CHECK(via_hash == 6);
    CHECK(via_mac == 6);
    CHECK(hex(got) == hex(want));
  }
}

TEST_CASE("vectors: mac is keyed BLAKE2s-128", "[vectors][blake2s]") {
  // WireGuard keys mac1 with a 32-byte hash and mac2 with a 16-byte cookie.
  for (size_t key_len : {size_t{1}, size_t{16}, size_t{32}}) {
    for (size_t data_len : {0, 1, 63, 64, 65, 148, 1000}) {
      CAPTURE(key_len, data_len);
      const Bytes key = random_buffer(key_len), data = random_buffer(data_len);
      uint8_t out[wg::kMacLen];
      wg::crypto::mac(out, key, data);
      CHECK(hex(out) == hex(libb2_blake2s(data, key, 16)));
      // BLAKE2s-128 is its own function (the length is in the parameter block), not a
      // truncated BLAKE2s-256.
      const Bytes long_mac = libb2_blake2s(data, key, 32);
      CHECK(hex(out) != hex(std::span<const uint8_t>(long_mac).first(16)));
    }
  }
}

TEST_CASE("vectors: hmac matches HMAC-BLAKE2s written out from RFC 2104",
          "[vectors][blake2s]") {
  // There is no published HMAC-BLAKE2s vector; the reference is the textbook
  // construction: key hashed if longer than the 64-byte block, zero-padded, ipad/opad.
  for (size_t key_len : {0, 1, 16, 32, 63, 64, 65, 100, 200}) {
    for (size_t data_len : {0, 1, 32, 33, 64, 65, 1000}) {
      CAPTURE(key_len, data_len);
      // One spare byte keeps even an empty span's pointer non-null: wg::crypto::hmac
      // memcpy()s the key, and memcpy from a null pointer is undefined even for 0 bytes.
      const Bytes key_buf = random_buffer(key_len + 1), data = random_buffer(data_len);
      const std::span<const uint8_t> key(key_buf.data(), key_len);
      uint8_t out[wg::kHashLen];
      wg::crypto::hmac(out, key, data);
      CHECK(hex(out) == hex(reference_hmac(Bytes(key.begin(), key.end()), data)));
    }
  }

  SECTION("output may overwrite the data it was computed from") {
    // kdf relies on this: it writes each t_i over the buffer holding t_(i-1) || i.
    const Bytes key = random_buffer(32);
    Bytes buf = random_buffer(33);
    const Bytes want = reference_hmac(key, buf);
    wg::crypto::hmac(buf.data(), key, buf);
    CHECK(hex(std::span<const uint8_t>(buf).first(32)) == hex(want));
  }
}

TEST_CASE("vectors: kdf follows the WireGuard paper's Kdf_n", "[vectors][blake2s]") {
  for (size_t input_len : {0, 1, 32, 64, 100}) {
    CAPTURE(input_len);
    const Bytes ck = random_buffer(32), input = random_buffer(input_len);
    const auto want = reference_kdf(ck, input);

    uint8_t t1[32], t2[32], t3[32];
    wg::crypto::kdf(ck, input, t1);
    CHECK(hex(t1) == hex(want[0]));

    std::memset(t1, 0, sizeof t1);
    wg::crypto::kdf(ck, input, t1, t2);
    CHECK(hex(t1) == hex(want[0]));
    CHECK(hex(t2) == hex(want[1]));

    std::memset(t1, 0, sizeof t1);
    std::memset(t2, 0, sizeof t2);
    wg::crypto::kdf(ck, input, t1, t2, t3);
    CHECK(hex(t1) == hex(want[0]));
    CHECK(hex(t2) == hex(want[1]));
    CHECK(hex(t3) == hex(want[2]));
  }

  SECTION("the chaining key may be overwritten by the first output") {
    // The handshake does exactly this: (C, k) := Kdf_2(C, ...).
    Bytes ck = random_buffer(32);
    const Bytes input = random_buffer(32);
    const auto want = reference_kdf(ck, input);
    uint8_t key[32];
    wg::crypto::kdf(ck, input, ck.data(), key);
    CHECK(hex(ck) == hex(want[0]));
    CHECK(hex(key) == hex(want[1]));
  }
}

// ---------------------------------------------------------------------------------------
// ChaCha20-Poly1305

TEST_CASE("vectors: ChaCha20-Poly1305 matches RFC 8439 (libsodium, OpenSSL, wg::crypto)",
          "[vectors][chacha20poly1305]") {
  const auto vectors = of_kind(load_vectors("chacha20poly1305.txt"), "aead");
  REQUIRE(vectors.size() == 2);
  int wg_layout = 0;
  for (const Vector& v : vectors) {
    INFO(v.where());
    const Bytes key = v.bytes("key"), nonce = v.bytes("nonce"), ad = v.bytes("ad"),
                pt = v.bytes("pt");
    const Bytes sealed = concat(v.bytes("ct"), v.bytes("tag"));
    REQUIRE(sealed.size() == pt.size() + 16);

    CHECK(hex(sodium_seal(key, nonce, pt, ad)) == hex(sealed));
    CHECK(hex(openssl_seal(key, nonce, pt, ad)) == hex(sealed));
    const auto by_sodium = sodium_open(key, nonce, sealed, ad);
    REQUIRE(by_sodium);
    CHECK(hex(*by_sodium) == hex(pt));
    const auto by_openssl = openssl_open(key, nonce, sealed, ad);
    REQUIRE(by_openssl);
    CHECK(hex(*by_openssl) == hex(pt));

    // A nonce of 0^32 || LE64(counter) is WireGuard's; run those through our wrapper.
    if (nonce[0] == 0 && nonce[1] == 0 && nonce[2] == 0 && nonce[3] == 0) {
      ++wg_layout;
      uint64_t counter = 0;
      for (int i = 7; i >= 0; --i) counter = counter << 8 | nonce[4 + i];
      CHECK(hex(wg_nonce(counter)) == hex(nonce));
      CHECK(hex(wg_seal(key, counter, pt, ad)) == hex(sealed));
      const auto opened = wg_open(key, counter, sealed, ad);
      REQUIRE(opened);
      CHECK(hex(*opened) == hex(pt));
    }
  }
  CHECK(wg_layout == 1);  // RFC 8439 A.5, counter 0x0807060504030201
}

TEST_CASE("vectors: aead_seal uses nonce 0^32 || LE64(counter)", "[vectors][chacha20poly1305]") {
  const Bytes key = random_buffer(32);
  for (uint64_t counter : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256},
                           uint64_t{0xffffffff}, uint64_t{0x100000000},
                           uint64_t{0x0807060504030201}, ~uint64_t{0} - 1, ~uint64_t{0}}) {
    for (size_t len : {0, 1, 15, 16, 17, 64, 1420}) {
      CAPTURE(counter, len);
      const Bytes pt = random_buffer(len), ad = random_buffer(len % 40);
      const Bytes sealed = wg_seal(key, counter, pt, ad);
      CHECK(hex(sealed) == hex(sodium_seal(key, wg_nonce(counter), pt, ad)));
      const auto opened = wg_open(key, counter, sealed, ad);
      REQUIRE(opened);
      CHECK(hex(*opened) == hex(pt));
      CHECK_FALSE(wg_open(key, counter ^ 1, sealed, ad));
    }
  }
}

TEST_CASE("vectors: aead_open rejects tampering", "[vectors][chacha20poly1305]") {
  const Bytes key = random_buffer(32), pt = random_buffer(64), ad = random_buffer(32);
  const uint64_t counter = 42;
  const Bytes sealed = wg_seal(key, counter, pt, ad);
  REQUIRE(wg_open(key, counter, sealed, ad));

  SECTION("a flipped bit anywhere in the ciphertext or the tag") {
    for (size_t byte = 0; byte < sealed.size(); ++byte) {
      for (int bit : {0, 7}) {
        CAPTURE(byte, bit);
        Bytes bad = sealed;
        bad[byte] ^= static_cast<uint8_t>(1 << bit);
        CHECK_FALSE(wg_open(key, counter, bad, ad));
      }
    }
  }
  SECTION("a flipped bit in the associated data") {
    for (size_t byte : {size_t{0}, ad.size() - 1}) {
      Bytes bad = ad;
      bad[byte] ^= 1;
      CHECK_FALSE(wg_open(key, counter, sealed, bad));
    }
    CHECK_FALSE(wg_open(key, counter, sealed, {}));
  }
  SECTION("another key, or a truncated or too-short message") {
    Bytes other = key;
    other[31] ^= 0x80;
    CHECK_FALSE(wg_open(other, counter, sealed, ad));
    CHECK_FALSE(wg_open(key, counter, Bytes(sealed.begin(), sealed.end() - 1), ad));
    CHECK_FALSE(wg_open(key, counter, Bytes(sealed.begin() + 1, sealed.end()), ad));
    uint8_t dst[16];
    CHECK_FALSE(wg::crypto::aead_open(dst, key.data(), counter,
                                      std::span<const uint8_t>(sealed).first(15), ad));
    CHECK_FALSE(wg::crypto::aead_open(dst, key.data(), counter, {}, ad));
  }
  SECTION("an empty plaintext still authenticates") {
    const Bytes tag_only = wg_seal(key, counter, {}, ad);
    REQUIRE(tag_only.size() == 16);
    const auto opened = wg_open(key, counter, tag_only, ad);
    REQUIRE(opened);
    CHECK(opened->empty());
    Bytes bad = tag_only;
    bad[0] ^= 1;
    CHECK_FALSE(wg_open(key, counter, bad, ad));
  }
}

TEST_CASE("vectors: aead_seal and aead_open work in place", "[vectors][chacha20poly1305]") {
  const Bytes key = random_buffer(32), ad = random_buffer(16);
  for (size_t len : {0, 1, 63, 64, 65, 1420}) {
    CAPTURE(len);
    const uint64_t counter = 7 + len;
    const Bytes pt = random_buffer(len);
    const Bytes want = wg_seal(key, counter, pt, ad);

    Bytes buf(len + wg::kAeadTagLen);
    std::copy(pt.begin(), pt.end(), buf.begin());
    wg::crypto::aead_seal(buf.data(), key.data(), counter,
                          std::span<const uint8_t>(buf.data(), len), ad);
    CHECK(hex(buf) == hex(want));

    REQUIRE(wg::crypto::aead_open(buf.data(), key.data(), counter, buf, ad));
    CHECK(hex(std::span<const uint8_t>(buf).first(len)) == hex(pt));
  }
}

// ---------------------------------------------------------------------------------------
// XChaCha20-Poly1305

TEST_CASE("vectors: XChaCha20-Poly1305 matches draft-irtf-cfrg-xchacha-03 A.3.1",
          "[vectors][xchacha20poly1305]") {
  const auto vectors = of_kind(load_vectors("xchacha20poly1305.txt"), "xaead");
  REQUIRE(vectors.size() == 1);
  const Vector& v = vectors[0];
  INFO(v.where());
  const Bytes key = v.bytes("key"), nonce = v.bytes("nonce"), ad = v.bytes("ad"),
              pt = v.bytes("pt");
  const Bytes sealed = concat(v.bytes("ct"), v.bytes("tag"));

  CHECK(hex(wg_xseal(key, nonce, pt, ad)) == hex(sealed));
  const auto opened = wg_xopen(key, nonce, sealed, ad);
  REQUIRE(opened);
  CHECK(hex(*opened) == hex(pt));

  SECTION("tampering is rejected") {
    for (size_t byte : {size_t{0}, pt.size() - 1, pt.size(), sealed.size() - 1}) {
      CAPTURE(byte);
      Bytes bad = sealed;
      bad[byte] ^= 1;
      CHECK_FALSE(wg_xopen(key, nonce, bad, ad));
    }
    Bytes bad_ad = ad;
    bad_ad[0] ^= 1;
    CHECK_FALSE(wg_xopen(key, nonce, sealed, bad_ad));
    for (size_t byte : {size_t{0}, size_t{15}, size_t{16}, size_t{23}}) {
      CAPTURE(byte);
      Bytes bad_nonce = nonce;  // the first 16 bytes go to HChaCha20, the rest to ChaCha20
      bad_nonce[byte] ^= 1;
      CHECK_FALSE(wg_xopen(key, bad_nonce, sealed, ad));
    }
    uint8_t dst[16];
    CHECK_FALSE(wg::crypto::xaead_open(dst, key.data(), nonce.data(),
                                       std::span<const uint8_t>(sealed).first(15), ad));
  }

  SECTION("in place") {
    Bytes buf = pt;
    buf.resize(pt.size() + wg::kAeadTagLen);
    wg::crypto::xaead_seal(buf.data(), key.data(), nonce.data(),
                           std::span<const uint8_t>(buf.data(), pt.size()), ad);
    CHECK(hex(buf) == hex(sealed));
    REQUIRE(wg::crypto::xaead_open(buf.data(), key.data(), nonce.data(), buf, ad));
    CHECK(hex(std::span<const uint8_t>(buf).first(pt.size())) == hex(pt));
  }
}

// ---------------------------------------------------------------------------------------
// X25519

TEST_CASE("vectors: X25519 matches RFC 7748", "[vectors][x25519]") {
  const auto all = load_vectors("x25519.txt");

  SECTION("section 5.2 scalar multiplications") {
    const auto vectors = of_kind(all, "scalarmult");
    REQUIRE(vectors.size() == 2);
    for (const Vector& v : vectors) {
      INFO(v.where());
      const auto scalar = key_from<wg::PrivateKey>(v.bytes("scalar"));
      Bytes u = v.bytes("u");
      const Bytes want = v.bytes("out");
      auto shared = wg::crypto::x25519(scalar, key_from<wg::PublicKey>(u));
      REQUIRE(shared);
      CHECK(hex(bytes_of(*shared)) == hex(want));
      // X25519 ignores bit 255 of u (RFC 7748 section 5); flipping it changes nothing.
      u[31] ^= 0x80;
      shared = wg::crypto::x25519(scalar, key_from<wg::PublicKey>(u));
      REQUIRE(shared);
      CHECK(hex(bytes_of(*shared)) == hex(want));
    }
  }

  SECTION("section 5.2 iterated: k, u = X25519(k, u), k starting from 9") {
    const auto vectors = of_kind(all, "iterated");
    REQUIRE(vectors.size() == 2);
    for (const Vector& v : vectors) {
      INFO(v.where());
      const int iterations = std::stoi(v.text("iterations"));
      Bytes k(32, 0), u(32, 0);
      k[0] = u[0] = 9;
      for (int i = 0; i < iterations; ++i) {
        const auto r = wg::crypto::x25519(key_from<wg::PrivateKey>(k), key_from<wg::PublicKey>(u));
        REQUIRE(r);
        u = k;
        k = bytes_of(*r);
      }
      CHECK(hex(k) == hex(v.bytes("out")));
    }
  }

  SECTION("section 6.1 Diffie-Hellman") {
    const auto vectors = of_kind(all, "dh");
    REQUIRE(vectors.size() == 1);
    const Vector& v = vectors[0];
    const auto alice = key_from<wg::PrivateKey>(v.bytes("alice_private"));
    const auto bob = key_from<wg::PrivateKey>(v.bytes("bob_private"));
    const auto alice_pub = wg::crypto::public_key(alice);
    const auto bob_pub = wg::crypto::public_key(bob);
    CHECK(hex(bytes_of(alice_pub)) == hex(v.bytes("alice_public")));
    CHECK(hex(bytes_of(bob_pub)) == hex(v.bytes("bob_public")));

    const auto ab = wg::crypto::x25519(alice, bob_pub);
    const auto ba = wg::crypto::x25519(bob, alice_pub);
    REQUIRE(ab);
    REQUIRE(ba);
    CHECK(hex(bytes_of(*ab)) == hex(v.bytes("shared")));
    CHECK(hex(bytes_of(*ba)) == hex(v.bytes("shared")));
  }
}

TEST_CASE("vectors: X25519 with a low-order point gives no shared secret", "[vectors][x25519]") {
  const auto vectors = of_kind(load_vectors("x25519.txt"), "low_order");
  REQUIRE(vectors.size() == 14);
  for (const Vector& v : vectors) {
    INFO(v.where());
    const auto point = key_from<wg::PublicKey>(v.bytes("u"));
    for (int i = 0; i < 4; ++i) {
      const auto priv = wg::crypto::generate_private_key();
      CHECK_FALSE(wg::crypto::x25519(priv, point).has_value());
    }
  }
}

TEST_CASE("vectors: generate_private_key clamps and pairs with public_key", "[vectors][x25519]") {
  for (int i = 0; i < 16; ++i) {
    const auto a = wg::crypto::generate_private_key();
    const auto b = wg::crypto::generate_private_key();
    CHECK((a.data()[0] & 7) == 0);
    CHECK((a.data()[31] & 0xc0) == 0x40);
    CHECK_FALSE(a == b);
    const auto ab = wg::crypto::x25519(a, wg::crypto::public_key(b));
    const auto ba = wg::crypto::x25519(b, wg::crypto::public_key(a));
    REQUIRE(ab);
    REQUIRE(ba);
    CHECK(*ab == *ba);
  }
}

// ---------------------------------------------------------------------------------------
// Key encodings and equality

TEST_CASE("vectors: Key hex and base64 round-trip and reject bad input", "[vectors][key]") {
  // RFC 7748 section 6.1, Alice's public key; base64 as `wg pubkey` prints it.
  const std::string alice_hex = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
  const std::string alice_b64 = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";

  SECTION("known encodings") {
    const auto k = wg::PublicKey::from_hex(alice_hex);
    REQUIRE(k);
    CHECK(hex(bytes_of(*k)) == alice_hex);
    CHECK(k->to_hex() == alice_hex);
    CHECK(k->to_base64() == alice_b64);
    const auto b = wg::PublicKey::from_base64(alice_b64);
    REQUIRE(b);
    CHECK(*b == *k);

    std::string upper = alice_hex;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const auto u = wg::PublicKey::from_hex(upper);
    REQUIRE(u);
    CHECK(*u == *k);
  }

  SECTION("random keys round-trip") {
    for (int i = 0; i < 32; ++i) {
      const auto k = key_from<wg::PresharedKey>(random_buffer(32));
      const std::string h = k.to_hex(), b = k.to_base64();
      CHECK(h.size() == 64);
      CHECK(b.size() == 44);
      const auto from_h = wg::PresharedKey::from_hex(h);
      const auto from_b = wg::PresharedKey::from_base64(b);
      REQUIRE(from_h);
      REQUIRE(from_b);
      CHECK(*from_h == k);
      CHECK(*from_b == k);
    }
  }

  SECTION("hex of the wrong length or with stray characters") {
    for (const std::string& bad :
         {std::string{}, alice_hex.substr(0, 62), alice_hex.substr(0, 63), alice_hex + "0",
          alice_hex + "00", "0x" + alice_hex.substr(0, 62), alice_hex.substr(0, 63) + "g",
          alice_hex.substr(0, 32) + " " + alice_hex.substr(33), " " + alice_hex.substr(1),
          alice_hex.substr(0, 63) + "\n", std::string(64, 'z')}) {
      CAPTURE(bad);
      CHECK_FALSE(wg::PublicKey::from_hex(bad));
    }
  }

  SECTION("base64 of the wrong length, alphabet or padding") {
    std::string noncanonical = alice_b64;  // "o" -> "p": sets a bit the padding must keep 0
    noncanonical[42] = 'p';
    for (const std::string& bad : {
             std::string{},
             alice_b64.substr(0, 43),                         // no padding
             alice_b64 + "=",                                 // 45 chars
             alice_b64.substr(0, 43) + "A",                   // 44 chars, not padding
             std::string("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg=="),  // 31 bytes
             std::string("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"),  // 33 bytes
             "!" + alice_b64.substr(1),                       // not in the alphabet
             alice_b64.substr(0, 4) + "-" + alice_b64.substr(5),  // URL-safe alphabet
             alice_b64.substr(0, 20) + " " + alice_b64.substr(21),
             alice_b64.substr(0, 20) + "=" + alice_b64.substr(21),
             noncanonical,
             alice_hex.substr(0, 44),
         }) {
      CAPTURE(bad);
      CHECK_FALSE(wg::PublicKey::from_base64(bad));
    }
  }
}

TEST_CASE("vectors: Key equality compares every byte", "[vectors][key]") {
  const Bytes raw = random_buffer(32);
  const auto a = key_from<wg::SymmetricKey>(raw);
  const auto copy = a;
  CHECK(a == copy);
  CHECK(a == key_from<wg::SymmetricKey>(raw));
  for (size_t byte : {size_t{0}, size_t{15}, size_t{31}}) {
    for (int bit : {0, 7}) {
      CAPTURE(byte, bit);
      Bytes other = raw;
      other[byte] ^= static_cast<uint8_t>(1 << bit);
      CHECK_FALSE(a == key_from<wg::SymmetricKey>(other));
    }
  }
  CHECK(wg::SymmetricKey{} == wg::SymmetricKey{});
  CHECK(wg::SymmetricKey{}.is_zero());
  CHECK_FALSE(a.is_zero());
  auto cleared = a;
  cleared.clear();
  CHECK(cleared.is_zero());
  CHECK_FALSE(cleared == a);
}

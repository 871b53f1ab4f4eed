// ChaCha20-Poly1305 (RFC 8439) from the OpenSSL default provider's raw primitives,
// skipping EVP's per-call lookups (docs/benchmarks.md); libsodium, whose output it equals,
// serves when they are missing. A context per thread and direction keeps its last key;
// all are listed for forget(). No call leaves the key in a vector register.
#include "wg/transport_aead.hpp"

#include <openssl/core_dispatch.h>
#include <openssl/crypto.h>
#include <openssl/provider.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

namespace wg::transport {
namespace {

constexpr size_t kBlock = 64;       // ChaCha20 block
constexpr size_t kPolyKeyLen = 32;  // from keystream block 0
constexpr size_t kIvLen = 16;       // le32 block counter || 12-byte nonce
constexpr uint8_t kZeros[kBlock] = {};

// `names` is colon-separated.
bool names_include(const char* names, std::string_view want) {
  std::string_view rest(names);
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    if (rest.substr(0, colon) == want) return true;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return false;
}

// ok when every function was found.
struct Provider {
  OSSL_PROVIDER* prov = OSSL_PROVIDER_load(nullptr, "default");
  void* provctx = nullptr;
  OSSL_FUNC_cipher_newctx_fn* cipher_new = nullptr;
  OSSL_FUNC_cipher_freectx_fn* cipher_free = nullptr;
  OSSL_FUNC_cipher_encrypt_init_fn* cipher_init = nullptr;
  OSSL_FUNC_cipher_update_fn* cipher_update = nullptr;
  OSSL_FUNC_mac_newctx_fn* mac_new = nullptr;
  OSSL_FUNC_mac_freectx_fn* mac_free = nullptr;
  OSSL_FUNC_mac_init_fn* mac_init = nullptr;
  OSSL_FUNC_mac_update_fn* mac_update = nullptr;
  OSSL_FUNC_mac_final_fn* mac_final = nullptr;
  bool ok = false;

  Provider() {
    if (!prov) return;
    provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
    for (const OSSL_DISPATCH* f = find(OSSL_OP_CIPHER, "ChaCha20"); f && f->function_id; ++f) {
      switch (f->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: cipher_new = OSSL_FUNC_cipher_newctx(f); break;
        case OSSL_FUNC_CIPHER_FREECTX: cipher_free = OSSL_FUNC_cipher_freectx(f); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: cipher_init = OSSL_FUNC_cipher_encrypt_init(f); break;
        case OSSL_FUNC_CIPHER_UPDATE: cipher_update = OSSL_FUNC_cipher_update(f); break;
        default: break;
      }
    }
    for (const OSSL_DISPATCH* f = find(OSSL_OP_MAC, "POLY1305"); f && f->function_id; ++f) {
      switch (f->function_id) {
        case OSSL_FUNC_MAC_NEWCTX: mac_new = OSSL_FUNC_mac_newctx(f); break;
        case OSSL_FUNC_MAC_FREECTX: mac_free = OSSL_FUNC_mac_freectx(f); break;
        case OSSL_FUNC_MAC_INIT: mac_init = OSSL_FUNC_mac_init(f); break;
        case OSSL_FUNC_MAC_UPDATE: mac_update = OSSL_FUNC_mac_update(f); break;
        case OSSL_FUNC_MAC_FINAL: mac_final = OSSL_FUNC_mac_final(f); break;
        default: break;
      }
    }
    ok = provctx && cipher_new && cipher_free && cipher_init && cipher_update && mac_new && mac_free && mac_init &&
         mac_update && mac_final;
  }

  // The table stays valid: the provider is never unloaded.
  const OSSL_DISPATCH* find(int op, std::string_view name) const {
    int no_cache = 0;
    const OSSL_ALGORITHM* algs = OSSL_PROVIDER_query_operation(prov, op, &no_cache);
    const OSSL_DISPATCH* found = nullptr;
    for (const OSSL_ALGORITHM* a = algs; a && a->algorithm_names && !found; ++a)
      if (names_include(a->algorithm_names, name)) found = a->implementation;
    if (algs) OSSL_PROVIDER_unquery_operation(prov, op, algs);
    return found;
  }
};

// Never freed: threads may outlive static destruction.
const Provider& provider() {
  static const Provider* p = new Provider();
  return *p;
}

// OpenSSL's AVX-512 ChaCha20 leaves the key in zmm16-31 (vzeroall clears only zmm0-15),
// whence a signal frame or the lazy-binding resolver could spill it to memory nobody wipes.
#if defined(__x86_64__) && defined(__GNUC__)
bool have_zmm16_31() { return __builtin_cpu_init(), __builtin_cpu_supports("avx512f"); }
[[gnu::target("avx512f")]] void clear_zmm16_31() {
  asm volatile(
      "vpxord %%zmm16, %%zmm16, %%zmm16\n\tvpxord %%zmm17, %%zmm17, %%zmm17\n\t"
      "vpxord %%zmm18, %%zmm18, %%zmm18\n\tvpxord %%zmm19, %%zmm19, %%zmm19\n\t"
      "vpxord %%zmm20, %%zmm20, %%zmm20\n\tvpxord %%zmm21, %%zmm21, %%zmm21\n\t"
      "vpxord %%zmm22, %%zmm22, %%zmm22\n\tvpxord %%zmm23, %%zmm23, %%zmm23\n\t"
      "vpxord %%zmm24, %%zmm24, %%zmm24\n\tvpxord %%zmm25, %%zmm25, %%zmm25\n\t"
      "vpxord %%zmm26, %%zmm26, %%zmm26\n\tvpxord %%zmm27, %%zmm27, %%zmm27\n\t"
      "vpxord %%zmm28, %%zmm28, %%zmm28\n\tvpxord %%zmm29, %%zmm29, %%zmm29\n\t"
      "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31" ::
          : "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26",
            "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}
#else
bool have_zmm16_31() { return false; }
void clear_zmm16_31() {}
#endif

struct Ctx;

// Every thread's contexts. Never destroyed, like provider().
struct Registry {
  std::mutex mu;  // before any context's lock
  std::vector<Ctx*> contexts;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

struct Ctx {
  const Provider& p = provider();
  const bool clear_registers = have_zmm16_31();
  std::mutex mu;  // guards the rest; contended only by forget()
  void* stream = p.ok ? p.cipher_new(p.provctx) : nullptr;
  void* mac = p.ok ? p.mac_new(p.provctx) : nullptr;
  uint8_t key[kKeyLen];  // valid when keyed
  bool keyed = false;

  Ctx() {
    std::lock_guard lock(registry().mu);
    registry().contexts.push_back(this);
  }
  ~Ctx() {
    {
      std::lock_guard lock(registry().mu);
      auto& all = registry().contexts;
      all.erase(std::find(all.begin(), all.end(), this));
    }
    OPENSSL_cleanse(key, sizeof key);
    if (mac) p.mac_free(mac);        // the provider cleanses both
    if (stream) p.cipher_free(stream);
  }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;

  bool usable() const { return stream && mac; }

  // Rekeys with zeros and refills the keystream buffer: no trace of the key is left.
  void wipe() {
    if (keyed) {
      uint8_t byte = 0;
      p.cipher_init(stream, kZeros, kKeyLen, kZeros, kIvLen, nullptr);
      update(&byte, kZeros, 1);
    }
    OPENSSL_cleanse(key, sizeof key);
    keyed = false;
  }

  // Keys the MAC from block 0, leaving the stream at block 1. Sets the key only if changed.
  bool start(const uint8_t k[kKeyLen], uint64_t counter) {
    uint8_t iv[kIvLen] = {};
    for (int i = 0; i < 8; ++i) iv[8 + i] = static_cast<uint8_t>(counter >> (8 * i));
    const bool same = keyed && CRYPTO_memcmp(key, k, kKeyLen) == 0;
    keyed = false;
    if (p.cipher_init(stream, same ? nullptr : k, same ? 0 : kKeyLen, iv, kIvLen, nullptr) != 1) return false;
    if (!same) std::copy_n(k, kKeyLen, key);
    keyed = true;
    uint8_t block[kBlock];
    const bool ok = update(block, kZeros, kBlock) && p.mac_init(mac, block, kPolyKeyLen, nullptr) == 1;
    OPENSSL_cleanse(block, sizeof block);
    return ok;
  }

  // dst may equal src.
  bool crypt(uint8_t* dst, const uint8_t* src, size_t n) { return n == 0 || update(dst, src, n); }

  bool update(uint8_t* dst, const uint8_t* src, size_t n) {
    size_t len = 0;
    const bool ok = p.cipher_update(stream, dst, &len, n, src, n) == 1 && len == n;
    if (clear_registers) clear_zmm16_31();
    return ok;
  }

  // The tag over ad and ciphertext as laid out in RFC 8439 section 2.8.
  bool tag(uint8_t out[kAeadTagLen], std::span<const uint8_t> ad, const uint8_t* ct, size_t n) {
    uint8_t tail[2 * 16] = {};  // ciphertext padding, then both lengths
    const size_t pad = (16 - n % 16) % 16;
    for (int i = 0; i < 8; ++i) {
      tail[pad + i] = static_cast<uint8_t>(static_cast<uint64_t>(ad.size()) >> (8 * i));
      tail[pad + 8 + i] = static_cast<uint8_t>(static_cast<uint64_t>(n) >> (8 * i));
    }
    size_t out_len = 0;
    return (ad.empty() || (p.mac_update(mac, ad.data(), ad.size()) == 1 &&
                           p.mac_update(mac, kZeros, (16 - ad.size() % 16) % 16) == 1)) &&
           (n == 0 || p.mac_update(mac, ct, n) == 1) && p.mac_update(mac, tail, pad + 16) == 1 &&
           p.mac_final(mac, out, &out_len, kAeadTagLen) == 1 && out_len == kAeadTagLen;
  }
};

Ctx& context(bool sealing) {
  thread_local Ctx seal_ctx, open_ctx;
  return sealing ? seal_ctx : open_ctx;
}

}  // namespace

void forget(const uint8_t key[kKeyLen]) {
  std::lock_guard lock(registry().mu);
  for (Ctx* x : registry().contexts) {
    std::lock_guard xl(x->mu);
    if (x->keyed && CRYPTO_memcmp(x->key, key, kKeyLen) == 0) x->wipe();
  }
}

void seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad) {
  Ctx& x = context(true);
  std::lock_guard lock(x.mu);
  const size_t n = src.size();
  if (n > INT_MAX || !x.usable() || !x.start(key, counter)) {
    crypto::aead_seal(dst, key, counter, src, ad);
    return;
  }
  if (!x.crypt(dst, src.data(), n) || !x.tag(dst + n, ad, dst, n)) {
    // Unreachable with valid arguments. In place the plaintext may be lost: leave zeros,
    // which never authenticate, rather than a wrong packet.
    if (dst == src.data()) std::memset(dst, 0, n + kAeadTagLen);
    else crypto::aead_seal(dst, key, counter, src, ad);
  }
}

// Writes plaintext only after the tag matches.
bool open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad) {
  if (src.size() < kAeadTagLen || src.size() > INT_MAX) return false;
  Ctx& x = context(false);
  std::lock_guard lock(x.mu);
  if (!x.usable()) return crypto::aead_open(dst, key, counter, src, ad);
  const size_t n = src.size() - kAeadTagLen;
  uint8_t expected[kAeadTagLen];
  return x.start(key, counter) && x.tag(expected, ad, src.data(), n) &&
         CRYPTO_memcmp(expected, src.data() + n, kAeadTagLen) == 0 && x.crypt(dst, src.data(), n);
}

}  // namespace wg::transport

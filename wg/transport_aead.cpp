// Transport AEAD over OpenSSL's EVP ChaCha20-Poly1305, one context per thread and
// direction. A context keeps the last key it was given: a packet under the same key (the
// common case, a session's packets in a row) sets only the nonce, which spares OpenSSL's
// key set-up and a round of its parameter handling per packet.
#include "wg/transport_aead.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace wg::transport {
namespace {

struct Ctx {
  EVP_CIPHER_CTX* ctx;
  const int enc;
  uint8_t key[kKeyLen];  // the key ctx holds, valid when keyed
  bool keyed = false;
  explicit Ctx(int e) : ctx(EVP_CIPHER_CTX_new()), enc(e) {
    if (!ctx || EVP_CipherInit_ex(ctx, EVP_chacha20_poly1305(), nullptr, nullptr, nullptr, enc) != 1)
      throw std::runtime_error("OpenSSL: cannot create a ChaCha20-Poly1305 context");
  }
  ~Ctx() {
    OPENSSL_cleanse(key, sizeof key);
    EVP_CIPHER_CTX_free(ctx);  // frees and cleanses the key schedule
  }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;

  // Ready for one message under k and iv: the key is set only when it changed (compared
  // in constant time, it is a secret). Setting the nonce alone resets the cipher's state.
  bool start(const uint8_t k[kKeyLen], const uint8_t iv[12]) {
    if (keyed && CRYPTO_memcmp(key, k, kKeyLen) == 0)
      return EVP_CipherInit_ex(ctx, nullptr, nullptr, nullptr, iv, enc) == 1;
    keyed = false;
    if (EVP_CipherInit_ex(ctx, nullptr, nullptr, k, iv, enc) != 1) return false;
    std::copy_n(k, kKeyLen, key);
    keyed = true;
    return true;
  }
};

Ctx& context(int enc) {
  thread_local Ctx seal_ctx(1), open_ctx(0);
  return enc ? seal_ctx : open_ctx;
}

void nonce(uint8_t out[12], uint64_t counter) {
  for (int i = 0; i < 4; ++i) out[i] = 0;
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
}

}  // namespace

void seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad) {
  Ctx& x = context(1);
  EVP_CIPHER_CTX* c = x.ctx;
  uint8_t iv[12];
  nonce(iv, counter);
  int len = 0;
  if (src.size() > INT_MAX || ad.size() > INT_MAX || !x.start(key, iv) ||
      (!ad.empty() && EVP_CipherUpdate(c, nullptr, &len, ad.data(), static_cast<int>(ad.size())) != 1) ||
      EVP_CipherUpdate(c, dst, &len, src.data(), static_cast<int>(src.size())) != 1 ||
      EVP_CipherFinal_ex(c, dst + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, kAeadTagLen, dst + src.size()) != 1) {
    // Cannot happen with valid arguments; fall back rather than send garbage.
    crypto::aead_seal(dst, key, counter, src, ad);
  }
}

bool open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad) {
  if (src.size() < kAeadTagLen || src.size() > INT_MAX || ad.size() > INT_MAX) return false;
  Ctx& x = context(0);
  EVP_CIPHER_CTX* c = x.ctx;
  uint8_t iv[12];
  nonce(iv, counter);
  size_t n = src.size() - kAeadTagLen;
  uint8_t tag[kAeadTagLen];
  std::copy_n(src.data() + n, kAeadTagLen, tag);  // dst may overwrite src
  int len = 0;
  return x.start(key, iv) &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, kAeadTagLen, tag) == 1 &&
         (ad.empty() || EVP_CipherUpdate(c, nullptr, &len, ad.data(), static_cast<int>(ad.size())) == 1) &&
         EVP_CipherUpdate(c, dst, &len, src.data(), static_cast<int>(n)) == 1 &&
         EVP_CipherFinal_ex(c, dst + len, &len) == 1;
}

}  // namespace wg::transport

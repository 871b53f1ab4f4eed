// Over libsodium, and libb2 for BLAKE2s.
#include "wg/crypto.hpp"

#include <blake2.h>
#include <sodium.h>

#include <cstring>
#include <stdexcept>

namespace wg {
namespace {

struct SodiumInit {
  SodiumInit() {
    if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  }
};
const SodiumInit sodium_init_once;

constexpr size_t kBlockLen = 64;  // BLAKE2s block size, for HMAC

}  // namespace

void secure_wipe(void* p, size_t n) { sodium_memzero(p, n); }

// noinline and its own frame: the area lies below every frame of its caller.
[[gnu::noinline]] void scrub_stack(size_t bytes) {
  constexpr size_t kMax = 256 * 1024;
  auto* area = static_cast<uint8_t*>(__builtin_alloca(std::min(bytes, kMax)));
  sodium_memzero(area, std::min(bytes, kMax));
  asm volatile("" : : "r"(area) : "memory");
}
bool ct_equal(const void* a, const void* b, size_t n) { return sodium_memcmp(a, b, n) == 0; }

void copy_secret(uint8_t* to, const uint8_t* from, size_t n) {
  const volatile uint8_t* in = from;
  volatile uint8_t* out = to;
  for (size_t i = 0; i < n; ++i) out[i] = in[i];
}

template <class Tag>
bool Key<Tag>::is_zero() const {
  return sodium_is_zero(bytes_.data(), bytes_.size()) == 1;
}

template <class Tag>
std::string Key<Tag>::to_base64() const {
  char out[sodium_base64_ENCODED_LEN(kKeyLen, sodium_base64_VARIANT_ORIGINAL)];
  sodium_bin2base64(out, sizeof out, bytes_.data(), bytes_.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string s(out);
  secure_wipe(out, sizeof out);
  return s;
}

template <class Tag>
std::string Key<Tag>::to_hex() const {
  char out[kKeyLen * 2 + 1];
  sodium_bin2hex(out, sizeof out, bytes_.data(), bytes_.size());
  std::string s(out, kKeyLen * 2);
  secure_wipe(out, sizeof out);
  return s;
}

template <class Tag>
std::optional<Key<Tag>> Key<Tag>::from_base64(std::string_view s) {
  if (s.size() != 44 || s[43] != '=') return std::nullopt;
  Key k;
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(k.data(), kKeyLen, s.data(), s.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_ORIGINAL) != 0 ||
      len != kKeyLen || end != s.data() + s.size())
    return std::nullopt;
  return k;
}

template <class Tag>
std::optional<Key<Tag>> Key<Tag>::from_hex(std::string_view s) {
  if (s.size() != kKeyLen * 2) return std::nullopt;
  Key k;
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_hex2bin(k.data(), kKeyLen, s.data(), s.size(), nullptr, &len, &end) != 0 ||
      len != kKeyLen || end != s.data() + s.size())
    return std::nullopt;
  return k;
}

template class Key<PrivateTag>;
template class Key<PublicTag>;
template class Key<PresharedTag>;
template class Key<SymmetricTag>;

size_t PublicKeyHash::operator()(const PublicKey& k) const {
  size_t h;
  std::memcpy(&h, k.data(), sizeof h);
  return h;
}

namespace crypto {

PrivateKey generate_private_key() {
  PrivateKey k;
  random_bytes(k.data(), kKeyLen);
  k.data()[0] &= 248;
  k.data()[31] = static_cast<uint8_t>((k.data()[31] & 127) | 64);
  return k;
}

#if defined(WGNET_FUZZ_CHEAP_DH)
// Fuzzing only (WGNET_FUZZ_CHEAP_DH): a cheap stand-in, not Diffie-Hellman, that keeps
// DH(a, pub(b)) == DH(b, pub(a)), distinct secrets for distinct keys, and failure on
// the all-zero point.
#if !defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
#error "WGNET_FUZZ_CHEAP_DH is for fuzz builds only"
#endif
PublicKey public_key(const PrivateKey& priv) {
  PublicKey pub;
  static constexpr uint8_t kLabel[] = {'f', 'u', 'z', 'z', '-', 'p', 'u', 'b'};
  hash(pub.data(), kLabel, {priv.data(), kKeyLen});
  return pub;
}

std::optional<SymmetricKey> x25519(const PrivateKey& priv, const PublicKey& pub) {
  if (pub.is_zero()) return std::nullopt;
  const PublicKey mine = public_key(priv);
  const bool mine_first = std::memcmp(mine.data(), pub.data(), kKeyLen) < 0;
  SymmetricKey out;
  hash(out.data(), {(mine_first ? mine : pub).data(), kKeyLen}, {(mine_first ? pub : mine).data(), kKeyLen});
  return out;
}
#else
PublicKey public_key(const PrivateKey& priv) {
  PublicKey pub;
  crypto_scalarmult_base(pub.data(), priv.data());
  return pub;
}

std::optional<SymmetricKey> x25519(const PrivateKey& priv, const PublicKey& pub) {
  SymmetricKey out;
  // libsodium fails an all-zero result; checked anyway.
  if (crypto_scalarmult(out.data(), priv.data(), pub.data()) != 0 || out.is_zero())
    return std::nullopt;
  return out;
}
#endif

void hash(uint8_t out[kHashLen], std::span<const uint8_t> a, std::span<const uint8_t> b) {
  blake2s_state s;
  blake2s_init(&s, kHashLen);
  blake2s_update(&s, a.data(), a.size());
  if (!b.empty()) blake2s_update(&s, b.data(), b.size());
  blake2s_final(&s, out, kHashLen);
}

void mac(uint8_t out[kMacLen], std::span<const uint8_t> key, std::span<const uint8_t> data) {
  // blake2s(out, in, key, outlen, inlen, keylen) refuses keys over 32 bytes, which
  // WireGuard never uses: throw rather than leave `out` untouched.
  if (key.size() > BLAKE2S_KEYBYTES || blake2s(out, data.data(), key.data(), kMacLen, data.size(), key.size()) != 0)
    throw std::invalid_argument("crypto::mac: key longer than 32 bytes");
}

void hmac(uint8_t out[kHashLen], std::span<const uint8_t> key, std::span<const uint8_t> data) {
  uint8_t k[kBlockLen] = {};
  if (key.size() > kBlockLen) hash(k, key);
  else if (!key.empty()) std::memcpy(k, key.data(), key.size());

  uint8_t pad[kBlockLen];
  uint8_t inner[kHashLen];
  for (size_t i = 0; i < kBlockLen; ++i) pad[i] = k[i] ^ 0x36;
  blake2s_state s;
  blake2s_init(&s, kHashLen);
  blake2s_update(&s, pad, kBlockLen);
  blake2s_update(&s, data.data(), data.size());
  blake2s_final(&s, inner, kHashLen);

  for (size_t i = 0; i < kBlockLen; ++i) pad[i] = k[i] ^ 0x5c;
  blake2s_init(&s, kHashLen);
  blake2s_update(&s, pad, kBlockLen);
  blake2s_update(&s, inner, kHashLen);
  blake2s_final(&s, out, kHashLen);

  secure_wipe(k, sizeof k);
  secure_wipe(pad, sizeof pad);
  secure_wipe(inner, sizeof inner);
  secure_wipe(&s, sizeof s);
}

void kdf(std::span<const uint8_t> ck, std::span<const uint8_t> input, uint8_t* out1,
         uint8_t* out2, uint8_t* out3) {
  uint8_t prk[kHashLen];
  uint8_t t[kHashLen + 1];
  hmac(prk, ck, input);
  t[0] = 1;
  hmac(t, prk, std::span<const uint8_t>(t, 1));
  std::memcpy(out1, t, kHashLen);
  if (out2) {
    t[kHashLen] = 2;
    hmac(t, prk, std::span<const uint8_t>(t, kHashLen + 1));
    std::memcpy(out2, t, kHashLen);
  }
  if (out3) {
    t[kHashLen] = 3;
    hmac(t, prk, std::span<const uint8_t>(t, kHashLen + 1));
    std::memcpy(out3, t, kHashLen);
  }
  secure_wipe(prk, sizeof prk);
  secure_wipe(t, sizeof t);
}

namespace {
void wg_nonce(uint8_t nonce[12], uint64_t counter) {
  std::memset(nonce, 0, 4);
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
}
}  // namespace

void aead_seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter,
               std::span<const uint8_t> src, std::span<const uint8_t> ad) {
  uint8_t nonce[12];
  wg_nonce(nonce, counter);
  crypto_aead_chacha20poly1305_ietf_encrypt(dst, nullptr, src.data(), src.size(), ad.data(),
                                            ad.size(), nullptr, nonce, key);
}

bool aead_open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter,
               std::span<const uint8_t> src, std::span<const uint8_t> ad) {
  if (src.size() < kAeadTagLen) return false;
  uint8_t nonce[12];
  wg_nonce(nonce, counter);
  return crypto_aead_chacha20poly1305_ietf_decrypt(dst, nullptr, nullptr, src.data(), src.size(),
                                                   ad.data(), ad.size(), nonce, key) == 0;
}

void xaead_seal(uint8_t* dst, const uint8_t key[kKeyLen], const uint8_t nonce[kXNonceLen],
                std::span<const uint8_t> src, std::span<const uint8_t> ad) {
  crypto_aead_xchacha20poly1305_ietf_encrypt(dst, nullptr, src.data(), src.size(), ad.data(),
                                             ad.size(), nullptr, nonce, key);
}

bool xaead_open(uint8_t* dst, const uint8_t key[kKeyLen], const uint8_t nonce[kXNonceLen],
                std::span<const uint8_t> src, std::span<const uint8_t> ad) {
  if (src.size() < kAeadTagLen) return false;
  return crypto_aead_xchacha20poly1305_ietf_decrypt(dst, nullptr, nullptr, src.data(), src.size(),
                                                    ad.data(), ad.size(), nonce, key) == 0;
}

}  // namespace crypto
}  // namespace wg

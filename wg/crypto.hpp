// WireGuard's primitives: typed keys, X25519, BLAKE2s, the AEADs.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "wg/base/random.hpp"

namespace wg {

inline constexpr size_t kKeyLen = 32;
inline constexpr size_t kHashLen = 32;
inline constexpr size_t kMacLen = 16;
inline constexpr size_t kAeadTagLen = 16;
inline constexpr size_t kXNonceLen = 24;

using Bytes32 = std::array<uint8_t, 32>;

// Wipes memory in a way the compiler cannot elide.
void secure_wipe(void* p, size_t n);
// Constant-time equality of two equal-length buffers.
bool ct_equal(const void* a, const void* b, size_t n);
// Zeroes `bytes` of stack below the caller's frame, where returned calls left key
// material. Call from a shallow frame.
void scrub_stack(size_t bytes = 64 * 1024);
// Copies n bytes one at a time: no vector register is left holding them (a register
// the thread's next lazily bound call may spill to its stack).
void copy_secret(uint8_t* to, const uint8_t* from, size_t n);

// Wipes what it frees, so a growing buffer leaves no copy of key material behind.
template <class T>
struct WipingAllocator {
  using value_type = T;
  WipingAllocator() = default;
  template <class U>
  WipingAllocator(const WipingAllocator<U>&) {}
  T* allocate(size_t n) { return std::allocator<T>().allocate(n); }
  void deallocate(T* p, size_t n) {
    secure_wipe(p, n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  friend bool operator==(const WipingAllocator&, const WipingAllocator&) { return true; }
};
// Short strings live in the object: secure_wipe them before they go.
using WipedString = std::basic_string<char, std::char_traits<char>, WipingAllocator<char>>;

// Wiped when dropped, compared in constant time. No formatter, deliberately.
template <class Tag>
class Key {
public:
  Key() = default;
  explicit Key(std::span<const uint8_t, kKeyLen> b) { copy_secret(bytes_.data(), b.data(), kKeyLen); }
  Key(const Key& k) { copy_secret(bytes_.data(), k.bytes_.data(), kKeyLen); }
  Key& operator=(const Key& k) {
    if (this != &k) copy_secret(bytes_.data(), k.bytes_.data(), kKeyLen);
    return *this;
  }
  ~Key() { secure_wipe(bytes_.data(), bytes_.size()); }

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return kKeyLen; }
  std::span<const uint8_t, kKeyLen> span() const { return bytes_; }
  bool is_zero() const;  // constant time
  void clear() { secure_wipe(bytes_.data(), bytes_.size()); }

  friend bool operator==(const Key& a, const Key& b) { return ct_equal(a.data(), b.data(), kKeyLen); }

  std::string to_base64() const;
  std::string to_hex() const;
  static std::optional<Key> from_base64(std::string_view s);  // exactly 44 chars
  static std::optional<Key> from_hex(std::string_view s);     // exactly 64 hex digits

private:
  std::array<uint8_t, kKeyLen> bytes_{};
};

struct PrivateTag {};
struct PublicTag {};
struct PresharedTag {};
struct SymmetricTag {};
using PrivateKey = Key<PrivateTag>;
using PublicKey = Key<PublicTag>;
using PresharedKey = Key<PresharedTag>;
using SymmetricKey = Key<SymmetricTag>;

// Public keys are not secret.
struct PublicKeyHash {
  size_t operator()(const PublicKey& k) const;
};

namespace crypto {

// --- X25519 ---
PrivateKey generate_private_key();  // random, clamped
PublicKey public_key(const PrivateKey& priv);
// nullopt for a low-order point.
std::optional<SymmetricKey> x25519(const PrivateKey& priv, const PublicKey& pub);

// --- BLAKE2s ---
void hash(uint8_t out[kHashLen], std::span<const uint8_t> a, std::span<const uint8_t> b = {});
// Keyed BLAKE2s-128 (WireGuard's MAC).
void mac(uint8_t out[kMacLen], std::span<const uint8_t> key, std::span<const uint8_t> data);
// HMAC-BLAKE2s-256.
void hmac(uint8_t out[kHashLen], std::span<const uint8_t> key, std::span<const uint8_t> data);
// KDF_n: 1..3 outputs of 32 bytes.
void kdf(std::span<const uint8_t> ck, std::span<const uint8_t> input, uint8_t* out1,
         uint8_t* out2 = nullptr, uint8_t* out3 = nullptr);

// --- ChaCha20-Poly1305, nonce = 4 zero bytes || le64 counter ---
// dst holds src.size() + 16 bytes and may equal src.data().
void aead_seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter,
               std::span<const uint8_t> src, std::span<const uint8_t> ad);
// src includes the tag; dst gets src.size() - 16 bytes.
bool aead_open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter,
               std::span<const uint8_t> src, std::span<const uint8_t> ad);

// --- XChaCha20-Poly1305, 24-byte nonce (cookie replies) ---
void xaead_seal(uint8_t* dst, const uint8_t key[kKeyLen], const uint8_t nonce[kXNonceLen],
                std::span<const uint8_t> src, std::span<const uint8_t> ad);
bool xaead_open(uint8_t* dst, const uint8_t key[kKeyLen], const uint8_t nonce[kXNonceLen],
                std::span<const uint8_t> src, std::span<const uint8_t> ad);

}  // namespace crypto
}  // namespace wg

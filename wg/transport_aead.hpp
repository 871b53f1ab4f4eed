// The AEAD for transport data: ChaCha20-Poly1305 with WireGuard's nonce layout, served by
// the implementation measured fastest here (OpenSSL 3's ChaCha20 and Poly1305 composed
// in transport_aead.cpp; tests/bench/crypto_bench.cpp compares it with libsodium and
// with OpenSSL's own AEAD). Handshakes and
// cookies keep using crypto.hpp (libsodium). Thread-safe: each thread has its contexts.
#pragma once

#include <cstdint>
#include <span>

#include "wg/crypto.hpp"

namespace wg::transport {

// dst receives src.size() + 16 bytes; dst may equal src.data().
void seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// src includes the tag; dst receives src.size() - 16 bytes. False if authentication fails.
bool open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// (WireGuard's transport messages have no associated data; `ad` exists for the RFC vectors.)

// Wipes `key` from every thread's cached state (the key and OpenSSL's key schedule), so
// that no copy outlives the keypair that owns it. Thread-safe; waits for a seal or open
// under way on another thread.
void forget(const uint8_t key[kKeyLen]);

}  // namespace wg::transport

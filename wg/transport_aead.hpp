// ChaCha20-Poly1305 with WireGuard's nonce layout, for transport data only (handshakes
// and cookies use crypto.hpp). Thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "wg/crypto.hpp"

namespace wg::transport {

// dst receives src.size() + 16 bytes; dst may equal src.data().
void seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// src includes the tag; dst receives src.size() - 16 bytes. False if authentication fails.
// Transport messages have no `ad`; it exists for the RFC vectors.
bool open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// Wipes `key` from every thread's cached state, so no copy outlives its keypair. Waits
// for a seal or open under way on another thread.
void forget(const uint8_t key[kKeyLen]);

}  // namespace wg::transport

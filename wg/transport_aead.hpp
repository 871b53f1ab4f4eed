// ChaCha20-Poly1305 for transport data. Thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "wg/crypto.hpp"

namespace wg::transport {

// dst receives src.size() + 16 bytes; dst may equal src.data().
void seal(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// dst receives src.size() - 16 bytes. False if authentication fails. `ad` is for tests.
bool open(uint8_t* dst, const uint8_t key[kKeyLen], uint64_t counter, std::span<const uint8_t> src,
          std::span<const uint8_t> ad = {});
// Wipes `key` from every thread's cache, so no copy outlives its keypair; waits for
// seals and opens under way.
void forget(const uint8_t key[kKeyLen]);

}  // namespace wg::transport

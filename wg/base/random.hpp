// Randomness from the operating system (libsodium's randombytes), for the core and the
// netstack alike.
#pragma once

#include <cstddef>

namespace wg {

// Fills p[0..n) with bytes from the system's cryptographic random source.
void random_bytes(void* p, size_t n);

}  // namespace wg

// Randomness from the operating system.
#pragma once

#include <cstddef>

namespace wg {

void random_bytes(void* p, size_t n);

}  // namespace wg

#include "wg/base/random.hpp"

#include <sodium.h>

#include <stdexcept>

namespace wg {

void random_bytes(void* p, size_t n) {
  // sodium_init is idempotent and thread-safe; it picks the random source once.
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw std::runtime_error("libsodium failed to initialise");
  if (n) randombytes_buf(p, n);
}

}  // namespace wg

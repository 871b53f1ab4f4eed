// Memory for objects holding keys: out of core dumps, mlock'ed while the limit allows,
// wiped when freed.
#pragma once

#include <cstddef>
#include <memory>

namespace wg {

void* secret_allocate(size_t bytes);
void secret_deallocate(void* p, size_t bytes);

struct SecretMemoryStats {
  size_t mapped = 0;
  size_t locked = 0;  // of mapped
};
SecretMemoryStats secret_memory_stats();

// For std::allocate_shared.
template <class T>
struct SecretAllocator {
  using value_type = T;
  SecretAllocator() = default;
  template <class U>
  SecretAllocator(const SecretAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(secret_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { secret_deallocate(p, n * sizeof(T)); }
  friend bool operator==(const SecretAllocator&, const SecretAllocator&) { return true; }
};

}  // namespace wg

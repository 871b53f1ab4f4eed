// Memory for objects that hold keys (keypairs, peers): kept out of core dumps
// (MADV_DONTDUMP) and locked in RAM (mlock) while the lock limit allows, never swapped
// out. Freed blocks are wiped and reused for objects of the same size.
#pragma once

#include <cstddef>
#include <memory>

namespace wg {

void* secret_allocate(size_t bytes);
void secret_deallocate(void* p, size_t bytes);  // wipes the block

// What the arena holds, for tests and diagnostics.
struct SecretMemoryStats {
  size_t mapped = 0;  // bytes mapped, all MADV_DONTDUMP
  size_t locked = 0;  // of which mlock'ed
};
SecretMemoryStats secret_memory_stats();

// For std::allocate_shared: the object and its control block in secret memory.
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

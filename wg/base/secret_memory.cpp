// A small arena of 256 KB chunks carved into blocks, a free list per block size: few
// sizes are ever asked for (a keypair, a peer, with their control blocks).
#include "wg/base/secret_memory.hpp"

#include <sodium.h>
#include <sys/mman.h>

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define WGNET_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define WGNET_LSAN 1
#endif
#endif
#ifdef WGNET_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace wg {
namespace {

constexpr size_t kChunk = 256 * 1024;
constexpr size_t kAlign = 64;

struct Arena {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;  // by rounded size
  char* next = nullptr;                                  // the current chunk's unused part
  size_t left = 0;
  SecretMemoryStats stats;
  bool lock_refused = false;

  void* take(size_t size) {
    std::lock_guard lock(mu);
    if (auto it = free.find(size); it != free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    if (size > kChunk) return map(size);
    if (left < size) {
      next = static_cast<char*>(map(kChunk));
      left = kChunk;
    }
    void* p = next;
    next += size;
    left -= size;
    return p;
  }

  void give(void* p, size_t size) {
    sodium_memzero(p, size);
    std::lock_guard lock(mu);
    free[size].push_back(p);
  }

  // Called with mu held.
  void* map(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    (void)::madvise(p, bytes, MADV_DONTDUMP);
#ifdef WGNET_LSAN
    __lsan_register_root_region(p, bytes);  // objects here hold heap pointers too
#endif
    stats.mapped += bytes;
    if (!lock_refused) {
      if (::mlock(p, bytes) == 0) stats.locked += bytes;
      else lock_refused = true;  // RLIMIT_MEMLOCK reached: dump exclusion only
    }
    return p;
  }
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: blocks may be freed during exit
  return *a;
}

size_t rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void* secret_allocate(size_t bytes) { return arena().take(rounded(bytes)); }

void secret_deallocate(void* p, size_t bytes) {
  if (p) arena().give(p, rounded(bytes));
}

SecretMemoryStats secret_memory_stats() {
  std::lock_guard lock(arena().mu);
  return arena().stats;
}

}  // namespace wg

// A tiny logger: silent by default in the library; programs raise the level.
// Never pass key material to it.
#pragma once

#include <fmt/core.h>

#include <atomic>
#include <cstdio>

namespace wg::log {

enum class Level { silent = 0, error = 1, verbose = 2 };

inline std::atomic<Level>& level() {
  static std::atomic<Level> l{Level::silent};
  return l;
}

inline void set_level(Level l) { level().store(l, std::memory_order_relaxed); }
inline bool enabled(Level l) { return level().load(std::memory_order_relaxed) >= l; }

template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::error)) fmt::print(stderr, "{}\n", fmt::format(f, std::forward<Args>(args)...));
}

template <class... Args>
void verbose(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::verbose)) fmt::print(stderr, "{}\n", fmt::format(f, std::forward<Args>(args)...));
}

// One line per event a user cares about (handshake completed, peer unreachable): shown
// at error level and above, so `LOG_LEVEL=error` still reports them.
template <class... Args>
void event(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::error)) fmt::print(stderr, "{}\n", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace wg::log

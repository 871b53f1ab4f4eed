// A tiny logger: silent by default in the library; programs raise the level.
// Never pass key material to it. Logging never throws: a line that cannot be formatted
// or written (stderr closed, a full pipe, a reader gone) is lost, not an exception in
// the caller's thread.
#pragma once

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <string>

namespace wg::log {

enum class Level { silent = 0, error = 1, verbose = 2 };

inline std::atomic<Level>& level() {
  static std::atomic<Level> l{Level::silent};
  return l;
}

inline void set_level(Level l) { level().store(l, std::memory_order_relaxed); }
inline bool enabled(Level l) { return level().load(std::memory_order_relaxed) >= l; }

// The line and its newline in one write(2) to descriptor 2: lines of several threads do
// not interleave, and nothing is buffered.
template <class... Args>
void line(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    std::string text = fmt::format(f, std::forward<Args>(args)...);
    text += '\n';
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
      if (n <= 0) return;  // EINTR too: a log line is not worth a retry loop
      done += static_cast<size_t>(n);
    }
  } catch (...) {
  }
}

template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (enabled(Level::error)) line(f, std::forward<Args>(args)...);
}

template <class... Args>
void verbose(fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (enabled(Level::verbose)) line(f, std::forward<Args>(args)...);
}

// Events a user cares about; shown at error level too.
template <class... Args>
void event(fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (enabled(Level::error)) line(f, std::forward<Args>(args)...);
}

}  // namespace wg::log

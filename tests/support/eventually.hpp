// Waiting for a condition another thread makes true: the C++ tests poll it here instead
// of sleeping for a guessed time, so a fast machine does not wait and a slow one is not
// failed.
#pragma once

#include <chrono>
#include <thread>

namespace wgtest {

// Tries `cond` every `poll` until it holds (true) or `timeout` has passed (false, after
// a last try). For a condition that, once true, stays true; that something does not
// happen cannot be waited for this way.
template <class F>
bool eventually(F&& cond, std::chrono::milliseconds timeout = std::chrono::seconds(5),
                std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace wgtest

// Whether another thread of this process sleeps in the kernel: a test that must know a
// call is blocked (not still on its way to block) before it acts reads it here.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>

#include "eventually.hpp"

namespace wgtest {

// Waits (up to 2 s) until the thread whose id `tid` holds is asleep in the kernel
// (state S in /proc/self/task/TID/stat); false if it never is. `tid` is 0 until the
// thread has stored its gettid().
inline bool blocked_in_kernel(const std::atomic<pid_t>& tid) {
  using namespace std::chrono_literals;
  return eventually(
      [&] {
        const pid_t t = tid.load();
        if (t == 0) return false;
        std::ifstream stat("/proc/self/task/" + std::to_string(t) + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto end_of_name = line.rfind(')');
        return end_of_name != std::string::npos && end_of_name + 2 < line.size() && line[end_of_name + 2] == 'S';
      },
      2s);
}

}  // namespace wgtest

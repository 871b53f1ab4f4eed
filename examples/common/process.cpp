#include "process.hpp"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

namespace programs {

WaitedSignals::WaitedSignals(std::initializer_list<int> signals) {
  sigemptyset(&set_);
  for (int s : signals) sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, &original_);
  sigpipe_was_default_ = ::signal(SIGPIPE, SIG_IGN) == SIG_DFL;
}

int WaitedSignals::wait(siginfo_t* info) const {
  for (;;) {
    const int sig = ::sigwaitinfo(&set_, info);
    if (sig >= 0) return sig;
    if (errno != EINTR) return -1;
  }
}

std::optional<wg::log::Level> parse_log_level(std::string_view name) {
  if (name == "verbose" || name == "debug") return wg::log::Level::verbose;
  if (name == "error") return wg::log::Level::error;
  if (name == "silent") return wg::log::Level::silent;
  return std::nullopt;
}

void make_undumpable() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    throw std::runtime_error(std::string("PR_SET_DUMPABLE: ") + std::strerror(errno));
}

void usage_error(std::string_view program, std::string what) {
  std::replace(what.begin(), what.end(), '\n', ' ');
  fmt::print(stderr, "{}: {} (--help for usage)\n", program, what);
  std::exit(1);
}

}  // namespace programs

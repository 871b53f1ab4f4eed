// What the daemons share about their process: the signals they wait for, the log levels
// their users name, and how a bad command line ends them.
#pragma once

#include <csignal>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "wg/base/log.hpp"

namespace programs {

// Signals waited for, not handled: the constructor blocks them (and ignores SIGPIPE), so
// it must run before the first thread starts for every thread to inherit the mask.
// original_mask() and sigpipe_was_default() are what a child should get back.
class WaitedSignals {
 public:
  WaitedSignals(std::initializer_list<int> signals);
  WaitedSignals(const WaitedSignals&) = delete;
  WaitedSignals& operator=(const WaitedSignals&) = delete;

  // The next of the signals; info, if given, says who sent it. Retries on EINTR.
  int wait(siginfo_t* info = nullptr) const;

  const sigset_t& original_mask() const { return original_; }
  bool sigpipe_was_default() const { return sigpipe_was_default_; }

 private:
  sigset_t set_{};
  sigset_t original_{};
  bool sigpipe_was_default_ = false;
};

// "verbose" (also "debug", wireguard-go's LOG_LEVEL word), "error" or "silent".
std::optional<wg::log::Level> parse_log_level(std::string_view name);

// Not dumpable: no core file, and /proc/PID/mem, environ and ptrace only for root (with
// CAP_SYS_PTRACE), not for another process of the same user. Changing user resets it
// (to fs.suid_dumpable): call again after. Throws std::runtime_error if refused.
void make_undumpable();

// Prints "PROGRAM: WHAT (--help for usage)" on one line to stderr and exits with 1.
[[noreturn]] void usage_error(std::string_view program, std::string what);

}  // namespace programs

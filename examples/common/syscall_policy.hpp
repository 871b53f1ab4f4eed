// The system calls each confined program may make, with their arguments: one table per
// program (syscall_policy.cpp), each entry naming the call site that needs it. confine.cpp
// turns a table into the seccomp filter.
#pragma once

#include <cstdint>
#include <vector>

#include "confine.hpp"

namespace programs {

// A condition on one argument: (argument & mask) == value; mask 0 is no condition.
// `self`: the value is this process's PID, filled in when the filter is made.
struct ArgIs {
  unsigned index = 0;
  uint64_t mask = 0;
  uint64_t value = 0;
  bool self = false;
};

// One form of a call the filter answers: allowed when every condition holds, or, with
// `error` set, failed with that errno without reaching the kernel.
struct SyscallRule {
  const char* name;
  ArgIs args[3] = {};
  int error = 0;
};

// `program`'s table: the calls allowed with any arguments, then the rules.
struct SyscallTable {
  std::vector<const char*> any_arguments;
  std::vector<SyscallRule> rules;
};

SyscallTable syscall_table(Program program);

}  // namespace programs

// A test case that cannot run here (no root, no IPv6 loopback, no UDP GSO) says why and
// is counted as skipped, never as passed: Catch2 v2 has no SKIP, so under ctest (which
// sets WGNET_TEST_SKIP_EXIT, tests/CMakeLists.txt) the process ends with that status,
// the test's SKIP_RETURN_CODE; run by hand, the case WARNs "SKIPPED: ..." and returns.
#pragma once

#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace wgnet_test {

inline void report_skip(const std::string& why) {
  if (const char* code = std::getenv("WGNET_TEST_SKIP_EXIT"); code && *code) {
    std::cout << "SKIPPED: " << why << std::endl;
    std::fflush(nullptr);
    std::_Exit(std::atoi(code));  // one case per process under ctest: nothing else is lost
  }
  WARN("SKIPPED: " << why);
}

}  // namespace wgnet_test

// Skips the rest of the test case (see above).
#define WGNET_SKIP(why)               \
  do {                                \
    ::wgnet_test::report_skip(why);   \
    return;                           \
  } while (0)

#define WGNET_REQUIRE_ROOT() \
  if (::geteuid() != 0) WGNET_SKIP("needs root (a TUN device in its own network namespace)")

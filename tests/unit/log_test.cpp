// The logger: a line that cannot be written is lost, never an exception in the caller
// (a daemon whose journal or terminal went away must keep running).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "wg/base/log.hpp"

namespace {

// Descriptor 2 replaced for the test's length, then restored.
struct StderrSwap {
  int saved = ::dup(STDERR_FILENO);
  explicit StderrSwap(int fd) { ::dup2(fd, STDERR_FILENO); }
  ~StderrSwap() {
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
  }
};

struct LevelSwap {
  wg::log::Level saved = wg::log::level().load();
  explicit LevelSwap(wg::log::Level l) { wg::log::set_level(l); }
  ~LevelSwap() { wg::log::set_level(saved); }
};

}  // namespace

TEST_CASE("log: a line to a pipe whose reader is gone is lost, not thrown", "[log]") {
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[0]);
  {
    StderrSwap swap(p[1]);
    LevelSwap level(wg::log::Level::verbose);
    CHECK_NOTHROW(wg::log::error("peer {}: {}", 1, "unreachable"));
    CHECK_NOTHROW(wg::log::event("handshake with peer {} completed", 2));
    CHECK_NOTHROW(wg::log::verbose("{}", std::string(100000, 'x')));
  }
  ::close(p[1]);
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_CASE("log: a line to a closed descriptor 2 is lost, not thrown", "[log]") {
  const int closed = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // read-only: every write fails
  REQUIRE(closed >= 0);
  {
    StderrSwap swap(closed);
    LevelSwap level(wg::log::Level::error);
    CHECK_NOTHROW(wg::log::error("{}", "nowhere to go"));
  }
  ::close(closed);
}

TEST_CASE("log: a line is written whole, with its newline, in one piece", "[log]") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  {
    StderrSwap swap(p[1]);
    LevelSwap level(wg::log::Level::error);
    wg::log::error("peer {} at {}", 7, "198.18.0.2:51820");
    wg::log::verbose("not shown at error level");
  }
  ::close(p[1]);
  char buf[256];
  const ssize_t n = ::read(p[0], buf, sizeof buf);
  ::close(p[0]);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)) == "peer 7 at 198.18.0.2:51820\n");
}

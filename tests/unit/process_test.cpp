// programs::WaitedSignals, programs::parse_log_level and the readiness pipe, shared by
// the daemons.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "daemon.hpp"
#include "process.hpp"

TEST_CASE("process: the log levels the daemons accept", "[process]") {
  CHECK(programs::parse_log_level("verbose") == wg::log::Level::verbose);
  CHECK(programs::parse_log_level("debug") == wg::log::Level::verbose);
  CHECK(programs::parse_log_level("error") == wg::log::Level::error);
  CHECK(programs::parse_log_level("silent") == wg::log::Level::silent);
  CHECK_FALSE(programs::parse_log_level(""));
  CHECK_FALSE(programs::parse_log_level("Verbose"));
  CHECK_FALSE(programs::parse_log_level("info"));
}

TEST_CASE("process: waited signals are blocked, waited for, and the original mask kept", "[process]") {
  sigset_t before;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  REQUIRE_FALSE(sigismember(&before, SIGUSR2));
  const auto sigpipe_before = ::signal(SIGPIPE, SIG_DFL);
  {
    const programs::WaitedSignals signals{SIGUSR2, SIGHUP};
    sigset_t now;
    pthread_sigmask(SIG_SETMASK, nullptr, &now);
    CHECK(sigismember(&now, SIGUSR2));
    CHECK(sigismember(&now, SIGHUP));
    CHECK_FALSE(sigismember(&signals.original_mask(), SIGUSR2));
    CHECK(signals.sigpipe_was_default());
    CHECK(::signal(SIGPIPE, SIG_IGN) == SIG_IGN);  // the constructor ignored it

    // Sent to this thread while blocked: pending, then taken by wait() with its sender.
    REQUIRE(pthread_kill(pthread_self(), SIGUSR2) == 0);
    siginfo_t info{};
    CHECK(signals.wait(&info) == SIGUSR2);
    CHECK(info.si_signo == SIGUSR2);
    REQUIRE(pthread_kill(pthread_self(), SIGHUP) == 0);
    CHECK(signals.wait() == SIGHUP);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::signal(SIGPIPE, sigpipe_before);
}

TEST_CASE("process: a readiness pipe says up, or that every writer left first", "[process]") {
  SECTION("one byte: up") {
    auto p = programs::ReadyPipe::make();
    programs::notify_ready(p.write_fd);
    CHECK(programs::wait_ready(p.read_fd));
  }
  SECTION("the writer closed without a word: not up") {
    auto p = programs::ReadyPipe::make();
    ::close(p.write_fd);
    CHECK_FALSE(programs::wait_ready(p.read_fd));
  }
  SECTION("a child that ends before it is up, and one that gets up") {
    for (const bool up : {false, true}) {
      auto p = programs::ReadyPipe::make();
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(p.read_fd);
        if (up) programs::notify_ready(p.write_fd);
        std::_Exit(0);
      }
      ::close(p.write_fd);
      CHECK(programs::wait_ready(p.read_fd) == up);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
}

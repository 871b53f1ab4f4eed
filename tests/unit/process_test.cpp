// programs::WaitedSignals and programs::parse_log_level, shared by the daemons.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>

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

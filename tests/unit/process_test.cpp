// programs::WaitedSignals, programs::parse_log_level and the readiness pipe, shared by
// the daemons.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

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
    CHECK(programs::wait_ready(p.read_fd).up);
  }
  SECTION("the writer closed without a word: not up") {
    auto p = programs::ReadyPipe::make();
    ::close(p.write_fd);
    CHECK_FALSE(programs::wait_ready(p.read_fd).up);
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
      CHECK(programs::wait_ready(p.read_fd).up == up);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
}

namespace {

// Runs fork_daemon("t") in a child whose stderr is captured; the daemon does `then`.
// Returns the child's exit status and what it printed.
template <class F>
std::pair<int, std::string> start_daemon(F then) {
  auto out = programs::ReadyPipe::make();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out.read_fd);
    ::dup2(out.write_fd, STDERR_FILENO);
    const int ready = programs::fork_daemon("t");
    then(ready);
    std::_Exit(0);
  }
  ::close(out.write_fd);
  std::string said;
  char buf[256];
  for (ssize_t n; (n = ::read(out.read_fd, buf, sizeof buf)) != 0;)
    if (n > 0) said.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  ::close(out.read_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, said};
}

}  // namespace

TEST_CASE("process: a background start prints the daemon's reason, or says it said none", "[process]") {
  SECTION("the daemon says why it ends: its words, exit 1") {
    auto [status, said] = start_daemon([](int) {
      const char why[] = "t: cannot open UDP port 1: Permission denied\n";
      (void)!::write(STDERR_FILENO, why, sizeof why - 1);
      std::_Exit(1);
    });
    CHECK(status == 1);
    CHECK(said == "t: cannot open UDP port 1: Permission denied\n");
  }
  SECTION("the daemon ends without a word: the generic line, exit 1") {
    auto [status, said] = start_daemon([](int) { std::_Exit(1); });
    CHECK(status == 1);
    CHECK(said == "t: the background process exited before it was up\n");
  }
  SECTION("the daemon warns, then is up: the warning, exit 0; later words go nowhere") {
    auto [status, said] = start_daemon([](int ready) {
      const char warning[] = "t: warning: no Landlock\n";
      (void)!::write(STDERR_FILENO, warning, sizeof warning - 1);
      programs::daemon_ready(ready, ::open("/dev/null", O_RDWR | O_CLOEXEC));
      (void)!::write(STDERR_FILENO, "late\n", 5);
      std::_Exit(0);
    });
    CHECK(status == 0);
    CHECK(said == "t: warning: no Landlock\n");
  }
}

TEST_CASE("process: a re-executed daemon finds its stderr is the readiness pipe", "[process]") {
  auto p = programs::ReadyPipe::make();
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(p.write_fd, STDERR_FILENO);
  const int null = programs::null_if_stderr_is(p.write_fd);
  ::dup2(saved, STDERR_FILENO);
  CHECK(null >= 0);
  CHECK(programs::null_if_stderr_is(p.write_fd) == -1);  // stderr is the terminal again
  if (null >= 0) ::close(null);
  ::close(saved);
  ::close(p.read_fd);
  ::close(p.write_fd);
}

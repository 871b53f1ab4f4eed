#include "daemon.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace programs {

namespace {
constexpr char kUp = '\0';

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

ReadyPipe ReadyPipe::make() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  return {p[0], p[1]};
}

void notify_ready(int fd) {
  write_all(fd, &kUp, 1);
  ::close(fd);
}

Readiness wait_ready(int read_fd, int copy_to) {
  Readiness r;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const char* end = static_cast<const char*>(std::memchr(buf, kUp, static_cast<size_t>(n)));
    const size_t text = end ? static_cast<size_t>(end - buf) : static_cast<size_t>(n);
    if (copy_to >= 0) write_all(copy_to, buf, text);
    r.said += text;
    if (end) {
      r.up = true;
      break;
    }
  }
  ::close(read_fd);
  return r;
}

int fork_daemon(std::string_view program, int pass_on, bool keep_stderr, const char* remove_if_failed) {
  struct stat made{};
  const bool remove = remove_if_failed && ::lstat(remove_if_failed, &made) == 0;
  const ReadyPipe p = ReadyPipe::make();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid > 0) {
    ::close(p.write_fd);
    const Readiness r = wait_ready(p.read_fd, STDERR_FILENO);
    if (!r.up && r.said == 0)
      fmt::print(stderr, "{}: the background process exited before it was up\n", program);
    struct stat now{};
    if (!r.up && remove && ::lstat(remove_if_failed, &now) == 0 && now.st_dev == made.st_dev &&
        now.st_ino == made.st_ino)
      ::unlink(remove_if_failed);
    if (r.up && pass_on >= 0) notify_ready(pass_on);
    std::_Exit(r.up ? 0 : 1);
  }
  ::close(p.read_fd);
  setsid();
  if (!keep_stderr) ::dup2(p.write_fd, STDERR_FILENO);
  return p.write_fd;
}

void daemon_ready(int fd, int null) {
  // Off the pipe first: once told, the parent exits, and a line written to a pipe
  // without a reader fails (the log would throw on it).
  if (null >= 0) {
    for (int target : {0, 1, 2}) ::dup2(null, target);
    if (null > 2) ::close(null);
  }
  notify_ready(fd);
}

int null_if_stderr_is(int ready_fd) {
  struct stat a{}, b{};
  if (::fstat(STDERR_FILENO, &a) != 0 || ::fstat(ready_fd, &b) != 0) return -1;
  if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) return -1;
  const int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "/dev/null");
  return fd;
}

}  // namespace programs

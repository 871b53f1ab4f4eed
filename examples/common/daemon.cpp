#include "daemon.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace programs {

namespace {
constexpr char kUp = 'k';
}  // namespace

ReadyPipe ReadyPipe::make() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  return {p[0], p[1]};
}

void notify_ready(int fd) {
  ssize_t n;
  do n = ::write(fd, &kUp, 1);
  while (n < 0 && errno == EINTR);
  ::close(fd);
}

bool wait_ready(int read_fd) {
  char c = 0;
  ssize_t n;
  do n = ::read(read_fd, &c, 1);
  while (n < 0 && errno == EINTR);
  ::close(read_fd);
  return n == 1 && c == kUp;
}

int fork_daemon() {
  const ReadyPipe p = ReadyPipe::make();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid > 0) {
    ::close(p.write_fd);
    std::_Exit(wait_ready(p.read_fd) ? 0 : 1);
  }
  ::close(p.read_fd);
  setsid();
  return p.write_fd;
}

void daemon_ready(int fd, int null) {
  notify_ready(fd);
  if (null >= 0) {
    for (int target : {0, 1, 2}) ::dup2(null, target);
    if (null > 2) ::close(null);
  }
}

}  // namespace programs

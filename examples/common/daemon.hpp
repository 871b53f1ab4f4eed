// A daemon's start in the background with a readiness pipe: the process the user
// started returns only once the one that stays is up (exit 0), or has failed (exit 1,
// with the reason the one that stays printed).
#pragma once

#include <cstddef>
#include <string_view>

namespace programs {

// Forks before any thread starts. The parent copies what the child writes to the pipe
// to its own stderr until the child's notify_ready, then notifies `pass_on` (if >= 0)
// and exits 0; if the child ends first it exits 1, saying "PROGRAM: the background
// process exited before it was up" when the child said nothing. It never returns. The
// child, in a new session, gets the pipe's write end (for daemon_ready); its stderr is
// the pipe too unless keep_stderr. `remove_if_failed`: a file the parent removes when the
// child ends first and the file is still the one there at the fork (a UAPI socket the
// child, become another user, could not remove).
int fork_daemon(std::string_view program, int pass_on = -1, bool keep_stderr = false,
                const char* remove_if_failed = nullptr);

// The child of fork_daemon is up: lets go of the terminal and the pipe (`null`: /dev/null
// onto 0, 1 and 2, opened before the sandbox; -1 keeps them), then tells the parent.
void daemon_ready(int fd, int null);

// /dev/null (close-on-exec) if stderr is the pipe `ready_fd` writes to, else -1: what a
// re-executed child gives daemon_ready. Throws std::system_error.
int null_if_stderr_is(int ready_fd);

// A pipe's read end and write end, both close-on-exec. Throws std::system_error.
struct ReadyPipe {
  int read_fd = -1, write_fd = -1;
  static ReadyPipe make();
};

// Writes the byte that says "up" (NUL, which no message has) to `fd` and closes it.
void notify_ready(int fd);

// Blocks until the writers of the pipe `read_fd` said "up" or all closed their end
// first; what they wrote before goes to `copy_to` (if >= 0). Closes read_fd.
struct Readiness {
  bool up = false;
  size_t said = 0;  // bytes written before "up" or the end
};
Readiness wait_ready(int read_fd, int copy_to = -1);

}  // namespace programs

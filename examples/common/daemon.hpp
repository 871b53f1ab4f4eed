// A daemon's start in the background with a readiness pipe: the process the user
// started returns only once the one that stays is up (exit 0), or has failed (exit 1).
#pragma once

namespace programs {

// Forks before any thread starts. The parent waits for the child's notify_ready (exit 0)
// or its end (exit 1; the child has printed why), and never returns. The child, in a new
// session, gets the pipe's write end to hand to daemon_ready.
int fork_daemon();

// The child of fork_daemon is up: tells the parent, and lets go of the terminal
// (`null`: /dev/null, opened before the sandbox; -1 keeps the terminal).
void daemon_ready(int fd, int null);

// A pipe's read end and write end, both close-on-exec. Throws std::system_error.
struct ReadyPipe {
  int read_fd = -1, write_fd = -1;
  static ReadyPipe make();
};

// Writes the one byte that says "up" to `fd` and closes it.
void notify_ready(int fd);

// Blocks until the writers of the pipe `read_fd` said "up" (true) or all closed their
// end first (false); closes read_fd.
bool wait_ready(int read_fd);

}  // namespace programs

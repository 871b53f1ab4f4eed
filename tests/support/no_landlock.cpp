// no_landlock COMMAND [ARGS...]: runs COMMAND as on a kernel without Landlock — its
// three system calls fail with ENOSYS (a seccomp filter, with no_new_privs), everything
// else as before. For the tests of the daemons' fallback when they cannot confine files.
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: no_landlock COMMAND [ARGS...]\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return 2;
  for (const char* name : {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}) {
    const int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), seccomp_syscall_resolve_name(name), 0);
    if (rc != 0) {
      std::fprintf(stderr, "no_landlock: %s: %s\n", name, std::strerror(-rc));
      return 2;
    }
  }
  if (int rc = seccomp_load(ctx); rc != 0) {
    std::fprintf(stderr, "no_landlock: seccomp_load: %s\n", std::strerror(-rc));
    return 2;
  }
  seccomp_release(ctx);
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "no_landlock: %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}

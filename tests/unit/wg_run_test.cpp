// wg-run's start-up diagnoses (examples/wg-run/diagnose.hpp) over a planted /proc/sys:
// each setting that forbids unprivileged user namespaces is named with its fix, in the
// order the kernel's checks would meet them; a TUN device closed or missing is named too.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "diagnose.hpp"

namespace fs = std::filesystem;

namespace {

// A directory standing in for /proc/sys, removed at the end of the case.
struct SysctlDir {
  fs::path root;
  SysctlDir() {
    char tmpl[] = "/tmp/wg-run-test.XXXXXX";
    root = ::mkdtemp(tmpl);
    fs::create_directories(root / "user");
    fs::create_directories(root / "kernel");
  }
  ~SysctlDir() { fs::remove_all(root); }
  void set(const char* name, const char* value) const { std::ofstream(root / name) << value << "\n"; }
};

}  // namespace

TEST_CASE("wg-run: each setting that forbids user namespaces is named, with its fix", "[wg-run]") {
  SysctlDir sys;
  const std::string root = sys.root.string();
  sys.set("user/max_user_namespaces", "15000");

  SECTION("nothing forbids them: the error itself") {
    CHECK(wgrun::userns_failure("create a user namespace", EPERM, root) ==
          "cannot create a user namespace: Operation not permitted");
  }
  SECTION("user.max_user_namespaces = 0") {
    sys.set("user/max_user_namespaces", "0");
    sys.set("kernel/apparmor_restrict_unprivileged_userns", "1");  // the first setting met is named
    CHECK(wgrun::userns_failure("create a user namespace", ENOSPC, root) ==
          "cannot create a user namespace: unprivileged user namespaces are disabled, user.max_user_namespaces is 0 "
          "(as root: sysctl -w user.max_user_namespaces=15000, and in /etc/sysctl.d/ to keep it)");
  }
  SECTION("Debian's kernel.unprivileged_userns_clone = 0") {
    sys.set("kernel/unprivileged_userns_clone", "0");
    CHECK(wgrun::userns_failure("create a user namespace", EPERM, root) ==
          "cannot create a user namespace: unprivileged user namespaces are disabled, "
          "kernel.unprivileged_userns_clone is 0 (as root: sysctl -w kernel.unprivileged_userns_clone=1, and in "
          "/etc/sysctl.d/ to keep it)");
  }
  SECTION("Ubuntu's AppArmor restriction, met at a later step") {
    sys.set("kernel/unprivileged_userns_clone", "1");
    sys.set("kernel/apparmor_restrict_unprivileged_userns", "1");
    CHECK(wgrun::userns_failure("map uid 1000 into the user namespace", EPERM, root) ==
          "cannot map uid 1000 into the user namespace: AppArmor restricts unprivileged user namespaces, "
          "kernel.apparmor_restrict_unprivileged_userns is 1 (add an AppArmor profile that allows wg-run `userns,` "
          "as man 8 wg-run shows, or as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)");
  }
  SECTION("the restriction switched off (0) is not blamed") {
    sys.set("kernel/apparmor_restrict_unprivileged_userns", "0");
    CHECK(wgrun::userns_failure("create a user namespace", EPERM, root) ==
          "cannot create a user namespace: Operation not permitted");
  }
  SECTION("too many namespaces") {
    CHECK(wgrun::userns_failure("create a user namespace", ENOSPC, root) ==
          "cannot create a user namespace: too many user namespaces (user.max_user_namespaces is 15000, and they "
          "nest 32 deep at most)");
  }
}

TEST_CASE("wg-run: a TUN device that is missing or closed is named, with its fix", "[wg-run]") {
  SysctlDir sys;
  const std::string dev = (sys.root / "tun").string();

  SECTION("missing") {
    CHECK(wgrun::tun_failure(std::error_code(ENOENT, std::system_category()), dev, sys.root.string()) ==
          "cannot create the TUN interface: " + dev + " is missing (as root: modprobe tun; or mknod " + dev +
              " c 10 200)");
  }
  SECTION("closed to the caller: its mode and owner") {
    std::ofstream(dev) << "";
    ::chmod(dev.c_str(), 0600);
    CHECK(wgrun::tun_failure(std::error_code(EACCES, std::system_category()), dev, sys.root.string()) ==
          "cannot create the TUN interface: " + dev + " is not accessible to uid " + std::to_string(::getuid()) +
              " (mode 0600, owner uid " + std::to_string(::getuid()) +
              "): make it 0666 as Debian and Ubuntu ship it (as root: chmod 0666 " + dev + ")");
  }
  SECTION("refused by the kernel: the namespace settings are looked at") {
    std::ofstream(dev) << "";
    sys.set("user/max_user_namespaces", "0");
    CHECK(wgrun::tun_failure(std::error_code(EPERM, std::system_category()), dev, sys.root.string()).starts_with(
        "cannot create the TUN interface: unprivileged user namespaces are disabled"));
  }
}

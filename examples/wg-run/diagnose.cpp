// Start-up errors turned into causes and fixes, from the kernel's settings.
#include "diagnose.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/core.h>

namespace wgrun {
namespace {

// The first word of a sysctl file ("" when it does not exist or cannot be read).
std::string sysctl(const std::string& root, const char* name) {
  std::ifstream in(root + "/" + name);
  std::string v;
  in >> v;
  return v;
}

constexpr const char* kKeep = "and in /etc/sysctl.d/ to keep it";

}  // namespace

std::string userns_failure(const std::string& step, int err, const std::string& sysctl_root) {
  const std::string max = sysctl(sysctl_root, "user/max_user_namespaces");
  if (max == "0")
    return fmt::format(
        "cannot {}: unprivileged user namespaces are disabled, user.max_user_namespaces is 0 "
        "(as root: sysctl -w user.max_user_namespaces=15000, {})",
        step, kKeep);
  if (sysctl(sysctl_root, "kernel/unprivileged_userns_clone") == "0")
    return fmt::format(
        "cannot {}: unprivileged user namespaces are disabled, kernel.unprivileged_userns_clone is 0 "
        "(as root: sysctl -w kernel.unprivileged_userns_clone=1, {})",
        step, kKeep);
  if (sysctl(sysctl_root, "kernel/apparmor_restrict_unprivileged_userns") == "1")
    return fmt::format(
        "cannot {}: AppArmor restricts unprivileged user namespaces, "
        "kernel.apparmor_restrict_unprivileged_userns is 1 (add an AppArmor profile that allows wg-run "
        "`userns,` as man 8 wg-run shows, or as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)",
        step);
  if (err == ENOSPC || err == EUSERS)
    return fmt::format("cannot {}: too many user namespaces (user.max_user_namespaces is {}, and they nest 32 deep "
                       "at most)",
                       step, max.empty() ? "unknown" : max);
  return fmt::format("cannot {}: {}", step, std::strerror(err));
}

std::string tun_failure(std::error_code ec, const std::string& device, const std::string& sysctl_root) {
  const int err = ec.category() == std::system_category() || ec.category() == std::generic_category() ? ec.value() : 0;
  struct stat st{};
  const bool exists = ::stat(device.c_str(), &st) == 0;
  if (err == ENOENT || err == ENODEV || err == ENXIO || !exists)
    return fmt::format("cannot create the TUN interface: {} is missing (as root: modprobe tun; or mknod {} c 10 200)",
                       device, device);
  if (err == EACCES)
    return fmt::format(
        "cannot create the TUN interface: {} is not accessible to uid {} (mode {:04o}, owner uid {}): make it "
        "0666 as Debian and Ubuntu ship it (as root: chmod 0666 {})",
        device, ::getuid(), st.st_mode & 07777, st.st_uid, device);
  if (err == EPERM) return userns_failure("create the TUN interface", err, sysctl_root);
  return fmt::format("cannot create the TUN interface: {}", ec.message());
}

}  // namespace wgrun

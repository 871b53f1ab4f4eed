// The errors a user meets when wg-run sets up its namespaces, each as one line naming the
// cause and the fix: user namespaces disabled or restricted (and by which setting), and
// /dev/net/tun missing or closed.
#pragma once

#include <string>
#include <system_error>

namespace wgrun {

// Why `step` (e.g. "create a user namespace") failed with errno `err`. Reads the settings
// that forbid unprivileged user namespaces under `sysctl_root` (the kernel's /proc/sys;
// tests give a directory of their own): user.max_user_namespaces = 0, Debian's
// kernel.unprivileged_userns_clone = 0, Ubuntu's
// kernel.apparmor_restrict_unprivileged_userns = 1, in that order, and names the first
// that is set; else the limit (ENOSPC, EUSERS) or the error itself.
std::string userns_failure(const std::string& step, int err, const std::string& sysctl_root = "/proc/sys");

// Why the TUN device could not be made: `ec` from tunlinux::Tun::create. Names the
// device node's mode and owner when it is closed to the caller, what loads the driver
// when it is missing, and the namespace restrictions (userns_failure) when the kernel
// refused the interface itself.
std::string tun_failure(std::error_code ec, const std::string& device = "/dev/net/tun",
                        const std::string& sysctl_root = "/proc/sys");

}  // namespace wgrun

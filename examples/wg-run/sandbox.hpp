// The child side of wg-run: a process that makes (or enters) the namespaces, builds the
// network there (lo, one TUN with its addresses and default routes, resolv.conf), hides
// the host (fresh /proc and /sys, and /tmp and /run unless host sockets are shared),
// hands the TUN out, and then stays as the PID namespace's init while COMMAND runs with
// no capabilities.
//
//   wg-run (user's namespaces)                      child: init of new user, PID, net, mount ns
//   ─────────────────────────                       ───────────────────────────────────────────
//   spawn() ── clone USER|PID ────────────────────> PID 1; uid/gid map to itself
//                                                   unshare NET|NS; mounts private
//                                                   lo up; TUN (IFF_VNET_HDR, offloads)
//                                                   addresses, link up, default routes
//                                                   /proc, /sys; /tmp, /run; resolv.conf
//   receive_devices() <──── 'T' + [TUN, rtnetlink] ─┘
//   Tun::from_fd, LinuxBind, wg::Device, UAPI
//   release() ──────────────── 'G' ───────────────> capabilities dropped, non-dumpable;
//                                                   fork: PID 2
//   kill(child, SIG) ─────────────────────────────> passed on to COMMAND      execvp(COMMAND)
//   waitpid ... exit with COMMAND's status <─────── exit with COMMAND's status; the kernel
//                                                   kills what is left in the namespace
//
// With --netns the child is forked in the user's namespaces, enters the given namespace
// (and the user namespace that owns it) instead, hands the TUN out and exits: there is no
// COMMAND.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "tunlinux/tun.hpp"
#include "wg/base/fd.hpp"
#include "wg/base/ip.hpp"

namespace wgrun {

struct SandboxSpec {
  std::string interface;                  // the TUN's name
  int mtu = 1420;
  std::vector<wg::IpPrefix> addresses;    // Address= (host bits kept)
  tunlinux::Tun::Options tun;             // offloads the TUN is created with
  // COMMAND mode: a resolv.conf naming these (none: an empty one, so names fail and
  // never leak), and the command line to execute.
  std::vector<wg::IpAddress> dns;
  std::vector<std::string> dns_search;
  std::vector<std::string> command;
  std::string netns_path;                 // --netns: enter this namespace, no COMMAND
  bool share_host_sockets = false;        // keep the host's /tmp and /run (COMMAND mode)
  sigset_t restore_mask;                  // the signal mask COMMAND starts with
  bool restore_sigpipe_default = true;    // SIGPIPE back to SIG_DFL (the parent ignores it)
  // Called first in the child, on its copy of the parent's memory: wipes the keys there.
  std::function<void()> forget_secrets;
};

struct Child {
  pid_t pid = -1;
  wg::UniqueFd control;  // the parent's end of the socket pair
};

// Starts the child (call it while the process has a single thread: user namespaces
// cannot be made by a threaded process); throws when it cannot be made. The child
// reports its own errors on stderr, one line each starting "wg-run: ", and exits 1 (127
// or 126 when COMMAND cannot be run). Signals sent to it reach COMMAND; its exit status
// is COMMAND's as a shell gives it (128+N for signal N).
Child spawn(const SandboxSpec& spec);

// Waits for the child's TUN descriptor and the rtnetlink socket of its namespace; false
// when the child failed instead (its control socket closed: wait for its exit status).
bool receive_devices(int control, wg::UniqueFd& tun, wg::UniqueFd& link);

// Lets the child execute COMMAND. Closing `control` instead makes it exit 1 unrun.
void release(int control);

}  // namespace wgrun

// What a daemon may do once it is up: the files it may still touch (Landlock) and the
// system calls it may make (a seccomp allow-list, with no_new_privs). wg-netstack and
// wg-tun confine themselves with these, so that a parser bug gives an attacker little.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace programs {

// Files a confined process may still use. Everything else on the file system is out of
// reach for good: no other file read or written, nothing made, removed or executed.
struct FileRules {
  std::vector<std::string> read_beneath;  // directories: any file beneath may be read
  std::vector<std::string> read_files;    // single files (their inode) may be read
  std::vector<std::string> remove_in;     // directories: files in them may be removed
  std::vector<std::string> devices;       // device files: opened read-write, ioctl
  bool signal_others = false;             // may signal processes outside the domain
};

// The files of the system resolver (getaddrinfo): resolv.conf (the directory of its
// target, which resolvers replace by rename), hosts, nsswitch.conf, gai.conf, host.conf,
// ld.so.cache and the NSS modules that nsswitch.conf may load.
void add_resolver_files(FileRules& rules);

// The result of confining: `abi` is the Landlock ABI used, 0 when none (the kernel has
// no Landlock, or it is turned off); `message` says so in one line for the log.
struct Confinement {
  int abi = 0;
  std::string message;
};

// Applies `rules` with the best Landlock ABI the kernel offers (plus, from ABI 6, no
// signals to processes outside the domain and no abstract Unix sockets outside it).
// Landlock confines the calling thread and the threads it creates after: call before
// any other thread starts (refused, abi 0, if one has). A path that does not exist is
// left out. Throws std::runtime_error when the kernel refuses a rule.
Confinement restrict_files(const FileRules& rules);

// What a call outside the allow-list gets.
enum class SyscallDenial {
  eperm,  // fails with EPERM: a missing entry degrades a feature instead of killing
  log,    // the same, and the kernel logs it (audit / kernel log: "type=1326 ... syscall=N")
  kill,   // the process prints the call's number and exits 159 (the tests' build)
};

// The denial of this build: kill when built with WGNET_SANDBOX_KILL, else eperm.
SyscallDenial default_denial();

// The programs that confine their system calls, each with its own table
// (syscall_policy.cpp). A program that confines itself (wg-run's outer process, say) adds
// its value here and its table there.
enum class Program {
  wg_netstack,
  wg_tun,
  wg_run,  // its outer process: the core over the TUN it was handed
};

// Installs `program`'s allow-list for every thread of the process (present and future),
// with no_new_privs: its calls with the arguments its table names; clone3 fails with
// ENOSYS (glibc then uses clone, whose flags a filter can read); anything else gets
// `denial`. Call it before the first byte from a peer, a client or the UAPI is read.
// Throws std::runtime_error if the kernel refuses the filter.
// `child`, if not 0, is a process it may also signal (wg-run's COMMAND).
void restrict_syscalls(Program program, SyscallDenial denial, pid_t child = 0);

// Becomes user `name` for good (its uid, its primary group, no supplementary groups),
// keeping only the capabilities `keep` (permitted and effective; none inheritable,
// ambient or in the bounding set beyond them). The process must be root and have one
// thread: a capability set belongs to a thread. Throws std::runtime_error naming the
// step that failed.
void become_user(const std::string& name, const std::vector<int>& keep);

// A user looked up ahead (while /etc/passwd can still be read): become_user(find_user(n), k)
// is become_user(n, k). find_user throws std::runtime_error for an unknown user or root.
struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};
User find_user(const std::string& name);
void become_user(const User& user, const std::vector<int>& keep);

// For a process that stays root: keeps only the capabilities `keep` (permitted and
// effective; none inheritable or ambient, the bounding set emptied beyond them) and
// locks the securebits so that neither uid 0 nor an exec gives the rest back. The
// process must have one thread. Throws std::runtime_error naming the step that failed.
void drop_capabilities(const std::vector<int>& keep);

// The effective capability set of the calling thread, as a mask (bit N: capability N).
uint64_t effective_capabilities();

}  // namespace programs

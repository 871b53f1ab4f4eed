#include "confine.hpp"

#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <linux/landlock.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <memory>
#include <stdexcept>

#include "syscall_policy.hpp"
#include "wg/base/fd.hpp"

namespace programs {
namespace {

// Landlock's rights by the ABI that brought them (linux/landlock.h of Debian 12 stops at
// ABI 2; the later values are the kernel's UAPI).
constexpr uint64_t kFsAbi1 = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM
constexpr uint64_t kFsRefer = 1ULL << 13;       // ABI 2
constexpr uint64_t kFsTruncate = 1ULL << 14;    // ABI 3
constexpr uint64_t kFsIoctlDev = 1ULL << 15;    // ABI 5
constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;        // ABI 6
constexpr uint64_t kReadFile = LANDLOCK_ACCESS_FS_READ_FILE;
constexpr uint64_t kRemoveFile = LANDLOCK_ACCESS_FS_REMOVE_FILE;

// struct landlock_ruleset_attr as of ABI 6; older kernels take its prefix.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct PathBeneath {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

int landlock_abi() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

// 0 when /proc/self/task cannot be read (Landlock, applied first, hides it): unknown.
int threads_running() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// Adds a path_beneath rule; false if the path does not exist.
bool add_rule(int ruleset, const std::string& path, uint64_t access, uint64_t handled) {
  wg::UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    throw std::runtime_error("sandbox: " + path + ": " + std::strerror(errno));
  }
  PathBeneath pb{access & handled, fd.get()};
  if (::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
    throw std::runtime_error("sandbox: Landlock rule for " + path + ": " + std::strerror(errno));
  return true;
}

void add_glob(FileRules& rules, const char* pattern) {
  glob_t g{};
  if (::glob(pattern, 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) rules.read_files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
}

}  // namespace

void add_resolver_files(FileRules& rules) {
  for (const char* f : {"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
                        "/etc/ld.so.cache"})
    rules.read_files.emplace_back(f);
  std::error_code ec;
  auto target = std::filesystem::canonical("/etc/resolv.conf", ec);
  if (!ec && target != "/etc/resolv.conf") rules.read_beneath.push_back(target.parent_path().string());
  for (const char* p : {"/lib/*/libnss_*.so*", "/usr/lib/*/libnss_*.so*", "/lib/libnss_*.so*", "/usr/lib/libnss_*.so*"})
    add_glob(rules, p);
}

Confinement restrict_files(const FileRules& rules) {
  const int abi = landlock_abi();
  if (abi <= 0)
    return {0, "sandbox: this kernel has no Landlock (or it is turned off): files are not confined"};
  if (int n = threads_running(); n != 1)
    return {0, "sandbox: " + std::to_string(n) + " threads already run: files are not confined"};
  RulesetAttr attr{kFsAbi1, 0, 0};
  if (abi >= 2) attr.handled_access_fs |= kFsRefer;
  if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
  if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
  if (abi >= 6) attr.scoped = kScopeAbstractUnix | (rules.signal_others ? 0 : kScopeSignal);
  const size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  wg::UniqueFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0)));
  if (!ruleset) throw std::runtime_error(std::string("sandbox: Landlock ruleset: ") + std::strerror(errno));
  const uint64_t handled = attr.handled_access_fs;
  for (auto& d : rules.read_beneath) add_rule(ruleset.get(), d, kReadFile, handled);
  for (auto& f : rules.read_files) add_rule(ruleset.get(), f, kReadFile, handled);
  for (auto& d : rules.remove_in) add_rule(ruleset.get(), d, kRemoveFile, handled);
  for (auto& d : rules.devices)
    add_rule(ruleset.get(), d, kReadFile | LANDLOCK_ACCESS_FS_WRITE_FILE | kFsIoctlDev, handled);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    throw std::runtime_error(std::string("sandbox: no_new_privs: ") + std::strerror(errno));
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0)
    throw std::runtime_error(std::string("sandbox: Landlock: ") + std::strerror(errno));
  return {abi, "sandbox: files confined (Landlock ABI " + std::to_string(abi) + ")"};
}

SyscallDenial default_denial() {
#ifdef WGNET_SANDBOX_KILL
  return SyscallDenial::kill;
#else
  return SyscallDenial::eperm;
#endif
}

namespace {

extern "C" void report_denied(int, siginfo_t* info, void*) {
  char line[96];
  int n = 0;
  const char prefix[] = "sandbox: system call ";
  std::memcpy(line, prefix, sizeof prefix - 1);
  n = sizeof prefix - 1;
  char digits[12];
  int d = 0;
  unsigned v = static_cast<unsigned>(info->si_syscall);
  do digits[d++] = static_cast<char>('0' + v % 10);
  while ((v /= 10) != 0);
  while (d > 0) line[n++] = digits[--d];
  const char suffix[] = " is not on the allow-list: exiting\n";
  std::memcpy(line + n, suffix, sizeof suffix - 1);
  n += sizeof suffix - 1;
  (void)!::write(2, line, static_cast<size_t>(n));
  ::_exit(159);  // 128 + SIGSYS, as if the kernel had killed it
}

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

void allow(scmp_filter_ctx ctx, const char* name) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0); rc != 0)
    throw std::runtime_error(std::string("sandbox: seccomp rule for ") + name + ": " + std::strerror(-rc));
}

void add(scmp_filter_ctx ctx, const SyscallRule& rule, scmp_datum_t pid) {
  const int nr = seccomp_syscall_resolve_name(rule.name);
  if (nr == __NR_SCMP_ERROR) return;
  scmp_arg_cmp cmp[std::extent_v<decltype(SyscallRule::args)>];
  unsigned n = 0;
  for (const ArgIs& a : rule.args)
    if (a.mask != 0) cmp[n++] = {a.index, SCMP_CMP_MASKED_EQ, a.mask, a.self ? pid : a.value};
  const uint32_t action = rule.error ? SCMP_ACT_ERRNO(static_cast<uint32_t>(rule.error)) : SCMP_ACT_ALLOW;
  if (int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp); rc != 0)
    throw std::runtime_error(std::string("sandbox: seccomp rule for ") + rule.name + ": " + std::strerror(-rc));
}

}  // namespace

void restrict_syscalls(Program program, SyscallDenial denial, pid_t child) {
  const uint32_t deny = denial == SyscallDenial::kill ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(EPERM);
  std::unique_ptr<void, FilterDeleter> ctx(seccomp_init(deny));
  if (!ctx) throw std::runtime_error("sandbox: seccomp_init failed");
  auto check = [](int rc, const char* what) {
    if (rc != 0) throw std::runtime_error(std::string("sandbox: seccomp ") + what + ": " + std::strerror(-rc));
  };
  check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1), "thread sync");
  check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 1), "no_new_privs");
  check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "binary tree");
  if (denial == SyscallDenial::log) check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_LOG, 1), "logging");
  const SyscallTable table = syscall_table(program);
  for (const char* name : table.any_arguments) allow(ctx.get(), name);
  const auto pid = static_cast<scmp_datum_t>(::getpid());
  for (const SyscallRule& rule : table.rules) add(ctx.get(), rule, pid);
  if (child > 0)
    check(seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
                           SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(child))),
          "kill rule");
  if (denial == SyscallDenial::kill) {
    struct sigaction sa{};
    sa.sa_sigaction = report_denied;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSYS, &sa, nullptr);
  }
  check(seccomp_load(ctx.get()), "load");
}

namespace {

[[noreturn]] void fail_step(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

namespace {

uint64_t mask_of(const std::vector<int>& caps) {
  uint64_t mask = 0;
  for (int cap : caps) mask |= 1ULL << cap;
  return mask;
}

// The bounding set down to `mask`; needs CAP_SETPCAP, so before capset.
void drop_bounding_set(uint64_t mask, const std::string& step) {
  for (int cap = 0; cap < 64; ++cap) {
    if (mask & (1ULL << cap)) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      fail_step(step + ": dropping capability " + std::to_string(cap) + " from the bounding set");
    }
  }
}

// Permitted and effective = mask, inheritable and ambient empty.
void set_capabilities(uint64_t mask, const std::string& step) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  data[0].effective = data[0].permitted = static_cast<uint32_t>(mask);
  data[1].effective = data[1].permitted = static_cast<uint32_t>(mask >> 32);
  if (::syscall(SYS_capset, &header, data) != 0) fail_step(step + ": capset");
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    fail_step(step + ": clearing ambient capabilities");
}

}  // namespace

uint64_t effective_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return 0;
  return data[0].effective | (static_cast<uint64_t>(data[1].effective) << 32);
}

void drop_capabilities(const std::vector<int>& keep) {
  if (int n = threads_running(); n > 1)
    throw std::runtime_error("dropping capabilities: " + std::to_string(n) +
                             " threads already run (capabilities are per thread)");
  const uint64_t mask = mask_of(keep);
  drop_bounding_set(mask, "dropping capabilities");
  // uid 0 gains nothing at exec, and these bits cannot be turned back.
  constexpr unsigned long kSecureBits = (1UL << 0) | (1UL << 1) |  // NOROOT, locked
                                        (1UL << 2) | (1UL << 3) |  // NO_SETUID_FIXUP, locked
                                        (1UL << 5) |               // KEEP_CAPS locked (off)
                                        (1UL << 6) | (1UL << 7);   // NO_CAP_AMBIENT_RAISE, locked
  if (::prctl(PR_SET_SECUREBITS, kSecureBits, 0, 0, 0) != 0) fail_step("dropping capabilities: securebits");
  set_capabilities(mask, "dropping capabilities");
}

User find_user(const std::string& name) {
  struct passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  errno = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (!found) throw std::runtime_error("--user " + name + ": no such user");
  if (pw.pw_uid == 0) throw std::runtime_error("--user " + name + ": that is root (leave --user out to stay root)");
  return {name, pw.pw_uid, pw.pw_gid};
}

void become_user(const std::string& name, const std::vector<int>& keep) { become_user(find_user(name), keep); }

void become_user(const User& user, const std::vector<int>& keep) {
  if (int n = threads_running(); n > 1)
    throw std::runtime_error("--user: " + std::to_string(n) + " threads already run (capabilities are per thread)");
  const uint64_t mask = mask_of(keep);
  drop_bounding_set(mask, "--user");  // while CAP_SETPCAP is still held
  if (::setgroups(0, nullptr) != 0) fail_step("--user: setgroups");
  if (::setresgid(user.gid, user.gid, user.gid) != 0) fail_step("--user: setresgid");
  if (::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) fail_step("--user: PR_SET_KEEPCAPS");
  if (::setresuid(user.uid, user.uid, user.uid) != 0) fail_step("--user: setresuid");
  set_capabilities(mask, "--user");
  if (::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) fail_step("--user: PR_SET_KEEPCAPS");
  if (::setuid(0) == 0 || ::getuid() == 0) throw std::runtime_error("--user: root could be taken back");
}

}  // namespace programs

// Kernel TUN device: open/attach and offload negotiation, batched non-blocking reads and
// writes through a virtio-net header, and the rtnetlink event thread.
//
//   read():  poll(tun fd, close eventfd) -> readv([vnet hdr][buffer at offset][scratch])
//            ... repeated until EAGAIN or the batch is full; per packet:
//            plain, in the buffer -> finish_read() (complete a partial checksum)
//            GSO, spilled into the scratch -> gso_split() into this and the next buffers
//   write(): Gro::plan() per 128 packets -> one writev() per plain or coalesced packet
//            ... EINVAL on a coalesced one: that GRO kind off, its packets one by one
//   events:  poll(rtnetlink RTMGRP_LINK, close eventfd, wake eventfd) -> handler
#include "tunlinux/tun.hpp"

#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "wg/base/fd.hpp"

namespace tunlinux {
namespace {

// NLMSG_OK, with no signed/unsigned comparison for the compiler to warn of.
bool nlmsg_ok(const nlmsghdr* nh, int len) {
  return len >= static_cast<int>(sizeof(nlmsghdr)) && nh->nlmsg_len >= sizeof(nlmsghdr) &&
         nh->nlmsg_len <= static_cast<unsigned>(len);
}

// How long write() waits for room after EAGAIN before dropping the packet.
constexpr int kWriteWaitMs = 100;

std::error_code errno_code(int e = errno) { return {e, std::system_category()}; }
std::error_code canceled() { return std::make_error_code(std::errc::operation_canceled); }

using wg::UniqueFd;

// An interface ioctl (SIOC*IF*) by name, through a throwaway AF_INET datagram socket.
bool if_ioctl(const char* name, unsigned long request, ifreq& ifr, std::error_code& ec) {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) {
    ec = errno_code();
    return false;
  }
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (::ioctl(s.get(), request, &ifr) < 0) {
    ec = errno_code();
    return false;
  }
  return true;
}

bool is_up(unsigned flags) { return (flags & IFF_UP) && (flags & IFF_RUNNING); }

// Offers what `opts` allow and takes the first set the kernel accepts: everything, then
// without USO (Linux before 6.2 refuses the unknown bits with EINVAL), then nothing.
bool negotiate_offloads(int fd, const Tun::Options& opts, unsigned& accepted, std::error_code& ec) {
  constexpr unsigned kUso = kTunFUso4 | kTunFUso6;
  unsigned want = 0;
  if (opts.tso) want |= TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
  if (opts.uso) want |= TUN_F_CSUM | kUso;
  for (unsigned offer : {want, want & ~kUso, 0u}) {
    if (::ioctl(fd, TUNSETOFFLOAD, static_cast<unsigned long>(offer)) == 0) {
      accepted = offer;
      return true;
    }
    if (offer == 0) break;
  }
  ec = errno_code();
  return false;
}

}  // namespace

// --- open ---

// The interface ioctls go through the rtnetlink socket: a socket's ioctls act in the
// namespace it was made in (netlink passes them to dev_ioctl), which is the interface's
// namespace also after a move, while the process may live in another.
bool Tun::query_link(int nl_fd, int ifindex, LinkState& st, std::error_code& ec) {
  ifreq ifr{};
  ifr.ifr_ifindex = ifindex;
  if (::ioctl(nl_fd, SIOCGIFNAME, &ifr) < 0) {
    ec = errno == ENODEV ? std::make_error_code(std::errc::no_such_device) : errno_code();
    return false;
  }
  if (::ioctl(nl_fd, SIOCGIFFLAGS, &ifr) < 0) {
    ec = errno_code();
    return false;
  }
  st.up = is_up(static_cast<unsigned short>(ifr.ifr_flags));
  if (::ioctl(nl_fd, SIOCGIFMTU, &ifr) < 0) {
    ec = errno_code();
    return false;
  }
  st.mtu = ifr.ifr_mtu;
  return true;
}

namespace {

// An rtnetlink socket subscribed to link events, in the calling thread's namespace.
UniqueFd open_link_socket(std::error_code& ec) {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!nl) {
    ec = errno_code();
    return UniqueFd();
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (::bind(nl.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    ec = errno_code();
    return UniqueFd();
  }
  return nl;
}

// The same in the namespace `netns_fd` names. Made on a short-lived thread that enters
// it: setns(CLONE_NEWNET) moves only the calling thread, and a socket stays in the
// namespace it was made in, so no other thread (nor the UDP sockets) ever changes.
UniqueFd link_socket_in(int netns_fd, std::error_code& ec) {
  UniqueFd nl;
  std::thread([&] {
    if (::setns(netns_fd, CLONE_NEWNET) < 0) {
      ec = errno_code();
      return;
    }
    nl = open_link_socket(ec);
  }).join();
  return nl;
}

// Queues attached to the TUN interface `ifindex` of this namespace (rtnetlink's
// IFLA_TUN_NUM_QUEUES); -1 when it cannot be told (no answer, or a kernel before 4.19).
long attached_queues(int ifindex) {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!nl) return -1;
  struct {
    nlmsghdr h;
    ifinfomsg i;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 1;
  req.i.ifi_family = AF_UNSPEC;
  req.i.ifi_index = ifindex;
  timeval tv{1, 0};
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::send(nl.get(), &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return -1;
  alignas(nlmsghdr) uint8_t buf[16384];
  const ssize_t got = ::recv(nl.get(), buf, sizeof buf, 0);
  if (got <= 0) return -1;
  int len = static_cast<int>(got);
  for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); nlmsg_ok(nh, len); nh = NLMSG_NEXT(nh, len)) {
    if (nh->nlmsg_type != RTM_NEWLINK || nh->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) continue;
    int alen = static_cast<int>(IFLA_PAYLOAD(nh));
    for (auto* a = IFLA_RTA(static_cast<ifinfomsg*>(NLMSG_DATA(nh))); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
      if (a->rta_type != IFLA_LINKINFO) continue;
      int ilen = static_cast<int>(RTA_PAYLOAD(a));
      for (auto* info = static_cast<rtattr*>(RTA_DATA(a)); RTA_OK(info, ilen); info = RTA_NEXT(info, ilen)) {
        if (info->rta_type != IFLA_INFO_DATA) continue;
        int dlen = static_cast<int>(RTA_PAYLOAD(info));
        for (auto* d = static_cast<rtattr*>(RTA_DATA(info)); RTA_OK(d, dlen); d = RTA_NEXT(d, dlen)) {
          if (d->rta_type != IFLA_TUN_NUM_QUEUES || RTA_PAYLOAD(d) < sizeof(uint32_t)) continue;
          uint32_t n;
          std::memcpy(&n, RTA_DATA(d), sizeof n);
          return n;
        }
      }
    }
  }
  return -1;
}

// Opens /dev/net/tun and attaches it to the interface `ifr` names, with its flags.
UniqueFd attach_queue(ifreq& ifr, std::error_code& ec) {
  UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    ec = errno_code();
    return fd;
  }
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0) {
    ec = errno_code();
    fd.reset();
  }
  return fd;
}

// Attaches queues until fds holds `queues`.
bool attach_queues(ifreq& ifr, unsigned queues, std::vector<UniqueFd>& fds, std::error_code& ec) {
  while (fds.size() < queues) {
    UniqueFd fd = attach_queue(ifr, ec);
    if (!fd) return false;
    fds.push_back(std::move(fd));
  }
  return true;
}

}  // namespace

std::unique_ptr<Tun> Tun::create(const std::string& name, int mtu, const Options& opts, std::error_code& ec) {
  ec.clear();
  if (name.size() >= IFNAMSIZ || mtu < 0) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  if (opts.queues == 0) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
  if (opts.queues > 1) {
    ifr.ifr_flags |= IFF_MULTI_QUEUE;
    // A multi-queue interface takes any number of openers: one that another process
    // holds (a running wg-tun --queues) would be joined, its offloads, MTU and flows
    // disturbed, where a single-queue one is refused. Refuse it here the same way.
    const unsigned index = name.empty() ? 0 : if_nametoindex(name.c_str());
    if (index != 0 && attached_queues(static_cast<int>(index)) > 0) {
      ec = std::make_error_code(std::errc::device_or_resource_busy);
      return nullptr;
    }
  }
  std::vector<UniqueFd> fds;
  UniqueFd fd = attach_queue(ifr, ec);
  if (!fd) {
    // The kernel says EINVAL when the name belongs to a device of another kind.
    if (ec == std::errc::invalid_argument && !name.empty() && if_nametoindex(name.c_str()) != 0)
      ec = std::make_error_code(std::errc::device_or_resource_busy);
    return nullptr;
  }
  fds.push_back(std::move(fd));
  // TUNSETOFFLOAD acts on the interface, whichever queue asks.
  unsigned offloads = 0;
  if (!negotiate_offloads(fds[0].get(), opts, offloads, ec)) return nullptr;
  std::string actual(ifr.ifr_name, strnlen(ifr.ifr_name, IFNAMSIZ));
  if (!attach_queues(ifr, opts.queues, fds, ec)) return nullptr;
  if (mtu > 0) {
    ifreq m{};
    m.ifr_mtu = mtu;
    if (!if_ioctl(actual.c_str(), SIOCSIFMTU, m, ec)) return nullptr;
  }
  if (opts.queue_len > 0) {
    ifreq q{};
    if (!if_ioctl(actual.c_str(), SIOCGIFTXQLEN, q, ec)) return nullptr;
    if (static_cast<unsigned>(q.ifr_qlen) < opts.queue_len) {
      q.ifr_qlen = static_cast<int>(opts.queue_len);
      if (!if_ioctl(actual.c_str(), SIOCSIFTXQLEN, q, ec)) return nullptr;
    }
  }
  return open_events(fds, std::move(actual), true, offloads, opts, -1, ec);
}

UniqueFd Tun::link_socket(std::error_code& ec) {
  ec.clear();
  return open_link_socket(ec);
}

std::unique_ptr<Tun> Tun::from_fd(int fd, const Options& opts, std::error_code& ec) {
  return adopt(fd, -1, opts, ec);
}

std::unique_ptr<Tun> Tun::from_fd(int fd, int link_fd, const Options& opts, std::error_code& ec) {
  if (link_fd < 0 || opts.queues != 1) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  return adopt(fd, link_fd, opts, ec);
}

std::unique_ptr<Tun> Tun::adopt(int fd, int link_fd, const Options& opts, std::error_code& ec) {
  ec.clear();
  ifreq ifr{};
  if (::ioctl(fd, TUNGETIFF, &ifr) < 0) {
    ec = errno_code();
    return nullptr;
  }
  const int flags = ifr.ifr_flags;
  if ((flags & (IFF_TUN | IFF_TAP)) != IFF_TUN || !(flags & IFF_NO_PI) || opts.queues == 0 ||
      (opts.queues > 1 && !(flags & IFF_MULTI_QUEUE))) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  const bool vnet = flags & IFF_VNET_HDR;
  unsigned offloads = 0;
  if (vnet) {
    // The parent may have negotiated other offloads or another header size: redo both.
    int size = kVirtioNetHdrLen;
    if (::ioctl(fd, TUNSETVNETHDRSZ, &size) < 0) {
      ec = errno_code();
      return nullptr;
    }
    if (!negotiate_offloads(fd, opts, offloads, ec)) return nullptr;
  }
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    ec = errno_code();
    return nullptr;
  }
  std::vector<UniqueFd> fds;
  fds.emplace_back(fd);
  // The other queues, by the interface's name and flags (TUNGETIFF gave both).
  ifr.ifr_flags = static_cast<short>(flags & (IFF_TUN | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE));
  std::string name(ifr.ifr_name, strnlen(ifr.ifr_name, IFNAMSIZ));
  auto tun = attach_queues(ifr, opts.queues, fds, ec)
                 ? open_events(fds, std::move(name), vnet, offloads, opts, link_fd, ec)
                 : nullptr;
  if (!tun) fds[0].release();  // still the caller's
  return tun;
}

// Everything but the TUN descriptors: ifindex, the rtnetlink socket (subscribed before
// the first query, so no change falls between them; or the caller's link_fd, made in the
// interface's namespace), the eventfds. Takes `fds` and link_fd only on success.
std::unique_ptr<Tun> Tun::open_events(std::vector<UniqueFd>& fds, std::string name, bool vnet_hdr,
                                      unsigned offloads, const Options& opts, int link_fd, std::error_code& ec) {
  UniqueFd own;  // the socket made here; link_fd >= 0 is the caller's until success
  if (link_fd < 0) {
    own = open_link_socket(ec);
    if (!own) return nullptr;
  }
  const int nl_fd = link_fd >= 0 ? link_fd : own.get();
  // Through the rtnetlink socket: it names the interface in its own namespace.
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(nl_fd, SIOCGIFINDEX, &ifr) < 0) {
    ec = errno_code();
    return nullptr;
  }
  const int ifindex = ifr.ifr_ifindex;

  UniqueFd close_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!close_fd || !wake_fd) {
    ec = errno_code();
    return nullptr;
  }
  LinkState st;
  if (!query_link(nl_fd, ifindex, st, ec)) return nullptr;

  std::vector<int> raw;
  for (auto& f : fds) raw.push_back(f.release());
  own.release();
  auto tun = std::make_unique<Tun>(Private(), std::move(raw), std::move(name), ifindex, vnet_hdr, offloads, opts,
                                   nl_fd, close_fd.release(), wake_fd.release());
  tun->mtu_ = st.mtu;
  tun->up_ = st.up;
  // Named here, so the name is there when create returns, and by the thread itself:
  // naming another thread writes /proc/self/task/TID/comm, which Landlock may refuse.
  tun->events_ = std::thread([t = tun.get()] {
    pthread_setname_np(pthread_self(), "tun-events");
    t->run_events();
  });
  pthread_setname_np(tun->events_.native_handle(), "tun-events");  // for ps/gdb (and the tests)
  return tun;
}

// --- queues ---

// queue(i) for i >= 1: reads queue i; everything else is the Tun's.
class Tun::QueueDevice final : public tun::Device {
public:
  QueueDevice(Tun& tun, Queue& q) : tun_(tun), q_(q) {}
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override {
    return tun_.read_on(q_, bufs, sizes, offset, ec);
  }
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override {
    return tun_.write(bufs, offset, ec);
  }
  size_t queues() const override { return tun_.queues(); }
  tun::Device& queue(size_t i) override { return tun_.queue(i); }
  size_t batch_size() const override { return tun_.batch_size(); }
  int mtu() const override { return tun_.mtu(); }
  void set_event_handler(std::function<void(tun::Event)> handler) override {
    tun_.set_event_handler(std::move(handler));
  }
  void close() override { tun_.close(); }

private:
  Tun& tun_;
  Queue& q_;
};

Tun::Tun(Private, std::vector<int> fds, std::string name, int ifindex, bool vnet_hdr, unsigned offloads,
         const Options& opts, int nl_fd, int close_fd, int wake_fd)
    : name_(std::move(name)),
      ifindex_(ifindex),
      vnet_hdr_(vnet_hdr),
      offloads_(offloads),
      csum_trusted_(vnet_hdr && opts.csum),
      nl_fd_(nl_fd),
      close_fd_(close_fd),
      wake_fd_(wake_fd),
      // UDP_L4 on write needs Linux >= 6.2, which the kernel showed by taking USO; when
      // USO was not offered we cannot tell, and a refused write turns it off.
      tcp_gro_(vnet_hdr && opts.gro),
      udp_gro_(vnet_hdr && opts.gro && (!opts.uso || (offloads & kTunFUso4))),
      readv_(opts.readv),
      writev_(opts.writev) {
  for (int fd : fds) {
    auto q = std::make_unique<Queue>();
    q->fd = fd;
    q->kick_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    q->scratch = std::make_unique_for_overwrite<uint8_t[]>(kMaxPacket + 1);
    queues_.push_back(std::move(q));
  }
  for (size_t i = 1; i < queues_.size(); ++i) queue_devices_.push_back(std::make_unique<QueueDevice>(*this, *queues_[i]));
}

Tun::~Tun() {
  close();
  ::close(nl_fd_);
  ::close(close_fd_);
  ::close(wake_fd_);
  for (auto& q : queues_)
    if (q->kick_fd >= 0) ::close(q->kick_fd);
}

tun::Device& Tun::queue(size_t i) {
  if (i == 0 || i >= queues_.size()) return *this;
  return *queue_devices_[i - 1];
}

// --- read ---

size_t Tun::read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                 std::error_code& ec) {
  return read_on(*queues_[0], bufs, sizes, offset, ec);
}

bool Tun::wait_readable(std::error_code& ec) { return wait_readable_on(*queues_[0], ec); }

size_t Tun::read_now(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                     std::error_code& ec) {
  return read_now_on(*queues_[0], bufs, sizes, offset, ec);
}

size_t Tun::read_now(size_t queue, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                     size_t offset, std::error_code& ec) {
  if (queue >= queues_.size()) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return 0;
  }
  return read_now_on(*queues_[queue], bufs, sizes, offset, ec);
}

size_t Tun::read_on(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                    std::error_code& ec) {
  ec.clear();
  std::shared_lock lock(io_mu_);
  const size_t want = std::min(bufs.size(), sizes.size());
  // Try before polling: under load the queue is rarely empty, and poll() would be one
  // more syscall per batch. But if the last read found it empty, poll first: a trickle of
  // packets would otherwise cost a failed read for each.
  bool poll_first;
  {
    std::lock_guard rl(q.read_mu);
    poll_first = q.drained && q.pending_next >= q.pending.segments && want > 0;
  }
  for (;;) {
    if (closed_.load(std::memory_order_acquire)) {
      ec = canceled();
      return 0;
    }
    if (poll_first && !wait(q, POLLIN, -1, ec)) return 0;
    poll_first = true;
    size_t n;
    {
      std::lock_guard rl(q.read_mu);
      n = read_queued(q, bufs, sizes, offset, want, ec);
    }
    if (ec || n > 0 || want == 0) return n;
  }
}

bool Tun::wait_readable_on(Queue& q, std::error_code& ec) {
  ec.clear();
  std::shared_lock lock(io_mu_);
  if (closed_.load(std::memory_order_acquire)) {
    ec = canceled();
    return false;
  }
  {
    std::lock_guard rl(q.read_mu);
    // Segments left, or the last read stopped with the queue not yet empty: read first.
    if (q.pending_next < q.pending.segments || !q.drained) return true;
  }
  return wait(q, POLLIN, -1, ec);
}

size_t Tun::read_now_on(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                        size_t offset, std::error_code& ec) {
  ec.clear();
  std::shared_lock lock(io_mu_);
  if (closed_.load(std::memory_order_acquire)) {
    ec = canceled();
    return 0;
  }
  std::lock_guard rl(q.read_mu);
  const size_t n = read_queued(q, bufs, sizes, offset, std::min(bufs.size(), sizes.size()), ec);
  if (q.pending_next < q.pending.segments) {  // a reader asleep in poll() would not see them
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(q.kick_fd, &one, sizeof one);
  }
  return n;
}

size_t Tun::read_queued(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                        size_t offset, size_t want, std::error_code& ec) {
  size_t n = 0;
  q.drained = false;
  while (n < want) {
    long got = q.pending_next < q.pending.segments ? split_pending(q, bufs.subspan(n), sizes.subspan(n), offset)
                                                   : read_one(q, bufs.subspan(n), sizes.subspan(n), offset, ec);
    if (ec) {
      if (n > 0) ec.clear();  // hand over what we have; the next call reports it
      return n;
    }
    if (got == 0) {
      q.drained = true;
      break;
    }
    if (got > 0) n += static_cast<size_t>(got);
  }
  return n;
}

long Tun::read_one(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
                   std::error_code& ec) {
  const std::span<uint8_t> buf = bufs[0];
  if (buf.size() < offset) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return 0;
  }
  // The packet goes straight into the caller's buffer, up to what a plain packet can be
  // (the MTU, and some slack for a change not yet seen); the rest runs on into the scratch
  // buffer, right where it would continue if the buffer's part were copied in front of
  // it. A super-packet then needs only that head copied to the scratch buffer before it
  // is split from there (not all of its 64 KB); a plain packet longer than the head (an
  // MTU raised under us) is moved back whole. One byte more than any packet shows
  // truncation.
  uint8_t hdr[kVirtioNetHdrLen];
  const size_t cap = buf.size() - offset;
  const size_t plain_max = static_cast<size_t>(std::max(mtu_.load(std::memory_order_relaxed), 0)) + kPlainSlack;
  const size_t in_buf = std::min({cap, kMaxPacket, plain_max});
  iovec iov[3];
  int n = 0;
  if (vnet_hdr_) iov[n++] = {hdr, sizeof hdr};
  iov[n++] = {buf.data() + offset, in_buf};
  iov[n++] = {q.scratch.get() + in_buf, kMaxPacket - in_buf + 1};
  const size_t hdr_len = vnet_hdr_ ? sizeof hdr : 0;

  ssize_t r;
  while ((r = readv_(q.fd.load(std::memory_order_relaxed), iov, n)) < 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return 0;
    // EBADFD: the interface was deleted under us (the event thread is closing us).
    ec = errno == EBADFD ? canceled() : errno_code();
    return 0;
  }
  auto drop = [this] {
    read_dropped_.fetch_add(1, std::memory_order_relaxed);
    return -1L;
  };
  const size_t total = static_cast<size_t>(r);
  if (total < hdr_len || total - hdr_len > kMaxPacket) return drop();  // the spill byte was reached
  const size_t len = total - hdr_len;
  const VirtioNetHdr vh = vnet_hdr_ ? VirtioNetHdr::decode(hdr) : VirtioNetHdr{};
  if (vh.gso_type == kVirtioNetHdrGsoNone) {
    if (len > cap) return drop();
    if (len > in_buf) std::memcpy(buf.data() + offset + in_buf, q.scratch.get() + in_buf, len - in_buf);
    if (!finish_read(vh, buf.subspan(offset, len))) return drop();
    sizes[0] = len;
    return 1;
  }
  // A super-packet: gather it in the scratch buffer, then split it into bufs from there.
  std::memcpy(q.scratch.get(), buf.data() + offset, std::min(len, in_buf));
  std::error_code parse_ec;
  if (!gso_parse(vh, {q.scratch.get(), len}, q.pending, parse_ec)) return drop();
  q.pending_next = 0;
  read_split_.fetch_add(1, std::memory_order_relaxed);
  return split_pending(q, bufs, sizes, offset);
}

long Tun::split_pending(Queue& q, std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes,
                        size_t offset) {
  // Segments are bounded by the caller's buffers alone, not by mtu(): a super-packet
  // queued before an MTU change is still delivered whole.
  std::error_code ec;
  const size_t k = gso_split(q.pending, {q.scratch.get(), q.pending.len}, q.pending_next, bufs, sizes, offset,
                             std::numeric_limits<size_t>::max(), ec);
  if (ec) {
    q.pending_next = q.pending.segments;
    read_dropped_.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  q.pending_next += k;
  return static_cast<long>(k);
}

bool Tun::wait(Queue& q, short events, int timeout_ms, std::error_code& ec) {
  pollfd fds[3] = {{q.fd.load(std::memory_order_relaxed), events, 0}, {close_fd_, POLLIN, 0}, {q.kick_fd, POLLIN, 0}};
  const nfds_t count = events == POLLIN && q.kick_fd >= 0 ? 3 : 2;
  for (;;) {
    int r = ::poll(fds, count, timeout_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      ec = errno_code();
      return false;
    }
    if (fds[1].revents) {
      ec = canceled();
      return false;
    }
    if (count == 3 && fds[2].revents) {
      uint64_t v;
      [[maybe_unused]] ssize_t got = ::read(q.kick_fd, &v, sizeof v);
    }
    return r > 0;  // POLLERR/POLLHUP too: the next read or write reports them
  }
}

// --- write ---

size_t Tun::write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) {
  ec.clear();
  std::shared_lock lock(io_mu_);
  if (closed_.load(std::memory_order_acquire)) {
    ec = canceled();
    return 0;
  }
  if (vnet_hdr_ && offset < kVirtioNetHdrLen) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return 0;
  }
  size_t written = 0;
  const GroOptions opts = gro();
  if (opts.tcp || opts.udp) {
    write_coalesced(bufs, offset, opts, written, ec);
    return written;
  }
  for (const auto& b : bufs) {
    if (write_one(b, offset, ec)) ++written;
    else if (ec) break;
  }
  return written;
}

bool Tun::write_coalesced(std::span<const std::span<uint8_t>> bufs, size_t offset, GroOptions opts,
                          size_t& written, std::error_code& ec) {
  Gro gro;  // ~20 KB of plan on this thread's stack: write() may run on many threads
  for (size_t at = 0; at < bufs.size(); at += kGroMaxBatch) {
    const auto chunk = bufs.subspan(at, std::min(kGroMaxBatch, bufs.size() - at));
    gro.plan(chunk, offset, opts);
    for (const Gro::Write& w : gro.writes()) {
      const auto iov = gro.iov(w);
      if (iov.empty()) {  // shorter than offset
        write_rejected_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const std::span<const uint8_t> first = chunk[gro.members(w)[0]].subspan(offset);
      switch (send(first, iov.data(), static_cast<int>(iov.size()), ec)) {
        case Sent::ok:
          written += w.member_count;
          if (w.gso_type != kVirtioNetHdrGsoNone) write_coalesced_.fetch_add(1, std::memory_order_relaxed);
          continue;
        case Sent::failed:
          return false;
        case Sent::dropped:
          write_rejected_.fetch_add(w.member_count, std::memory_order_relaxed);
          continue;
        case Sent::refused:
          break;
      }
      if (w.gso_type == kVirtioNetHdrGsoNone) {
        write_rejected_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // The kernel does not take this kind of coalesced packet: stop making them, and
      // send this run's packets as they came (their bytes are untouched).
      (w.gso_type == kVirtioNetHdrGsoUdpL4 ? udp_gro_ : tcp_gro_).store(false, std::memory_order_relaxed);
      (w.gso_type == kVirtioNetHdrGsoUdpL4 ? opts.udp : opts.tcp) = false;
      for (uint16_t m : gro.members(w)) {
        if (write_one(chunk[m], offset, ec)) ++written;
        else if (ec) return false;
      }
    }
  }
  return true;
}

bool Tun::write_one(std::span<uint8_t> buf, size_t offset, std::error_code& ec) {
  if (buf.size() < offset) {
    write_rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const size_t hdr_len = vnet_hdr_ ? kVirtioNetHdrLen : 0;
  uint8_t* start = buf.data() + offset - hdr_len;
  if (vnet_hdr_) plain_header(buf.subspan(offset), csum_trusted_).encode(start);  // GSO_NONE
  const iovec iov{start, buf.size() - offset + hdr_len};
  const Sent s = send(buf.subspan(offset), &iov, 1, ec);
  if (s == Sent::ok) return true;
  if (s != Sent::failed) write_rejected_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

Tun::Sent Tun::send(std::span<const uint8_t> packet, const iovec* iov, int count, std::error_code& ec) {
  Queue& q = *queues_[flow_queue(packet, queues_.size())];
  for (;;) {
    if (writev_(q.fd.load(std::memory_order_relaxed), iov, count) >= 0) return Sent::ok;
    switch (errno) {
      case EINTR:
        continue;
      case EAGAIN:
        if (wait(q, POLLOUT, kWriteWaitMs, ec)) continue;
        return ec ? Sent::failed : Sent::dropped;  // no room in time: drop this one
      case EINVAL:
        return Sent::refused;  // not IPv4/IPv6 or malformed: the kernel's verdict on this packet only
      case ENOMEM:
      case ENOBUFS:
        return Sent::dropped;  // no memory for this packet now, as a full queue drops one
      case EBADFD:
        ec = canceled();
        return Sent::failed;
      default:  // EIO: the interface is down
        ec = errno_code();
        return Sent::failed;
    }
  }
}

Tun::Counters Tun::counters() const {
  return {read_dropped_.load(std::memory_order_relaxed), read_split_.load(std::memory_order_relaxed),
          write_rejected_.load(std::memory_order_relaxed), write_coalesced_.load(std::memory_order_relaxed)};
}

// --- events ---

void Tun::set_event_handler(std::function<void(tun::Event)> handler) {
  {
    std::lock_guard lock(handler_mu_);
    handler_ = std::move(handler);
  }
  report_pending_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof one);
}

void Tun::emit(tun::Event e) {
  std::function<void(tun::Event)> h;
  {
    std::lock_guard lock(handler_mu_);
    h = handler_;
  }
  if (h) h(e);
}

void Tun::run_events() {
  alignas(nlmsghdr) uint8_t buf[16384];
  pollfd fds[3] = {{nl_fd_, POLLIN, 0}, {close_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!closed_.load(std::memory_order_acquire)) {
    fds[0].fd = nl_fd_;  // follow_move() may have replaced it
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (fds[2].revents) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
      if (report_pending_.exchange(false)) {
        LinkState st;
        std::error_code ec;
        if (query_link(nl_fd_, ifindex_, st, ec)) {
          mtu_.store(st.mtu, std::memory_order_relaxed);
          up_ = st.up;
        }
        emit(up_ ? tun::Event::up : tun::Event::down);
      }
    }
    if (!fds[0].revents) continue;
    for (;;) {
      sockaddr_nl from{};
      socklen_t from_len = sizeof from;
      ssize_t r = ::recvfrom(nl_fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == ENOBUFS) {  // the socket overflowed: messages were lost
          resync();
          if (closed_.load(std::memory_order_acquire)) return;
          if (fds[0].fd != nl_fd_) break;  // moved: poll the new socket
          continue;
        }
        break;  // EAGAIN
      }
      if (from.nl_pid != 0) continue;  // only the kernel speaks for links
      handle_netlink(buf, static_cast<size_t>(r));
      if (closed_.load(std::memory_order_acquire)) return;
      if (fds[0].fd != nl_fd_) break;  // the interface moved: poll the new socket
    }
  }
}

void Tun::handle_netlink(const uint8_t* msg, size_t size) {
  int len = static_cast<int>(size);
  for (auto* nh = reinterpret_cast<const nlmsghdr*>(msg); nlmsg_ok(nh, len); nh = NLMSG_NEXT(nh, len)) {
    if (nh->nlmsg_type != RTM_NEWLINK && nh->nlmsg_type != RTM_DELLINK) continue;
    if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) continue;
    auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(nh));
    if (ifi->ifi_index != ifindex_) continue;

    if (nh->nlmsg_type == RTM_DELLINK) {
      link_gone();
      return;
    }
    int mtu = mtu_.load(std::memory_order_relaxed);
    int alen = static_cast<int>(IFLA_PAYLOAD(nh));
    for (auto* a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
      if (a->rta_type == IFLA_MTU && RTA_PAYLOAD(a) >= sizeof(uint32_t)) std::memcpy(&mtu, RTA_DATA(a), sizeof mtu);
    }
    apply({is_up(ifi->ifi_flags), mtu});
  }
}

void Tun::resync() {
  LinkState st;
  std::error_code ec;
  if (query_link(nl_fd_, ifindex_, st, ec)) {
    apply(st);
  } else if (ec == std::errc::no_such_device) {
    link_gone();
  }
}

// The kernel tells the old namespace RTM_DELLINK both when the interface is deleted and
// when it moves to another namespace (`ip link set wg0 netns other`, as the kernel's own
// netns.sh does). The TUN descriptor tells them apart: a deleted interface has detached
// it (TUNGETDEVNETNS fails, EBADFD), a moved one names its new namespace.
void Tun::link_gone() {
  if (follow_move()) return;
  deleted_.store(true, std::memory_order_release);
  // Always reported, even when already down: it is how users learn of the deletion.
  up_ = false;
  emit(tun::Event::down);
  shutdown();
}

bool Tun::follow_move() {
  UniqueFd netns;
  ifreq ifr{};
  {
    std::shared_lock lock(io_mu_);
    int fd = queues_[0]->fd.load(std::memory_order_relaxed);
    if (fd < 0) return false;
    netns = UniqueFd(::ioctl(fd, TUNGETDEVNETNS));
    if (!netns || ::ioctl(fd, TUNGETIFF, &ifr) < 0) return false;
  }
  std::error_code ec;
  UniqueFd nl = link_socket_in(netns.get(), ec);
  if (!nl && ec == std::errc::operation_not_permitted) {
    // Entering another namespace needs CAP_SYS_ADMIN, which a process that dropped
    // root lacks: the interface is down here until it comes back to this namespace.
    if (up_) {
      up_ = false;
      emit(tun::Event::down);
    }
    return true;
  }
  // Subscribed before the queries, so no change after them is missed.
  if (!nl || ::ioctl(nl.get(), SIOCGIFINDEX, &ifr) < 0) return false;
  ::close(nl_fd_);
  nl_fd_ = nl.release();
  ifindex_.store(ifr.ifr_ifindex, std::memory_order_relaxed);
  LinkState st;
  if (!query_link(nl_fd_, ifindex_, st, ec)) return ec != std::errc::no_such_device;
  apply(st);  // a move takes the interface down: the new namespace brings it up again
  return true;
}

void Tun::apply(const LinkState& st) {
  if (mtu_.exchange(st.mtu, std::memory_order_relaxed) != st.mtu) emit(tun::Event::mtu_changed);
  if (st.up != up_) {
    up_ = st.up;
    emit(up_ ? tun::Event::up : tun::Event::down);
  }
}

// --- close ---

void Tun::shutdown() {
  closed_.store(true, std::memory_order_release);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(close_fd_, &one, sizeof one);
  // read() and write() leave once they see close_fd_ readable; then the descriptor
  // can go without another thread still polling or reusing its number.
  std::unique_lock lock(io_mu_);
  for (auto& q : queues_) {
    const int fd = q->fd.exchange(-1);
    if (fd >= 0) ::close(fd);
  }
}

void Tun::close() {
  shutdown();
  std::lock_guard lock(join_mu_);
  if (events_.joinable() && events_.get_id() != std::this_thread::get_id()) events_.join();
}

}  // namespace tunlinux

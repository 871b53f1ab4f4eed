// LinuxBind: recvmmsg/sendmmsg over an IPv4 and an IPv6 UDP socket, with sticky source
// addresses. Receive flow: poll(socket, close eventfd) → recvmmsg → per datagram, the
// sender from msg_name and the sticky source (and later the GRO size) from the control.
#include "bind/linux.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace conn {

namespace {

constexpr int kSocketBuffer = 7 << 20;  // as wireguard-go asks for
constexpr int kPortTries = 100;         // fresh ports tried when IPv6 lacks IPv4's
constexpr auto kSendWait = std::chrono::seconds(1);

// Room for the control messages one datagram may carry: a PKTINFO (the IPv6 one is the
// larger) and, once the fast path enables it, a UDP_GRO size.
constexpr size_t kControlSize = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
static_assert(kControlSize % alignof(cmsghdr) == 0);

std::error_code sys_error(int err) { return {err, std::system_category()}; }

template <class F>
struct ScopeExit {
  F f;
  ~ScopeExit() { f(); }
};
template <class F>
ScopeExit(F) -> ScopeExit<F>;

class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
};

int poll_ms(std::chrono::steady_clock::duration left) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 1000));
}

// Waits until `fd` has `events` or `wake` is signalled (close()). Returns false with ec
// set on close (operation_canceled), at the deadline (EAGAIN) or on a poll error.
bool wait_for(int fd, short events, int wake, std::chrono::steady_clock::time_point deadline,
              std::error_code& ec) {
  for (;;) {
    int timeout = -1;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= left.zero()) {
        ec = sys_error(EAGAIN);
        return false;
      }
      timeout = poll_ms(left);
    }
    pollfd p[2] = {{fd, events, 0}, {wake, POLLIN, 0}};
    int r = ::poll(p, 2, timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      ec = sys_error(errno);
      return false;
    }
    if (p[1].revents) {
      ec = std::make_error_code(std::errc::operation_canceled);
      return false;
    }
    // Ready, or an error/hang-up on the socket: the next syscall reports it.
    if (p[0].revents) return true;
  }
}

void set_buffer(int fd, int force_opt, int opt) {
  int size = kSocketBuffer;
  // The FORCE variants pass rmem_max/wmem_max but need CAP_NET_ADMIN; without it the
  // plain ones give what the limits allow. Best effort either way.
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof size) == 0) return;
  (void)::setsockopt(fd, SOL_SOCKET, opt, &size, sizeof size);
}

bool set_int(int fd, int level, int opt, int value, std::error_code& ec) {
  if (::setsockopt(fd, level, opt, &value, sizeof value) == 0) return true;
  ec = sys_error(errno);
  return false;
}

// A non-blocking UDP socket of `family` (AF_INET or AF_INET6, v6-only) bound to the
// wildcard address and `port`, asking for PKTINFO on every datagram.
Fd open_socket(int family, uint16_t port, std::error_code& ec) {
  Fd fd(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP));
  if (!fd) {
    ec = sys_error(errno);
    return {};
  }
  set_buffer(fd.get(), SO_RCVBUFFORCE, SO_RCVBUF);
  set_buffer(fd.get(), SO_SNDBUFFORCE, SO_SNDBUF);
  int r;
  if (family == AF_INET) {
    if (!set_int(fd.get(), IPPROTO_IP, IP_PKTINFO, 1, ec)) return {};
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } else {
    if (!set_int(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1, ec)) return {};
    if (!set_int(fd.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, ec)) return {};
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    sa.sin6_addr = in6addr_any;
    r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  }
  // GRO (fast-path issue): setsockopt(SOL_UDP, UDP_GRO) here when the kernel takes it.
  if (r != 0) {
    ec = sys_error(errno);
    return {};
  }
  ec.clear();
  return fd;
}

uint16_t bound_port(int fd, std::error_code& ec) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    ec = sys_error(errno);
    return 0;
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
}

bool is_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

// Binds the IPv4 socket, then the IPv6 one on the port IPv4 got. With port 0 that port
// may be taken for IPv6 only: start over with a fresh one, as wireguard-go does. A family
// the kernel lacks is left out (its Fd stays empty); at least one must open.
bool bind_pair(uint16_t port, Fd& v4, Fd& v6, uint16_t& bound, std::error_code& ec) {
  for (int tries = 0;; ++tries) {
    bound = port;
    v4 = open_socket(AF_INET, port, ec);
    if (v4) bound = bound_port(v4.get(), ec);
    if (ec && ec != std::errc::address_family_not_supported) return false;
    v6 = open_socket(AF_INET6, bound, ec);
    if (ec == std::errc::address_in_use && port == 0 && v4 && tries < kPortTries) continue;
    if (ec && ec != std::errc::address_family_not_supported) return false;
    ec.clear();
    if (!v4 && !v6) {
      ec = std::make_error_code(std::errc::address_family_not_supported);
      return false;
    }
    if (!v4) bound = bound_port(v6.get(), ec);
    return !ec;
  }
}

// The sender of a received datagram.
void endpoint_from(const sockaddr_in6& name, Endpoint& ep) {
  ep = Endpoint{};
  if (name.sin6_family == AF_INET) {
    sockaddr_in sa;
    std::memcpy(&sa, &name, sizeof sa);
    ep.family = 4;
    std::memcpy(ep.addr.data(), &sa.sin_addr, 4);
    ep.port = ntohs(sa.sin_port);
  } else if (name.sin6_family == AF_INET6) {
    ep.family = 6;
    std::memcpy(ep.addr.data(), &name.sin6_addr, 16);
    ep.port = ntohs(name.sin6_port);
    ep.scope_id = name.sin6_scope_id;
  }
}

// The destination address of a send, and the PKTINFO that picks its source.
struct Destination {
  sockaddr_storage name{};
  socklen_t name_len = 0;
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))]{};
  size_t control_len = 0;

  explicit Destination(const Endpoint& ep) {
    if (ep.family == 4) {
      auto* sa = reinterpret_cast<sockaddr_in*>(&name);
      sa->sin_family = AF_INET;
      sa->sin_port = htons(ep.port);
      std::memcpy(&sa->sin_addr, ep.addr.data(), 4);
      name_len = sizeof(sockaddr_in);
    } else {
      auto* sa = reinterpret_cast<sockaddr_in6*>(&name);
      sa->sin6_family = AF_INET6;
      sa->sin6_port = htons(ep.port);
      std::memcpy(&sa->sin6_addr, ep.addr.data(), 16);
      sa->sin6_scope_id = ep.scope_id;
      name_len = sizeof(sockaddr_in6);
    }
    if (ep.has_source) set_source(ep);
  }

  void set_source(const Endpoint& ep) {
    cmsghdr h{};
    if (ep.family == 4) {
      in_pktinfo pi{};
      pi.ipi_ifindex = static_cast<int>(ep.source_ifindex);
      std::memcpy(&pi.ipi_spec_dst, ep.source.data(), 4);
      h.cmsg_level = IPPROTO_IP;
      h.cmsg_type = IP_PKTINFO;
      h.cmsg_len = CMSG_LEN(sizeof pi);
      std::memcpy(control + CMSG_LEN(0), &pi, sizeof pi);
      control_len = CMSG_SPACE(sizeof pi);
    } else {
      in6_pktinfo pi{};
      pi.ipi6_ifindex = ep.source_ifindex;
      std::memcpy(&pi.ipi6_addr, ep.source.data(), 16);
      h.cmsg_level = IPPROTO_IPV6;
      h.cmsg_type = IPV6_PKTINFO;
      h.cmsg_len = CMSG_LEN(sizeof pi);
      std::memcpy(control + CMSG_LEN(0), &pi, sizeof pi);
      control_len = CMSG_SPACE(sizeof pi);
    }
    std::memcpy(control, &h, sizeof h);
  }
};

// What sendmmsg says when a PKTINFO source no longer fits (measured on 6.18): EINVAL
// for an address on another interface (IPv4) or not local at all (IPv6), ENETUNREACH
// for a non-local IPv4 address, ENODEV for a deleted interface; EADDRNOTAVAIL too.
bool stale_source(const std::error_code& e) {
  return e == std::errc::invalid_argument || e == std::errc::address_not_available ||
         e == std::errc::network_unreachable || e == std::errc::no_such_device;
}

// Sends bufs with sendmmsg, 128 at a time, looping on partial sends and waiting (until
// `deadline`) while the socket buffer is full. Returns how many went; on failure ec says
// why bufs[returned] did not.
size_t send_some(int fd, int wake, std::span<const std::span<const uint8_t>> bufs,
                 Destination& dst, std::chrono::steady_clock::time_point deadline,
                 std::error_code& ec) {
  std::array<mmsghdr, LinuxBind::kBatchSize> msgs;
  std::array<iovec, LinuxBind::kBatchSize> iovs;
  size_t sent = 0;
  while (sent < bufs.size()) {
    size_t n = std::min(bufs.size() - sent, LinuxBind::kBatchSize);
    // GSO (fast-path issue): coalesce runs of equal-sized datagrams into one message
    // with a UDP_SEGMENT control here; on EIO turn GSO off and rebuild the batch.
    for (size_t i = 0; i < n; ++i) {
      auto b = bufs[sent + i];
      iovs[i].iov_base = const_cast<uint8_t*>(b.data());
      iovs[i].iov_len = b.size();
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &dst.name;
      msgs[i].msg_hdr.msg_namelen = dst.name_len;
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      if (dst.control_len) {
        // Every message shares the one read-only control buffer.
        msgs[i].msg_hdr.msg_control = dst.control;
        msgs[i].msg_hdr.msg_controllen = dst.control_len;
      }
    }
    int r = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(n), 0);
    if (r > 0) {
      sent += static_cast<size_t>(r);
      continue;
    }
    int err = r == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, wake, deadline, ec)) return sent;
      continue;
    }
    ec = sys_error(err);
    return sent;
  }
  ec.clear();
  return sent;
}

}  // namespace

void parse_control(const uint8_t* control, size_t len, Endpoint& ep, uint16_t& gso_size) {
  ep.clear_source();
  gso_size = 0;
  if (control == nullptr) return;
  constexpr size_t kHeader = CMSG_LEN(0);  // the header, aligned: where data starts
  size_t off = 0;
  while (len - off >= kHeader) {
    cmsghdr h;
    std::memcpy(&h, control + off, sizeof h);  // `control` may be unaligned
    size_t cmsg_len = h.cmsg_len;
    if (cmsg_len < kHeader || cmsg_len > len - off) return;  // malformed: stop
    const uint8_t* data = control + off + kHeader;
    size_t data_len = cmsg_len - kHeader;

    if (h.cmsg_level == IPPROTO_IP && h.cmsg_type == IP_PKTINFO && data_len >= sizeof(in_pktinfo)) {
      in_pktinfo pi;
      std::memcpy(&pi, data, sizeof pi);
      // ipi_spec_dst is the local address the kernel would answer from; ipi_addr, the
      // header's destination, stands in if it is unset.
      const void* src = pi.ipi_spec_dst.s_addr != 0 ? &pi.ipi_spec_dst : &pi.ipi_addr;
      ep.clear_source();
      std::memcpy(ep.source.data(), src, 4);
      ep.source_ifindex = static_cast<uint32_t>(pi.ipi_ifindex);
      ep.has_source = !is_zero(ep.source.data(), 4);
      if (!ep.has_source) ep.clear_source();
    } else if (h.cmsg_level == IPPROTO_IPV6 && h.cmsg_type == IPV6_PKTINFO &&
               data_len >= sizeof(in6_pktinfo)) {
      in6_pktinfo pi;
      std::memcpy(&pi, data, sizeof pi);
      ep.clear_source();
      std::memcpy(ep.source.data(), &pi.ipi6_addr, 16);
      ep.source_ifindex = pi.ipi6_ifindex;
      ep.has_source = !is_zero(ep.source.data(), 16);
      if (!ep.has_source) ep.clear_source();
    } else if (h.cmsg_level == SOL_UDP && h.cmsg_type == UDP_GRO) {
      // The kernel writes an int; a u16 is accepted too (as wireguard-go reads it).
      if (data_len >= sizeof(int)) {
        int v;
        std::memcpy(&v, data, sizeof v);
        gso_size = v > 0 && v <= 0xffff ? static_cast<uint16_t>(v) : 0;
      } else if (data_len >= sizeof(uint16_t)) {
        uint16_t v;
        std::memcpy(&v, data, sizeof v);
        gso_size = v;
      }
    }
    // The next header starts at the aligned end of this one; the last may be unpadded.
    size_t step = CMSG_ALIGN(cmsg_len);
    if (step > len - off) return;
    off += step;
  }
}

// One socket and the scratch its receiver uses: preallocated so that receiving a batch
// allocates nothing. receive_mu serializes receivers (one thread per socket expected).
struct LinuxBind::Socket {
  Fd fd;
  std::mutex receive_mu;
  std::array<mmsghdr, kBatchSize> msgs{};
  std::array<iovec, kBatchSize> iovs{};
  std::array<sockaddr_in6, kBatchSize> names{};  // room for either family
  alignas(cmsghdr) uint8_t control[kBatchSize][kControlSize]{};
};

struct LinuxBind::Sockets {
  Fd wake;  // eventfd, written once by close(): readable from then on
  std::unique_ptr<Socket> v4, v6;
};

LinuxBind::LinuxBind() = default;
LinuxBind::~LinuxBind() { close(); }

bool LinuxBind::enter(uint64_t generation) {
  std::lock_guard lock(mu_);
  if (!open_ || (generation != 0 && generation != generation_)) return false;
  ++users_;
  return true;
}

void LinuxBind::leave() {
  std::lock_guard lock(mu_);
  if (--users_ == 0) idle_cv_.notify_all();
}

std::vector<ReceiveFn> LinuxBind::open(uint16_t port, uint16_t& actual_port, std::error_code& ec) {
  std::lock_guard life(lifecycle_mu_);
  {
    std::lock_guard lock(mu_);
    if (open_) {
      ec = std::make_error_code(std::errc::already_connected);
      return {};
    }
  }

  auto s = std::make_unique<Sockets>();
  s->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->wake) {
    ec = sys_error(errno);
    return {};
  }

  Fd v4, v6;
  uint16_t bound = 0;
  if (!bind_pair(port, v4, v6, bound, ec)) return {};
  auto adopt = [&](Fd& fd, std::unique_ptr<Socket>& slot) {
    if (!fd) return true;
    if (mark_ != 0 && !set_int(fd.get(), SOL_SOCKET, SO_MARK, static_cast<int>(mark_), ec)) return false;
    slot = std::make_unique<Socket>();
    slot->fd = std::move(fd);
    return true;
  };
  if (!adopt(v4, s->v4) || !adopt(v6, s->v6)) return {};

  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    sockets_ = std::move(s);
    open_ = true;
    generation = ++generation_;
  }
  std::vector<ReceiveFn> fns;
  for (Socket* sock : {sockets_->v4.get(), sockets_->v6.get()}) {
    if (!sock) continue;
    fns.emplace_back([this, sock, generation](std::span<const std::span<uint8_t>> bufs,
                                              std::span<size_t> sizes, std::span<Endpoint> eps,
                                              std::error_code& e) {
      return receive(*sock, generation, bufs, sizes, eps, e);
    });
  }
  actual_port = bound;
  ec.clear();
  return fns;
}

void LinuxBind::close() {
  std::lock_guard life(lifecycle_mu_);
  std::unique_lock lock(mu_);
  if (!open_) return;
  open_ = false;
  // Wake every poll() on the sockets: the eventfd stays readable until it is closed.
  uint64_t one = 1;
  (void)!::write(sockets_->wake.get(), &one, sizeof one);
  idle_cv_.wait(lock, [&] { return users_ == 0; });
  sockets_.reset();
}

size_t LinuxBind::receive(Socket& s, uint64_t generation, std::span<const std::span<uint8_t>> bufs,
                          std::span<size_t> sizes, std::span<Endpoint> eps, std::error_code& ec) {
  if (!enter(generation)) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  ScopeExit done{[this] { leave(); }};
  std::lock_guard lock(s.receive_mu);
  const int wake = sockets_->wake.get();
  size_t n = std::min({bufs.size(), sizes.size(), eps.size(), kBatchSize});
  if (n == 0) {
    ec.clear();
    return 0;
  }
  // GRO (fast-path issue): read fewer messages than n into 64 KB buffers and split each
  // super-datagram (gso_size from parse_control) over the remaining slots.
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      s.iovs[i] = {bufs[i].data(), bufs[i].size()};
      auto& h = s.msgs[i].msg_hdr;
      h = {};
      h.msg_name = &s.names[i];
      h.msg_namelen = sizeof s.names[i];
      h.msg_iov = &s.iovs[i];
      h.msg_iovlen = 1;
      h.msg_control = s.control[i];
      h.msg_controllen = kControlSize;
      s.msgs[i].msg_len = 0;
    }
    // Try first: under load data is usually waiting, and this saves a poll().
    int r = ::recvmmsg(s.fd.get(), s.msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    if (r > 0) {
      for (size_t i = 0; i < static_cast<size_t>(r); ++i) {
        const auto& h = s.msgs[i].msg_hdr;
        sizes[i] = std::min<size_t>(s.msgs[i].msg_len, bufs[i].size());  // truncated if longer
        endpoint_from(s.names[i], eps[i]);
        uint16_t gso_size = 0;
        parse_control(s.control[i], h.msg_controllen, eps[i], gso_size);
      }
      ec.clear();
      return static_cast<size_t>(r);
    }
    int err = r == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      ec = sys_error(err);
      return 0;
    }
    if (!wait_for(s.fd.get(), POLLIN, wake, std::chrono::steady_clock::time_point::max(), ec))
      return 0;
  }
}

void LinuxBind::send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) {
  ec.clear();
  if (!enter(0)) {
    ec = std::make_error_code(std::errc::not_connected);
    return;
  }
  ScopeExit done{[this] { leave(); }};
  Socket* s = ep.family == 4 ? sockets_->v4.get() : ep.family == 6 ? sockets_->v6.get() : nullptr;
  if (!s) {
    ec = std::make_error_code(std::errc::address_family_not_supported);
    return;
  }
  Destination dst(ep);
  const auto deadline = std::chrono::steady_clock::now() + kSendWait;
  std::error_code first;
  size_t i = 0;
  while (i < bufs.size()) {
    std::error_code e;
    i += send_some(s->fd.get(), sockets_->wake.get(), bufs.subspan(i), dst, deadline, e);
    if (!e) break;
    if (dst.control_len && stale_source(e)) {
      // The sticky source is gone (address removed or moved, interface deleted): forget
      // it and send from whatever the routing table picks.
      ep.clear_source();
      dst.control_len = 0;
      continue;
    }
    if (!first) first = e;
    if (e != std::errc::message_size) break;
    ++i;  // drop the one oversized datagram, send the rest
  }
  ec = first;
}

void LinuxBind::set_mark(uint32_t mark, std::error_code& ec) {
  std::lock_guard life(lifecycle_mu_);
  ec.clear();
  if (mark == mark_) return;
  if (sockets_) {
    for (Socket* s : {sockets_->v4.get(), sockets_->v6.get()}) {
      if (s && !set_int(s->fd.get(), SOL_SOCKET, SO_MARK, static_cast<int>(mark), ec)) return;
    }
  }
  mark_ = mark;
}

}  // namespace conn

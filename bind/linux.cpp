// LinuxBind: recvmmsg/sendmmsg over an IPv4 and an IPv6 UDP socket, with sticky source
// addresses and UDP GSO/GRO.
//   Receive: carried datagrams first → poll(socket, close eventfd) → recvmmsg → per
//   message, the sender from msg_name, the sticky source and GRO size from the control →
//   hand out coalesced messages' datagrams where they landed, carry what does not fit to
//   the next call.
//   Send: coalesce runs of equal-size datagrams into UDP_SEGMENT messages → sendmmsg →
//   a refused segmented message goes again unsegmented (EIO: GSO off for the bind).
// Addresses and control messages (msg_name, PKTINFO, UDP_GRO) are in linux_msg.cpp.
#include "bind/linux.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <linux/errqueue.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "bind/linux_msg.hpp"
#include "wg/base/fd.hpp"

namespace conn {

using detail::Destination;
using detail::endpoint_from;

namespace {

constexpr int kSocketBuffer = 7 << 20;  // as wireguard-go asks for
constexpr int kPortTries = 100;         // fresh ports tried when IPv6 lacks IPv4's
constexpr auto kSendWait = std::chrono::seconds(1);

constexpr size_t kBatchSize = LinuxBind::kBatchSize;

// Room for the control messages one received datagram may carry: a PKTINFO (the IPv6
// one is the larger) and a UDP_GRO size.
constexpr size_t kControlSize = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
static_assert(kControlSize % alignof(cmsghdr) == 0);
// A sent message's control: the sticky source, then UDP_SEGMENT's u16 segment size.
constexpr size_t kSendControlSize = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t));
static_assert(kSendControlSize % alignof(cmsghdr) == 0);
// Carry storage kept once drained (two coalesced messages); a larger one is freed.
constexpr size_t kCarryKeep = 2 * LinuxBind::kGroBufferSize;

std::error_code sys_error(int err) { return {err, std::system_category()}; }

// The errors an ICMP error queued with IP_RECVERR leaves pending on the socket: the next
// send or receive returns it once, whatever it is about.
bool icmp_error(int err) {
  return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN ||
         err == ENONET || err == EPROTO;
}

template <class F>
struct ScopeExit {
  F f;
  ~ScopeExit() { f(); }
};
template <class F>
ScopeExit(F) -> ScopeExit<F>;

using Fd = wg::UniqueFd;

int poll_ms(std::chrono::steady_clock::duration left) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 1000));
}

// Waits until `fd` has `events` or `wake` is signalled (close()). Returns false with ec
// set on close (operation_canceled), at the deadline (EAGAIN) or on a poll error.
bool wait_for(int fd, short events, int wake, std::chrono::steady_clock::time_point deadline,
              std::error_code& ec,
              short* revents = nullptr) {
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
    if (p[0].revents) {
      if (revents) *revents = p[0].revents;
      return true;
    }
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
// wildcard address and `port`, asking for PKTINFO on every datagram and, with `want_gro`,
// for coalesced datagrams (`gro` says whether the kernel agreed: Linux 5.0 and later);
// with `reuseport`, in a SO_REUSEPORT group.
Fd open_socket(int family, uint16_t port, bool want_gro, bool reuseport, bool& gro, std::error_code& ec) {
  Fd fd(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP));
  if (!fd) {
    ec = sys_error(errno);
    return {};
  }
  set_buffer(fd.get(), SO_RCVBUFFORCE, SO_RCVBUF);
  set_buffer(fd.get(), SO_SNDBUFFORCE, SO_SNDBUF);
  // Before bind(), so that no datagram reaches the socket segmented by the kernel first.
  std::error_code gro_ec;
  gro = want_gro && set_int(fd.get(), SOL_UDP, UDP_GRO, 1, gro_ec);
  if (reuseport && !set_int(fd.get(), SOL_SOCKET, SO_REUSEPORT, 1, ec)) return {};
  int r;
  if (family == AF_INET) {
    if (!set_int(fd.get(), IPPROTO_IP, IP_PKTINFO, 1, ec)) return {};
    if (!set_int(fd.get(), IPPROTO_IP, IP_RECVERR, 1, ec)) return {};
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } else {
    if (!set_int(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1, ec)) return {};
    if (!set_int(fd.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, ec)) return {};
    if (!set_int(fd.get(), IPPROTO_IPV6, IPV6_RECVERR, 1, ec)) return {};
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    sa.sin6_addr = in6addr_any;
    r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  }
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

// getsockopt(UDP_SEGMENT) answers from Linux 4.18 on, when sendmsg takes the option.
bool kernel_has_gso(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  return ::getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &len) == 0;
}

// Binds the IPv4 socket, then the IPv6 one on the port IPv4 got. With port 0 that port
// may be taken for IPv6 only: start over with a fresh one, as wireguard-go does. A family
// the kernel lacks is left out (its Fd stays empty); at least one must open.
bool bind_pair(uint16_t port, bool want_gro, bool reuseport, Fd& v4, bool& gro4, Fd& v6, bool& gro6,
               uint16_t& bound, std::error_code& ec) {
  for (int tries = 0;; ++tries) {
    bound = port;
    v4 = open_socket(AF_INET, port, want_gro, reuseport, gro4, ec);
    if (v4) bound = bound_port(v4.get(), ec);
    if (ec && ec != std::errc::address_family_not_supported) return false;
    v6 = open_socket(AF_INET6, bound, want_gro, reuseport, gro6, ec);
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

// What sendmmsg says when a PKTINFO source no longer fits (Linux 6.18): EINVAL
// for an address on another interface (IPv4) or not local at all (IPv6), ENETUNREACH
// for a non-local IPv4 address, ENODEV for a deleted interface; EADDRNOTAVAIL too.
bool stale_source(const std::error_code& e) {
  return e == std::errc::invalid_argument || e == std::errc::address_not_available ||
         e == std::errc::network_unreachable || e == std::errc::no_such_device;
}

using SendFn = int (*)(int, mmsghdr*, unsigned, int);

// The messages of one sendmmsg over up to kBatchSize datagrams: one iovec per datagram,
// in order; a message covers one datagram, or a run of them sent as one UDP_SEGMENT
// message (the kernel cuts it at the segment size, so datagram boundaries are kept).
struct SendBatch {
  std::array<mmsghdr, kBatchSize> msgs;
  std::array<iovec, kBatchSize> iovs;
  std::array<uint16_t, kBatchSize> counts;  // datagrams per message
  alignas(cmsghdr) uint8_t control[kBatchSize][kSendControlSize];
  unsigned size = 0;  // messages
};

// How many datagrams from bufs[0] go in one message: with gso, the run of datagrams of
// bufs[0]'s size, ended by a shorter one (included: the kernel allows a short last
// segment), a longer or empty one, kMaxGsoSegments, or max_bytes in all.
size_t run_length(std::span<const std::span<const uint8_t>> bufs, bool gso, size_t max_bytes) {
  const size_t size = bufs[0].size();
  if (!gso || size == 0) return 1;
  size_t k = 1, bytes = size;
  while (k < bufs.size() && k < LinuxBind::kMaxGsoSegments) {
    const size_t next = bufs[k].size();
    if (next == 0 || next > size || bytes + next > max_bytes) break;
    bytes += next;
    ++k;
    if (next < size) break;
  }
  return k;
}

// Fills b with messages for the first kBatchSize (at most) datagrams of bufs.
void build(SendBatch& b, std::span<const std::span<const uint8_t>> bufs, const Destination& dst, bool gso,
           size_t max_bytes) {
  bufs = bufs.first(std::min(bufs.size(), kBatchSize));
  b.size = 0;
  for (size_t i = 0; i < bufs.size();) {
    const size_t k = run_length(bufs.subspan(i), gso, max_bytes);
    for (size_t d = i; d < i + k; ++d) b.iovs[d] = {const_cast<uint8_t*>(bufs[d].data()), bufs[d].size()};
    mmsghdr& m = b.msgs[b.size];
    m = {};
    auto& h = m.msg_hdr;
    h.msg_name = const_cast<sockaddr_storage*>(&dst.name);
    h.msg_namelen = dst.name_len;
    h.msg_iov = &b.iovs[i];
    h.msg_iovlen = k;
    if (k > 1) {
      // This message's own control: the sticky source (if any), then the segment size.
      uint8_t* c = b.control[b.size];
      std::memcpy(c, dst.control, dst.control_len);
      uint8_t* seg = c + dst.control_len;
      std::memset(seg, 0, CMSG_SPACE(sizeof(uint16_t)));
      cmsghdr hdr{};
      hdr.cmsg_level = SOL_UDP;
      hdr.cmsg_type = UDP_SEGMENT;
      hdr.cmsg_len = CMSG_LEN(sizeof(uint16_t));
      std::memcpy(seg, &hdr, sizeof hdr);
      const auto gso_size = static_cast<uint16_t>(bufs[i].size());  // ≤ max_bytes < 65536
      std::memcpy(seg + CMSG_LEN(0), &gso_size, sizeof gso_size);
      h.msg_control = c;
      h.msg_controllen = dst.control_len + CMSG_SPACE(sizeof(uint16_t));
    } else if (dst.control_len) {
      // Single datagrams share the one read-only control buffer.
      h.msg_control = const_cast<uint8_t*>(dst.control);
      h.msg_controllen = dst.control_len;
    }
    b.counts[b.size++] = static_cast<uint16_t>(k);
    i += k;
  }
}

// Sends bufs with sendmmsg, up to kBatchSize datagrams per call, looping on partial sends
// and waiting (until `deadline`) while the socket buffer is full. Returns how many
// datagrams went; on failure ec says why bufs[returned] did not, and `segmented` whether
// it was part of a UDP_SEGMENT message (then none of that message went).
size_t send_some(SendFn send_fn, int fd, int wake, std::span<const std::span<const uint8_t>> bufs,
                 const Destination& dst, bool gso, size_t max_bytes,
                 std::chrono::steady_clock::time_point deadline, std::error_code& ec, bool& segmented) {
  SendBatch b;  // ~18 KB of stack, nothing on the heap
  size_t sent = 0;
  size_t pending_at = SIZE_MAX;  // where an ICMP error left pending was taken
  segmented = false;
  while (sent < bufs.size()) {
    // After a partial send the rest is built afresh: simpler than resuming mid-batch.
    build(b, bufs.subspan(sent), dst, gso, max_bytes);
    int r = send_fn(fd, b.msgs.data(), b.size, 0);
    if (r > 0) {
      for (size_t m = 0; m < static_cast<size_t>(r); ++m) sent += b.counts[m];
      continue;
    }
    int err = r == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, wake, deadline, ec)) return sent;
      continue;
    }
    // A refusal of an earlier datagram, reported by the first send after it (the
    // receive side reads the queued error): this one never left, and goes again, once.
    if (icmp_error(err) && pending_at != sent) {
      pending_at = sent;
      continue;
    }
    ec = sys_error(err);
    segmented = b.counts[0] > 1;
    return sent;
  }
  ec.clear();
  return sent;
}

// One received message, described: its bytes (in the buffer it landed in), the GRO
// segment size (0: a single datagram), how many datagrams it holds, and the sender.
struct Message {
  size_t len = 0;
  uint16_t gso = 0;
  size_t segments = 1;
  Endpoint ep;
};

// Datagrams received but not handed out yet, in arrival order: the part of a read that
// did not fit the caller's batch, or a message read through here because the caller's
// buffers were too small for a coalesced one. One byte store, cut into datagrams by each
// entry's GRO size. Used by one receiver at a time (under the socket's receive_mu).
class Carry {
public:
  Carry() { entries_.reserve(kBatchSize); }  // a read adds at most one entry per message

  bool empty() const { return head_ == entries_.size(); }

  // Storage for `bytes` bytes, only while empty(). Allocates only when more is needed
  // than ever since the last release: the first time, and when a read switches from
  // single datagrams to coalesced ones (at most kBatchSize messages of 64 KB).
  uint8_t* storage(size_t bytes) {
    if (bytes > capacity_) {
      capacity_ = std::max(bytes, LinuxBind::kGroBufferSize);
      store_ = std::make_unique_for_overwrite<uint8_t[]>(capacity_);
    }
    return store_.get();
  }

  // Takes storage()[off, off + len) as one datagram, or as datagrams of gso bytes each
  // (the last may be shorter) when gso > 0.
  void add(size_t off, size_t len, uint16_t gso, const Endpoint& ep) { entries_.push_back({off, len, gso, ep}); }

  // Copies datagrams out into bufs[from..], one per buffer (cut to a smaller buffer, as
  // recvmmsg would); returns how many.
  size_t drain(std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at, std::span<size_t> sizes,
               std::span<Endpoint> eps, size_t from) {
    size_t i = from;
    for (; i < bufs.size() && !empty(); ++i) {
      Entry& e = entries_[head_];
      const size_t len = e.gso ? std::min<size_t>(e.gso, e.len) : e.len;
      const size_t n = std::min(len, bufs[i].size());
      if (n) std::memcpy(bufs[i].data(), store_.get() + e.off, n);
      at[i] = bufs[i].data();
      sizes[i] = n;
      eps[i] = e.ep;
      e.off += len;
      e.len -= len;
      if (e.len == 0) ++head_;
    }
    if (empty()) {
      entries_.clear();
      head_ = 0;
      if (capacity_ > kCarryKeep) {
        store_.reset();
        capacity_ = 0;
      }
    }
    return i - from;
  }

private:
  struct Entry {
    size_t off, len;
    uint16_t gso;
    Endpoint ep;
  };
  std::unique_ptr<uint8_t[]> store_;
  size_t capacity_ = 0;
  std::vector<Entry> entries_;
  size_t head_ = 0;  // entries_[head_] is the next to hand out
};

}  // namespace

// One socket and the scratch its receiver uses: preallocated so that receiving a batch
// allocates nothing (the carry aside, see Carry::storage). receive_mu serializes
// receivers (one thread per socket expected) and guards everything below it.
struct LinuxBind::Socket {
  Fd fd;
  bool gro = false;  // UDP_GRO is on; set before the socket is shared, never changes

  std::mutex receive_mu;
  std::array<mmsghdr, kBatchSize> msgs{};
  std::array<iovec, kBatchSize> iovs{};
  std::array<sockaddr_in6, kBatchSize> names{};  // room for either family
  alignas(cmsghdr) uint8_t control[kBatchSize][kControlSize]{};
  std::array<Message, kBatchSize> got{};  // the messages of the last read, described
  Carry carry;
  size_t segments_hint = 1;  // datagrams per message in the last read, rounded up
  // The last read found the queue empty: the next receive polls before it reads (a
  // trickle of single datagrams would otherwise cost a failed read for each).
  bool drained = false;

  // Describes message j of the last read, which landed in a buffer of `cap` bytes.
  Message describe(size_t j, size_t cap) const {
    Message m;
    const auto& h = msgs[j].msg_hdr;
    endpoint_from(names[j], m.ep);
    parse_control(control[j], h.msg_controllen, m.ep, m.gso);
    m.len = std::min<size_t>(msgs[j].msg_len, cap);  // truncated if longer
    // A coalesced message cut short (only if a kernel builds one above kGroBufferSize):
    // its cut segment is no datagram.
    if (m.gso && (h.msg_flags & MSG_TRUNC)) m.len -= m.len % m.gso;
    if (m.gso && m.len > m.gso) {
      m.segments = (m.len + m.gso - 1) / m.gso;
    } else {
      m.gso = 0;  // one datagram, whatever its size
    }
    return m;
  }

  // The r messages of the last read landed in bufs[out..out + r): hands out their
  // datagrams from slot `out` on, one per slot, in order, each where it landed (no
  // copy: a coalesced message's datagrams all point into its buffer). What does not fit
  // the batch is copied to the carry. Returns the datagrams placed.
  //
  //   bufs:    bufs[out]   bufs[out+1]   bufs[out+2] ...
  //            [a0 a1 a2]  [b0]          [c0 c1]
  //   slots:   a0 a1 a2 b0 c0 | c1 → carry   (with 5 slots left)
  //   at:      &a0 &a1 &a2 &b0 &c0            (into bufs[out], bufs[out], ..., bufs[out+2])
  //
  // Message j's first datagram takes slot out + (datagrams before it) >= out + j, so
  // the buffer holding a slot's datagram is never after the slot (ReceiveFn's promise).
  size_t place(size_t r, size_t out, std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
               std::span<size_t> sizes, std::span<Endpoint> eps) {
    size_t total = 0;
    for (size_t j = 0; j < r; ++j) {
      got[j] = describe(j, bufs[out + j].size());
      total += got[j].segments;
    }
    segments_hint = (total + r - 1) / r;

    // Messages [0, p) fit whole; of message p (if any) the first `part` datagrams fit.
    const size_t avail = bufs.size() - out;
    size_t p = 0, used = 0;
    while (p < r && used + got[p].segments <= avail) used += got[p++].segments;
    const size_t part = p < r ? avail - used : 0;

    if (p < r) {
      const size_t skip = part * got[p].gso;  // part > 0 only for a coalesced message
      size_t bytes = got[p].len - skip;
      for (size_t j = p + 1; j < r; ++j) bytes += got[j].len;
      uint8_t* store = carry.storage(bytes);  // the carry is empty: reads happen only then
      size_t off = 0;
      for (size_t j = p; j < r; ++j) {
        const size_t from = j == p ? skip : 0;
        const size_t len = got[j].len - from;
        if (len) std::memcpy(store + off, bufs[out + j].data() + from, len);
        carry.add(off, len, got[j].gso, got[j].ep);
        off += len;
      }
    }

    size_t slot = out;
    for (size_t j = 0; j < r && j <= p; ++j) {
      const Message& m = got[j];
      const size_t k = j == p ? part : m.segments;
      uint8_t* src = bufs[out + j].data();
      for (size_t seg = 0; seg < k; ++seg, ++slot) {
        const size_t off = seg * m.gso;
        at[slot] = src + off;
        sizes[slot] = m.gso ? std::min<size_t>(m.gso, m.len - off) : m.len;
        eps[slot] = m.ep;
      }
    }
    return used + part;
  }
};

struct LinuxBind::Sockets {
  Fd wake;  // eventfd, written once by close(): readable from then on
  // Options::sockets of each family the kernel has (none of one it lacks); the first of
  // each sends.
  std::vector<std::unique_ptr<Socket>> v4, v6;

  Socket* sender(uint8_t family) const {
    const auto& v = family == 4 ? v4 : v6;
    return (family == 4 || family == 6) && !v.empty() ? v[0].get() : nullptr;
  }
  // In the order of the receive functions: IPv4's, then IPv6's.
  std::vector<Socket*> all() const {
    std::vector<Socket*> out;
    for (const auto* v : {&v4, &v6})
      for (const auto& sock : *v) out.push_back(sock.get());
    return out;
  }
};

LinuxBind::LinuxBind() : LinuxBind(Options{}) {}
LinuxBind::LinuxBind(Options options) : options_(options) {}
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

  if (options_.sockets == 0) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  const bool group = options_.sockets > 1;
  Fd v4, v6;
  bool gro4 = false, gro6 = false;
  uint16_t bound = 0;
  // A SO_REUSEPORT group would let us join another's group on the same port (any
  // process of our user's), and with port 0 the kernel may even pick such a port: the
  // group goes on a port that sockets of our own without SO_REUSEPORT could just have,
  // so one that any socket holds is taken. (Between closing those and binding the group
  // another group could take the port; with port 0 that is tried again elsewhere.)
  for (int tries = 0;; ++tries) {
    uint16_t want = port;
    if (group) {
      if (!bind_pair(port, false, false, v4, gro4, v6, gro6, want, ec)) return {};
      v4.reset();
      v6.reset();
    }
    if (bind_pair(want, options_.gro, group, v4, gro4, v6, gro6, bound, ec)) break;
    if (!(group && port == 0 && ec == std::errc::address_in_use && tries < kPortTries)) return {};
  }
  // An offload counts as on when every open socket has it (all share one kernel).
  bool gso = options_.gso, gro = options_.gro;
  auto adopt = [&](Fd& fd, bool fd_gro, std::vector<std::unique_ptr<Socket>>& into) {
    if (!fd) return true;
    if (mark_ != 0 && !set_int(fd.get(), SOL_SOCKET, SO_MARK, static_cast<int>(mark_), ec)) return false;
    gso = gso && kernel_has_gso(fd.get());
    gro = gro && fd_gro;
    auto& slot = into.emplace_back(std::make_unique<Socket>());
    slot->fd = std::move(fd);
    slot->gro = fd_gro;
    return true;
  };
  if (!adopt(v4, gro4, s->v4) || !adopt(v6, gro6, s->v6)) return {};
  // The rest of each family's group, on the port the first ones got.
  for (size_t i = 1; i < options_.sockets; ++i) {
    for (auto [family, into] : {std::pair(AF_INET, &s->v4), std::pair(AF_INET6, &s->v6)}) {
      if (into->empty()) continue;
      bool fd_gro = false;
      Fd fd = open_socket(family, bound, options_.gro, true, fd_gro, ec);
      if (!fd || !adopt(fd, fd_gro, *into)) return {};
    }
  }

  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    sockets_ = std::move(s);
    open_ = true;
    generation = ++generation_;
    gso_.store(gso, std::memory_order_relaxed);
    gro_.store(gro, std::memory_order_relaxed);
  }
  std::vector<ReceiveFn> fns;
  for (Socket* sock : sockets_->all()) {
    fns.emplace_back([this, sock, generation](std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
                                              std::span<size_t> sizes, std::span<Endpoint> eps,
                                              std::error_code& e) {
      return receive(*sock, generation, bufs, at, sizes, eps, e);
    });
  }
  actual_port = bound;
  ec.clear();
  return fns;
}

size_t LinuxBind::receivers() const {
  std::lock_guard life(lifecycle_mu_);
  return sockets_ ? sockets_->all().size() : 0;
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

// Where the kernel writes: straight into the caller's buffers when a coalesced message
// fits them (always without GRO; with it, buffers of kGroBufferSize, as the core gives),
// reading about as many messages as fill the batch at the last read's datagrams per
// message, whose datagrams are then handed out where they landed. Smaller buffers with
// GRO read one message per syscall into the carry's 64 KB and copy out of it.
size_t LinuxBind::receive(Socket& s, uint64_t generation, std::span<const std::span<uint8_t>> bufs,
                          std::span<uint8_t*> at, std::span<size_t> sizes, std::span<Endpoint> eps,
                          std::error_code& ec) {
  if (!enter(generation)) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  ScopeExit done{[this] { leave(); }};
  std::lock_guard lock(s.receive_mu);
  const int wake = sockets_->wake.get();
  const size_t n = std::min({bufs.size(), at.size(), sizes.size(), eps.size(), kBatchSize});
  bufs = bufs.first(n);
  at = at.first(n);
  sizes = sizes.first(n);
  eps = eps.first(n);

  // 1. What an earlier receive could not hand out comes first.
  size_t out = s.carry.drain(bufs, at, sizes, eps, 0);
  short revents = 0;
  if (out == 0 && s.drained &&
      !wait_for(s.fd.get(), POLLIN, wake, std::chrono::steady_clock::time_point::max(), ec, &revents))
    return 0;
  if (revents & POLLERR) read_errors(s);
  s.drained = false;
  while (out < n) {
    // 2. Read.
    const size_t avail = n - out;
    const bool direct = !s.gro || std::all_of(bufs.begin() + static_cast<ptrdiff_t>(out), bufs.end(),
                                              [](std::span<uint8_t> b) { return b.size() >= kGroBufferSize; });
    const size_t m = !direct   ? 1
                     : !s.gro ? avail
                              : std::clamp<size_t>((avail + s.segments_hint - 1) / s.segments_hint, 1, avail);
    for (size_t i = 0; i < m; ++i) {
      s.iovs[i] = direct ? iovec{bufs[out + i].data(), bufs[out + i].size()}
                         : iovec{s.carry.storage(kGroBufferSize), kGroBufferSize};
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
    int r = ::recvmmsg(s.fd.get(), s.msgs.data(), static_cast<unsigned>(m), MSG_DONTWAIT, nullptr);
    if (r > 0) {
      // 3. Split into datagrams.
      if (direct) {
        out += s.place(static_cast<size_t>(r), out, bufs, at, sizes, eps);
      } else {
        const Message msg = s.describe(0, kGroBufferSize);
        s.carry.add(0, msg.len, msg.gso, msg.ep);
        out += s.carry.drain(bufs, at, sizes, eps, out);
      }
      // 4. Fill the rest of the batch while the socket may hold more: it filled every
      // message asked for, and nothing had to be carried.
      if (static_cast<size_t>(r) < m) {
        s.drained = true;
        break;
      }
      if (!s.carry.empty()) break;
      continue;
    }
    int err = r == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (icmp_error(err)) {
      read_errors(s);
      continue;
    }
    if (out > 0) {  // hand out what there is; an error shows again on the next call
      s.drained = err == EAGAIN || err == EWOULDBLOCK;
      break;
    }
    if (err != EAGAIN && err != EWOULDBLOCK) {
      ec = sys_error(err);
      return 0;
    }
    revents = 0;
    if (!wait_for(s.fd.get(), POLLIN, wake, std::chrono::steady_clock::time_point::max(), ec, &revents))
      return 0;
    if (revents & POLLERR) read_errors(s);
  }
  ec.clear();
  return out;
}

// Empties the socket's error queue (poll() reports POLLERR until it is empty), telling
// unreachable_ the destination of each datagram refused by an ICMP destination
// unreachable other than "fragmentation needed".
void LinuxBind::read_errors(Socket& s) {
  for (;;) {
    sockaddr_in6 name{};  // room for either family
    // The error and the offender's address, after the PKTINFO the socket asks for.
    alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo)) +
                                     CMSG_SPACE(sizeof(sock_extended_err) + sizeof(sockaddr_in6))];
    msghdr h{};
    h.msg_name = &name;
    h.msg_namelen = sizeof name;
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    if (::recvmsg(s.fd.get(), &h, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: empty
    }
    if (!unreachable_) continue;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
      if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
            (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) ||
          c->cmsg_len < CMSG_LEN(sizeof(sock_extended_err)))
        continue;
      sock_extended_err e;
      std::memcpy(&e, CMSG_DATA(c), sizeof e);
      const bool refused = (e.ee_origin == SO_EE_ORIGIN_ICMP && e.ee_type == 3 && e.ee_code != 4) ||
                           (e.ee_origin == SO_EE_ORIGIN_ICMP6 && e.ee_type == 1);
      if (!refused) continue;
      Endpoint ep;
      endpoint_from(name, ep);
      if (ep.family) unreachable_(ep);
    }
  }
}

void LinuxBind::set_unreachable(UnreachableFn fn) {
  std::lock_guard life(lifecycle_mu_);
  unreachable_ = std::move(fn);
}

void LinuxBind::send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) {
  ec.clear();
  if (!enter(0)) {
    ec = std::make_error_code(std::errc::not_connected);
    return;
  }
  ScopeExit done{[this] { leave(); }};
  Socket* s = sockets_->sender(ep.family);
  if (!s) {
    ec = std::make_error_code(std::errc::address_family_not_supported);
    return;
  }
  const SendFn send_fn = options_.sendmmsg ? options_.sendmmsg : &::sendmmsg;
  const size_t max_bytes = ep.family == 4 ? kMaxGsoBytes4 : kMaxGsoBytes6;
  bool gso = gso_.load(std::memory_order_relaxed);
  Destination dst(ep);
  const auto deadline = std::chrono::steady_clock::now() + kSendWait;
  std::error_code first;
  size_t i = 0;
  while (i < bufs.size()) {
    std::error_code e;
    bool segmented = false;
    i += send_some(send_fn, s->fd.get(), sockets_->wake.get(), bufs.subspan(i), dst, gso, max_bytes, deadline, e,
                   segmented);
    if (!e) break;
    if (segmented) {
      // The kernel refused a coalesced message, all of it. EIO means the egress device
      // cannot checksum (as wireguard-go reads it): no more GSO on this bind. Any other
      // refusal (EINVAL: a segment above the path MTU, or a stale source) is sorted out
      // by sending the rest of this batch one datagram per message, which also shows
      // the real error if there is one.
      if (e == std::errc::io_error) gso_.store(false, std::memory_order_relaxed);
      gso = false;
      continue;
    }
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
    for (Socket* s : sockets_->all())
      if (!set_int(s->fd.get(), SOL_SOCKET, SO_MARK, static_cast<int>(mark), ec)) return;
  }
  mark_ = mark;
}

}  // namespace conn

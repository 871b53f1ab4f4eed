// rtnetlink requests: one message with its attributes, NLM_F_ACK, and the error the
// kernel's acknowledgement carries.
#include "netlink.hpp"

#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "wg/base/fd.hpp"

namespace wgrun::netlink {
namespace {

std::error_code errno_code(int e = errno) { return {e, std::system_category()}; }

// A request under construction: header, the family's fixed part, then attributes.
class Request {
public:
  Request(uint16_t type, uint16_t flags) {
    header()->nlmsg_type = type;
    header()->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
    header()->nlmsg_seq = 1;
    header()->nlmsg_len = NLMSG_LENGTH(0);
  }
  template <class Fixed>
  Fixed* fixed() {
    header()->nlmsg_len = NLMSG_LENGTH(sizeof(Fixed));
    return reinterpret_cast<Fixed*>(NLMSG_DATA(header()));
  }
  void attr(uint16_t type, const void* data, size_t len) {
    auto* a = reinterpret_cast<rtattr*>(buf_ + NLMSG_ALIGN(header()->nlmsg_len));
    a->rta_type = type;
    a->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    std::memcpy(RTA_DATA(a), data, len);
    header()->nlmsg_len = static_cast<uint32_t>(NLMSG_ALIGN(header()->nlmsg_len) + RTA_ALIGN(a->rta_len));
  }
  // Sends the request and reads the acknowledgement.
  std::error_code send() {
    wg::UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!fd) return errno_code();
    timeval tv{5, 0};  // the kernel answers at once; never wait forever
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd.get(), buf_, header()->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
      return errno_code();
    alignas(nlmsghdr) uint8_t answer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd.get(), answer, sizeof answer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_code();
      int len = static_cast<int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(answer); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_type != NLMSG_ERROR) continue;
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        return e->error == 0 ? std::error_code() : errno_code(-e->error);
      }
    }
  }

private:
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_); }
  alignas(nlmsghdr) uint8_t buf_[512]{};
};

}  // namespace

std::error_code set_link_up(int ifindex) {
  Request r(RTM_NEWLINK, 0);
  auto* i = r.fixed<ifinfomsg>();
  i->ifi_family = AF_UNSPEC;
  i->ifi_index = ifindex;
  i->ifi_flags = IFF_UP;
  i->ifi_change = IFF_UP;
  return r.send();
}

std::error_code set_txqueuelen(int ifindex, uint32_t packets) {
  Request r(RTM_NEWLINK, 0);
  auto* i = r.fixed<ifinfomsg>();
  i->ifi_family = AF_UNSPEC;
  i->ifi_index = ifindex;
  r.attr(IFLA_TXQLEN, &packets, sizeof packets);
  return r.send();
}

std::error_code add_address(int ifindex, const wg::IpPrefix& p) {
  Request r(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  auto* a = r.fixed<ifaddrmsg>();
  a->ifa_family = p.addr.is_v4() ? AF_INET : AF_INET6;
  a->ifa_prefixlen = p.bits;
  a->ifa_index = static_cast<uint32_t>(ifindex);
  a->ifa_scope = RT_SCOPE_UNIVERSE;
  if (p.addr.is_v6()) a->ifa_flags = IFA_F_NODAD;
  r.attr(IFA_LOCAL, p.addr.bytes.data(), p.addr.size());
  r.attr(IFA_ADDRESS, p.addr.bytes.data(), p.addr.size());
  return r.send();
}

std::error_code add_default_route(int ifindex, int family) {
  Request r(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
  auto* m = r.fixed<rtmsg>();
  m->rtm_family = family == 4 ? AF_INET : AF_INET6;
  m->rtm_dst_len = 0;
  m->rtm_table = RT_TABLE_MAIN;
  m->rtm_protocol = RTPROT_BOOT;
  // No gateway: every destination is on the link (IPv6 routes have no scope; ip(8)
  // sends universe for them).
  m->rtm_scope = family == 4 ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  m->rtm_type = RTN_UNICAST;
  const uint32_t oif = static_cast<uint32_t>(ifindex);
  r.attr(RTA_OIF, &oif, sizeof oif);
  return r.send();
}

}  // namespace wgrun::netlink

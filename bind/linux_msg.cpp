// Socket addresses and control messages of the Linux Bind (see linux_msg.hpp).
#include "bind/linux_msg.hpp"

#include <arpa/inet.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cstring>

#include "bind/linux.hpp"

namespace conn {
namespace {

bool is_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

}  // namespace

namespace detail {

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

Destination::Destination(const Endpoint& ep) {
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

void Destination::set_source(const Endpoint& ep) {
  // One control message: its header, then `pi` at CMSG_DATA's offset.
  auto put = [this](int level, int type, const auto& pi) {
    cmsghdr h{};
    h.cmsg_level = level;
    h.cmsg_type = type;
    h.cmsg_len = CMSG_LEN(sizeof pi);
    std::memcpy(control, &h, sizeof h);
    std::memcpy(control + CMSG_LEN(0), &pi, sizeof pi);
    control_len = CMSG_SPACE(sizeof pi);
  };
  if (ep.family == 4) {
    in_pktinfo pi{};
    pi.ipi_ifindex = static_cast<int>(ep.source_ifindex);
    std::memcpy(&pi.ipi_spec_dst, ep.source.data(), 4);
    put(IPPROTO_IP, IP_PKTINFO, pi);
  } else {
    in6_pktinfo pi{};
    pi.ipi6_ifindex = ep.source_ifindex;
    std::memcpy(&pi.ipi6_addr, ep.source.data(), 16);
    put(IPPROTO_IPV6, IPV6_PKTINFO, pi);
  }
}

}  // namespace detail

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

}  // namespace conn

// Socket addresses and control messages of the Linux Bind: the sender of a received
// datagram (msg_name), the destination and sticky source of a sent one (msg_name and an
// IP_PKTINFO/IPV6_PKTINFO control message). Internal to bind/; parse_control, the
// received side's control parser, is declared in linux.hpp for the fuzz target.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "bind/bind.hpp"

namespace conn::detail {

// The sender of a received datagram.
void endpoint_from(const sockaddr_in6& name, Endpoint& ep);

// The destination address of a send, and the PKTINFO that picks its source.
struct Destination {
  sockaddr_storage name{};
  socklen_t name_len = 0;
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))]{};
  size_t control_len = 0;

  explicit Destination(const Endpoint& ep);
  void set_source(const Endpoint& ep);
};

}  // namespace conn::detail

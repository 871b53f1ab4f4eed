// LinuxBind's socket addresses and PKTINFO control messages. Internal to bind/.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "bind/bind.hpp"

namespace conn::detail {

void endpoint_from(const sockaddr_in6& name, Endpoint& ep);

// A send's destination and the PKTINFO picking its source.
struct Destination {
  sockaddr_storage name{};
  socklen_t name_len = 0;
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))]{};
  size_t control_len = 0;

  explicit Destination(const Endpoint& ep);
  void set_source(const Endpoint& ep);
};

}  // namespace conn::detail

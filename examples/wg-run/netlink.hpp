// The rtnetlink requests wg-run makes inside the namespace it sets up: an interface up,
// an address on it, a default route through it. Each call makes one request on its own
// socket, in the calling thread's network namespace, and waits for the kernel's answer.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

#include "wg/base/ip.hpp"

namespace wgrun::netlink {

// IFF_UP on interface `ifindex`.
std::error_code set_link_up(int ifindex);

// The interface's transmit queue length (the TUN's ring: packets the kernel may queue
// for the reader). Through rtnetlink: the SIOCSIFTXQLEN ioctl wants CAP_NET_ADMIN over
// the initial user namespace, rtnetlink over the interface's own.
std::error_code set_txqueuelen(int ifindex, uint32_t packets);

// Address `p` (host bits kept, as in wg-quick's Address=) on `ifindex`; an IPv6 address
// skips duplicate address detection (usable at once, as `ip addr add ... nodad`).
std::error_code add_address(int ifindex, const wg::IpPrefix& p);

// A default route of the family (4 or 6) through `ifindex`, in the main table, with no
// gateway (a TUN has no link-layer neighbours). file_exists when one is there already.
std::error_code add_default_route(int ifindex, int family);

}  // namespace wgrun::netlink

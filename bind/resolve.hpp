// Endpoint names on the underlay: the system resolver (getaddrinfo, blocking), for the
// programs to hand to wg::apply_config. Endpoints live outside the tunnel, so this is
// never the tunnel's DNS.
#pragma once

#include <optional>
#include <string>

#include "bind/bind.hpp"

namespace conn {

// "host:port", "[v6]:port", "[fe80::1%eth0]:port" → endpoint; a host name is looked up
// (IPv4 preferred, as wg(8) does). nullopt with `error` set when it cannot be resolved.
std::optional<Endpoint> resolve_endpoint(const std::string& text, std::string& error);

}  // namespace conn

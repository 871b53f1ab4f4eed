// Endpoint names via the system resolver (blocking); never the tunnel's DNS.
#pragma once

#include <optional>
#include <string>

#include "bind/bind.hpp"

namespace conn {

// IPv4 preferred, as wg(8). nullopt with `error` set on failure.
std::optional<Endpoint> resolve_endpoint(const std::string& text, std::string& error);

}  // namespace conn

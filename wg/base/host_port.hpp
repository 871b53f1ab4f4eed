// The one "host:port" parser.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wg {

// "host:port" / "[v6]:port"; false if malformed. The host is only checked to be
// non-empty and, unbracketed, free of ':'.
bool split_host_port(std::string_view s, std::string& host, uint16_t& port);

}  // namespace wg

// "host:port" and "[v6]:port" split: the one parser behind Endpoint::parse, the endpoint
// resolver, and wg-netstack's command line, forwards, HTTP CONNECT and config reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wg {

// Splits "host:port" / "[v6]:port"; false if malformed. The host is not checked beyond
// being non-empty (and, unbracketed, holding no ':'); the port is 0-65535.
bool split_host_port(std::string_view s, std::string& host, uint16_t& port);

}  // namespace wg

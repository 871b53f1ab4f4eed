// "host:port" and "[v6]:port" split, shared by the command line, the forwards, HTTP CONNECT
// and the wireproxy config reader (kept free of Asio so the parsers stay light).
#pragma once

#include <cstdint>
#include <string>

namespace wgns {

// Splits "host:port" / "[v6]:port"; false if malformed. The host is not checked beyond
// being non-empty (and, unbracketed, holding no ':'); the port is 0-65535.
bool split_host_port(const std::string& s, std::string& host, uint16_t& port);

}  // namespace wgns

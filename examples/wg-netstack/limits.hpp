// What wg-netstack's listeners may hold at once (--max-connections and the UDP ASSOCIATE
// caps): kept free of Asio, for the command line.
#pragma once

#include <chrono>
#include <cstddef>

namespace wgns {

// What one listener may hold. Each proxied connection is a descriptor, so the three proxy
// kinds at their default caps stay below the service unit's LimitNOFILE=20000.
struct Limits {
  size_t max_connections = 4096;  // per SOCKS5, HTTP, SNI, --forward and --reverse tcp listener
  size_t health_max_connections = 64;  // wg-run's and wg-tun's too (health.cpp checks)
  // UDP ASSOCIATE: a relay socket each, besides its control connection.
  size_t udp_associations = 256;            // per SOCKS5 listener
  size_t udp_associations_per_client = 64;  // per client IP address, on each listener
  // An association without a datagram either way this long is closed (its control
  // connection too). As long as a --forward udp flow may idle.
  std::chrono::steady_clock::duration udp_associate_timeout = std::chrono::seconds(60);
};

}  // namespace wgns

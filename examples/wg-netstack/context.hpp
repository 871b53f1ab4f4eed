// wg-netstack's Context, what every service runs in; the accept loop; and (relay.hpp)
// the relay that copies bytes both ways between a local socket and a tunnel stream.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/udp.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "limits.hpp"
#include "wg/base/host_port.hpp"
#include "proxy_config.hpp"
#include "wg/crypto.hpp"
#include "netstack/stack.hpp"
#include "relay.hpp"
#include "wg/device.hpp"

namespace wgns {

using wg::split_host_port;

using asio::ip::udp;

struct Metrics {
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> connections_active{0};
  std::atomic<uint64_t> connections_failed{0};
  std::atomic<uint64_t> udp_datagrams{0};
  // SOCKS5 / HTTP clients closed for not sending their request within the timeout.
  std::atomic<uint64_t> handshake_timeouts{0};
  // Clients reset on accept: their listener was at its cap, or out of descriptors.
  std::atomic<uint64_t> connections_refused{0};
  std::atomic<uint64_t> udp_associations_active{0};
  // UDP ASSOCIATE requests answered "not allowed" for a cap; associations ended idle.
  std::atomic<uint64_t> udp_associations_refused{0};
  std::atomic<uint64_t> udp_associations_idle{0};
  void connection_opened() { connections_active.fetch_add(1); }
  void connection_closed() { connections_active.fetch_sub(1); }
};

inline constexpr auto kDefaultHandshakeTimeout = std::chrono::seconds(10);


struct Credentials {
  std::string user, password;
  ~Credentials() {
    wg::secure_wipe(user.data(), user.size());
    wg::secure_wipe(password.data(), password.size());
  }
};

// CheckAlive (wireproxy's key): addresses pinged through the tunnel every interval; with
// them, /readyz follows their answers instead of the handshakes.
struct CheckAlive {
  struct Target {
    wg::IpAddress address;
    std::optional<std::chrono::steady_clock::time_point> last_pong;
    int64_t last_pong_unix = 0;  // wall clock, for the /readyz body; 0 = never
  };
  std::chrono::seconds interval{5};
  mutable std::mutex mu;  // guards targets' pong times
  std::vector<Target> targets;
};

struct Context {
  netstack::Stack& stack;
  wg::Device& device;
  Metrics metrics;
  // SOCKS5 and HTTP proxy credentials (empty user: none required).
  Credentials socks, http;
  // How long a SOCKS5 or HTTP client may take to send its greeting and request.
  std::chrono::steady_clock::duration handshake_timeout = kDefaultHandshakeTimeout;
  // Set when CheckAlive addresses are configured (see start_check_alive).
  CheckAlive* checks = nullptr;
  // [Resolve] ResolveStrategy: the family of a name's addresses that are dialed.
  ResolveStrategy resolve = ResolveStrategy::automatic;
  Limits limits{};
};

// Counts a proxied connection as active for its lifetime.
struct ActiveConnection {
  explicit ActiveConnection(Metrics& m) : m(m) {
    m.connections_total.fetch_add(1);
    m.connection_opened();
  }
  ~ActiveConnection() { m.connection_closed(); }
  Metrics& m;
};

}  // namespace wgns

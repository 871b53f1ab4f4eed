// conn::Bind: the batched UDP layer under the WireGuard core, after wireguard-go's
// conn.Bind (`bind` is POSIX's). Endpoint is a plain value: no allocation per datagram.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace conn {

struct Endpoint {
  uint8_t family = 0;                 // 4 or 6; 0 = unset
  std::array<uint8_t, 16> addr{};     // IPv4 in the first 4 bytes
  uint16_t port = 0;                  // host order
  uint32_t scope_id = 0;              // IPv6 link-local zone

  // Sticky source: the local address and interface the peer last reached us on.
  bool has_source = false;
  std::array<uint8_t, 16> source{};
  uint32_t source_ifindex = 0;

  // "198.18.0.1:51820", "[fd00:18::1]:51820", "[fe80::1%eth0]:51820"; numeric only.
  static std::optional<Endpoint> parse(std::string_view s);
  std::string to_string() const;  // the destination
  // The destination's address and port, e.g. for cookies.
  size_t destination_bytes(uint8_t out[18]) const;
  bool same_destination(const Endpoint& o) const {
    return family == o.family && addr == o.addr && port == o.port && scope_id == o.scope_id;
  }
  void clear_source() { has_source = false; source = {}; source_ifindex = 0; }
};

// Blocks until a datagram arrives, then returns the count n: datagram i is sizes[i]
// bytes at at[i] from eps[i]. After close(): 0 with errc::operation_canceled.
//
// Datagram i lies whole in bufs[k] for some k <= i, k never decreasing with i; a
// coalesced (GRO) message stays where it landed, several to a buffer:
//
//   bufs:   [0: a0 a1 a2 ....] [1: unused] [2: unused] [3: b0 ...] [4: ...]
//   at:      a0  a1  a2  b0
//
// Datagrams do not overlap, so each may be rewritten in place; a buffer holding none
// may have been used as scratch.
using ReceiveFn = std::function<size_t(std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
                                       std::span<size_t> sizes, std::span<Endpoint> eps,
                                       std::error_code& ec)>;

// Given the destination of a datagram the network refused (ICMP unreachable).
using UnreachableFn = std::function<void(const Endpoint& destination)>;

class Bind {
public:
  virtual ~Bind() = default;

  // One ReceiveFn per socket; all families share the port (0: picked). On an open
  // bind: errc::already_connected.
  virtual std::vector<ReceiveFn> open(uint16_t port, uint16_t& actual_port, std::error_code& ec) = 0;
  // Closes the sockets; receive functions return operation_canceled afterwards.
  virtual void close() = 0;
  // Thread-safe.
  virtual void send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep,
                    std::error_code& ec) = 0;
  // SO_MARK for every socket (0 = none).
  virtual void set_mark(uint32_t mark, std::error_code& ec) = 0;
  virtual size_t batch_size() const = 0;
  // Called on a receive thread, if the Bind can learn of refusals; set while closed.
  virtual void set_unreachable(UnreachableFn fn) { (void)fn; }
};

}  // namespace conn

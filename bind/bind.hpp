// conn::Bind (namespace `conn`, as in wireguard-go: `bind` is taken by POSIX bind()):
// the batched UDP layer under the WireGuard core, shaped after wireguard-go's
// conn.Bind. Endpoint is a plain value: the peer's address plus the local source it
// last reached us on (sticky source), so no allocation is needed per datagram.
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
  std::array<uint8_t, 16> addr{};     // destination address (IPv4 in the first 4 bytes)
  uint16_t port = 0;                  // host order
  uint32_t scope_id = 0;              // IPv6 link-local zone

  // Sticky source: the local address and interface the peer last reached us on.
  bool has_source = false;
  std::array<uint8_t, 16> source{};
  uint32_t source_ifindex = 0;

  // Parses "198.18.0.1:51820", "[fd00:18::1]:51820", "[fe80::1%eth0]:51820". Numeric
  // only: host names are resolved by the caller.
  static std::optional<Endpoint> parse(std::string_view s);
  std::string to_string() const;  // the destination, in the same format
  // Bytes identifying the destination (address and port), e.g. for cookies.
  size_t destination_bytes(uint8_t out[18]) const;
  bool same_destination(const Endpoint& o) const {
    return family == o.family && addr == o.addr && port == o.port && scope_id == o.scope_id;
  }
  void clear_source() { has_source = false; source = {}; source_ifindex = 0; }
};

// Receives a batch into the caller's buffers. Datagram i is the sizes[i] bytes at
// at[i], from eps[i]. Blocks until at least one arrives. Returns the count; after close()
// returns 0 with errc::operation_canceled.
//
// Where the datagrams lie (zero-copy receive): at[i] points into one of bufs, not
// necessarily bufs[i]. A coalesced message (UDP GRO) is handed out where the kernel put
// it, several datagrams in one buffer one after the other, instead of being copied
// apart:
//
//   bufs:   [0: a0 a1 a2 ....] [1: unused] [2: unused] [3: b0 ...] [4: ...]
//   at:      a0  a1  a2  b0      (at[3] = bufs[3].data() + 0, sizes 1420 1420 1420 96)
//
// The promise: datagram i lies whole inside bufs[k] for one k <= i, and k never
// decreases with i (a buffer's datagrams are consecutive, buffers in order). The
// datagrams do not overlap, so each may be rewritten in place within its own bytes; a
// buffer that holds none may have been written over as scratch. Everything lies in bufs
// and stays valid for as long as the caller keeps them.
using ReceiveFn = std::function<size_t(std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
                                       std::span<size_t> sizes, std::span<Endpoint> eps,
                                       std::error_code& ec)>;

// Told the destination of a datagram the network refused (ICMP destination or port
// unreachable): nobody took it there.
using UnreachableFn = std::function<void(const Endpoint& destination)>;

class Bind {
public:
  virtual ~Bind() = default;

  // Opens the sockets on `port` (0 picks one; all families share it). Returns one receive
  // function per socket and stores the actual port. Calling open() on an open bind is an
  // error (errc::already_connected).
  virtual std::vector<ReceiveFn> open(uint16_t port, uint16_t& actual_port, std::error_code& ec) = 0;
  // Closes the sockets; receive functions return operation_canceled afterwards.
  virtual void close() = 0;
  // Sends a batch of datagrams to one endpoint. Thread-safe.
  virtual void send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep,
                    std::error_code& ec) = 0;
  // SO_MARK for every socket (0 = none).
  virtual void set_mark(uint32_t mark, std::error_code& ec) = 0;
  virtual size_t batch_size() const = 0;
  // Where refusals are reported, from a receive function's thread; set while closed. A
  // Bind that cannot learn of them never calls it.
  virtual void set_unreachable(UnreachableFn fn) { (void)fn; }
};

}  // namespace conn

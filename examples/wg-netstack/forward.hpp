// Port forwards: --forward (local listener → host in the tunnel) and --reverse
// (listener on the netstack → local service), for TCP and UDP.
#pragma once

#include <chrono>
#include <functional>

#include <memory>

#include "context.hpp"

namespace wgns {

// How long a UDP flow of a forward or reverse lives without a datagram (by default).
inline constexpr std::chrono::seconds kUdpFlowIdle{60};

struct ForwardSpec {
  bool udp = false;
  std::string from_host;  // where we listen
  uint16_t from_port = 0;
  std::string to_host;    // where we connect
  uint16_t to_port = 0;
  std::string text;       // as given, for messages
  // UDP: a client's flow (its own tunnel socket) ends after this long without a datagram
  // either way; the next datagram from it opens a new one.
  std::chrono::seconds udp_idle = kUdpFlowIdle;
};

// "tcp:127.0.0.1:8080=198.19.0.2:80" → spec; throws std::invalid_argument.
ForwardSpec parse_forward(const std::string& s);

// Start listening now (errors such as "address in use" are thrown as
// std::runtime_error with one clear line), then serve in the background.
void start_forward(Context& ctx, const ForwardSpec& spec);
void start_reverse(Context& ctx, const ForwardSpec& spec);

// [STDIOTunnel]: this process's stdin and stdout bridged to one TCP connection to
// host:port in the tunnel (ssh's ProxyCommand). `done` runs once both directions have
// ended or the dial failed (logged).
void start_stdio_tunnel(Context& ctx, const std::string& host, uint16_t port, std::function<void(bool)> done);

}  // namespace wgns

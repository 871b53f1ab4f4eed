// <wgnet/netstack.hpp>: a WireGuard tunnel inside this process in one call. A Tunnel owns
// the TCP/IP stack that holds the config's tunnel addresses, the UDP socket WireGuard
// speaks on, and the WireGuard device between them; it dials through the tunnel like
// netstack::Stack (the same operations, tokens and cancellation: netstack/stack.hpp).
//
//   auto tunnel = wgnet::Tunnel::open_file("wg0.conf");
//   netstack::TcpStream s = tunnel->async_dial_tcp("web.internal", 80, asio::use_future).get();
//
// The steps it takes, for programs that need one of them done otherwise: load the config,
// netstack::Stack::create with its Address/MTU/DNS, conn::LinuxBind, wg::Device on both,
// wg::apply_config, Device::up, Stack::set_route_check(Device::routable), and a first
// handshake with every peer that has an Endpoint (so the first dial need not wait for
// one). A process may hold several Tunnels (netstack/stack.hpp: several Stacks share one
// lwIP thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/config.hpp"
#include "wg/device.hpp"

namespace wgnet {

struct TunnelOptions {
  netstack::StackOptions::Congestion tcp_congestion = netstack::StackOptions::Congestion::bbr;
  std::chrono::milliseconds tcp_keepalive{0};  // see StackOptions::tcp_keepalive
  std::chrono::milliseconds dial_timeout{30000};
  conn::LinuxBind::Options bind;  // the UDP socket's offloads (the program reads their switches)
};

// What Tunnel::open could not set up, and the system's reason (code()): a
// std::system_error whose what() is "wgnet: the network stack: ..." or
// "wgnet: UDP port N: ...".
class TunnelError : public std::system_error {
public:
  enum class Step { stack, udp_port };
  TunnelError(Step step, std::error_code ec, uint16_t port);
  Step step() const { return step_; }
  uint16_t port() const { return port_; }  // the ListenPort asked for (0: any); for udp_port

private:
  Step step_;
  uint16_t port_;
};

class Tunnel {
public:
  // Errors are exceptions, as with Asio's throwing overloads: wg::ConfigError for the
  // config (with its file and line), TunnelError for the stack or the UDP port
  // (ListenPort in use, say), std::runtime_error for an Endpoint that does not resolve.
  static std::unique_ptr<Tunnel> open(const wg::Config& config, const TunnelOptions& options = {});
  static std::unique_ptr<Tunnel> open_file(const std::string& path, const TunnelOptions& options = {});
  static std::unique_ptr<Tunnel> open_text(std::string_view wg_quick_config, const TunnelOptions& options = {});
  // Closes the device (no more packets either way), then the stack; operations still
  // pending complete with operation_aborted.
  ~Tunnel();
  Tunnel(const Tunnel&) = delete;
  Tunnel& operator=(const Tunnel&) = delete;

  netstack::Stack& stack() { return *stack_; }
  wg::Device& device() { return *device_; }
  netstack::Executor get_executor() { return stack_->get_executor(); }

  // The dialer, as netstack::Stack has it.
  template <class... Args>
  auto async_dial_tcp(Args&&... args) {
    return stack_->async_dial_tcp(std::forward<Args>(args)...);
  }
  template <class... Args>
  auto async_dial_udp(Args&&... args) {
    return stack_->async_dial_udp(std::forward<Args>(args)...);
  }
  template <class... Args>
  auto async_resolve(Args&&... args) {
    return stack_->async_resolve(std::forward<Args>(args)...);
  }
  template <class... Args>
  auto async_ping(Args&&... args) {
    return stack_->async_ping(std::forward<Args>(args)...);
  }
  netstack::TcpListener listen_tcp(const netstack::Endpoint& local, netstack::error_code& ec, int backlog = 128) {
    return stack_->listen_tcp(local, ec, backlog);
  }
  netstack::UdpSocket listen_udp(const netstack::Endpoint& local, netstack::error_code& ec) {
    return stack_->listen_udp(local, ec);
  }

private:
  Tunnel() = default;
  // Destroyed in reverse: the device before what it uses.
  std::unique_ptr<netstack::Stack> stack_;
  std::unique_ptr<conn::LinuxBind> bind_;
  std::unique_ptr<wg::Device> device_;
};

}  // namespace wgnet

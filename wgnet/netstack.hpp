// <wgnet/netstack.hpp>: a WireGuard tunnel inside this process in one call. A Tunnel owns
// a netstack::Stack, the UDP socket and the wg::Device between them, and dials like the
// Stack.
//
//   auto tunnel = wgnet::Tunnel::open_file("wg0.conf");
//   netstack::TcpStream s = tunnel->async_dial_tcp("web.internal", 80, asio::use_future).get();
//
// It also routes dials by the allowed IPs and starts a handshake with every peer that
// has an Endpoint.
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
  std::chrono::milliseconds tcp_keepalive{0};
  std::chrono::milliseconds dial_timeout{30000};
  conn::LinuxBind::Options bind;
};

// What Tunnel::open could not set up; code() is the system's reason.
class TunnelError : public std::system_error {
public:
  enum class Step { stack, udp_port };
  TunnelError(Step step, std::error_code ec, uint16_t port);
  Step step() const { return step_; }
  uint16_t port() const { return port_; }  // ListenPort asked for (0: any)

private:
  Step step_;
  uint16_t port_;
};

class Tunnel {
public:
  // Throws wg::ConfigError, TunnelError, or std::runtime_error for an unresolvable
  // Endpoint.
  static std::unique_ptr<Tunnel> open(const wg::Config& config, const TunnelOptions& options = {});
  static std::unique_ptr<Tunnel> open_file(const std::string& path, const TunnelOptions& options = {});
  static std::unique_ptr<Tunnel> open_text(std::string_view wg_quick_config, const TunnelOptions& options = {});
  // Closes the device, then the stack; pending operations complete with
  // operation_aborted.
  ~Tunnel();
  Tunnel(const Tunnel&) = delete;
  Tunnel& operator=(const Tunnel&) = delete;

  netstack::Stack& stack() { return *stack_; }
  wg::Device& device() { return *device_; }
  netstack::Executor get_executor() { return stack_->get_executor(); }

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

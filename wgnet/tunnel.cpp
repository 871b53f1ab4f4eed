// wgnet::Tunnel: the six set-up steps of an embedded tunnel in one call, and TunnelError.
#include "wgnet/netstack.hpp"

#include <system_error>

#include "bind/resolve.hpp"
#include "wg/apply.hpp"
#include "wg/base/log.hpp"
#include "wg/messages.hpp"

namespace wgnet {

namespace {
std::string step_text(TunnelError::Step step, uint16_t port) {
  return step == TunnelError::Step::stack ? "wgnet: the network stack" : "wgnet: UDP port " + std::to_string(port);
}
}  // namespace

TunnelError::TunnelError(Step step, std::error_code ec, uint16_t port)
    : std::system_error(ec, step_text(step, port)), step_(step), port_(port) {}

std::unique_ptr<Tunnel> Tunnel::open(const wg::Config& config, const TunnelOptions& options) {
  netstack::StackOptions so;
  so.addresses = config.iface.addresses;
  so.mtu = static_cast<int>(config.iface.mtu.value_or(wg::kDefaultMtu));
  so.dns_servers = config.iface.dns_servers;
  so.tcp_congestion = options.tcp_congestion;
  so.tcp_keepalive = options.tcp_keepalive;
  so.dial_timeout = options.dial_timeout;
  std::unique_ptr<Tunnel> t(new Tunnel);
  std::error_code ec;
  t->stack_ = netstack::Stack::create(so, ec);
  if (!t->stack_) throw TunnelError(TunnelError::Step::stack, ec, 0);
  t->bind_ = std::make_unique<conn::LinuxBind>(options.bind);
  t->device_ = std::make_unique<wg::Device>(*t->stack_, *t->bind_);
  // ListenPort before the rest, so that a port in use is a TunnelError with its code.
  if (const auto port = config.iface.listen_port)
    if (auto err = t->device_->set_listen_port(*port)) throw TunnelError(TunnelError::Step::udp_port, err, *port);
  wg::apply_config(*t->device_, config, conn::resolve_endpoint);  // endpoint names through the system resolver
  if (auto err = t->device_->up())
    throw TunnelError(TunnelError::Step::udp_port, err, config.iface.listen_port.value_or(0));
  t->stack_->set_route_check([d = t->device_.get()](const wg::IpAddress& a) { return d->routable(a); });
  for (auto& p : t->device_->peers())
    if (p->endpoint()) t->device_->initiate_handshake(*p);
  return t;
}

std::unique_ptr<Tunnel> Tunnel::open_file(const std::string& path, const TunnelOptions& options) {
  auto config = wg::load_config(path);
  for (auto& w : config.warnings) wg::log::error("{}", w);  // the embedding program's log level decides
  return open(std::move(config), options);
}

std::unique_ptr<Tunnel> Tunnel::open_text(std::string_view wg_quick_config, const TunnelOptions& options) {
  return open(wg::parse_config(wg_quick_config), options);
}

Tunnel::~Tunnel() {
  if (device_) device_->close();
  if (stack_) stack_->close();
}

}  // namespace wgnet

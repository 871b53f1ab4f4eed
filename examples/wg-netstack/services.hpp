// What wg-netstack runs over its tunnel: the SOCKS5, HTTP(S) and SNI proxies, the health
// server, the forwards both ways, [STDIOTunnel]s, CheckAlive, endpoint re-resolution and
// the malloc-trim timer; chosen from the command line and the config file.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "context.hpp"
#include "forward.hpp"
#include "options.hpp"
#include "proxy_config.hpp"
#include "tls_stream.hpp"

namespace wgns {

// A proxy listener and the credentials it asks for.
struct Listener {
  std::string address;
  Credentials creds;
  std::string cert_file, key_file;  // [http] CertFile/KeyFile: an HTTPS proxy
};

// The listeners and forwards, checked and with their certificates loaded, before
// anything starts (and by -n).
struct ServicePlan {
  std::vector<Listener> socks, http;
  Credentials socks_creds, http_creds;
  std::vector<std::unique_ptr<TlsServerContext>> tls;  // one per http listener, null for HTTP
  std::vector<ForwardSpec> tunnel_forwards, tunnel_reverses;  // the config's tunnel sections
  std::vector<std::string> check_alive;  // the command line's, then the config's
  unsigned check_alive_interval = 5;
};

// Throws std::runtime_error for what cannot run: credentials missing off loopback or
// differing within a kind, an unreadable auth file, -d with [STDIOTunnel], a second
// [STDIOTunnel], a certificate that does not load.
ServicePlan plan_services(const Options& o, const ProxyConfig& pc);

// The plan's CheckAlive addresses and interval into `checks`; throws std::runtime_error
// ("--check-alive: 'X' is not an IP address").
void set_check_alive(CheckAlive& checks, const ServicePlan& plan);

// The running services. Started on the tunnel's executor from the constructor (which
// throws std::runtime_error for a listener that cannot bind or a bad --forward or
// --check-alive); stop() must be called before ctx's tunnel closes.
class Services {
 public:
  // ctx.checks, when set, must outlive the Stack (its executor runs the pingers).
  Services(Context& ctx, const ServicePlan& plan, const Options& o, const ProxyConfig& pc);
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  // ", SOCKS5 on A, HTTP on B, ...": the listeners, for the "up" line.
  const std::string& listening() const { return listening_; }
  // Closes the listeners and cancels the timers on the executor; returns once done.
  void stop();
  // A [STDIOTunnel] could not connect and nothing else ran: exit status 1.
  bool stdio_failed() const;

 private:
  Context& ctx_;
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors_;
  std::shared_ptr<asio::steady_timer> endpoint_timer_, trim_timer_;
  std::string listening_;
};

}  // namespace wgns

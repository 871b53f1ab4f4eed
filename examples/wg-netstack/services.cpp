#include "services.hpp"

#include <boost/asio/steady_timer.hpp>
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <stdexcept>

#include "bind/linux.hpp"
#include "endpoint_refresh.hpp"
#include "health.hpp"
#include "http_proxy.hpp"
#include "listen_address.hpp"
#include "memory_trim.hpp"
#include "sni.hpp"
#include "socks5.hpp"

namespace wgns {

namespace {

// A [STDIOTunnel] could not connect and nothing else runs: exit status 1.
std::atomic<bool> stdio_failed_{false};

std::shared_ptr<tcp::acceptor> listen_on(netstack::Executor ex, const std::string& what, const std::string& addr) {
  auto ep = programs::parse_listen(addr);
  auto acc = std::make_shared<tcp::acceptor>(ex);
  error_code ec;
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("{} on {}: {}", what, addr, ec.message()));
  return acc;
}

bool is_loopback(const std::string& addr) { return programs::parse_listen(addr).address().is_loopback(); }

// A [Socks5] or [http] section: its Username/Password, else those of --auth-file.
template <class Section>
Listener section_listener(const Section& sec, const std::string& user, const std::string& password) {
  Listener l{sec.bind.text, {user, password}, {}, {}};
  if (!sec.username.empty()) l.creds = {sec.username, sec.password.str()};
  if constexpr (requires { sec.cert_file; }) {
    l.cert_file = sec.cert_file;
    l.key_file = sec.key_file;
  }
  return l;
}

// The proxies of one kind share their credentials (Context holds one pair per kind).
Credentials one_credential(const char* kind, const std::vector<Listener>& ls) {
  for (auto& l : ls)
    if (l.creds.user != ls.front().creds.user || l.creds.password.size() != ls.front().creds.password.size() ||
        !wg::ct_equal(l.creds.password.data(), ls.front().creds.password.data(), l.creds.password.size()))
      throw std::runtime_error(std::string("several ") + kind + " sections must share Username and Password");
  return ls.empty() ? Credentials{} : ls.front().creds;
}

ForwardSpec tunnel_spec(bool udp, const ListenAddress& bind, const HostPort& target) {
  ForwardSpec f;
  f.udp = udp;
  f.from_host = bind.ip.to_string();
  f.from_port = bind.port;
  f.to_host = target.host;
  f.to_port = target.port;
  f.text = bind.text + "=" + target.text;
  return f;
}

// [TCPServerTunnel]: ListenPort on a tunnel address → Target on this side.
ForwardSpec server_tunnel_spec(const wg::IpAddress& tunnel_address, uint16_t port, const HostPort& target) {
  ForwardSpec f;
  f.from_host = tunnel_address.to_string();
  f.from_port = port;
  f.to_host = target.host;
  f.to_port = target.port;
  f.text = tunnel_address.to_string() + ":" + std::to_string(port) + "=" + target.text;
  return f;
}

std::pair<std::string, std::string> read_auth(const std::string& file) {
  std::string line;
  if (const char* env = std::getenv("WG_NETSTACK_AUTH"); env && file.empty()) {
    line = env;
  } else if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error(fmt::format("--auth-file {}: {}", file, std::strerror(errno)));
    std::getline(in, line);
  } else {
    return {};
  }
  auto colon = line.find(':');
  if (colon == std::string::npos || colon == 0)
    throw std::runtime_error("credentials must be USER:PASSWORD");
  auto out = std::pair{line.substr(0, colon), line.substr(colon + 1)};
  wg::secure_wipe(line.data(), line.size());
  return out;
}

}  // namespace

ServicePlan plan_services(const Options& o, const ProxyConfig& pc) {
  ServicePlan plan;
  auto [user, password] = read_auth(o.auth_file);
  // Listeners: a flag on the command line wins over the file's sections of its kind. A
  // file in wireproxy's style (any proxy or tunnel section) says what runs, as it does
  // for wireproxy: then the default SOCKS5 listener runs only if asked for.
  const bool wireproxy_style = !pc.socks5.empty() || !pc.http.empty() || !pc.tcp_client_tunnels.empty() ||
                               !pc.tcp_server_tunnels.empty() || !pc.udp_proxy_tunnels.empty() ||
                               !pc.stdio_tunnels.empty() || !pc.sni.empty();
  if (o.no_socks) {
  } else if (o.socks_given || (pc.socks5.empty() && !wireproxy_style)) {
    plan.socks.push_back({o.socks, {user, password}, {}, {}});
  } else {
    for (auto& sec : pc.socks5) plan.socks.push_back(section_listener(sec, user, password));
  }
  if (o.http_given || pc.http.empty()) {
    if (!o.http_addr.empty()) plan.http.push_back({o.http_addr, {user, password}, {}, {}});
  } else {
    for (auto& sec : pc.http) plan.http.push_back(section_listener(sec, user, password));
  }
  plan.socks_creds = one_credential("[Socks5]", plan.socks);
  plan.http_creds = one_credential("[http]", plan.http);
  // [SNI] has no credentials (nor has wireproxy's): it may listen off loopback, since it
  // only relays TLS to port 443 of the names its clients' ClientHellos carry.
  for (auto* ls : {&plan.socks, &plan.http})
    for (auto& l : *ls)
      if (!is_loopback(l.address) && l.creds.user.empty())
        throw std::runtime_error("listening on " + l.address +
                                 " (not loopback) needs credentials: --auth-file, or Username/Password");
  plan.check_alive = o.check_alive;
  for (auto& a : pc.check_alive) plan.check_alive.push_back(a.to_string());
  plan.check_alive_interval =
      o.check_alive_interval_given ? o.check_alive_interval : static_cast<unsigned>(pc.check_alive_interval.count());
  for (auto& t : pc.tcp_client_tunnels) plan.tunnel_forwards.push_back(tunnel_spec(false, t.bind, t.target));
  for (auto& t : pc.udp_proxy_tunnels) {
    plan.tunnel_forwards.push_back(tunnel_spec(true, t.bind, t.target));
    // wireproxy's 0 (the default) keeps a flow forever; here it means the --forward
    // default, 60 s, so that memory stays bounded.
    if (t.inactivity_timeout.count() > 0) plan.tunnel_forwards.back().udp_idle = t.inactivity_timeout;
  }
  for (auto& t : pc.tcp_server_tunnels)
    for (auto& a : pc.wg.iface.addresses)
      plan.tunnel_reverses.push_back(server_tunnel_spec(a.addr, t.listen_port, t.target));
  if (o.daemon_mode && !pc.stdio_tunnels.empty())
    throw std::runtime_error("-d and [STDIOTunnel] exclude each other: the tunnel is this process's stdin and stdout");
  for (auto& l : plan.http)
    plan.tls.push_back(l.cert_file.empty() ? nullptr : std::make_unique<TlsServerContext>(l.cert_file, l.key_file));
  return plan;
}

void set_check_alive(CheckAlive& checks, const ServicePlan& plan) {
  checks.interval = std::chrono::seconds(plan.check_alive_interval);
  for (auto& a : plan.check_alive) {
    auto addr = wg::IpAddress::parse(a);
    if (!addr) throw std::runtime_error("--check-alive: '" + a + "' is not an IP address");
    checks.targets.push_back({*addr, std::nullopt, 0});
  }
}

Services::Services(Context& ctx, const ServicePlan& plan, const Options& o, const ProxyConfig& pc) : ctx_(ctx) {
  if (ctx.checks) start_check_alive(ctx, *ctx.checks);
  auto ex = ctx.stack.get_executor();
  for (auto& l : plan.socks) {
    auto a = listen_on(ex, "SOCKS5", l.address);
    acceptors_.push_back(a);
    asio::co_spawn(ex, socks5_server(ctx, *a), asio::detached);
    listening_ += ", SOCKS5 on " + l.address;
  }
  for (size_t i = 0; i < plan.http.size(); ++i) {
    auto& l = plan.http[i];
    auto* tls = plan.tls[i].get();
    auto a = listen_on(ex, tls ? "HTTPS proxy" : "HTTP proxy", l.address);
    acceptors_.push_back(a);
    asio::co_spawn(ex, http_proxy_server(ctx, *a, tls), asio::detached);
    listening_ += (tls ? ", HTTPS on " : ", HTTP on ") + l.address;
  }
  for (auto& sec : pc.sni) {
    auto a = listen_on(ex, "SNI proxy", sec.bind.text);
    acceptors_.push_back(a);
    asio::co_spawn(ex, sni_server(ctx, *a), asio::detached);
    listening_ += ", SNI on " + sec.bind.text;
  }
  if (!o.health_addr.empty()) {
    auto a = listen_on(ex, "health", o.health_addr);
    acceptors_.push_back(a);
    asio::co_spawn(ex, health_server(ctx, *a), asio::detached);
  }
  // Forwards listen on the host (from) into the tunnel (to); reverses in the tunnel.
  std::vector<std::pair<bool, ForwardSpec>> specs;  // (reverse, spec)
  for (auto& f : o.forwards) specs.emplace_back(false, parse_forward(f));
  for (auto& f : plan.tunnel_forwards) specs.emplace_back(false, f);
  for (auto& r : o.reverses) specs.emplace_back(true, parse_forward(r));
  for (auto& r : plan.tunnel_reverses) specs.emplace_back(true, r);
  auto at = [](const std::string& host, uint16_t port) {
    return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port) : fmt::format("[{}]:{}", host, port);
  };
  for (auto& [reverse, f] : specs) {
    if (reverse) start_reverse(ctx, f);
    else start_forward(ctx, f);
    listening_ += fmt::format(", {} {} {} to {}", reverse ? "reverse" : "forward", f.udp ? "udp" : "tcp",
                              at(f.from_host, f.from_port), at(f.to_host, f.to_port));
  }
  // [STDIOTunnel]: when its connection has ended, so has wg-netstack (as wireproxy). A
  // dial that fails ends it with status 1 (ssh's ProxyCommand then says so), unless other
  // services run: those go on, as wireproxy's do.
  const bool other_services = !acceptors_.empty() || !o.forwards.empty() || !o.reverses.empty() ||
                              !plan.tunnel_forwards.empty() || !plan.tunnel_reverses.empty();
  for (auto& t : pc.stdio_tunnels)
    start_stdio_tunnel(ctx, t.target.host, t.target.port, [other_services](bool connected) {
      if (connected || !other_services) {
        if (!connected) stdio_failed_ = true;
        kill(getpid(), SIGTERM);
      }
    });

  std::vector<std::pair<wg::PublicKey, std::string>> named;
  for (auto& p : pc.wg.peers)
    if (p.endpoint && !conn::Endpoint::parse(*p.endpoint)) named.emplace_back(p.public_key, *p.endpoint);
  endpoint_timer_ = std::make_shared<asio::steady_timer>(ex);
  if (!named.empty()) watch_endpoints(ctx, endpoint_timer_, named);
  trim_timer_ = std::make_shared<asio::steady_timer>(ex);
  trim_when_slack_grows(trim_timer_, heap_slack());
}

void Services::stop() {
  // Stop accepting on the Stack's thread.
  std::promise<void> stopped;
  asio::post(ctx_.stack.get_executor(), [&] {
    error_code ec;
    for (auto& a : acceptors_) a->close(ec);
    endpoint_timer_->cancel();
    trim_timer_->cancel();
    stopped.set_value();
  });
  stopped.get_future().wait();
}

bool Services::stdio_failed() const { return stdio_failed_; }

}  // namespace wgns

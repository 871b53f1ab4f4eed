// embed: fetch a web page from a server inside a WireGuard network, in-process, without
// root: the config's tunnel address lives in this program's own TCP/IP stack.
//
//   wgnet-embed wg0.conf http://198.19.0.2/index.html
#include <cstdio>
#include <string>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/apply.hpp"

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]).rfind("http://", 0) != 0) {
    std::fprintf(stderr, "usage: %s CONFIG http://HOST[:PORT]/PATH\n", argv[0]);
    return 2;
  }
  try {
    // 1. The WireGuard config (wg-quick format): keys, Address=, DNS=, peers.
    wg::Config cfg = wg::load_config(argv[1]);

    // 2. A TCP/IP stack holding our tunnel addresses, under a WireGuard device on UDP.
    std::error_code ec;
    auto stack = netstack::Stack::create({.addresses = cfg.iface.addresses,
                                          .mtu = static_cast<int>(cfg.iface.mtu.value_or(1420)),
                                          .dns_servers = cfg.iface.dns_servers},
                                         ec);
    if (!stack) throw std::runtime_error("netstack: " + ec.message());
    conn::LinuxBind bind;
    wg::Device device(*stack, bind);
    wg::apply_config(device, cfg);
    if (auto err = device.up()) throw std::runtime_error("UDP: " + err.message());
    stack->set_route_check([&](const wg::IpAddress& a) { return device.routable(a); });

    // 3. Split the URL and resolve the host through the tunnel's DNS (or take a literal).
    std::string rest = std::string(argv[2]).substr(7);
    std::string hostport = rest.substr(0, rest.find('/'));
    std::string path = rest.find('/') == std::string::npos ? "/" : rest.substr(rest.find('/'));
    std::string host = hostport;
    uint16_t port = 80;
    if (auto colon = hostport.rfind(':'); colon != std::string::npos && hostport.back() != ']') {
      host = hostport.substr(0, colon);
      port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
    }
    netstack::error_code err;
    auto addrs = stack->resolve(host, err);
    if (err) throw std::runtime_error("resolve " + host + ": " + err.message());

    // 4. Dial, send the request, print the response until the server closes.
    netstack::TcpStream s = stack->dial_tcp({addrs.front(), port}, err);
    if (err) throw std::runtime_error("connect " + hostport + ": " + err.message());
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
    s.write_all(boost::asio::buffer(req), err);
    char buf[16384];
    for (;;) {
      size_t n = s.read_some(boost::asio::buffer(buf), err);
      std::fwrite(buf, 1, n, stdout);
      if (err) break;
    }
    if (err != boost::asio::error::eof) throw std::runtime_error("read: " + err.message());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgnet-embed: %s\n", e.what());
    return 1;
  }
}

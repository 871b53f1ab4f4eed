// embed: fetch a web page from a server inside a WireGuard network, in-process, without
// root: the config's tunnel address lives in this program's own TCP/IP stack.
//
//   wgnet-embed wg0.conf http://web.internal/index.html
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
#include <string>

#include <wgnet/netstack.hpp>

int main(int argc, char** argv) {
  namespace asio = boost::asio;
  if (argc != 3 || std::string(argv[2]).rfind("http://", 0) != 0) {
    std::fprintf(stderr, "usage: %s CONFIG http://HOST[:PORT]/PATH\n", argv[0]);
    return 2;
  }
  try {
    // 1. The tunnel, from a wg-quick config: keys, Address=, DNS=, peers.
    auto tunnel = wgnet::Tunnel::open_file(argv[1]);

    // 2. Split the URL; the host is a name for the tunnel's DNS, or an address.
    std::string rest = std::string(argv[2]).substr(7);
    std::string hostport = rest.substr(0, rest.find('/'));
    std::string path = rest.find('/') == std::string::npos ? "/" : rest.substr(rest.find('/'));
    std::string host = hostport;
    uint16_t port = 80;
    if (auto colon = hostport.rfind(':'); colon != std::string::npos && hostport.back() != ']') {
      host = hostport.substr(0, colon);
      port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
    }

    // 3. Dial by name (Happy Eyeballs), send the request, print until the server closes.
    netstack::TcpStream s = tunnel->async_dial_tcp(host, port, asio::use_future).get();
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
    asio::async_write(s, asio::buffer(req), asio::use_future).get();
    char buf[16384];
    netstack::error_code err;
    for (;;) {
      size_t n = s.read_some(asio::buffer(buf), err);
      std::fwrite(buf, 1, n, stdout);
      if (err) break;
    }
    if (err != asio::error::eof) throw std::runtime_error("read: " + err.message());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgnet-embed: %s\n", e.what());
    return 1;
  }
}

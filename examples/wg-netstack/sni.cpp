// The [SNI] service: read the ClientHello under the handshake deadline, dial its server
// name through the tunnel, write the ClientHello there unchanged, relay.
#include "sni.hpp"

#include <boost/asio/write.hpp>

#include <algorithm>
#include <vector>

#include "dial.hpp"
#include "listener.hpp"
#include "proxy_client.hpp"
#include "tls_client_hello.hpp"
#include "wg/base/ip.hpp"
#include "wg/base/log.hpp"
#include "wg/base/shown.hpp"

namespace wgns {
namespace {

// Reads are at least this large, so that a ClientHello in several records (or followed at
// once by more of the client's bytes) takes few reads.
constexpr size_t kReadChunk = 2048;

// Reads until the ClientHello is whole or the client stops short of it (it closed, or the
// deadline closed it: the result is then incomplete). `buf` receives every byte read: the
// records of the ClientHello and whatever came with them, all of it for the server.
awaitable<tls::ClientHello> read_client_hello(tcp::socket& s, std::vector<uint8_t>& buf) {
  for (;;) {
    auto hello = tls::parse_client_hello(buf);
    if (hello.status != tls::HelloStatus::incomplete) co_return hello;
    // incomplete: hello.size > buf.size() and hello.size <= kMaxHelloBytes.
    const size_t have = buf.size();
    const size_t want = std::min(std::max(hello.size - have, kReadChunk), tls::kMaxHelloBytes - have);
    buf.resize(have + want);
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf.data() + have, want), kTry);
    buf.resize(have + n);
    if (ec) co_return hello;
  }
}

// Why a ClientHello gives no name to dial (empty when it gives one).
std::string unusable(const tls::ClientHello& hello) {
  switch (hello.status) {
    case tls::HelloStatus::complete:
      return hello.server_name.empty() ? "a ClientHello without server_name" : std::string();
    case tls::HelloStatus::incomplete:
      return "the client closed before its ClientHello was whole";
    case tls::HelloStatus::malformed:
      return "not a TLS ClientHello, or a malformed one";
    case tls::HelloStatus::too_large:
      return "a ClientHello over " + std::to_string(tls::kMaxHelloLength) + " bytes";
  }
  return "?";
}

awaitable<void> serve_client(Context& ctx, tcp::socket s) {
  ActiveConnection active(ctx.metrics);
  std::vector<uint8_t> buf;
  tls::ClientHello hello;
  {
    Deadline deadline(s, ctx.handshake_timeout);
    hello = co_await read_client_hello(s, buf);
    deadline.disarm();
    if (deadline.expired()) {  // it closed the socket
      ctx.metrics.handshake_timeouts.fetch_add(1);
      wg::log::verbose("sni: no complete ClientHello within the handshake timeout: closed");
      co_return;
    }
  }
  if (auto why = unusable(hello); !why.empty()) {
    wg::log::verbose("sni: {}: closed", why);
    close_stream(s);
    co_return;
  }
  const std::string& name = hello.server_name;
  // RFC 6066 section 3: "Literal IPv4 and IPv6 addresses are not permitted in HostName."
  // Refused as a name that does not resolve is: [SNI] asks for no credentials and may
  // listen off loopback, so it reaches what the tunnel's DNS names, never any address a
  // client writes. (IPv6 literals do not get past the parser: ':'.)
  if (wg::IpAddress::parse(name)) {
    ctx.metrics.connections_failed.fetch_add(1);
    wg::log::verbose("sni: {}: an IP address as server name (RFC 6066 forbids it): closed", wg::escaped(name));
    close_stream(s);
    co_return;
  }
  auto [derr, stream] = co_await dial_host(ctx, name, kSniTargetPort);
  if (derr) {
    ctx.metrics.connections_failed.fetch_add(1);
    wg::log::verbose("sni: {}:{}: {}", wg::escaped(name), kSniTargetPort, derr.message());
    close_stream(s);
    co_return;
  }
  auto [werr, wn] = co_await asio::async_write(stream, asio::buffer(buf), kTry);
  if (werr) {
    abort_stream(s);
    abort_stream(stream);
    co_return;
  }
  std::vector<uint8_t>().swap(buf);  // an idle relayed connection holds no buffer
  co_await relay(s, stream);
}

}  // namespace

awaitable<void> sni_server(Context& ctx, tcp::acceptor& acceptor) {
  return accept_loop(ctx, acceptor, "SNI proxy", [&ctx](tcp::socket s) { return serve_client(ctx, std::move(s)); });
}

}  // namespace wgns

// SOCKS5 server: one coroutine per client on the Stack's thread.
#include "socks5.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "dial.hpp"
#include "listener.hpp"
#include "proxy_client.hpp"
#include "socks5_parse.hpp"
#include "wg/crypto.hpp"
#include "wg/base/log.hpp"
#include "wg/base/shown.hpp"

namespace wgns {
namespace {

using namespace socks5;

// Constant-time comparison of secrets of any length: compare their hashes.
bool secret_equal(const std::string& a, const std::string& b) {
  uint8_t ha[wg::kHashLen], hb[wg::kHashLen];
  wg::crypto::hash(ha, {reinterpret_cast<const uint8_t*>(a.data()), a.size()});
  wg::crypto::hash(hb, {reinterpret_cast<const uint8_t*>(b.data()), b.size()});
  return wg::ct_equal(ha, hb, sizeof ha);
}

// Appends ATYP + address + port for an endpoint.
void put_address(std::vector<uint8_t>& out, const wg::IpAddress& a, uint16_t port) {
  out.push_back(a.is_v6() ? kAtypV6 : kAtypV4);
  out.insert(out.end(), a.bytes.begin(), a.bytes.begin() + static_cast<std::ptrdiff_t>(a.size()));
  out.push_back(static_cast<uint8_t>(port >> 8));
  out.push_back(static_cast<uint8_t>(port));
}

wg::IpAddress from_asio(const asio::ip::address& a) {
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    return wg::IpAddress::v4(b.data());
  }
  auto b = a.to_v6().to_bytes();
  return wg::IpAddress::v6(b.data());
}

wg::IpAddress unspecified_v4() {
  wg::IpAddress a;
  a.family = 4;
  return a;
}

awaitable<void> reply(tcp::socket& s, SocksReply code, const wg::IpAddress& bound = unspecified_v4(),
                      uint16_t port = 0) {
  std::vector<uint8_t> r{kVersion, static_cast<uint8_t>(code), 0};
  put_address(r, bound, port);
  co_await asio::async_write(s, asio::buffer(r), kTry);
}

// Reads one client message by its parser's count and not a byte more: what follows is
// the next message or, after the request, the stream to relay. nullopt when the client
// closed (or the handshake deadline closed it) first.
template <class Parse>
awaitable<std::optional<Parsed>> read_message(tcp::socket& s, std::vector<uint8_t>& buf, Parse parse) {
  buf.clear();
  for (;;) {
    Parsed r = parse(std::span<const uint8_t>(buf));
    if (r.status != Status::incomplete) co_return r;
    const size_t have = buf.size();
    buf.resize(r.size);
    auto [ec, n] = co_await asio::async_read(s, asio::buffer(buf.data() + have, r.size - have), kTry);
    if (ec) co_return std::nullopt;
  }
}

awaitable<bool> negotiate(Context& ctx, tcp::socket& s) {
  std::vector<uint8_t> buf;
  const uint8_t want = ctx.socks.user.empty() ? kMethodNone : kMethodUserPass;
  uint8_t chosen = kMethodRefused;
  auto greeting = co_await read_message(s, buf, [&](std::span<const uint8_t> in) {
    return parse_greeting(in, want, chosen);
  });
  if (!greeting || greeting->status != Status::complete) co_return false;
  uint8_t choice[2] = {kVersion, chosen};
  co_await asio::async_write(s, asio::buffer(choice), kTry);
  if (chosen != want) co_return false;
  if (want == kMethodNone) co_return true;

  std::string user, pass;
  auto auth = co_await read_message(s, buf, [&](std::span<const uint8_t> in) {
    return parse_auth(in, user, pass);
  });
  wg::secure_wipe(buf.data(), buf.size());
  const bool whole = auth && auth->status == Status::complete;
  const bool ok = whole && (secret_equal(user, ctx.socks.user) & secret_equal(pass, ctx.socks.password));
  wg::secure_wipe(pass.data(), pass.size());
  if (!whole) co_return false;
  uint8_t status[2] = {kAuthVersion, static_cast<uint8_t>(ok ? 0 : 1)};
  co_await asio::async_write(s, asio::buffer(status), kTry);
  co_return ok;
}

// --- UDP ASSOCIATE ---

// The associations open on one SOCKS5 listener, for its caps (Limits). The Stack's thread's.
struct Associations {
  size_t open = 0;
  std::map<asio::ip::address, size_t> per_client;
};

// A place among a listener's associations, held while one lives.
class AssociationSlot {
public:
  AssociationSlot(Context& ctx, std::shared_ptr<Associations> all, asio::ip::address client)
      : ctx_(ctx), all_(std::move(all)), client_(client) {
    ++all_->open;
    ++all_->per_client[client_];
    ctx_.metrics.udp_associations_active.fetch_add(1);
  }
  AssociationSlot(const AssociationSlot&) = delete;
  AssociationSlot& operator=(const AssociationSlot&) = delete;
  ~AssociationSlot() {
    --all_->open;
    if (--all_->per_client[client_] == 0) all_->per_client.erase(client_);
    ctx_.metrics.udp_associations_active.fetch_sub(1);
  }

private:
  Context& ctx_;
  std::shared_ptr<Associations> all_;
  asio::ip::address client_;
};

// A reply datagram's header (RSV RSV FRAG ATYP ADDR PORT) at its longest, for IPv6.
constexpr size_t kMaxUdpHeader = 3 + 1 + 16 + 2;

// The relay between the client's UDP socket and the tunnel, for as long as the control
// connection lasts and a datagram passes either way within udp_associate_timeout. Each
// datagram is read into a buffer of its own size, released once it is sent on: an idle
// association holds none.
awaitable<void> udp_associate(Context& ctx, tcp::socket& control, const Target& requested,
                              std::shared_ptr<Associations> all) {
  error_code ec;
  auto local = control.local_endpoint(ec);
  if (ec) co_return;
  auto client_addr = control.remote_endpoint(ec).address();
  if (ec) co_return;
  const auto it = all->per_client.find(client_addr);
  const size_t from_client = it == all->per_client.end() ? 0 : it->second;
  if (all->open >= ctx.limits.udp_associations || from_client >= ctx.limits.udp_associations_per_client) {
    ctx.metrics.udp_associations_refused.fetch_add(1);
    wg::log::verbose("socks5: UDP ASSOCIATE from {}: {} associations open, {} of them its, the most allowed: refused",
                     client_addr.to_string(), all->open, from_client);
    co_await reply(control, SocksReply::not_allowed);
    co_await close_after_reply(control);
    co_return;
  }
  AssociationSlot slot(ctx, all, client_addr);
  // The relay listens on the address the client reached us on.
  udp::socket relay(control.get_executor());
  relay.open(local.address().is_v4() ? udp::v4() : udp::v6(), ec);
  if (!ec) relay.bind(udp::endpoint(local.address(), 0), ec);
  if (ec) {
    co_await reply(control, SocksReply::general_failure);
    co_return;
  }
  netstack::UdpSocket tunnel = ctx.stack.listen_udp({}, ec);
  if (ec) {
    co_await reply(control, SocksReply::general_failure);
    co_return;
  }
  auto bound = relay.local_endpoint();
  co_await reply(control, SocksReply::succeeded, from_asio(bound.address()), bound.port());

  // The client's UDP source: the one it announced, else the first datagram's, and only
  // from the control connection's address.
  std::optional<udp::endpoint> client;
  if (requested.port != 0) {
    auto announced = asio::ip::make_address(requested.host, ec);
    if (!ec && !announced.is_unspecified()) client = udp::endpoint(announced, requested.port);
  }
  bool done = false;
  auto last = std::chrono::steady_clock::now();
  asio::steady_timer idle(control.get_executor());
  // Ends the association: the relays see their sockets closed, the watch its timer.
  auto finish = [&] {
    if (std::exchange(done, true)) return;
    error_code e;
    relay.close(e);
    tunnel.close();
    idle.cancel();
  };

  auto client_to_tunnel = [&]() -> awaitable<void> {
    while (!done) {
      auto [wec] = co_await relay.async_wait(udp::socket::wait_read, kTry);
      if (wec || done) break;
      // The next datagram's size (MSG_TRUNC: its whole length); a peek, not FIONREAD,
      // which the system-call filter does not allow.
      const ssize_t size = ::recv(relay.native_handle(), nullptr, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
      if (size < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
      if (size < 0) continue;
      std::vector<uint8_t> buf(std::max<size_t>(static_cast<size_t>(size), 1));
      udp::endpoint from;
      auto [rec, n] = co_await relay.async_receive_from(asio::buffer(buf), from, kTry);
      if (rec) break;
      if (from.address() != client_addr) continue;
      if (client && *client != from) continue;
      if (!client) client = from;
      last = std::chrono::steady_clock::now();
      Target t;
      size_t hl;
      if (!parse_udp_header(std::span<const uint8_t>(buf.data(), n), t, hl)) continue;
      auto [rerr, addrs] = co_await resolve_host(ctx, t.host);
      if (rerr) continue;
      // A datagram to our own tunnel address would leave through the tunnel (the netstack
      // does not loop back) toward a peer that routes it on: dropped, as any datagram
      // the relay cannot deliver (RFC 1928 §7).
      auto to = std::find_if(addrs.begin(), addrs.end(), [&](const wg::IpAddress& a) { return !is_own_address(ctx, a); });
      if (to == addrs.end()) {
        if (!addrs.empty())
          wg::log::verbose("socks5: UDP datagram to the proxy's own address {}: dropped", wg::escaped(t.host));
        continue;
      }
      ctx.metrics.udp_datagrams.fetch_add(1);
      co_await tunnel.async_send_to(asio::buffer(buf.data() + hl, n - hl), netstack::Endpoint{*to, t.port}, kTry);
    }
  };
  auto tunnel_to_client = [&]() -> awaitable<void> {
    while (!done) {
      auto [wec, size] = co_await tunnel.async_wait_readable(kTry);
      if (wec || done) break;
      // The payload lands after room for the longest header, which then goes in front.
      std::vector<uint8_t> out(kMaxUdpHeader + size);
      netstack::Endpoint from;
      auto [rec, n] = co_await tunnel.async_receive_from(asio::buffer(out.data() + kMaxUdpHeader, size), from, kTry);
      if (rec) break;
      if (!client) continue;
      std::vector<uint8_t> header{0, 0, 0};
      put_address(header, from.addr, from.port);
      const size_t start = kMaxUdpHeader - header.size();
      std::copy(header.begin(), header.end(), out.begin() + static_cast<std::ptrdiff_t>(start));
      last = std::chrono::steady_clock::now();
      ctx.metrics.udp_datagrams.fetch_add(1);
      co_await relay.async_send_to(asio::buffer(out.data() + start, header.size() + n), *client, kTry);
    }
  };
  // The association lives as long as the control connection (RFC 1928 §7) and no longer
  // than udp_associate_timeout without a datagram.
  auto watch_control = [&]() -> awaitable<void> {
    uint8_t b[256];
    for (;;) {
      auto [rec, n] = co_await control.async_read_some(asio::buffer(b), kTry);
      if (rec) break;
    }
    finish();
  };
  auto watch_idle = [&]() -> awaitable<void> {
    while (!done) {
      idle.expires_at(last + ctx.limits.udp_associate_timeout);
      auto [tec] = co_await idle.async_wait(kTry);
      if (tec || done) break;
      if (std::chrono::steady_clock::now() - last < ctx.limits.udp_associate_timeout) continue;
      ctx.metrics.udp_associations_idle.fetch_add(1);
      wg::log::verbose("socks5: UDP association of {} idle: closed", client_addr.to_string());
      finish();
      error_code e;
      control.close(e);  // ends watch_control
    }
  };
  using namespace asio::experimental::awaitable_operators;
  co_await (client_to_tunnel() && tunnel_to_client() && watch_control() && watch_idle());
}

// The greeting, the authentication and the request, under the handshake deadline: the
// command byte, or nullopt once the connection is done with (an error already answered).
awaitable<std::optional<uint8_t>> read_request(Context& ctx, tcp::socket& s, Target& target) {
  Deadline deadline(s, ctx.handshake_timeout);
  bool ok = co_await negotiate(ctx, s);
  std::optional<Parsed> request;
  uint8_t cmd = 0;
  if (ok) {
    std::vector<uint8_t> buf;
    request = co_await read_message(s, buf, [&](std::span<const uint8_t> in) {
      return parse_request(in, cmd, target);
    });
  }
  deadline.disarm();
  if (deadline.expired()) {
    ctx.metrics.handshake_timeouts.fetch_add(1);
    wg::log::verbose("socks5: no complete request within the handshake timeout: closed");
    co_return std::nullopt;
  }
  switch (request ? request->status : Status::malformed) {
    case Status::complete:
      co_return cmd;
    case Status::incomplete:  // read_message never returns it
    case Status::malformed:
      break;
    case Status::bad_type:
      co_await reply(s, SocksReply::address_type_not_supported);
      break;
    case Status::empty_name:
      co_await reply(s, SocksReply::host_unreachable);
      break;
  }
  co_await close_after_reply(s);
  co_return std::nullopt;
}

awaitable<void> serve_client(Context& ctx, tcp::socket s, std::shared_ptr<Associations> associations) {
  ActiveConnection active(ctx.metrics);

  Target target;
  auto cmd = co_await read_request(ctx, s, target);
  if (!cmd) co_return;
  switch (*cmd) {
    case kCmdConnect: {
      auto [derr, stream] = co_await dial_host(ctx, target.host, target.port);
      if (derr) {
        ctx.metrics.connections_failed.fetch_add(1);
        wg::log::verbose("socks5: {}:{}: {}", wg::escaped(target.host), target.port, derr.message());
        co_await reply(s, socks_reply_for(derr));
        co_await close_after_reply(s);
        co_return;
      }
      auto local = stream.local_endpoint();
      co_await reply(s, SocksReply::succeeded, local.addr, local.port);
      co_await relay(s, stream);
      co_return;
    }
    case kCmdUdpAssociate:
      co_await udp_associate(ctx, s, target, std::move(associations));
      co_return;
    case kCmdBind:
    default:
      co_await reply(s, SocksReply::command_not_supported);
      co_await close_after_reply(s);
      co_return;
  }
}

}  // namespace

SocksReply socks_reply_for(const error_code& ec) {
  namespace e = asio::error;
  if (ec == ProxyError::own_address) return SocksReply::not_allowed;
  if (ec == e::connection_refused) return SocksReply::connection_refused;
  if (ec == e::host_unreachable || ec == e::host_not_found || ec == e::no_data ||
      ec == e::host_not_found_try_again)
    return SocksReply::host_unreachable;
  if (ec == e::network_unreachable) return SocksReply::network_unreachable;
  if (ec == e::timed_out) return SocksReply::ttl_expired;  // no answer in time
  if (ec == e::invalid_argument) return SocksReply::address_type_not_supported;
  return SocksReply::general_failure;
}

awaitable<void> socks5_server(Context& ctx, tcp::acceptor& acceptor) {
  auto associations = std::make_shared<Associations>();
  return accept_loop(ctx, acceptor, "SOCKS5", [&ctx, associations](tcp::socket s) {
    return serve_client(ctx, std::move(s), associations);
  });
}

}  // namespace wgns

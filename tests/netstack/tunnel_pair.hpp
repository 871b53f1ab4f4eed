// Two Stacks joined by WireGuard in this process: x (198.19.0.1, fd00:19::1) and y
// (198.19.0.2, fd00:19::2), each under its own wg::Device on a UDP port of 127.0.0.1.
// Any number of pairs may live in one process, all with the same addresses (the
// several-Stack tests, tests/netstack/multi_stack_test.cpp, and the benchmark
// tests/bench/netstack_tunnels.cpp). Failures throw std::runtime_error.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/crypto.hpp"
#include "wg/device.hpp"

namespace tunnel_pair {

using namespace std::chrono_literals;

// The Stack as the Device sees it, counting the ICMP errors (IPv4 type 3, IPv6 type 1)
// among the packets the Stack sends: which tunnel an answer left through.
class Tap final : public tun::Device {
public:
  explicit Tap(netstack::Stack& s) : s_(s) {}
  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override {
    const size_t n = s_.read(bufs, sizes, offset, ec);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = bufs[i].data() + offset;
      const size_t len = sizes[i];
      if (len >= 21 && p[0] >> 4 == 4 && p[9] == 1 && p[(p[0] & 0xf) * 4] == 3) ++icmp_errors;
      if (len >= 41 && p[0] >> 4 == 6 && p[6] == 58 && p[40] == 1) ++icmp_errors;
    }
    return n;
  }
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override {
    return s_.write(bufs, offset, ec);
  }
  size_t batch_size() const override { return s_.batch_size(); }
  int mtu() const override { return s_.mtu(); }
  void set_event_handler(std::function<void(tun::Event)> h) override { s_.set_event_handler(std::move(h)); }
  void close() override { s_.close(); }

  std::atomic<int> icmp_errors{0};

private:
  netstack::Stack& s_;
};

// One end: a Stack, its Tap, a Device on a UDP port of 127.0.0.1.
struct Side {
  // `so`: the Stack's options but its addresses and dial timeout, which are set here.
  Side(const std::string& v4, const std::string& v6, netstack::StackOptions so = {}) {
    so.addresses = {*wg::IpPrefix::parse(v4 + "/24"), *wg::IpPrefix::parse(v6 + "/64")};
    so.dial_timeout = 10s;
    std::error_code ec;
    stack = netstack::Stack::create(so, ec);
    if (!stack) throw std::runtime_error("Stack::create: " + ec.message());
    tap = std::make_unique<Tap>(*stack);
    device = std::make_unique<wg::Device>(*tap, bind);
    device->set_private_key(key);
    if (auto e = device->up()) throw std::runtime_error("Device::up: " + e.message());
    stack->set_route_check([d = device.get()](const wg::IpAddress& a) { return d->routable(a); });
  }
  ~Side() {
    device->close();
    device.reset();
    tap.reset();
    stack.reset();
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  // The other end as this Device's peer, at its 127.0.0.1 port, for its addresses.
  void peer_with(const Side& other, const std::string& v4, const std::string& v6) {
    auto p = device->add_peer(wg::crypto::public_key(other.key));
    device->add_allowed_ip(*p, *wg::IpPrefix::parse(v4 + "/32"));
    device->add_allowed_ip(*p, *wg::IpPrefix::parse(v6 + "/128"));
    device->set_endpoint(*p, *conn::Endpoint::parse("127.0.0.1:" + std::to_string(other.device->listen_port())));
  }

  wg::PrivateKey key = wg::crypto::generate_private_key();
  std::unique_ptr<netstack::Stack> stack;
  std::unique_ptr<Tap> tap;
  conn::LinuxBind bind;
  std::unique_ptr<wg::Device> device;
};

// x and y, handshaken: x's ping reaches y. `x_options` as Side's `so`, for x.
struct Tunnel {
  explicit Tunnel(netstack::StackOptions x_options = {})
      : x("198.19.0.1", "fd00:19::1", std::move(x_options)), y("198.19.0.2", "fd00:19::2") {
    x.peer_with(y, "198.19.0.2", "fd00:19::2");
    y.peer_with(x, "198.19.0.1", "fd00:19::1");
    netstack::error_code ec = boost::asio::error::timed_out;
    for (int i = 0; i < 5 && ec; ++i) x.stack->ping(*wg::IpAddress::parse("198.19.0.2"), 3000ms, ec);
    if (ec) throw std::runtime_error("ping through the new tunnel: " + ec.message());
  }
  Side x, y;
};

}  // namespace tunnel_pair

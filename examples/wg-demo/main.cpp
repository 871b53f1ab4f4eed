// wg-demo: two WireGuard devices in one process, joined by the in-memory Bind and TUN.
// Shows the handshake and moves packets both ways through the real protocol core.
//
//   [tun A] ── wg::Device A ── MemoryBind ══ MemoryNetwork ══ MemoryBind ── wg::Device B ── [tun B]
//   198.19.0.1                                                                         198.19.0.2
#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "wg/base/log.hpp"
#include "wg/uapi.hpp"

using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> udp_packet(uint8_t src, uint8_t dst, uint32_t seq, size_t size) {
  std::vector<uint8_t> p(size, 0);
  p[0] = 0x45;
  p[2] = static_cast<uint8_t>(size >> 8);
  p[3] = static_cast<uint8_t>(size);
  p[8] = 64;
  p[9] = 17;
  const uint8_t s[4] = {198, 19, 0, src}, d[4] = {198, 19, 0, dst};
  std::memcpy(&p[12], s, 4);
  std::memcpy(&p[16], d, 4);
  std::memcpy(&p[28], &seq, 4);
  return p;
}

// Moves `count` packets from one TUN to the other in windows; returns packets received.
size_t pump(tun::MemoryDevice& from, tun::MemoryDevice& to, uint8_t src, uint8_t dst, size_t count,
            size_t size) {
  size_t got = 0;
  for (size_t sent = 0; sent < count;) {
    size_t n = std::min<size_t>(256, count - sent);
    for (size_t i = 0; i < n; ++i) from.inject(udp_packet(src, dst, static_cast<uint32_t>(sent + i), size));
    sent += n;
    for (size_t i = 0; i < n; ++i) {
      if (!to.take(2s)) return got;
      ++got;
    }
  }
  return got;
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 200000;
  const size_t size = 1400;
  wg::log::set_level(wg::log::Level::error);  // one line per handshake

  conn::MemoryNetwork net;
  tun::MemoryDevice tun_a, tun_b;
  conn::MemoryBind bind_a(net), bind_b(net);
  wg::Device a(tun_a, bind_a), b(tun_b, bind_b);

  auto key_a = wg::crypto::generate_private_key(), key_b = wg::crypto::generate_private_key();
  a.set_private_key(key_a);
  b.set_private_key(key_b);
  if (a.up() || b.up()) {
    fmt::print(stderr, "wg-demo: cannot bring the devices up\n");
    return 1;
  }
  // Configure A through the same UAPI text that `wg set` sends.
  std::string err;
  int rc = wg::uapi::set(a, fmt::format("public_key={}\nallowed_ip=198.19.0.2/32\nendpoint=127.0.0.1:{}\n",
                                         wg::crypto::public_key(key_b).to_hex(), b.listen_port()),
                         &err);
  if (rc != 0) {
    fmt::print(stderr, "wg-demo: uapi set failed: {}\n", err);
    return 1;
  }
  auto peer_b = b.add_peer(wg::crypto::public_key(key_a));
  b.add_allowed_ip(*peer_b, *wg::IpPrefix::parse("198.19.0.1/32"));

  fmt::print("wg-demo: device A listens on memory port {}, device B on {}\n", a.listen_port(),
             b.listen_port());
  fmt::print("wg-demo: A sends the first packet; it waits while A and B do the Noise IK handshake\n");
  auto t0 = std::chrono::steady_clock::now();
  if (pump(tun_a, tun_b, 1, 2, 1, size) != 1) {
    fmt::print(stderr, "wg-demo: no handshake\n");
    return 1;
  }
  auto hs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wg-demo: handshake done and first packet delivered in {:.2f} ms\n", hs);

  t0 = std::chrono::steady_clock::now();
  size_t ab = 0, ba = 0;
  std::thread t1([&] { ab = pump(tun_a, tun_b, 1, 2, count, size); });
  std::thread t2([&] { ba = pump(tun_b, tun_a, 2, 1, count, size); });
  t1.join();
  t2.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double gbit = static_cast<double>((ab + ba) * size * 8) / secs / 1e9;
  fmt::print("wg-demo: {} packets A→B and {} B→A of {} bytes in {:.2f} s: {:.2f} Gbit/s, {:.0f} kpps\n", ab,
             ba, size, secs, gbit, static_cast<double>(ab + ba) / secs / 1e3);
  fmt::print("wg-demo: A's view of B (wg show style):\n");
  std::string view = wg::uapi::get(a);
  for (size_t pos = 0; pos < view.size();) {
    size_t nl = view.find('\n', pos);
    std::string line = view.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("private_key", 0) == 0 || line.rfind("preshared_key", 0) == 0) continue;  // secrets
    fmt::print("  {}\n", line);
  }
  return ab == count && ba == count ? 0 : 1;
}

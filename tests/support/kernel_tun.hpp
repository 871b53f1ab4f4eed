// The kernel TUN as the [root] tests use it, inside the namespace of
// require_in_netns (netns_child.hpp): wgt0 at 198.19.0.1/24, the kernel's peer
// 198.19.0.2, batches with the core's headroom, and the packets sent and read through it.
// Shared by tests/unit/tunlinux_test.cpp and device_tunlinux_test.cpp.
#pragma once

#include <arpa/inet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "eventually.hpp"
#include "netns_child.hpp"
#include "packet_bytes.hpp"
#include "thread_state.hpp"
#include "tunlinux/tun.hpp"
#include "wg/base/fd.hpp"

namespace wgtest {

inline constexpr size_t kOffset = 16;  // what the core passes
inline constexpr const char* kIf = "wgt0";
inline constexpr uint8_t kLocal[4] = {198, 19, 0, 1};
inline constexpr uint8_t kPeer[4] = {198, 19, 0, 2};

inline std::unique_ptr<tunlinux::Tun> make_tun(int mtu = 0) {
  std::error_code ec;
  auto tun = tunlinux::Tun::create(kIf, mtu, ec);
  EXPECT_MSG(tun && !ec, ec.message());
  return tun;
}

inline void set_up(const char* name, bool up) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  EXPECT(::ioctl(s, SIOCGIFFLAGS, &ifr) == 0);
  ifr.ifr_flags = static_cast<short>(up ? ifr.ifr_flags | IFF_UP : ifr.ifr_flags & ~IFF_UP);
  EXPECT(::ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  ::close(s);
}

inline void bring_up(const char* name = kIf) {
  set_up(name, true);
  sh(std::string("ip addr add 198.19.0.1/24 dev ") + name);
}

// Batch buffers with the core's headroom.
struct Batch {
  explicit Batch(size_t n = 128, size_t cap = 65536) : storage(n, std::vector<uint8_t>(kOffset + cap)), sizes(n) {
    for (auto& s : storage) spans.emplace_back(s);
  }
  std::span<const uint8_t> packet(size_t i) const { return {storage[i].data() + kOffset, sizes[i]}; }
  std::vector<std::vector<uint8_t>> storage;
  std::vector<std::span<uint8_t>> spans;
  std::vector<size_t> sizes;
};

// Reads batches until a packet satisfies `pred` (the alarm bounds the wait); returns
// it and the size of the batch it came in.
inline std::pair<std::vector<uint8_t>, size_t> read_until(tun::Device& tun, Batch& b,
                                                          const std::function<bool(std::span<const uint8_t>)>& pred,
                                                          size_t offset = kOffset) {
  for (;;) {
    std::error_code ec;
    size_t n = tun.read(b.spans, b.sizes, offset, ec);
    EXPECT_MSG(!ec, ec.message());
    for (size_t i = 0; i < n; ++i) {
      std::span<const uint8_t> p(b.storage[i].data() + offset, b.sizes[i]);
      if (pred(p)) return {{p.begin(), p.end()}, n};
    }
  }
}

inline bool is_udp_to_discard(std::span<const uint8_t> p) {
  return p.size() >= 28 && p[0] == 0x45 && p[9] == IPPROTO_UDP && be16(&p[22]) == 9;
}

inline void send_udp(const std::string& payload) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  std::memcpy(&to.sin_addr, kPeer, 4);
  ssize_t r = ::sendto(s, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  ::close(s);
  EXPECT_MSG(r == static_cast<ssize_t>(payload.size()), std::strerror(errno));
}

// Addresses, lengths, both checksums and the payload of a datagram sent by send_udp.
inline void check_udp(std::span<const uint8_t> p, const std::string& payload) {
  EXPECT(p.size() == 28 + payload.size());
  EXPECT(be16(&p[2]) == p.size());
  EXPECT(std::memcmp(&p[12], kLocal, 4) == 0);
  EXPECT(std::memcmp(&p[16], kPeer, 4) == 0);
  EXPECT(naive_checksum(p.data(), 20) == 0xffff);
  EXPECT(be16(&p[24]) == 8 + payload.size());
  EXPECT(be16(&p[26]) != 0);
  EXPECT(l4_verify(p.data(), p.size()) == 0xffff);
  EXPECT(std::memcmp(&p[28], payload.data(), payload.size()) == 0);
}

// An ICMP echo request 198.19.0.2 -> 198.19.0.1 placed at kOffset in its buffer.
inline std::vector<uint8_t> echo_request(uint16_t id, uint16_t seq, size_t offset = kOffset) {
  std::vector<uint8_t> b(offset + 20 + 8 + 32);
  uint8_t* p = b.data() + offset;
  p[0] = 0x45;
  put16(&p[2], 60);
  p[8] = 64;
  p[9] = IPPROTO_ICMP;
  std::memcpy(&p[12], kPeer, 4);
  std::memcpy(&p[16], kLocal, 4);
  put16(&p[10], static_cast<uint16_t>(~naive_checksum(p, 20)));
  uint8_t* icmp = p + 20;
  icmp[0] = 8;  // echo request
  put16(&icmp[4], id);
  put16(&icmp[6], seq);
  for (int i = 0; i < 32; ++i) icmp[8 + i] = static_cast<uint8_t>('a' + i % 26);
  put16(&icmp[2], static_cast<uint16_t>(~naive_checksum(icmp, 40)));
  return b;
}

inline std::function<bool(std::span<const uint8_t>)> is_echo_reply(uint16_t id, uint16_t seq) {
  return [id, seq](std::span<const uint8_t> p) {
    return p.size() == 60 && p[0] == 0x45 && p[9] == IPPROTO_ICMP && p[20] == 0 && be16(&p[24]) == id &&
           be16(&p[26]) == seq;
  };
}

// A UDP datagram 198.19.0.2:sport -> 198.19.0.1:dport at `offset` in its buffer, its
// checksum right or (as a sender that corrupted it before encrypting would leave it) wrong.
inline std::vector<uint8_t> udp_to_local(const std::string& payload, bool good_checksum, uint16_t sport = 5555,
                                         uint16_t dport = 7000, size_t offset = kOffset) {
  std::vector<uint8_t> b(offset + 28 + payload.size());
  uint8_t* p = b.data() + offset;
  p[0] = 0x45;
  put16(&p[2], static_cast<uint16_t>(28 + payload.size()));
  p[8] = 64;
  p[9] = IPPROTO_UDP;
  std::memcpy(&p[12], kPeer, 4);
  std::memcpy(&p[16], kLocal, 4);
  put16(&p[10], static_cast<uint16_t>(~naive_checksum(p, 20)));
  put16(&p[20], sport);
  put16(&p[22], dport);
  put16(&p[24], static_cast<uint16_t>(8 + payload.size()));
  std::memcpy(&p[28], payload.data(), payload.size());
  uint16_t c = static_cast<uint16_t>(~l4_verify(p, 28 + payload.size()));  // over a zero field
  if (c == 0) c = 0xffff;
  put16(&p[26], good_checksum ? c : static_cast<uint16_t>(c ^ 0x1234));
  return b;
}

// A UDP socket bound to 198.19.0.1:port (0: any), closed on scope exit.
inline wg::UniqueFd udp_socket(uint16_t port = 0) {
  wg::UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  std::memcpy(&a.sin_addr, kLocal, 4);
  EXPECT_MSG(s && ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, std::strerror(errno));
  return s;
}

// Threads of this process named `name`.
inline size_t threads_named(const std::string& name) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string got;
    std::getline(comm, got);
    n += got == name;
  }
  return n;
}

}  // namespace wgtest

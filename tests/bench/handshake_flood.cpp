// A handshake flood for tests/bench/handshake_flood.sh: WireGuard initiations with a
// valid mac1 for the target's public key and random contents (no static key behind them,
// no mac2), from spoofed IPv4 sources, at a fixed rate for a fixed time. Each costs the
// target a Diffie-Hellman unless it answers with a cookie reply instead. Root (a raw
// socket); bounded: at most 120 s.
//   handshake_flood DST_IP DST_PORT PUBLIC_KEY RATE SECONDS SRC_FIRST SRC_COUNT
// RATE 0 sends as fast as one thread can. Sources are SRC_FIRST and the SRC_COUNT - 1
// IPv4 addresses after it, in turn, each from a random UDP port. Prints what it sent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "wg/cookie.hpp"
#include "wg/crypto.hpp"
#include "wg/messages.hpp"

namespace {

constexpr size_t kPool = 4096;  // distinct messages, sent in turn
constexpr size_t kBurst = 64;   // datagrams per sendmmsg
constexpr size_t kPacket = sizeof(iphdr) + sizeof(udphdr) + wg::kInitiationSize;

int usage() {
  std::fprintf(stderr, "usage: handshake_flood DST_IP DST_PORT PUBLIC_KEY RATE SECONDS SRC_FIRST SRC_COUNT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) return usage();
  in_addr dst{}, src_first{};
  auto key = wg::PublicKey::from_base64(argv[3]);
  const long port = std::strtol(argv[2], nullptr, 10), rate = std::strtol(argv[4], nullptr, 10),
             seconds = std::strtol(argv[5], nullptr, 10), src_count = std::strtol(argv[7], nullptr, 10);
  if (inet_pton(AF_INET, argv[1], &dst) != 1 || inet_pton(AF_INET, argv[6], &src_first) != 1 || !key ||
      port <= 0 || port > 65535 || rate < 0 || seconds <= 0 || seconds > 120 || src_count <= 0 ||
      src_count > 65536)
    return usage();

  int fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);  // IP_HDRINCL implied
  if (fd < 0) {
    std::perror("raw socket");
    return 1;
  }

  // The messages: random, then the type and a mac1 over them.
  wg::CookieGenerator macs;
  macs.init(*key);
  std::vector<uint8_t> pool(kPool * wg::kInitiationSize);
  wg::random_bytes(pool.data(), pool.size());
  for (size_t i = 0; i < kPool; ++i) {
    std::span<uint8_t> m(pool.data() + i * wg::kInitiationSize, wg::kInitiationSize);
    const uint32_t type = static_cast<uint32_t>(wg::MessageType::initiation);
    std::memcpy(m.data(), &type, sizeof type);
    macs.add_macs(m, wg::Clock::now());
  }

  std::vector<uint8_t> packets(kBurst * kPacket);
  std::vector<iovec> iov(kBurst);
  std::vector<mmsghdr> hdrs(kBurst);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = dst;
  const uint32_t first = ntohl(src_first.s_addr);
  uint64_t sent = 0, failed = 0, next = 0;
  uint16_t sport = 0;
  wg::random_bytes(&sport, sizeof sport);

  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    if (rate > 0) {  // ahead of the rate: wait for the burst's time
      auto due = t0 + std::chrono::nanoseconds(static_cast<int64_t>(sent * 1e9 / rate));
      if (due > now) {
        std::this_thread::sleep_for(due - now);
        continue;
      }
    }
    for (size_t i = 0; i < kBurst; ++i, ++next) {
      uint8_t* p = packets.data() + i * kPacket;
      iphdr ip{};
      ip.version = 4;
      ip.ihl = 5;
      ip.ttl = 64;
      ip.protocol = IPPROTO_UDP;
      ip.tot_len = htons(kPacket);  // the kernel fills in id and checksum
      ip.saddr = htonl(first + static_cast<uint32_t>(next % src_count));
      ip.daddr = dst.s_addr;
      udphdr udp{};
      udp.source = htons(static_cast<uint16_t>(1024 + (sport++ % 60000)));
      udp.dest = htons(static_cast<uint16_t>(port));
      udp.len = htons(sizeof(udphdr) + wg::kInitiationSize);  // checksum 0: none (IPv4)
      std::memcpy(p, &ip, sizeof ip);
      std::memcpy(p + sizeof ip, &udp, sizeof udp);
      std::memcpy(p + sizeof ip + sizeof udp, pool.data() + (next % kPool) * wg::kInitiationSize,
                  wg::kInitiationSize);
      iov[i] = {p, kPacket};
      hdrs[i] = {};
      hdrs[i].msg_hdr.msg_name = &to;
      hdrs[i].msg_hdr.msg_namelen = sizeof to;
      hdrs[i].msg_hdr.msg_iov = &iov[i];
      hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = ::sendmmsg(fd, hdrs.data(), kBurst, 0);
    if (n < 0) {
      ++failed;  // ENOBUFS and the like: the burst is lost, the rate counts it anyway
      n = kBurst;
    }
    sent += static_cast<uint64_t>(n);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("sent %llu initiations in %.1f s (%.0f/s), %llu bursts failed\n",
              static_cast<unsigned long long>(sent), took, sent / took, static_cast<unsigned long long>(failed));
  ::close(fd);
  return 0;
}

// tunlinux: the Internet checksum against a naive 16-bit reference, finish_read() on
// synthetic virtio-net headers, and the kernel TUN device itself ([root]).
//
// Each [root] test runs in a forked child inside its own network namespace, so the test
// process and the host see nothing; the child reports failures through a pipe:
//
//   test process --fork--> child: unshare(CLONE_NEWNET)
//                                  lo up, IPv6 off (no router solicitations on the TUN)
//                                  wgt0 = Tun, 198.19.0.1/24
//                                    sendto 198.19.0.2:9  --> Tun::read
//                                    Tun::write ICMP echo --> kernel --> Tun::read reply
//                                  exit 0, or exit 1 with the failure text on the pipe
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "bind/linux.hpp"
#include "bind/memory.hpp"
#include "seam_faults.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"

#include "../support/netns_child.hpp"
#include "skip.hpp"
#include "tunlinux/checksum.hpp"
#include "tunlinux/tun.hpp"
#include "wg/base/fd.hpp"

namespace {

using wgtest::be16;
using wgtest::put16;
using wgtest::naive_checksum;

using namespace std::chrono_literals;
using tunlinux::Tun;

// ---------------------------------------------------------------- checksum reference



// A TCP/UDP checksum over the pseudo-header, recomputed naively: 0xffff when valid.
uint16_t l4_verify(const uint8_t* ip, size_t len) {
  const size_t ihl = (ip[0] & 0xf) * 4u;
  std::vector<uint8_t> pseudo(12 + len - ihl);
  std::memcpy(pseudo.data(), ip + 12, 8);
  pseudo[9] = ip[9];
  put16(&pseudo[10], static_cast<uint16_t>(len - ihl));
  std::memcpy(pseudo.data() + 12, ip + ihl, len - ihl);
  return naive_checksum(pseudo.data(), pseudo.size());
}

// An IPv4/UDP packet 198.19.0.1:4000 -> 198.19.0.2:9 whose UDP checksum field holds only
// the pseudo-header sum, as the kernel hands it over with NEEDS_CSUM.
std::vector<uint8_t> partial_udp(size_t payload) {
  std::vector<uint8_t> p(28 + payload);
  p[0] = 0x45;
  put16(&p[2], static_cast<uint16_t>(p.size()));
  p[8] = 64;
  p[9] = IPPROTO_UDP;
  const uint8_t src[4] = {198, 19, 0, 1}, dst[4] = {198, 19, 0, 2};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  put16(&p[10], static_cast<uint16_t>(~naive_checksum(p.data(), 20)));
  put16(&p[20], 4000);
  put16(&p[22], 9);
  put16(&p[24], static_cast<uint16_t>(8 + payload));
  for (size_t i = 0; i < payload; ++i) p[28 + i] = static_cast<uint8_t>(i * 7 + 1);
  put16(&p[26], tunlinux::pseudo_header_checksum(IPPROTO_UDP, src, dst, static_cast<uint32_t>(8 + payload)));
  return p;
}

}  // namespace

TEST_CASE("checksum: RFC 1071 example", "[tunlinux][checksum]") {
  // RFC 1071 section 3: the sum of 0001 f203 f4f5 f6f7 is ddf2.
  const uint8_t bytes[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  CHECK(tunlinux::checksum(bytes, sizeof bytes, 0) == 0xddf2);
  CHECK(tunlinux::checksum(bytes, 0, 0) == 0);
  CHECK(tunlinux::checksum(bytes, 0, 0x1ffff) == 0x0001);  // initial is folded too
}

TEST_CASE("checksum: matches the naive reference at every length and alignment", "[tunlinux][checksum]") {
  std::mt19937_64 rng(1071);
  std::vector<uint8_t> buf(2000 + 16);
  std::vector<uint8_t> ones(2000 + 16, 0xff);  // every carry path at once
  for (size_t len = 0; len <= 2000; ++len) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    const size_t align = rng() % 16;
    const uint32_t initial = len % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
    const uint8_t* p = buf.data() + align;
    INFO("len " << len << " align " << align << " initial " << initial);
    REQUIRE(tunlinux::checksum(p, len, initial) == naive_checksum(p, len, initial));
    REQUIRE(tunlinux::checksum(ones.data() + align, len, initial) ==
            naive_checksum(ones.data() + align, len, initial));
  }
}

TEST_CASE("checksum: pseudo-header sums for IPv4 and IPv6", "[tunlinux][checksum]") {
  std::mt19937 rng(768);
  for (int round = 0; round < 200; ++round) {
    const size_t alen = round % 2 ? 16 : 4;
    std::vector<uint8_t> src(alen), dst(alen);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (auto& b : dst) b = static_cast<uint8_t>(rng());
    const uint32_t l4 = alen == 4 ? rng() & 0xffff : rng();
    const uint8_t proto = round % 3 ? IPPROTO_UDP : IPPROTO_TCP;
    // RFC 768 / RFC 8200 section 8.1 layouts.
    std::vector<uint8_t> ph(src);
    ph.insert(ph.end(), dst.begin(), dst.end());
    if (alen == 4) {
      ph.insert(ph.end(), {0, proto, static_cast<uint8_t>(l4 >> 8), static_cast<uint8_t>(l4)});
    } else {
      ph.insert(ph.end(), {static_cast<uint8_t>(l4 >> 24), static_cast<uint8_t>(l4 >> 16),
                           static_cast<uint8_t>(l4 >> 8), static_cast<uint8_t>(l4), 0, 0, 0, proto});
    }
    REQUIRE(tunlinux::pseudo_header_checksum(proto, src, dst, l4) == naive_checksum(ph.data(), ph.size()));
  }
}

TEST_CASE("tun: finish_read completes a partial checksum and rejects GSO", "[tunlinux]") {
  tunlinux::VirtioNetHdr hdr;
  hdr.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
  hdr.csum_start = 20;
  hdr.csum_offset = 6;

  SECTION("UDP of every small length") {
    for (size_t payload = 0; payload < 64; ++payload) {
      auto p = partial_udp(payload);
      REQUIRE(tunlinux::finish_read(hdr, p));
      REQUIRE(l4_verify(p.data(), p.size()) == 0xffff);
    }
  }
  SECTION("a checksum field beyond the packet is refused") {
    auto p = partial_udp(0);
    hdr.csum_offset = 7;  // field at 27..28, packet ends at 28
    CHECK_FALSE(tunlinux::finish_read(hdr, p));
  }
  SECTION("GSO packets are refused while no offload is negotiated") {
    auto p = partial_udp(100);
    hdr.gso_type = 1;  // VIRTIO_NET_HDR_GSO_TCPV4
    CHECK_FALSE(tunlinux::finish_read(hdr, p));
  }
  SECTION("without NEEDS_CSUM the packet is left alone") {
    auto p = partial_udp(10);
    auto copy = p;
    REQUIRE(tunlinux::finish_read(tunlinux::VirtioNetHdr{}, p));
    CHECK(p == copy);
  }
}

// ---------------------------------------------------------------- kernel TUN, in a netns

namespace {

constexpr size_t kOffset = 16;  // what the core passes
constexpr const char* kIf = "wgt0";
const uint8_t kLocal[4] = {198, 19, 0, 1};
const uint8_t kPeer[4] = {198, 19, 0, 2};

using wgtest::require_in_netns;
using wgtest::sh;
using wgtest::step;
using wgtest::write_file;

std::unique_ptr<Tun> make_tun(int mtu = 0) {
  std::error_code ec;
  auto tun = Tun::create(kIf, mtu, ec);
  EXPECT_MSG(tun && !ec, ec.message());
  return tun;
}

void set_up(const char* name, bool up) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  EXPECT(::ioctl(s, SIOCGIFFLAGS, &ifr) == 0);
  ifr.ifr_flags = static_cast<short>(up ? ifr.ifr_flags | IFF_UP : ifr.ifr_flags & ~IFF_UP);
  EXPECT(::ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  ::close(s);
}

void bring_up(const char* name = kIf) {
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
std::pair<std::vector<uint8_t>, size_t> read_until(tun::Device& tun, Batch& b,
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

bool is_udp_to_discard(std::span<const uint8_t> p) {
  return p.size() >= 28 && p[0] == 0x45 && p[9] == IPPROTO_UDP && be16(&p[22]) == 9;
}

void send_udp(const std::string& payload) {
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
void check_udp(std::span<const uint8_t> p, const std::string& payload) {
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
std::vector<uint8_t> echo_request(uint16_t id, uint16_t seq, size_t offset = kOffset) {
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

std::function<bool(std::span<const uint8_t>)> is_echo_reply(uint16_t id, uint16_t seq) {
  return [id, seq](std::span<const uint8_t> p) {
    return p.size() == 60 && p[0] == 0x45 && p[9] == IPPROTO_ICMP && p[20] == 0 && be16(&p[24]) == id &&
           be16(&p[26]) == seq;
  };
}

void ping_through(Tun& tun, uint16_t seq, size_t offset = kOffset) {
  auto req = echo_request(0x7767, seq, offset);
  std::span<uint8_t> one[] = {req};
  std::error_code ec;
  EXPECT_MSG(tun.write(one, offset, ec) == 1 && !ec, ec.message());
  Batch b;
  auto [reply, n] = read_until(tun, b, is_echo_reply(0x7767, seq), offset);
  EXPECT(std::memcmp(&reply[12], kLocal, 4) == 0);
  EXPECT(std::memcmp(&reply[16], kPeer, 4) == 0);
  EXPECT(naive_checksum(reply.data(), 20) == 0xffff);
  EXPECT(naive_checksum(reply.data() + 20, 40) == 0xffff);
}

class EventLog {
public:
  void push(tun::Event e) {
    std::lock_guard lock(mu_);
    q_.push_back(e);
    cv_.notify_all();
  }
  // Consumes events up to and including the first `e`; false if none within `timeout`.
  bool expect(tun::Event e, std::chrono::milliseconds timeout = 3s) {
    std::unique_lock lock(mu_);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      while (!q_.empty()) {
        tun::Event got = q_.front();
        q_.pop_front();
        if (got == e) return true;
      }
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && q_.empty()) return false;
    }
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<tun::Event> q_;
};

// Threads of this process named like the Tun's event thread.
size_t event_threads() {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name == "tun-events";
  }
  return n;
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 2s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Waits until the thread whose id `tid` holds sleeps in the kernel (state S in
// /proc/self/task/TID/stat): a reader blocked in its read, not one still on its way there.
bool blocked_in_kernel(const std::atomic<pid_t>& tid) {
  return eventually([&] {
    const pid_t t = tid.load();
    if (t == 0) return false;
    std::ifstream stat("/proc/self/task/" + std::to_string(t) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto end_of_name = line.rfind(')');
    return end_of_name != std::string::npos && end_of_name + 2 < line.size() && line[end_of_name + 2] == 'S';
  });
}

}  // namespace

TEST_CASE("tun: a UDP datagram from the kernel reads back whole, in one batch", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    auto tun = make_tun(1420);
    EXPECT(tun->name() == kIf);
    EXPECT(tun->mtu() == 1420);
    EXPECT(tun->batch_size() == 128);
    bring_up();

    step("one datagram");
    send_udp("hello through the tunnel");
    Batch b;
    auto [pkt, n] = read_until(*tun, b, is_udp_to_discard);
    check_udp(pkt, "hello through the tunnel");

    step("eight datagrams queued before one read");
    for (int i = 0; i < 8; ++i) send_udp("datagram " + std::to_string(i));
    size_t seen = 0, largest = 0;
    while (seen < 8) {
      std::error_code ec;
      size_t got = tun->read(b.spans, b.sizes, kOffset, ec);
      EXPECT_MSG(!ec, ec.message());
      largest = std::max(largest, got);
      for (size_t i = 0; i < got; ++i) {
        if (!is_udp_to_discard(b.packet(i))) continue;
        check_udp(b.packet(i), "datagram " + std::to_string(seen));
        ++seen;
      }
    }
    EXPECT_MSG(largest >= 8, "largest batch " + std::to_string(largest));
    EXPECT(tun->counters().read_dropped == 0);
  });
}

TEST_CASE("tun: a partial checksum (NEEDS_CSUM) is completed on read", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create with TUN_F_CSUM negotiated behind the device's back");
    auto tun = make_tun();
    // With checksum offload the kernel leaves UDP checksums partial: the path
    // finish_read() completes. Nothing else changes (no TSO/USO, so no GSO packets).
    EXPECT(::ioctl(tun->fd(), TUNSETOFFLOAD, static_cast<unsigned long>(TUN_F_CSUM)) == 0);
    bring_up();

    step("the kernel really sets NEEDS_CSUM");
    send_udp("raw");
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    for (;;) {
      EXPECT_MSG(std::chrono::steady_clock::now() < deadline, "no UDP datagram read within 2 s");
      uint8_t raw[2048];
      ssize_t r = ::read(tun->fd(), raw, sizeof raw);
      if (r < 0 && errno == EAGAIN) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      EXPECT(r > 10);
      if (!is_udp_to_discard({raw + 10, static_cast<size_t>(r) - 10})) continue;
      EXPECT(raw[0] & tunlinux::kVirtioNetHdrFNeedsCsum);
      break;
    }

    step("read completes it");
    for (size_t len : {0, 1, 2, 3, 99, 1000}) {
      std::string payload(len, 'x');
      for (size_t i = 0; i < len; ++i) payload[i] = static_cast<char>(i * 13 + len);
      send_udp(payload);
      Batch b;
      auto [pkt, n] = read_until(*tun, b, is_udp_to_discard);
      check_udp(pkt, payload);
    }
  });
}

TEST_CASE("tun: an ICMP echo written into the TUN is answered, bad packets are skipped", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    auto tun = make_tun();
    bring_up();

    step("echo request -> echo reply");
    ping_through(*tun, 1);

    step("a batch with a packet the kernel refuses");
    std::vector<uint8_t> garbage(kOffset + 40, 0);  // IP version 0: EINVAL
    auto req = echo_request(0x7767, 2);
    std::span<uint8_t> batch[] = {garbage, req};
    std::error_code ec;
    EXPECT(tun->write(batch, kOffset, ec) == 1);
    EXPECT_MSG(!ec, ec.message());
    EXPECT(tun->counters().write_rejected == 1);
    Batch b;
    read_until(*tun, b, is_echo_reply(0x7767, 2));

    step("headroom too small for the virtio-net header");
    auto small = echo_request(0x7767, 3, 4);
    std::span<uint8_t> one[] = {small};
    EXPECT(tun->write(one, 4, ec) == 0);
    EXPECT(ec == std::errc::invalid_argument);

    step("writes while down fail with EIO");
    set_up(kIf, false);
    auto req4 = echo_request(0x7767, 4);
    std::span<uint8_t> four[] = {req4};
    EXPECT(tun->write(four, kOffset, ec) == 0);
    EXPECT_MSG(ec == std::errc::io_error, ec.message());
  });
}

namespace {

// A UDP datagram 198.19.0.2:sport -> 198.19.0.1:dport at `offset` in its buffer, its
// checksum right or (as a sender that corrupted it before encrypting would leave it) wrong.
std::vector<uint8_t> udp_to_local(const std::string& payload, bool good_checksum, uint16_t sport = 5555,
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

// Udp: InCsumErrors of this namespace.
long udp_csum_errors() {
  std::ifstream f("/proc/net/snmp");
  std::string line, names;
  while (std::getline(f, line)) {
    if (line.rfind("Udp: ", 0) != 0) continue;
    if (names.empty()) {
      names = line;
      continue;
    }
    std::istringstream n(names), v(line);
    std::string name, value;
    while (n >> name && v >> value)
      if (name == "InCsumErrors") return std::stol(value);
  }
  return -1;
}

// The next datagram on `s` within 300 ms, "" if none.
std::string receive_within(int s) {
  pollfd pfd{s, POLLIN, 0};
  if (::poll(&pfd, 1, 300) != 1) return "";
  char buf[2048];
  const ssize_t r = ::recv(s, buf, sizeof buf, 0);
  return r > 0 ? std::string(buf, static_cast<size_t>(r)) : "";
}

}  // namespace

TEST_CASE("tun: written checksums - trusted ones skip the kernel's check, DATA_VALID does not, off verifies",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto tun = make_tun();  // Options::csum on, as wg-tun runs
    EXPECT(tun->gro().trusted);
    bring_up();
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(7000);
    std::memcpy(&at.sin_addr, kLocal, 4);
    EXPECT(::bind(s, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    std::error_code ec;

    step("trusted: a good datagram and a bad one both arrive, no checksum error counted");
    const long errors = udp_csum_errors();
    EXPECT(errors >= 0);
    for (bool good : {true, false}) {
      auto b = udp_to_local(good ? "good" : "bad", good);
      std::span<uint8_t> one[] = {b};
      EXPECT_MSG(tun->write(one, kOffset, ec) == 1 && !ec, ec.message());
      EXPECT(b[kOffset - 10] == tunlinux::kVirtioNetHdrFNeedsCsum);  // the header went out in the headroom
      EXPECT(receive_within(s) == (good ? "good" : "bad"));
    }
    EXPECT(udp_csum_errors() == errors);

    step("DATA_VALID alone: the kernel accepts the write, and still verifies (Linux 6.18)");
    {
      auto b = udp_to_local("flagged", false);
      uint8_t* start = b.data() + kOffset - tunlinux::kVirtioNetHdrLen;
      std::memset(start, 0, tunlinux::kVirtioNetHdrLen);
      start[0] = tunlinux::kVirtioNetHdrFDataValid;
      const ssize_t len = static_cast<ssize_t>(b.size() - kOffset + tunlinux::kVirtioNetHdrLen);
      EXPECT_MSG(::write(tun->fd(), start, static_cast<size_t>(len)) == len, std::strerror(errno));
      // If this fails, the kernel now honours DATA_VALID: plain_header could rely on it.
      EXPECT_MSG(receive_within(s).empty(), "a DATA_VALID datagram with a bad checksum was delivered");
      EXPECT(udp_csum_errors() == errors + 1);
    }
    step("an ICMP echo written with DATA_VALID is answered");
    ping_through(*tun, 1);

    step("Options::csum off: the kernel verifies, the bad datagram is dropped and counted");
    tun.reset();
    Tun::Options opts;
    opts.csum = false;
    tun = Tun::create(kIf, 0, opts, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(!tun->gro().trusted);
    bring_up();
    for (bool good : {false, true}) {
      auto b = udp_to_local(good ? "good" : "bad", good);
      std::span<uint8_t> one[] = {b};
      EXPECT_MSG(tun->write(one, kOffset, ec) == 1 && !ec, ec.message());
      EXPECT(receive_within(s) == (good ? "good" : ""));
    }
    EXPECT(udp_csum_errors() == errors + 2);
    ::close(s);
  });
}

TEST_CASE("tun: events report the initial state, up, MTU, down and deletion", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    EXPECT(event_threads() == 0);
    auto tun = make_tun(1420);
    EXPECT(event_threads() == 1);
    EventLog log;
    tun->set_event_handler([&](tun::Event e) { log.push(e); });
    step("initial state");
    EXPECT(log.expect(tun::Event::down));

    step("up");
    bring_up();
    EXPECT(log.expect(tun::Event::up));

    step("MTU");
    sh("ip link set wgt0 mtu 1300");
    EXPECT(log.expect(tun::Event::mtu_changed));
    EXPECT(tun->mtu() == 1300);

    step("down");
    sh("ip link set wgt0 down");
    EXPECT(log.expect(tun::Event::down));
    sh("ip link set wgt0 up");
    EXPECT(log.expect(tun::Event::up));

    step("a second handler hears the current state");
    EventLog log2;
    tun->set_event_handler([&](tun::Event e) { log2.push(e); });
    EXPECT(log2.expect(tun::Event::up));

    step("delete while a read is blocked");
    std::error_code read_ec;
    std::atomic<bool> returned{false};
    std::atomic<pid_t> reader_tid{0};
    wgtest::StoppingThread reader(
        [&] {
          reader_tid = ::gettid();
          Batch b(4, 2048);
          for (;;) {
            std::error_code ec;
            tun->read(b.spans, b.sizes, kOffset, ec);
            if (ec) {
              read_ec = ec;
              break;
            }
          }
          returned = true;
        },
        [&] { tun->close(); });
    EXPECT(blocked_in_kernel(reader_tid));
    sh("ip link del wgt0");
    EXPECT(log2.expect(tun::Event::down));
    EXPECT(eventually([&] { return returned.load(); }));
    reader.join();
    EXPECT_MSG(read_ec == std::errc::operation_canceled, read_ec.message());

    step("the event thread ended and the device is closed");
    EXPECT(eventually([] { return event_threads() == 0; }));
    EXPECT(tun->deleted());
    EXPECT(tun->fd() == -1);
    std::error_code ec;
    Batch b(1, 2048);
    EXPECT(tun->read(b.spans, b.sizes, kOffset, ec) == 0);
    EXPECT(ec == std::errc::operation_canceled);
    std::span<uint8_t> none[] = {b.spans[0]};
    EXPECT(tun->write(none, kOffset, ec) == 0);
    EXPECT(ec == std::errc::operation_canceled);
    tun->close();
  });
}

TEST_CASE("tun: a move to another namespace is followed, a deletion there closes", "[tunlinux][root]") {
  // The old namespace hears RTM_DELLINK for a move as for a deletion; the device must
  // follow the interface and keep reporting its events from the new namespace.
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    const std::string other = "wgnu" + std::to_string(::getpid());
    sh("ip netns del " + other + " 2>/dev/null; ip netns add " + other);
    struct Remove {
      std::string ns;
      ~Remove() { [[maybe_unused]] int rc = std::system(("ip netns del " + ns + " 2>/dev/null").c_str()); }
    } remove{other};
    auto tun = make_tun(1420);
    EventLog log;
    tun->set_event_handler([&](tun::Event e) { log.push(e); });
    EXPECT(log.expect(tun::Event::down));
    bring_up();
    EXPECT(log.expect(tun::Event::up));

    step("move: the interface goes down, the device stays open");
    sh("ip link set wgt0 netns " + other);
    EXPECT(log.expect(tun::Event::down));
    std::this_thread::sleep_for(100ms);
    EXPECT(!tun->deleted());
    EXPECT(tun->fd() >= 0);
    EXPECT(event_threads() == 1);

    step("events from the new namespace");
    sh("ip -n " + other + " link set wgt0 mtu 1300");
    EXPECT(log.expect(tun::Event::mtu_changed));
    sh("ip -n " + other + " link set wgt0 up");
    EXPECT(log.expect(tun::Event::up));
    EXPECT(tun->mtu() == 1300);
    EXPECT(tun->ifindex() > 0);

    step("deleted there: down, then closed");
    sh("ip -n " + other + " link del wgt0");
    EXPECT(log.expect(tun::Event::down));
    EXPECT(eventually([] { return event_threads() == 0; }));
    EXPECT(tun->deleted());
    EXPECT(tun->fd() == -1);
    tun->close();
  });
}

TEST_CASE("tun: close() unblocks a blocked read and removes the interface", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    auto tun = make_tun();
    bring_up();
    std::error_code read_ec;
    std::atomic<bool> returned{false};
    std::atomic<pid_t> reader_tid{0};
    wgtest::StoppingThread reader(
        [&] {
          reader_tid = ::gettid();
          Batch b(4, 2048);
          tun->read(b.spans, b.sizes, kOffset, read_ec);
          returned = true;
        },
        [&] { tun->close(); });
    EXPECT(blocked_in_kernel(reader_tid));
    EXPECT(!returned);

    step("close");
    auto start = std::chrono::steady_clock::now();
    tun->close();
    EXPECT(eventually([&] { return returned.load(); }, 1s));
    reader.join();
    EXPECT(std::chrono::steady_clock::now() - start < 1s);
    EXPECT_MSG(read_ec == std::errc::operation_canceled, read_ec.message());
    EXPECT(if_nametoindex(kIf) == 0);
    EXPECT(event_threads() == 0);
    tun->close();  // idempotent
  });
}

TEST_CASE("tun: create reports a taken name, a long name and missing permission", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    std::error_code ec;
    step("a long name");
    EXPECT(!Tun::create("a-name-of-16-chr", 0, ec));
    EXPECT(ec == std::errc::invalid_argument);

    step("a name held by a veth");
    sh("ip link add wgt1 type veth peer name wgt2");
    EXPECT(!Tun::create("wgt1", 0, ec));
    EXPECT_MSG(ec == std::errc::device_or_resource_busy, ec.message());

    step("a TUN already attached");
    auto tun = make_tun();
    EXPECT(!Tun::create(kIf, 0, ec));
    EXPECT_MSG(ec == std::errc::device_or_resource_busy, ec.message());

    step("the kernel's name pattern");
    auto auto_named = Tun::create("", 0, ec);
    EXPECT_MSG(auto_named && !ec, ec.message());
    EXPECT(auto_named->name().rfind("tun", 0) == 0);

    step("without CAP_NET_ADMIN");
    tun.reset();
    auto_named.reset();
    EXPECT(::setresuid(65534, 65534, 65534) == 0);
    // EACCES where /dev/net/tun is 0600, else EPERM from TUNSETIFF.
    EXPECT(!Tun::create(kIf, 0, ec));
    EXPECT_MSG(ec == std::errc::operation_not_permitted || ec == std::errc::permission_denied, ec.message());
  });
}

// The interface's txqueuelen, through an ioctl (sysfs shows the namespace it was
// mounted in, not this one).
int queue_len(const char* name) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  EXPECT(::ioctl(s, SIOCGIFTXQLEN, &ifr) == 0);
  ::close(s);
  return ifr.ifr_qlen;
}

TEST_CASE("tun: create raises the queue to queue_len and keeps a longer one", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    std::error_code ec;
    step("a new interface: the kernel's 500 raised to 1024");
    auto tun = make_tun();
    EXPECT(queue_len(kIf) == 1024);
    tun.reset();

    step("queue_len 0 leaves the kernel's default");
    Tun::Options keep;
    keep.queue_len = 0;
    tun = Tun::create(kIf, 0, keep, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(queue_len(kIf) == 500);
    tun.reset();

    step("a persistent TUN with a longer queue keeps it");
    sh(std::string("ip tuntap add mode tun name ") + kIf + " && ip link set " + kIf + " txqueuelen 3000");
    tun = make_tun();
    EXPECT(queue_len(kIf) == 3000);
    tun.reset();
    sh(std::string("ip link set ") + kIf + " txqueuelen 100");
    tun = make_tun();
    EXPECT(queue_len(kIf) == 1024);
    tun.reset();
    sh(std::string("ip tuntap del mode tun name ") + kIf);
  });
}

TEST_CASE("tun: from_fd adopts an inherited descriptor with or without a virtio-net header", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto open_tun = [](const char* name, short flags) {
      int fd = ::open("/dev/net/tun", O_RDWR);
      EXPECT(fd >= 0);
      ifreq ifr{};
      std::strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
      ifr.ifr_flags = flags;
      EXPECT(::ioctl(fd, TUNSETIFF, &ifr) == 0);
      return fd;
    };
    std::error_code ec;

    step("not a TUN descriptor: refused, and still the caller's");
    int pipe_fds[2];
    EXPECT(::pipe(pipe_fds) == 0);
    EXPECT(!Tun::from_fd(pipe_fds[0], ec));
    EXPECT(ec);
    EXPECT(::fcntl(pipe_fds[0], F_GETFD) >= 0);

    step("with IFF_VNET_HDR and offloads left on by the parent");
    int fd = open_tun(kIf, IFF_TUN | IFF_NO_PI | IFF_VNET_HDR);
    EXPECT(::ioctl(fd, TUNSETOFFLOAD, static_cast<unsigned long>(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)) == 0);
    auto tun = Tun::from_fd(fd, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->name() == kIf);
    EXPECT(tun->fd() == fd);
    EXPECT(::fcntl(fd, F_GETFL) & O_NONBLOCK);
    EXPECT(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
    bring_up();
    ping_through(*tun, 10);
    send_udp("adopted");
    Batch b;
    auto [pkt, n] = read_until(*tun, b, is_udp_to_discard);
    check_udp(pkt, "adopted");
    tun.reset();
    EXPECT(if_nametoindex(kIf) == 0);

    step("without IFF_VNET_HDR: no header, any offset");
    fd = open_tun(kIf, IFF_TUN | IFF_NO_PI);
    tun = Tun::from_fd(fd, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    bring_up();
    ping_through(*tun, 11, 0);
  });
}

TEST_CASE("tun: from_fd with a link socket adopts a TUN whose namespace the caller is not in", "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    // The TUN, a link socket and a socket for interface ioctls, all made in another
    // namespace on a thread of their own (as wg-run's child makes them).
    int fd = -1, link = -1, ctl = -1;
    std::thread([&] {
      if (::unshare(CLONE_NEWNET) != 0) return;
      fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
      ifreq ifr{};
      std::strncpy(ifr.ifr_name, kIf, IFNAMSIZ - 1);
      ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
      if (fd < 0 || ::ioctl(fd, TUNSETIFF, &ifr) != 0) return;
      std::error_code lec;
      link = Tun::link_socket(lec).release();
      ctl = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    }).join();
    EXPECT(fd >= 0 && link >= 0 && ctl >= 0);
    EXPECT(if_nametoindex(kIf) == 0);  // not in this namespace
    auto inner_ioctl = [&](unsigned long request, ifreq& ifr) {
      std::strncpy(ifr.ifr_name, kIf, IFNAMSIZ - 1);
      return ::ioctl(ctl, request, &ifr);
    };
    std::error_code ec;

    step("without the link socket the interface is not found here");
    EXPECT(!Tun::from_fd(fd, ec) && ec);
    EXPECT(::fcntl(fd, F_GETFD) >= 0);

    step("more than one queue: refused, both descriptors still the caller's");
    Tun::Options two;
    two.queues = 2;
    EXPECT(!Tun::from_fd(fd, link, two, ec) && ec == std::errc::invalid_argument);
    EXPECT(::fcntl(fd, F_GETFD) >= 0 && ::fcntl(link, F_GETFD) >= 0);

    step("with it: found, offloads negotiated, its events heard");
    auto tun = Tun::from_fd(fd, link, Tun::Options{}, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->name() == kIf);
    EXPECT(tun->ifindex() > 0);
    EXPECT(tun->offloads() & TUN_F_TSO4);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<tun::Event> events;
    tun->set_event_handler([&](tun::Event e) {
      std::lock_guard lock(mu);
      events.push_back(e);
      cv.notify_all();
    });
    auto saw = [&](tun::Event e) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(5),
                         [&] { return std::find(events.begin(), events.end(), e) != events.end(); });
    };
    EXPECT(saw(tun::Event::down));  // the first report: the current state
    ifreq ifr{};
    EXPECT(inner_ioctl(SIOCGIFFLAGS, ifr) == 0);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    EXPECT(inner_ioctl(SIOCSIFFLAGS, ifr) == 0);
    EXPECT(saw(tun::Event::up));
    ifreq m{};
    m.ifr_mtu = 1300;
    EXPECT(inner_ioctl(SIOCSIFMTU, m) == 0);
    EXPECT(saw(tun::Event::mtu_changed));
    EXPECT(tun->mtu() == 1300);

    step("closed: the interface leaves the other namespace");
    tun.reset();
    ifreq gone{};
    EXPECT(inner_ioctl(SIOCGIFINDEX, gone) < 0 && errno == ENODEV);
    ::close(ctl);
  });
}

// Devices a (on the TUN, 198.19.0.1) and b (in memory, 198.19.0.2), peers of each other
// over a MemoryNetwork (or what `endpoint` says a listen port is), each knowing the
// other's endpoint, both up.
void pair_up(wg::Device& a, wg::Device& b,
             const std::function<conn::Endpoint(uint16_t)>& endpoint = conn::MemoryBind::endpoint_for) {
  wg::PrivateKey ka = wg::crypto::generate_private_key(), kb = wg::crypto::generate_private_key();
  a.set_private_key(ka);
  b.set_private_key(kb);
  EXPECT(!a.up());
  EXPECT(!b.up());
  auto to_b = a.add_peer(wg::crypto::public_key(kb));
  auto to_a = b.add_peer(wg::crypto::public_key(ka));
  a.add_allowed_ip(*to_b, *wg::IpPrefix::parse("198.19.0.2/32"));
  b.add_allowed_ip(*to_a, *wg::IpPrefix::parse("198.19.0.1/32"));
  a.set_endpoint(*to_b, endpoint(b.listen_port()));
  b.set_endpoint(*to_a, endpoint(a.listen_port()));
}

// The core over the real TUN with read faults injected around it (tests/unit/
// seam_faults.hpp): transient EINTR/EAGAIN/ENOBUFS lose nothing the kernel queued, and a
// read that fails every call is retried with a backoff, not spun on.
//
//   UDP socket -> kernel -> wgt0 (Tun) -> FaultyTun -> Device A -> MemoryBind ->
//   Device B -> MemoryDevice (counts the datagrams)
TEST_CASE("tun: the core over a real TUN survives read faults and does not spin on a failing read",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    using namespace std::chrono_literals;
    step("two devices");
    auto tun = make_tun(1420);
    wgnet_test::FaultyTun faulty(*tun);
    conn::MemoryNetwork net;
    conn::MemoryBind bind_a(net), bind_b(net);
    tun::MemoryDevice mem_b;
    wg::Device a(faulty, bind_a), b(mem_b, bind_b);
    pair_up(a, b);
    bring_up();
    // Datagrams to 198.19.0.2:9 that reach B, in order, within 5 s each.
    auto arrive = [&](int from, int count) {
      for (int i = from; i < from + count; ++i) {
        for (;;) {
          auto p = mem_b.take(5s);
          EXPECT_MSG(p, "datagram " + std::to_string(i) + " never reached B");
          if (!is_udp_to_discard(*p)) continue;
          std::string got(p->begin() + 28, p->end());
          EXPECT_MSG(got == "datagram " + std::to_string(i), "got '" + got + "' for datagram " + std::to_string(i));
          break;
        }
      }
    };

    step("transient read faults");
    faulty.read_faults.script({EINTR, 0, EAGAIN, 0, ENOBUFS, 0}, 4);
    for (int i = 0; i < 40; ++i) {
      send_udp("datagram " + std::to_string(i));
      arrive(i, 1);  // one read per datagram, so that the script is played
    }
    EXPECT(faulty.read_faults.script_done());

    step("a read that fails every call");
    faulty.read_faults.set_persistent(EIO);
    // Brings the reader back if it is blocked in the real read (then the datagram reaches
    // B now); if it was between two reads, its next one fails and the datagram waits in
    // the kernel's queue with those below. Either way it must arrive, in order.
    send_udp("datagram 40");
    // Retried, not given up: nine failing reads come (within 10 s, a bound on a wait of
    // about 0.13 s). Not spun on: the waits between them double from 1 ms (Device::
    // keep_reading_after), so the ninth comes at least 32 ms after the eighth (64 ms when
    // the first failure is the first after the good read; a sleep is never shorter, so
    // load cannot break this, and a spinning reader has microseconds there).
    std::vector<std::chrono::steady_clock::time_point> fails;
    for (auto until = std::chrono::steady_clock::now() + 10s;
         (fails = faulty.read_faults.persistent_times()).size() < 9 && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(10ms);
    EXPECT_MSG(fails.size() >= 9, std::to_string(fails.size()) + " failing reads within 10 s");
    const auto gap = std::chrono::duration_cast<std::chrono::microseconds>(fails[8] - fails[7]);
    EXPECT_MSG(gap >= 32ms, "the ninth failing read came " + std::to_string(gap.count()) + " us after the eighth");
    for (int i = 41; i < 51; ++i) send_udp("datagram " + std::to_string(i));  // queued in the kernel
    faulty.read_faults.set_persistent(0);
    arrive(40, 11);
    EXPECT(tun->counters().read_dropped == 0);
    a.close();
    b.close();
  });
}

TEST_CASE("tun: read_now takes what is queued without blocking, wait_readable waits, both mix with read",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    auto tun = make_tun(1500);
    EXPECT(tun->can_read_now());
    bring_up();
    std::error_code ec;
    Batch b(64, 1500);

    step("nothing queued: read_now returns 0 at once");
    while (tun->read_now(b.spans, b.sizes, kOffset, ec) > 0) EXPECT(!ec);  // router solicitations and the like
    EXPECT_MSG(!ec, ec.message());

    step("wait_readable sleeps until a datagram comes, read_now then takes it");
    std::atomic<pid_t> tid{0};
    std::atomic<bool> woke{false};
    bool readable = false;
    std::error_code wec;
    wgtest::StoppingThread waiter(
        [&] {
          tid = static_cast<pid_t>(::gettid());
          readable = tun->wait_readable(wec);
          woke = true;
        },
        [&] { tun->close(); });
    EXPECT(eventually([&] { return blocked_in_kernel(tid); }));
    EXPECT(!woke);
    send_udp("now");
    waiter.join();
    EXPECT_MSG(readable && !wec, wec.message());
    size_t n = 0;
    std::vector<uint8_t> got;
    for (auto until = std::chrono::steady_clock::now() + 2s; got.empty() && std::chrono::steady_clock::now() < until;) {
      n = tun->read_now(b.spans, b.sizes, kOffset, ec);
      EXPECT_MSG(!ec, ec.message());
      for (size_t i = 0; i < n; ++i)
        if (is_udp_to_discard(b.packet(i))) got.assign(b.packet(i).begin(), b.packet(i).end());
    }
    check_udp(got, "now");

    step("a super-packet cut by read_now's buffers: wait_readable says so at once, read() goes on");
    const std::vector<uint8_t> data(40 * 1000, 'u');
    EXPECT(wgtest::send_udp_segmented(kPeer, 9, 1000, data));
    size_t segments = 0;
    Batch few(8, 1500);
    for (auto until = std::chrono::steady_clock::now() + 2s; segments == 0 && std::chrono::steady_clock::now() < until;) {
      EXPECT(tun->wait_readable(ec));
      n = tun->read_now(few.spans, few.sizes, kOffset, ec);
      for (size_t i = 0; i < n; ++i) segments += is_udp_to_discard(few.packet(i)) ? 1 : 0;
    }
    EXPECT_MSG(segments == 8, std::to_string(segments) + " segments in the first read_now");
    EXPECT(tun->wait_readable(ec) && !ec);  // the rest is ours, not the kernel's
    while (segments < 40) {
      n = tun->read(b.spans, b.sizes, kOffset, ec);
      EXPECT_MSG(!ec, ec.message());
      for (size_t i = 0; i < n; ++i) segments += is_udp_to_discard(b.packet(i)) ? 1 : 0;
    }
    EXPECT(segments == 40);
    EXPECT(tun->counters().read_split == 1);

    step("after close: both report it");
    tun->close();
    EXPECT(!tun->wait_readable(ec));
    EXPECT(ec == std::errc::operation_canceled);
    EXPECT(tun->read_now(b.spans, b.sizes, kOffset, ec) == 0);
    EXPECT(ec == std::errc::operation_canceled);
  });
}

// The core over the real TUN: the kernel's answer to a packet the device just wrote (an
// echo reply) is read and sent by the receiving thread (DeviceStats::tun_answers), or with
// DeviceOptions::answer_from_tun off by the TUN reader; either way it arrives.
//
//   B (MemoryDevice) echo request -> MemoryBind -> A -> wgt0 -> kernel -> echo reply ->
//   wgt0 -> A -> MemoryBind -> B
TEST_CASE("tun: the core answers from the receiving thread, or leaves it to the reader when told",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    for (bool answer : {true, false}) {
      step(answer ? "answer_from_tun on" : "answer_from_tun off");
      auto tun = make_tun(1420);
      conn::MemoryNetwork net;
      conn::MemoryBind bind_a(net), bind_b(net);
      tun::MemoryDevice mem_b;
      wg::DeviceOptions opts;
      opts.answer_from_tun = answer;
      wg::Device a(*tun, bind_a, opts), b(mem_b, bind_b);
      pair_up(a, b);
      bring_up();
      for (uint16_t seq = 1; seq <= 50; ++seq) {
        auto req = echo_request(0x7767, seq, 0);
        EXPECT(mem_b.inject(req));
        for (;;) {
          auto p = mem_b.take(5s);
          EXPECT_MSG(p, "no reply to echo request " + std::to_string(seq));
          if (is_echo_reply(0x7767, seq)(*p)) break;
        }
      }
      const uint64_t answers = a.stats().tun_answers.load();
      // Each reply is the kernel's answer to what a receiving pass wrote, made while it
      // wrote; the pass reads it right after, unless the TUN reader, woken by the same
      // reply, got tun_order_mu_ first (it has to wake up for that: the pass, already
      // running, wins nearly always; all 50 lost would take a reader that never sleeps).
      if (answer)
        EXPECT_MSG(answers >= 1, "no reply left from the receiving thread");
      else
        EXPECT(answers == 0);
      a.close();
      b.close();
    }
  });
}

// One thread per side when traffic is light (DeviceOptions::one_thread_when_light): after
// light reads the TUN reader lends the TUN to the receiving thread, which then reads
// both the socket and the TUN (tun_light_reads: every packet the kernel sends while lent
// is read there, the reader sleeping); a super-packet makes it give the TUN back, light
// traffic lends it again, and a TUN closed while lent is given back. Off: never lent.
//
//   kernel -> wgt0 (Tun) -> A -> LinuxBind -- 127.0.0.1 -- LinuxBind -> B (MemoryDevice)
TEST_CASE("tun: with light traffic a receiving thread serves the TUN too, and gives it back when traffic grows",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    using namespace std::chrono_literals;
    sh("ip link set lo up");
    for (bool light : {true, false}) {
      step(light ? "one_thread_when_light on" : "one_thread_when_light off");
      auto tun = make_tun(1420);
      conn::LinuxBind bind_a, bind_b;
      tun::MemoryDevice mem_b;
      wg::DeviceOptions opts;
      opts.one_thread_when_light = light;
      wg::Device a(*tun, bind_a, opts), b(mem_b, bind_b);
      pair_up(a, b, [](uint16_t port) { return *conn::Endpoint::parse("127.0.0.1:" + std::to_string(port)); });
      bring_up();
      const auto& st = a.stats();
      // Datagrams i..i+count to 198.19.0.2:9, sent one at a time, each reaching B in order,
      // 1 ms apart: light traffic (fewer than Device::kLightReads per kLightWindow).
      auto one_by_one = [&](int from, int count) {
        for (int i = from; i < from + count; ++i) {
          const std::string payload = "datagram " + std::to_string(i);
          send_udp(payload);
          for (;;) {
            auto p = mem_b.take(5s);
            EXPECT_MSG(p, payload + " never reached B");
            if (!is_udp_to_discard(*p)) continue;
            EXPECT_MSG(std::string(p->begin() + 28, p->end()) == payload, "not " + payload);
            break;
          }
          std::this_thread::sleep_for(wg::Device::kLightWindow);
        }
      };

      step("echo requests from B: each answered (A's receiving thread now had traffic)");
      for (uint16_t seq = 1; seq <= 20; ++seq) {
        EXPECT(mem_b.inject(echo_request(0x7767, seq, 0)));
        for (;;) {
          auto p = mem_b.take(5s);
          EXPECT_MSG(p, "no reply to echo request " + std::to_string(seq));
          if (is_echo_reply(0x7767, seq)(*p)) break;
        }
      }

      step("datagrams from the kernel one at a time: light reads, so the reader lends the TUN");
      // Each is a read of one packet, by the reader unless it lent the TUN already (the
      // replies above may have made enough light reads): kLightReads of them, spread over
      // more than kLightWindow, lend it.
      one_by_one(0, static_cast<int>(wg::Device::kLightReads));
      if (light)
        EXPECT_MSG(eventually([&] { return st.tun_handovers.load() == 1; }),
                   std::to_string(st.tun_handovers.load()) + " handovers");
      else
        EXPECT(st.tun_handovers.load() == 0);

      step("100 more: all read by the receiving thread");
      const uint64_t before = st.tun_light_reads.load();
      one_by_one(100, 100);
      if (light) {
        EXPECT_MSG(st.tun_light_reads.load() - before >= 100,
                   std::to_string(st.tun_light_reads.load() - before) + " of 100 read while lent");
        EXPECT(st.tun_handovers.load() == 1);
        EXPECT(st.tun_returns.load() == 0);
      } else {
        EXPECT(st.tun_light_reads.load() == 0);
      }

      step("a 40-segment super-packet: every segment arrives, in order; the TUN goes back");
      std::vector<uint8_t> data(40 * 1000);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>('A' + i / 1000);  // segment k: 'A' + k
      EXPECT(wgtest::send_udp_segmented(kPeer, 9, 1000, data));
      for (int seg = 0; seg < 40; ++seg) {
        for (;;) {
          auto p = mem_b.take(5s);
          EXPECT_MSG(p, "segment " + std::to_string(seg) + " never reached B");
          if (!is_udp_to_discard(*p)) continue;
          EXPECT(p->size() == 1028);
          EXPECT_MSG((*p)[28] == 'A' + seg && (*p)[1027] == 'A' + seg,
                     "segment " + std::to_string((*p)[28] - 'A') + " where " + std::to_string(seg) + " belongs");
          break;
        }
      }
      // It goes back after the segments were sent, maybe just after B had them all.
      if (light) EXPECT(eventually([&] { return st.tun_returns.load() == 1; }));

      step("light again: lent again, and the datagrams still arrive in order");
      one_by_one(200, static_cast<int>(wg::Device::kLightReads) + 2);
      if (light) {
        EXPECT_MSG(eventually([&] { return st.tun_handovers.load() == 2; }),
                   std::to_string(st.tun_handovers.load()) + " handovers");
        one_by_one(300, 10);

        step("the TUN closes while lent, its file open elsewhere too: given back, and no spinning");
        // A copy of the descriptor (as wg-tun's daemon mode hands its child) keeps the
        // interface and its queue: the epoll set must forget the TUN all the same, or
        // packets queued there would wake the receiving thread for ever.
        int copy = -1;
        for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
          std::error_code lec;
          if (std::filesystem::read_symlink(e.path(), lec) == "/dev/net/tun")
            copy = ::dup(std::stoi(e.path().filename().string()));
        }
        EXPECT(copy >= 0);
        wg::UniqueFd keep(copy);
        tun->close();
        EXPECT(eventually([&] { return st.tun_returns.load() == 2; }));
        for (int i = 0; i < 5; ++i) send_udp("queued after close");  // waits in the kept file's queue
        auto cpu = [] {
          rusage ru{};
          ::getrusage(RUSAGE_SELF, &ru);
          return std::chrono::seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 std::chrono::microseconds(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        };
        const auto cpu_before = cpu();
        std::this_thread::sleep_for(500ms);
        // A thread spinning on a readable set takes a core (more than 250 ms of the 500
        // even when sharing it); the idle process takes a few.
        const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(cpu() - cpu_before);
        EXPECT_MSG(used < 150ms, std::to_string(used.count()) + " ms of CPU in 500 ms after the close");
      } else {
        EXPECT(st.tun_handovers.load() == 0 && st.tun_returns.load() == 0 && st.tun_light_reads.load() == 0);
      }
      a.close();
      b.close();
    }
  });
}

// ---- faults from the TUN's own system calls -------------------------------------------

namespace {

// readv()/writev() that fail as a loaded kernel does, on a script: call i takes
// script[i] (0 = the real call), past the script every call is the real one. Each test
// runs in its own child process, so the script is that child's alone.
std::vector<int> g_readv_script, g_writev_script;
size_t g_readv_calls = 0, g_writev_calls = 0;

// The system call `Real` behind a script and its call count (one per scripted call).
template <ssize_t (*Real)(int, const iovec*, int), std::vector<int>& Script, size_t& Calls>
ssize_t scripted(int fd, const iovec* iov, int n) {
  const size_t i = Calls++;
  if (i < Script.size() && Script[i] != 0) {
    errno = Script[i];
    return -1;
  }
  return Real(fd, iov, n);
}

// Reads until the kernel answered every echo request in `want` (id 0x7767); a reply to
// one in `never` (a request that was dropped) fails.
void expect_replies(Tun& tun, std::set<uint16_t> want, const std::set<uint16_t>& never) {
  Batch b;
  while (!want.empty()) {
    std::error_code ec;
    const size_t n = tun.read(b.spans, b.sizes, kOffset, ec);
    EXPECT_MSG(!ec, ec.message());
    for (size_t i = 0; i < n; ++i) {
      const auto p = b.packet(i);
      if (p.size() != 60 || p[0] != 0x45 || p[9] != IPPROTO_ICMP || p[20] != 0 || be16(&p[24]) != 0x7767) continue;
      const uint16_t seq = be16(&p[26]);
      EXPECT_MSG(!never.contains(seq), "a reply to dropped request " + std::to_string(seq));
      want.erase(seq);
    }
  }
}

std::unique_ptr<Tun> make_scripted_tun() {
  Tun::Options opts;  // every offload on, whatever the environment says
  opts.readv = scripted<::readv, g_readv_script, g_readv_calls>;
  opts.writev = scripted<::writev, g_writev_script, g_writev_calls>;
  std::error_code ec;
  auto tun = Tun::create(kIf, 0, opts, ec);
  EXPECT_MSG(tun && !ec, ec.message());
  return tun;
}

}  // namespace

TEST_CASE("tun: EINTR and EAGAIN from readv lose nothing, another error is reported and loses nothing",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    auto tun = make_scripted_tun();
    bring_up();
    Batch b;
    std::deque<std::vector<uint8_t>> arrived;  // read, not yet checked (a batch may hold several)
    auto next_datagram = [&](int i) {
      while (arrived.empty()) {
        std::error_code ec;
        const size_t n = tun->read(b.spans, b.sizes, kOffset, ec);
        EXPECT_MSG(!ec, ec.message());
        for (size_t k = 0; k < n; ++k)
          if (is_udp_to_discard(b.packet(k))) arrived.emplace_back(b.packet(k).begin(), b.packet(k).end());
      }
      check_udp(arrived.front(), "datagram " + std::to_string(i));
      arrived.pop_front();
    };

    step("EINTR and EAGAIN with datagrams queued");
    // Each datagram is queued before the read that meets the faults: an EINTR must be
    // retried at once, an EAGAIN that lies about an empty queue must end in a poll that
    // finds the datagram, not in a lost or reordered one.
    g_readv_script = {EINTR, EAGAIN, 0, EINTR, EINTR, 0, EAGAIN, EAGAIN, 0, EAGAIN, EINTR, 0};
    g_readv_calls = 0;
    for (int i = 0; i < 4; ++i) {
      send_udp("datagram " + std::to_string(i));
      next_datagram(i);
    }
    EXPECT_MSG(g_readv_calls >= g_readv_script.size(), std::to_string(g_readv_calls) + " readv calls");

    step("EIO from readv");
    send_udp("datagram 4");
    send_udp("datagram 5");
    g_readv_script.assign(g_readv_calls, 0);  // the next call fails, the ones after are real
    g_readv_script.push_back(EIO);
    std::error_code ec;
    const size_t n = tun->read(b.spans, b.sizes, kOffset, ec);
    EXPECT_MSG(n == 0 && ec == std::errc::io_error, std::to_string(n) + " packets, " + ec.message());
    next_datagram(4);  // still queued, in order
    next_datagram(5);
    EXPECT(tun->counters().read_dropped == 0);
  });
}

TEST_CASE("tun: EINTR and EAGAIN from writev are retried, ENOMEM drops one packet, EIO stops the batch",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create");
    auto tun = make_scripted_tun();
    bring_up();
    // Echo requests are never coalesced: one writev each, so call i is request i.
    auto requests = [](uint16_t first, int count) {
      std::vector<std::vector<uint8_t>> r;
      for (int i = 0; i < count; ++i) r.push_back(echo_request(0x7767, static_cast<uint16_t>(first + i)));
      return r;
    };
    auto spans = [](std::vector<std::vector<uint8_t>>& r) { return std::vector<std::span<uint8_t>>(r.begin(), r.end()); };

    step("EINTR, EAGAIN, ENOMEM and ENOBUFS in one batch");
    // Requests 0-7: EINTR and EAGAIN before request 1 (retried: it goes), ENOMEM on
    // request 3 and ENOBUFS on request 6 (each dropped alone, the batch goes on).
    g_writev_script = {0, EINTR, EAGAIN, EINTR, 0, 0, ENOMEM, 0, 0, ENOBUFS, 0};
    g_writev_calls = 0;
    auto first = requests(100, 8);
    auto first_spans = spans(first);
    std::error_code ec;
    const size_t written = tun->write(first_spans, kOffset, ec);
    EXPECT_MSG(!ec, ec.message());
    EXPECT_MSG(written == 6, std::to_string(written) + " written");
    EXPECT(g_writev_calls == g_writev_script.size());
    EXPECT(tun->counters().write_rejected == 2);
    expect_replies(*tun, {100, 101, 102, 104, 105, 107}, {103, 106});

    step("EIO stops the batch");
    g_writev_script = {0, EIO};
    g_writev_calls = 0;
    auto second = requests(200, 4);
    auto second_spans = spans(second);
    EXPECT(tun->write(second_spans, kOffset, ec) == 1);
    EXPECT_MSG(ec == std::errc::io_error, ec.message());
    EXPECT(g_writev_calls == 2);  // not retried, the rest not tried
    expect_replies(*tun, {200}, {201, 202, 203});
    ping_through(*tun, 300);  // the next write goes
    EXPECT(tun->counters().write_rejected == 2);
  });
}

// ---------------------------------------------------------------- multi-queue TUN

namespace {

// A UDP socket bound to 198.19.0.1:port (0: any), closed on scope exit.
wg::UniqueFd udp_socket(uint16_t port = 0) {
  wg::UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  std::memcpy(&a.sin_addr, kLocal, 4);
  EXPECT_MSG(s && ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, std::strerror(errno));
  return s;
}

// Threads of this process named `name`.
size_t threads_named(const std::string& name) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string got;
    std::getline(comm, got);
    n += got == name;
  }
  return n;
}

}  // namespace

// IFF_MULTI_QUEUE (Tun::Options::queues): the kernel puts each flow it sends on one
// queue, and a flow written through the Tun (on the queue flow_queue picks) is answered
// on that same queue, so both directions of a flow meet one reader.
//
//   64 local sockets -> 198.19.0.2:9 -> kernel -> wgt0 queue 0 or 1 (read_now on each)
//   Tun::write 198.19.0.2:P -> 198.19.0.1:7000 -> socket -> reply -> queue flow_queue(P)
TEST_CASE("tun: a multi-queue TUN spreads flows over its queues and answers a flow on the queue it was written on",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    step("create with 2 queues");
    Tun::Options o;
    o.queues = 2;
    std::error_code ec;
    auto tun = Tun::create(kIf, 1420, o, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    EXPECT(tun->queues() == 2);
    EXPECT(&tun->queue(0) == tun.get());
    tun::Device& q1 = tun->queue(1);
    EXPECT(&q1 != tun.get() && q1.can_read_now() && q1.mtu() == 1420 && q1.queues() == 2);
    bring_up();

    // Reads both queues until `want` packets matched `pred`; per match, which queue.
    auto read_both = [&](size_t want, const std::function<bool(std::span<const uint8_t>)>& pred,
                         const std::function<void(size_t, std::span<const uint8_t>)>& seen) {
      Batch b;
      size_t got = 0;
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while (got < want) {
        EXPECT_MSG(std::chrono::steady_clock::now() < deadline,
                   "read " + std::to_string(got) + " of " + std::to_string(want) + " in 5 s");
        bool any = false;
        for (size_t q = 0; q < 2; ++q) {
          size_t n = tun->queue(q).read_now(b.spans, b.sizes, kOffset, ec);
          EXPECT_MSG(!ec, ec.message());
          for (size_t i = 0; i < n; ++i) {
            if (!pred(b.packet(i))) continue;
            seen(q, b.packet(i));
            ++got;
          }
          any = any || n > 0;
        }
        if (!any) std::this_thread::sleep_for(1ms);
      }
    };

    step("64 flows from the kernel, 4 datagrams each: one queue per flow, both queues used, all read");
    std::vector<wg::UniqueFd> socks;
    for (int f = 0; f < 64; ++f) socks.push_back(udp_socket());
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(9);
    std::memcpy(&peer.sin_addr, kPeer, 4);
    for (int round = 0; round < 4; ++round)
      for (auto& s : socks)
        EXPECT(::sendto(s.get(), "x", 1, 0, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 1);
    std::map<uint16_t, std::set<size_t>> queue_of;  // source port -> queues seen
    std::map<uint16_t, int> count;
    size_t per_queue[2] = {};
    read_both(256, is_udp_to_discard, [&](size_t q, std::span<const uint8_t> p) {
      queue_of[be16(&p[20])].insert(q);
      ++count[be16(&p[20])];
      ++per_queue[q];
    });
    EXPECT(queue_of.size() == 64);
    for (auto& [port, qs] : queue_of) EXPECT_MSG(qs.size() == 1, "flow " + std::to_string(port) + " on both queues");
    for (auto& [port, n] : count) EXPECT(n == 4);
    EXPECT_MSG(per_queue[0] > 0 && per_queue[1] > 0,
               "queue 0: " + std::to_string(per_queue[0]) + ", queue 1: " + std::to_string(per_queue[1]));

    step("32 flows written into the TUN: each answer comes back on flow_queue's queue");
    auto server = udp_socket(7000);
    std::map<uint16_t, size_t> written_on;  // peer port -> queue of its flow
    size_t expect_per_queue[2] = {};
    for (uint16_t port = 20000; port < 20032; ++port) {
      auto pkt = udp_to_local("ask " + std::to_string(port), true, port);
      written_on[port] = tunlinux::flow_queue({pkt.data() + kOffset, pkt.size() - kOffset}, 2);
      ++expect_per_queue[written_on[port]];
      std::span<uint8_t> one[] = {pkt};
      // Through either queue's device: write() picks the queue by the flow, not the caller.
      EXPECT(tun->queue(port % 2).write(one, kOffset, ec) == 1 && !ec);
      char buf[64];
      sockaddr_in from{};
      socklen_t len = sizeof from;
      pollfd pf{server.get(), POLLIN, 0};
      EXPECT_MSG(::poll(&pf, 1, 2000) == 1, "datagram from port " + std::to_string(port) + " not delivered");
      ssize_t r = ::recvfrom(server.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      EXPECT(r > 0 && ntohs(from.sin_port) == port);
      EXPECT(::sendto(server.get(), "answer", 6, 0, reinterpret_cast<sockaddr*>(&from), len) == 6);
    }
    EXPECT(expect_per_queue[0] > 0 && expect_per_queue[1] > 0);
    size_t answers = 0;
    read_both(
        32, [](std::span<const uint8_t> p) { return p.size() >= 28 && p[9] == IPPROTO_UDP && be16(&p[20]) == 7000; },
        [&](size_t q, std::span<const uint8_t> p) {
          const uint16_t port = be16(&p[22]);
          EXPECT_MSG(written_on.count(port) && written_on[port] == q,
                     "answer to port " + std::to_string(port) + " on queue " + std::to_string(q));
          ++answers;
        });
    EXPECT(answers == 32);

    step("close wakes a reader blocked on either queue");
    std::atomic<int> woken{0};
    std::thread r1([&] {
      Batch b;
      std::error_code e;
      EXPECT(q1.read(b.spans, b.sizes, kOffset, e) == 0 && e == std::errc::operation_canceled);
      ++woken;
    });
    std::this_thread::sleep_for(50ms);
    tun->close();
    r1.join();
    EXPECT(woken == 1);
    std::error_code e;
    EXPECT(!q1.wait_readable(e) && e == std::errc::operation_canceled);
  });
}

TEST_CASE("tun: a multi-queue TUN is refused where the interface has one queue, and from_fd attaches the rest",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    std::error_code ec;
    step("a persistent single-queue interface cannot be opened with 2 queues");
    sh(std::string("ip tuntap add dev ") + kIf + " mode tun");
    Tun::Options o;
    o.queues = 2;
    EXPECT(!Tun::create(kIf, 0, o, ec) && ec);
    sh(std::string("ip tuntap del dev ") + kIf + " mode tun");
    o.queues = 0;
    EXPECT(!Tun::create(kIf, 0, o, ec) && ec == std::errc::invalid_argument);

    step("an interface another holder's queues are attached to is not joined, nor changed");
    {
      o.queues = 2;
      auto first = Tun::create(kIf, 1380, o, ec);
      EXPECT_MSG(first && !ec, ec.message());
      EXPECT(!Tun::create(kIf, 1420, o, ec) && ec == std::errc::device_or_resource_busy);
      EXPECT(first->mtu() == 1380);
      ifreq ifr{};
      int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      std::strncpy(ifr.ifr_name, kIf, IFNAMSIZ - 1);
      EXPECT(::ioctl(s, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu == 1380);
      ::close(s);
      first->close();
    }

    step("from_fd: a single-queue descriptor with queues 2 is refused and stays the caller's");
    auto single = make_tun();
    const int dup1 = ::dup(single->fd());
    o.queues = 2;
    EXPECT(!Tun::from_fd(dup1, o, ec) && ec == std::errc::invalid_argument);
    EXPECT(::fcntl(dup1, F_GETFD) >= 0);
    ::close(dup1);
    single->close();

    step("from_fd: a multi-queue descriptor gets its other queues attached, and they carry flows");
    auto multi = Tun::create(kIf, 1420, o, ec);
    EXPECT_MSG(multi && !ec, ec.message());
    const int dup2 = ::dup(multi->fd());
    o.queues = 4;
    auto adopted = Tun::from_fd(dup2, o, ec);
    EXPECT_MSG(adopted && !ec, ec.message());
    EXPECT(adopted->queues() == 4);
    multi->close();  // its second queue leaves (its first is the adopted one's too)
    bring_up();
    // Each datagram goes on the queue of its flow, and its answer comes back there. (Not
    // so for ICMP here: Linux 6.18 hashes an echo reply apart from its request, so the
    // reply may come on any queue; the readers read them all.)
    auto server = udp_socket(7000);
    std::set<size_t> queues_used;
    for (uint16_t port = 30000; port < 30008; ++port) {
      auto pkt = udp_to_local("hello", true, port);
      const size_t q = tunlinux::flow_queue({pkt.data() + kOffset, pkt.size() - kOffset}, 4);
      queues_used.insert(q);
      std::span<uint8_t> one[] = {pkt};
      EXPECT(adopted->write(one, kOffset, ec) == 1 && !ec);
      char buf[16];
      sockaddr_in from{};
      socklen_t len = sizeof from;
      pollfd pf{server.get(), POLLIN, 0};
      EXPECT_MSG(::poll(&pf, 1, 2000) == 1, "datagram from port " + std::to_string(port) + " not delivered");
      EXPECT(::recvfrom(server.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len) == 5);
      EXPECT(::sendto(server.get(), "back", 4, 0, reinterpret_cast<sockaddr*>(&from), len) == 4);
      Batch b;
      const auto deadline = std::chrono::steady_clock::now() + 3s;
      std::string where;
      while (where.empty()) {
        EXPECT_MSG(std::chrono::steady_clock::now() < deadline, "no answer to port " + std::to_string(port) + " in 3 s");
        for (size_t i = 0; i < 4; ++i) {
          const size_t n = adopted->queue(i).read_now(b.spans, b.sizes, kOffset, ec);
          for (size_t k = 0; k < n; ++k)
            if (b.packet(k).size() >= 28 && b.packet(k)[9] == IPPROTO_UDP && be16(&b.packet(k)[22]) == port)
              where += std::to_string(i);
        }
        std::this_thread::sleep_for(1ms);
      }
      EXPECT_MSG(where == std::to_string(q),
                 "answer to port " + std::to_string(port) + " on queue " + where + ", written on " + std::to_string(q));
    }
    EXPECT(queues_used.size() > 1);
  });
}

// The core over a 2-queue TUN and a Bind of 2 sockets per family: a reader per queue,
// flows spread over both, each flow in order, nothing lost either way.
//
//   64 local sockets -> wgt0 (2 queues) -> A (2 readers) -> LinuxBind (2 + 2 sockets)
//     -- 127.0.0.1 -- LinuxBind -> B (MemoryDevice) -> answers back to each socket
TEST_CASE("tun: the core reads a multi-queue TUN with a thread per queue, every flow whole and in order",
          "[tunlinux][root]") {
  WGNET_REQUIRE_ROOT();
  require_in_netns([] {
    sh("ip link set lo up");
    Tun::Options o;
    o.queues = 2;
    o.queue_len = 4096;  // the burst below (1,024) must not overflow the kernel's queue
    std::error_code ec;
    auto tun = Tun::create(kIf, 1420, o, ec);
    EXPECT_MSG(tun && !ec, ec.message());
    conn::LinuxBind::Options bo;
    bo.sockets = 2;
    conn::LinuxBind bind_a(bo), bind_b;
    tun::MemoryDevice mem_b;
    const size_t readers_before = threads_named("wg-tun-read");
    wg::Device a(*tun, bind_a), b(mem_b, bind_b);
    // A's two readers and B's one (each names itself once it runs).
    EXPECT(eventually([&] { return threads_named("wg-tun-read") == readers_before + 3; }));
    pair_up(a, b, [](uint16_t port) { return *conn::Endpoint::parse("127.0.0.1:" + std::to_string(port)); });
    bring_up();

    step("the handshake, on a first datagram (packets waiting for a session may be dropped)");
    send_udp("first");
    for (;;) {
      auto p = mem_b.take(5s);
      EXPECT_MSG(p, "the first datagram never reached B");
      if (is_udp_to_discard(*p)) break;
    }

    step("64 flows x 16 datagrams from the kernel reach B, each flow in order");
    constexpr int kFlows = 64, kEach = 16;
    std::vector<wg::UniqueFd> socks;
    std::map<uint16_t, int> index_of;  // source port -> flow
    for (int f = 0; f < kFlows; ++f) {
      socks.push_back(udp_socket());
      sockaddr_in me{};
      socklen_t len = sizeof me;
      EXPECT(::getsockname(socks.back().get(), reinterpret_cast<sockaddr*>(&me), &len) == 0);
      index_of[ntohs(me.sin_port)] = f;
    }
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(9);
    std::memcpy(&peer.sin_addr, kPeer, 4);
    for (int i = 0; i < kEach; ++i)
      for (auto& s : socks) {
        const std::string payload = std::to_string(i);
        EXPECT(::sendto(s.get(), payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&peer), sizeof peer) ==
               static_cast<ssize_t>(payload.size()));
      }
    std::vector<int> next(kFlows, 0);
    for (int got = 0; got < kFlows * kEach;) {
      auto p = mem_b.take(5s);
      EXPECT_MSG(p, std::to_string(got) + " of " + std::to_string(kFlows * kEach) + " datagrams reached B");
      if (!is_udp_to_discard(*p)) continue;
      const auto it = index_of.find(be16(&(*p)[20]));
      EXPECT(it != index_of.end());
      const std::string payload(p->begin() + 28, p->end());
      EXPECT_MSG(payload == std::to_string(next[it->second]),
                 "flow " + std::to_string(it->second) + ": " + payload + " where " + std::to_string(next[it->second]) +
                     " was due");
      ++next[it->second];
      ++got;
    }

    step("an answer from B to every flow reaches its socket");
    for (auto& [port, f] : index_of) {
      auto pkt = udp_to_local("answer " + std::to_string(f), true, 9, port, 0);
      // udp_to_local's 198.19.0.2 -> 198.19.0.1 is what B sends back through the tunnel.
      EXPECT(mem_b.inject(std::move(pkt)));
    }
    for (int f = 0; f < kFlows; ++f) {
      pollfd pf{socks[f].get(), POLLIN, 0};
      EXPECT_MSG(::poll(&pf, 1, 5000) == 1, "no answer to flow " + std::to_string(f));
      char buf[64];
      const ssize_t r = ::recv(socks[f].get(), buf, sizeof buf, 0);
      EXPECT(r > 0 && std::string(buf, static_cast<size_t>(r)) == "answer " + std::to_string(f));
    }
    a.close();
    b.close();
  });
}

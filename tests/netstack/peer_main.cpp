// wgnet_netstack_peer: the far end of the dialer test (a second process, as separate as
// a real peer). A Stack + wg::Device + LinuxBind on
// loopback, serving test services on its tunnel addresses:
//
//   test process (netstack_tests)                     this process
//   ┌────────────────────────────┐  WireGuard over  ┌─────────────────────────────┐
//   │ Stack 198.19.0.1/24        │  127.0.0.1 UDP   │ Stack 198.19.0.2/24         │
//   │       fd00:19::1/64        │ <══════════════> │       fd00:19::2/64         │
//   └────────────────────────────┘                  └─────────────────────────────┘
//
//   TCP  :7     echo                   UDP :7   echo
//   TCP  :9000  source: 8-byte big-endian N in, then N pattern bytes out, FIN
//   TCP  :9001  sink: reads to EOF, replies count (8 bytes) + FNV-1a 64 (8 bytes)
//   TCP  :9002  held sink: 8-byte hold (ms) in, reads nothing for that long, then as :9001
//   TCP  :9100  dial back: "PORT\n" or "6 PORT\n" in → dials 198.19.0.1:PORT (or
//               [fd00:19::1]:PORT), writes "hello from peer"; answers "ok\n" / "error ...\n"
//   UDP/TCP :53 DNS: peer.test A/AAAA, big.test (100 A / 100 AAAA: TC over UDP),
//               silent.test never answered, twofold.test A 198.19.0.3 (a silent host)
//               then A 198.19.0.2, else NXDOMAIN
//
// Usage: wgnet_netstack_peer TEST_PUBLIC_KEY TEST_UDP_PORT, with the private key in the
// environment (WGNET_PEER_PRIVATE_KEY, base64; never on a command line). Prints
// "READY <udp port>" when up, exits when stdin closes.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/device.hpp"

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using netstack::Endpoint;
using netstack::error_code;
constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

// The byte at offset i of a source stream (the test computes the same).
uint8_t pattern(uint64_t i) { return static_cast<uint8_t>((i * 0x9E3779B97F4A7C15ull) >> 56); }

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}


using StreamPtr = std::shared_ptr<netstack::TcpStream>;

// Accepts on `port` (both families) and runs serve(stream) for each connection.
template <class Serve>
void serve_tcp(netstack::Stack& st, uint16_t port, Serve serve) {
  error_code ec;
  auto l = std::make_shared<netstack::TcpListener>(st.listen_tcp(Endpoint{{}, port}, ec));
  if (ec) {
    std::fprintf(stderr, "peer: listen tcp :%u: %s\n", port, ec.message().c_str());
    std::exit(1);
  }
  auto ex = st.get_executor();
  asio::co_spawn(ex, [l, serve, ex]() -> awaitable<void> {
    for (;;) {
      auto [aec, s] = co_await l->async_accept(kTry);
      if (aec) co_return;
      asio::co_spawn(ex, serve(std::make_shared<netstack::TcpStream>(std::move(s))), asio::detached);
    }
  }, asio::detached);
}

awaitable<void> echo(StreamPtr s) {
  std::vector<uint8_t> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await s->async_read_some(asio::buffer(buf), kTry);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(*s, asio::buffer(buf.data(), n), kTry);
      if (wec) break;
    }
    if (ec) break;
  }
  s->close();
}

awaitable<void> source(StreamPtr s) {
  uint8_t head[8];
  auto [ec, n] = co_await asio::async_read(*s, asio::buffer(head), kTry);
  if (ec) co_return;
  const uint64_t total = get_u64(head);
  std::vector<uint8_t> buf(64 * 1024);
  for (uint64_t sent = 0; sent < total;) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), total - sent));
    for (size_t i = 0; i < len; ++i) buf[i] = pattern(sent + i);
    auto [wec, wn] = co_await asio::async_write(*s, asio::buffer(buf.data(), len), kTry);
    if (wec) co_return;
    sent += len;
  }
  s->close();  // FIN after the queued data
}

// Reads to EOF after `hold`, then answers the byte count and FNV-1a 64 of the bytes.
awaitable<void> sink_after(StreamPtr s, std::chrono::milliseconds hold) {
  if (hold.count() > 0) {
    asio::steady_timer t(s->get_executor(), hold);
    co_await t.async_wait(kTry);
  }
  std::vector<uint8_t> buf(64 * 1024);
  uint64_t count = 0;
  Fnv sum;
  for (;;) {
    auto [ec, n] = co_await s->async_read_some(asio::buffer(buf), kTry);
    count += n;
    sum.add(buf.data(), n);
    if (ec == asio::error::eof) break;
    if (ec) co_return;
  }
  uint8_t reply[16];
  put_u64(reply, count);
  put_u64(reply + 8, sum.h);
  co_await asio::async_write(*s, asio::buffer(reply), kTry);
  s->close();
}

awaitable<void> sink(StreamPtr s) { co_await sink_after(s, {}); }

awaitable<void> held_sink(StreamPtr s) {
  uint8_t head[8];
  auto [ec, n] = co_await asio::async_read(*s, asio::buffer(head), kTry);
  if (ec) co_return;
  co_await sink_after(s, std::chrono::milliseconds(get_u64(head)));
}

awaitable<void> dial_back(netstack::Stack& st, StreamPtr s) {
  std::string line;
  char c;
  while (line.size() < 32) {
    auto [ec, n] = co_await s->async_read_some(asio::buffer(&c, 1), kTry);
    if (ec) co_return;
    if (c == '\n') break;
    line += c;
  }
  bool v6 = line.rfind("6 ", 0) == 0;
  if (v6) line.erase(0, 2);
  Endpoint to{*wg::IpAddress::parse(v6 ? "fd00:19::1" : "198.19.0.1"),
              static_cast<uint16_t>(std::atoi(line.c_str()))};
  auto [dec, back] = co_await st.async_dial_tcp(to, kTry);
  std::string answer = "ok\n";
  if (dec) {
    answer = "error " + dec.message() + "\n";
  } else {
    static const std::string hello = "hello from peer";
    auto [wec, wn] = co_await asio::async_write(back, asio::buffer(hello), kTry);
    if (wec) answer = "error " + wec.message() + "\n";
    back.close();
  }
  co_await asio::async_write(*s, asio::buffer(answer), kTry);
  s->close();
}

awaitable<void> udp_echo(std::shared_ptr<netstack::UdpSocket> u) {
  std::vector<uint8_t> buf(65535);
  for (;;) {
    Endpoint from;
    auto [ec, n] = co_await u->async_receive_from(asio::buffer(buf), from, kTry);
    if (ec) co_return;
    co_await u->async_send_to(asio::buffer(buf.data(), n), from, kTry);
  }
}

// --- DNS ---

struct Question {
  std::string name;  // lower case, no trailing dot
  uint16_t qtype = 0;
  size_t end = 0;  // offset just past the question
};

std::optional<Question> parse_question(const uint8_t* p, size_t n) {
  if (n < 12 || (p[2] & 0x80) || p[4] != 0 || p[5] != 1) return std::nullopt;
  Question q;
  size_t off = 12;
  while (off < n && p[off] != 0) {
    size_t len = p[off];
    if (len > 63 || off + 1 + len >= n) return std::nullopt;
    if (!q.name.empty()) q.name += '.';
    for (size_t i = 0; i < len; ++i) q.name += static_cast<char>(std::tolower(p[off + 1 + i]));
    off += 1 + len;
  }
  if (off + 5 > n) return std::nullopt;
  q.qtype = static_cast<uint16_t>(p[off + 1] << 8 | p[off + 2]);
  q.end = off + 5;
  return q;
}

// RDATA of every record of `name` and `qtype`; nullopt when the name does not exist.
std::optional<std::vector<std::vector<uint8_t>>> records_for(const std::string& name, uint16_t qtype) {
  std::vector<std::vector<uint8_t>> out;
  auto a = [&](uint8_t last) { out.push_back({198, 19, 0, last}); };
  auto aaaa = [&](uint16_t low) {
    std::vector<uint8_t> r{0xfd, 0, 0, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    r[14] = static_cast<uint8_t>(low >> 8);
    r[15] = static_cast<uint8_t>(low);
    out.push_back(std::move(r));
  };
  if (name == "peer.test") {
    if (qtype == 1) a(2);
    if (qtype == 28) aaaa(2);
  } else if (name == "twofold.test") {
    if (qtype == 1) {
      a(3);
      a(2);
    }
  } else if (name == "big.test") {  // 100 records: far past 512 bytes
    for (int i = 0; i < 100; ++i) {
      if (qtype == 1) a(static_cast<uint8_t>(10 + i));
      if (qtype == 28) aaaa(static_cast<uint16_t>(0x1000 + i));
    }
  } else {
    return std::nullopt;
  }
  return out;
}

// The answer to `query`, at most `limit` bytes (TC set when records were left out);
// empty when the query is not one to answer.
std::vector<uint8_t> dns_answer(const uint8_t* query, size_t n, size_t limit) {
  auto q = parse_question(query, n);
  if (!q || q->name == "silent.test") return {};
  auto records = records_for(q->name, q->qtype);
  std::vector<uint8_t> out(query, query + q->end);
  out[2] = static_cast<uint8_t>(0x84 | (query[2] & 0x01));  // QR, AA, RD copied
  out[3] = static_cast<uint8_t>(0x80 | (records ? 0 : 3));   // RA, NOERROR / NXDOMAIN
  out[6] = out[7] = out[8] = out[9] = out[10] = out[11] = 0;
  uint16_t count = 0;
  for (auto& rdata : records.value_or(std::vector<std::vector<uint8_t>>{})) {
    if (out.size() + 12 + rdata.size() > limit) {
      out[2] |= 0x02;  // TC
      break;
    }
    const uint8_t rr[12] = {0xc0, 0x0c, static_cast<uint8_t>(q->qtype >> 8), static_cast<uint8_t>(q->qtype),
                            0, 1, 0, 0, 0, 60, 0, static_cast<uint8_t>(rdata.size())};
    out.insert(out.end(), rr, rr + sizeof rr);
    out.insert(out.end(), rdata.begin(), rdata.end());
    ++count;
  }
  out[6] = static_cast<uint8_t>(count >> 8);
  out[7] = static_cast<uint8_t>(count);
  return out;
}

awaitable<void> dns_udp(std::shared_ptr<netstack::UdpSocket> u) {
  std::vector<uint8_t> buf(4096);
  for (;;) {
    Endpoint from;
    auto [ec, n] = co_await u->async_receive_from(asio::buffer(buf), from, kTry);
    if (ec) co_return;
    auto answer = dns_answer(buf.data(), n, 512);
    if (!answer.empty()) co_await u->async_send_to(asio::buffer(answer), from, kTry);
  }
}

awaitable<void> dns_tcp(StreamPtr s) {
  for (;;) {
    uint8_t len[2];
    auto [ec, n] = co_await asio::async_read(*s, asio::buffer(len), kTry);
    if (ec) break;
    std::vector<uint8_t> query(static_cast<size_t>(len[0] << 8 | len[1]));
    std::tie(ec, n) = co_await asio::async_read(*s, asio::buffer(query), kTry);
    if (ec) break;
    auto answer = dns_answer(query.data(), query.size(), 65535);
    if (answer.empty()) break;
    uint8_t head[2] = {static_cast<uint8_t>(answer.size() >> 8), static_cast<uint8_t>(answer.size())};
    answer.insert(answer.begin(), head, head + 2);
    std::tie(ec, n) = co_await asio::async_write(*s, asio::buffer(answer), kTry);
    if (ec) break;
  }
  s->close();
}

std::shared_ptr<netstack::UdpSocket> listen_udp(netstack::Stack& st, uint16_t port) {
  error_code ec;
  auto u = std::make_shared<netstack::UdpSocket>(st.listen_udp(Endpoint{{}, port}, ec));
  if (ec) {
    std::fprintf(stderr, "peer: listen udp :%u: %s\n", port, ec.message().c_str());
    std::exit(1);
  }
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TEST_PUBLIC_KEY TEST_UDP_PORT (private key in WGNET_PEER_PRIVATE_KEY)\n",
                 argv[0]);
    return 2;
  }
  const char* priv_text = std::getenv("WGNET_PEER_PRIVATE_KEY");
  auto priv = priv_text ? wg::PrivateKey::from_base64(priv_text) : std::nullopt;
  auto test_pub = wg::PublicKey::from_base64(argv[1]);
  int test_port = std::atoi(argv[2]);
  if (!priv || !test_pub || test_port <= 0 || test_port > 65535) {
    std::fprintf(stderr, "peer: bad key or port\n");
    return 2;
  }
  alarm(900);  // never outlive a stuck test by much

  netstack::StackOptions so;
  so.addresses = {*wg::IpPrefix::parse("198.19.0.2/24"), *wg::IpPrefix::parse("fd00:19::2/64")};
  so.dial_timeout = std::chrono::seconds(10);
  std::error_code sec;
  auto stack = netstack::Stack::create(so, sec);
  if (!stack) {
    std::fprintf(stderr, "peer: Stack::create: %s\n", sec.message().c_str());
    return 1;
  }
  conn::LinuxBind bind;
  wg::Device device(*stack, bind);
  device.set_private_key(*priv);
  auto peer = device.add_peer(*test_pub);
  device.add_allowed_ip(*peer, *wg::IpPrefix::parse("198.19.0.1/32"));
  device.add_allowed_ip(*peer, *wg::IpPrefix::parse("fd00:19::1/128"));
  device.set_endpoint(*peer, *conn::Endpoint::parse("127.0.0.1:" + std::to_string(test_port)));
  if (auto ec = device.up()) {
    std::fprintf(stderr, "peer: device up: %s\n", ec.message().c_str());
    return 1;
  }
  stack->set_route_check([&device](const wg::IpAddress& a) { return device.routable(a); });

  auto& st = *stack;
  serve_tcp(st, 7, echo);
  serve_tcp(st, 9000, source);
  serve_tcp(st, 9001, sink);
  serve_tcp(st, 9002, held_sink);
  serve_tcp(st, 9100, [&st](StreamPtr s) { return dial_back(st, std::move(s)); });
  serve_tcp(st, 53, dns_tcp);
  asio::co_spawn(st.get_executor(), udp_echo(listen_udp(st, 7)), asio::detached);
  asio::co_spawn(st.get_executor(), dns_udp(listen_udp(st, 53)), asio::detached);

  std::printf("READY %u\n", device.listen_port());
  std::fflush(stdout);

  char c;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  device.close();
  // Detached coroutines still own streams on the Stack's io_context; lwIP's globals and
  // that context end with the process, not piece by piece.
  std::fflush(nullptr);
  _exit(0);
}

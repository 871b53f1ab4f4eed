// The dialer API end to end, without root: this process's Stack and wg::Device against
// wgnet_netstack_peer (a second process: lwIP is one stack per process), WireGuard over
// UDP on 127.0.0.1. Topology and the peer's services: see peer_main.cpp.
//
//   netstack_tests                                     wgnet_netstack_peer
//   Stack ─ CaptureTun ─ wg::Device ─ LinuxBind <══ 127.0.0.1 ══> LinuxBind ─ wg::Device ─ Stack
//   198.19.0.1, fd00:19::1     (notes SYN options)                        198.19.0.2, fd00:19::2
//
// Every test body is a coroutine on the Stack's thread with a watchdog that closes its
// sockets when time is up, so a lost packet fails a test instead of hanging it. Catch's
// assertions run on the test thread only (Catch2 v2 is not thread-safe).
#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>

#include "bind/linux.hpp"
#include "netstack/stack.hpp"
#include "wg/crypto.hpp"
#include "wg/device.hpp"

extern char** environ;

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using asio::awaitable;
using netstack::Endpoint;
using netstack::error_code;
using netstack::TcpStream;
using Clock = std::chrono::steady_clock;
constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

wg::IpAddress ip(const char* s) { return *wg::IpAddress::parse(s); }
const wg::IpAddress kPeer4 = ip("198.19.0.2"), kPeer6 = ip("fd00:19::2");

// The byte at offset i of the peer's source stream (peer_main.cpp has the same).
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

// Resident set size of this process, from /proc/self/statm.
size_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// --- the peer process ---

// wgnet_netstack_peer with pipes on stdin (closing it ends the peer) and stdout (its
// READY line). The private key travels in the environment, not on the command line.
class PeerProcess {
public:
  PeerProcess(const wg::PrivateKey& key, const wg::PublicKey& test_pub, uint16_t test_port) {
    int in[2], out[2];
    REQUIRE(pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);

    std::vector<std::string> env_text;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "WGNET_PEER_PRIVATE_KEY=", 23) != 0) env_text.emplace_back(*e);
    env_text.push_back("WGNET_PEER_PRIVATE_KEY=" + key.to_base64());
    std::vector<char*> env;
    for (auto& s : env_text) env.push_back(s.data());
    env.push_back(nullptr);
    std::string path = WGNET_NETSTACK_PEER, pub = test_pub.to_base64(), port = std::to_string(test_port);
    char* argv[] = {path.data(), pub.data(), port.data(), nullptr};
    int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv, env.data());
    wg::secure_wipe(env_text.back().data(), env_text.back().size());
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    REQUIRE(rc == 0);

    // "READY <port>\n" within 10 s.
    std::string line;
    auto deadline = Clock::now() + 10s;
    while (line.find('\n') == std::string::npos && Clock::now() < deadline) {
      pollfd p{stdout_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[64];
      ssize_t n = read(stdout_, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    INFO("peer said: " << line);
    REQUIRE(line.rfind("READY ", 0) == 0);
    port_ = static_cast<uint16_t>(std::stoi(line.substr(6)));
    REQUIRE(port_ != 0);
  }

  ~PeerProcess() {
    if (stdin_ >= 0) close(stdin_);
    if (stdout_ >= 0) close(stdout_);
    if (pid_ <= 0) return;
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(100 * 1000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  uint16_t port() const { return port_; }

private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
  uint16_t port_ = 0;
};

// --- seeing what the Stack sends ---

struct TcpOptions {
  bool seen = false;
  uint16_t mss = 0;
  int window_scale = -1;
  bool sack_permitted = false;
};

// Reads the options of a TCP segment with SYN set (and ACK as given); nullopt otherwise.
std::optional<TcpOptions> syn_options(const uint8_t* pkt, size_t len, bool ack) {
  if (len < 1) return std::nullopt;
  size_t l4 = 0;
  if ((pkt[0] >> 4) == 4 && len >= 20 && pkt[9] == 6) l4 = static_cast<size_t>(pkt[0] & 0x0f) * 4;
  else if ((pkt[0] >> 4) == 6 && len >= 40 && pkt[6] == 6) l4 = 40;
  else return std::nullopt;
  if (len < l4 + 20) return std::nullopt;
  const uint8_t* tcp = pkt + l4;
  const uint8_t flags = tcp[13];
  if (!(flags & 0x02) || bool(flags & 0x10) != ack) return std::nullopt;
  const size_t end = std::min(len - l4, static_cast<size_t>(tcp[12] >> 4) * 4);
  TcpOptions o;
  o.seen = true;
  for (size_t i = 20; i < end;) {
    uint8_t kind = tcp[i];
    if (kind == 0) break;
    if (kind == 1) {
      ++i;
      continue;
    }
    if (i + 1 >= end || tcp[i + 1] < 2 || i + tcp[i + 1] > end) break;
    if (kind == 2 && tcp[i + 1] == 4) o.mss = static_cast<uint16_t>(tcp[i + 2] << 8 | tcp[i + 3]);
    if (kind == 3 && tcp[i + 1] == 3) o.window_scale = tcp[i + 2];
    if (kind == 4 && tcp[i + 1] == 2) o.sack_permitted = true;
    i += tcp[i + 1];
  }
  return o;
}

// The tun::Device the test's wg::Device sees: the Stack, with the first SYN it sends
// and the first SYN-ACK it receives noted per IP version.
class CaptureTun final : public tun::Device {
public:
  explicit CaptureTun(netstack::Stack& s) : s_(s) {}

  size_t read(std::span<const std::span<uint8_t>> bufs, std::span<size_t> sizes, size_t offset,
              std::error_code& ec) override {
    size_t n = s_.read(bufs, sizes, offset, ec);
    for (size_t i = 0; i < n; ++i) note(bufs[i].data() + offset, sizes[i], false);
    return n;
  }
  size_t write(std::span<const std::span<uint8_t>> bufs, size_t offset, std::error_code& ec) override {
    for (auto& b : bufs) note(b.data() + offset, b.size() - offset, true);
    return s_.write(bufs, offset, ec);
  }
  size_t batch_size() const override { return s_.batch_size(); }
  int mtu() const override { return s_.mtu(); }
  void set_event_handler(std::function<void(tun::Event)> h) override { s_.set_event_handler(std::move(h)); }
  void close() override { s_.close(); }

  TcpOptions syn_sent(int version) {
    std::lock_guard lock(mu_);
    return sent_[version == 6];
  }
  TcpOptions syn_ack_received(int version) {
    std::lock_guard lock(mu_);
    return received_[version == 6];
  }

private:
  void note(const uint8_t* pkt, size_t len, bool inbound) {
    auto o = syn_options(pkt, len, inbound);
    if (!o) return;
    std::lock_guard lock(mu_);
    auto& slot = (inbound ? received_ : sent_)[(pkt[0] >> 4) == 6];
    if (!slot.seen) slot = *o;
  }

  netstack::Stack& s_;
  std::mutex mu_;
  TcpOptions sent_[2], received_[2];
};

// --- the fixture: one per process ---

struct Harness {
  Harness() {
    netstack::StackOptions so;
    so.addresses = {*wg::IpPrefix::parse("198.19.0.1/24"), *wg::IpPrefix::parse("fd00:19::1/64")};
    so.dns_servers = {kPeer4};
    so.dial_timeout = 10s;
    std::error_code ec;
    stack = netstack::Stack::create(so, ec);
    REQUIRE(stack);
    tun = std::make_unique<CaptureTun>(*stack);
    device = std::make_unique<wg::Device>(*tun, bind);
    const auto key = wg::crypto::generate_private_key(), peer_key = wg::crypto::generate_private_key();
    device->set_private_key(key);
    auto p = device->add_peer(wg::crypto::public_key(peer_key));
    device->add_allowed_ip(*p, *wg::IpPrefix::parse("198.19.0.2/32"));
    device->add_allowed_ip(*p, *wg::IpPrefix::parse("fd00:19::2/128"));
    REQUIRE(!device->up());
    stack->set_route_check([d = device.get()](const wg::IpAddress& a) { return d->routable(a); });
    peer = std::make_unique<PeerProcess>(peer_key, wg::crypto::public_key(key), device->listen_port());
    device->set_endpoint(*p, *conn::Endpoint::parse("127.0.0.1:" + std::to_string(peer->port())));

    // The first packet starts the handshake; wait until the tunnel carries pings.
    error_code pec = asio::error::timed_out;
    for (int i = 0; i < 5 && pec; ++i) stack->ping(kPeer4, 3000ms, pec);
    INFO("ping through the new tunnel: " << pec.message());
    REQUIRE(!pec);
  }
  ~Harness() {
    peer.reset();
    if (device) device->close();
    device.reset();
    tun.reset();
    stack.reset();
  }

  std::unique_ptr<netstack::Stack> stack;
  std::unique_ptr<CaptureTun> tun;
  conn::LinuxBind bind;
  std::unique_ptr<wg::Device> device;
  std::unique_ptr<PeerProcess> peer;
};

Harness& harness() {
  static Harness h;
  return h;
}

// Closes the sockets it watches when `limit` has passed, so every pending operation of
// the coroutine ends (operation_aborted) and the coroutine with it. Lives in the
// coroutine's frame, on the Stack's thread, declared before what it watches.
class Watchdog {
public:
  Watchdog(asio::any_io_executor ex, Clock::duration limit) : state_(std::make_shared<State>(ex)) {
    state_->timer.expires_after(limit);
    state_->timer.async_wait([s = state_](const error_code& ec) {
      if (ec) return;
      for (auto& close : s->closers) close();
    });
  }
  ~Watchdog() {
    state_->closers.clear();
    state_->timer.cancel();
  }
  template <class Socket>
  void watch(Socket& s) {
    state_->closers.push_back([&s] { s.close(); });
  }
private:
  struct State {
    explicit State(asio::any_io_executor ex) : timer(ex) {}
    asio::steady_timer timer;
    std::vector<std::function<void()>> closers;
  };
  std::shared_ptr<State> state_;
};

// Runs a test coroutine on the Stack's thread and returns its result. The coroutine's
// own Watchdog bounds it; `limit` is the last resort (it should never trigger).
template <class T>
T run(awaitable<T> op, Clock::duration limit = 60s) {
  auto f = asio::co_spawn(harness().stack->get_executor(), std::move(op), asio::use_future);
  if (f.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "netstack_tests: a test coroutine outlived its watchdog; aborting\n");
    std::abort();
  }
  return f.get();
}

awaitable<std::tuple<error_code, TcpStream>> dial(const Endpoint& to) {
  co_return co_await harness().stack->async_dial_tcp(to, kTry);
}

// Reads until EOF (or error, or `max` bytes) into a string.
awaitable<std::pair<error_code, std::string>> read_all(TcpStream& s, size_t max = 1 << 20) {
  std::string out;
  char buf[4096];
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), kTry);
    out.append(buf, n);
    if (ec == asio::error::eof) co_return std::pair{error_code{}, out};
    if (ec || out.size() >= max) co_return std::pair{ec, out};
  }
}

std::string error_text(const error_code& ec) { return ec ? ec.message() : "ok"; }

}  // namespace

TEST_CASE("netstack: TCP to the peer's echo service, IPv4 and IPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  struct Result {
    error_code dial, io;
    std::string echoed;
    Endpoint local, remote;
  };
  auto r = run([](wg::IpAddress to) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 15s);
    Result r;
    auto [ec, s] = co_await dial({to, 7});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(s);
    r.local = s.local_endpoint();
    r.remote = s.remote_endpoint();
    const std::string msg = "hello through the tunnel";
    std::tie(r.io, std::ignore) = co_await asio::async_write(s, asio::buffer(msg), kTry);
    r.echoed.resize(msg.size());
    if (!r.io) std::tie(r.io, std::ignore) = co_await asio::async_read(s, asio::buffer(r.echoed), kTry);
    co_return r;
  }(v6 ? kPeer6 : kPeer4));
  INFO("dial: " << error_text(r.dial) << ", io: " << error_text(r.io));
  REQUIRE(!r.dial);
  CHECK(!r.io);
  CHECK(r.echoed == "hello through the tunnel");
  CHECK(r.remote == Endpoint{v6 ? kPeer6 : kPeer4, 7});
  CHECK(r.local.addr == (v6 ? ip("fd00:19::1") : ip("198.19.0.1")));
  CHECK(r.local.port != 0);
}

TEST_CASE("netstack: a closed stream keeps its executor and fails reads cleanly", "[netstack]") {
  struct Result {
    error_code dial, read;
    bool posted = false, same = false;
  };
  auto r = run([](wg::IpAddress to) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 15s);
    Result r;
    auto [ec, s] = co_await dial({to, 7});
    r.dial = ec;
    if (ec) co_return r;
    auto before = s.get_executor();
    s.close();
    auto after = s.get_executor();  // was a null dereference once closed
    r.same = before == after;
    co_await asio::post(after, asio::use_awaitable);
    r.posted = true;
    char b[8];
    std::tie(r.read, std::ignore) = co_await s.async_read_some(asio::buffer(b), kTry);
    co_return r;
  }(kPeer4));
  REQUIRE(!r.dial);
  CHECK(r.same);
  CHECK(r.posted);
  CHECK(r.read == asio::error::bad_descriptor);
}

TEST_CASE("netstack: the peer dials back into listen_tcp", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  struct Result {
    error_code listen, dial, accept;
    std::string hello, answer;
    Endpoint from;
  };
  auto r = run([](bool v6) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 20s);
    Result r;
    auto l = harness().stack->listen_tcp(Endpoint{}, r.listen);  // any address, a free port
    if (r.listen) co_return r;
    wd.watch(l);
    auto [ec, ctrl] = co_await dial({kPeer4, 9100});
    r.dial = ec;
    if (ec) co_return r;
    wd.watch(ctrl);
    const std::string cmd = (v6 ? "6 " : "") + std::to_string(l.local_endpoint().port) + "\n";
    co_await asio::async_write(ctrl, asio::buffer(cmd), kTry);
    auto [aec, in] = co_await l.async_accept(kTry);
    r.accept = aec;
    if (!aec) {
      wd.watch(in);
      r.from = in.remote_endpoint();
      std::tie(std::ignore, r.hello) = co_await read_all(in);
    }
    std::tie(std::ignore, r.answer) = co_await read_all(ctrl);
    co_return r;
  }(v6));
  INFO("listen: " << error_text(r.listen) << ", dial: " << error_text(r.dial) << ", accept: "
                  << error_text(r.accept) << ", peer: " << r.answer);
  REQUIRE(!r.listen);
  REQUIRE(!r.dial);
  REQUIRE(!r.accept);
  CHECK(r.hello == "hello from peer");
  CHECK(r.answer == "ok\n");
  CHECK(r.from.addr == (v6 ? kPeer6 : kPeer4));
}

TEST_CASE("netstack: 20 MB each way arrive intact", "[netstack]") {
  static constexpr uint64_t kSize = 20 * 1000 * 1000;

  SECTION("to the peer's sink: byte count and checksum") {
    struct Result {
      error_code ec;
      uint64_t count = 0, sum = 0, expected_sum = 0;
    };
    auto r = run([]() -> awaitable<Result> {
      Watchdog wd(co_await asio::this_coro::executor, 60s);
      Result r;
      auto [ec, s] = co_await dial({kPeer4, 9001});
      r.ec = ec;
      if (ec) co_return r;
      wd.watch(s);
      std::vector<uint8_t> buf(256 * 1024);
      Fnv sum;
      for (uint64_t sent = 0; sent < kSize && !r.ec;) {
        size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), kSize - sent));
        for (size_t i = 0; i < len; ++i) buf[i] = pattern(sent + i) ^ 0x5a;
        sum.add(buf.data(), len);
        std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(buf.data(), len), kTry);
        sent += len;
      }
      r.expected_sum = sum.h;
      if (r.ec) co_return r;
      s.shutdown_send();
      uint8_t reply[16];
      std::tie(r.ec, std::ignore) = co_await asio::async_read(s, asio::buffer(reply), kTry);
      r.count = get_u64(reply);
      r.sum = get_u64(reply + 8);
      co_return r;
    }());
    INFO(error_text(r.ec));
    REQUIRE(!r.ec);
    CHECK(r.count == kSize);
    CHECK(r.sum == r.expected_sum);
  }

  SECTION("from the peer's source: every byte where it belongs") {
    struct Result {
      error_code ec;
      uint64_t count = 0, wrong = 0;
    };
    auto r = run([]() -> awaitable<Result> {
      Watchdog wd(co_await asio::this_coro::executor, 60s);
      Result r;
      auto [ec, s] = co_await dial({kPeer6, 9000});
      r.ec = ec;
      if (ec) co_return r;
      wd.watch(s);
      uint8_t head[8];
      put_u64(head, kSize);
      std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
      std::vector<uint8_t> buf(256 * 1024);
      while (!r.ec) {
        auto [rec, n] = co_await s.async_read_some(asio::buffer(buf), kTry);
        for (size_t i = 0; i < n; ++i) r.wrong += buf[i] != pattern(r.count + i);
        r.count += n;
        if (rec == asio::error::eof) break;
        r.ec = rec;
      }
      co_return r;
    }());
    INFO(error_text(r.ec));
    REQUIRE(!r.ec);
    CHECK(r.count == kSize);
    CHECK(r.wrong == 0);
  }
}

TEST_CASE("netstack: UDP round trip through the peer's echo, IPv4 and IPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  const bool dialed = GENERATE(true, false);
  CAPTURE(v6, dialed);
  struct Result {
    error_code open, send, receive;
    std::string reply;
    Endpoint from;
  };
  auto r = run([](wg::IpAddress to, bool dialed) -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 10s);
    Result r;
    auto& st = *harness().stack;
    auto u = dialed ? st.dial_udp({to, 7}, r.open) : st.listen_udp({}, r.open);
    if (r.open) co_return r;
    wd.watch(u);
    const std::string msg = "datagram through the tunnel";
    std::tie(r.send, std::ignore) =
        co_await u.async_send_to(asio::buffer(msg), dialed ? Endpoint{} : Endpoint{to, 7}, kTry);
    if (r.send) co_return r;
    char buf[256];
    auto [ec, n] = co_await u.async_receive_from(asio::buffer(buf), r.from, kTry);
    r.receive = ec;
    r.reply.assign(buf, n);
    co_return r;
  }(v6 ? kPeer6 : kPeer4, dialed));
  INFO("open: " << error_text(r.open) << ", send: " << error_text(r.send) << ", receive: "
                << error_text(r.receive));
  REQUIRE(!r.open);
  REQUIRE(!r.send);
  REQUIRE(!r.receive);
  CHECK(r.reply == "datagram through the tunnel");
  CHECK(r.from == Endpoint{v6 ? kPeer6 : kPeer4, 7});
}

TEST_CASE("netstack: ping over ICMP and ICMPv6", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  auto& st = *harness().stack;
  error_code ec;
  auto rtt = st.ping(v6 ? kPeer6 : kPeer4, 3000ms, ec);  // bounded by its own timeout
  INFO(error_text(ec));
  REQUIRE(!ec);
  CHECK(rtt > 0ns);
  CHECK(rtt < 3s);
}

TEST_CASE("netstack: resolve asks the tunnel's DNS server", "[netstack]") {
  auto& st = *harness().stack;
  error_code ec;

  SECTION("A and AAAA") {
    auto addrs = st.resolve("peer.test", ec);
    INFO(error_text(ec));
    REQUIRE(!ec);
    CHECK(addrs == std::vector<wg::IpAddress>{kPeer4, kPeer6});
  }
  SECTION("a truncated UDP answer is asked again over TCP") {
    // The UDP answer holds the records that fit in 512 bytes and sets TC; all 100 of
    // each type only come over TCP.
    auto addrs = st.resolve("big.test", ec);
    INFO(error_text(ec));
    REQUIRE(!ec);
    REQUIRE(addrs.size() == 200);
    CHECK(addrs.front() == ip("198.19.0.10"));
    CHECK(addrs[99] == ip("198.19.0.109"));
    CHECK(addrs[100] == ip("fd00:19::1000"));
    CHECK(addrs.back() == ip("fd00:19::1063"));
  }
  SECTION("NXDOMAIN is host_not_found") {
    auto addrs = st.resolve("nowhere.test", ec);
    CHECK(ec == asio::error::host_not_found);
    CHECK(addrs.empty());
  }
  SECTION("a literal resolves to itself without a query") {
    auto addrs = st.resolve("[fd00:19::2]", ec);
    CHECK(!ec);
    CHECK(addrs == std::vector<wg::IpAddress>{kPeer6});
  }
  SECTION("names reach TCP services") {
    auto addrs = st.resolve("peer.test", ec);
    REQUIRE(!ec);
    auto r = run([](wg::IpAddress to) -> awaitable<std::pair<error_code, std::string>> {
      Watchdog wd(co_await asio::this_coro::executor, 10s);
      auto [ec, s] = co_await dial({to, 7});
      if (ec) co_return std::pair{ec, std::string{}};
      wd.watch(s);
      co_await asio::async_write(s, asio::buffer(std::string_view("by name")), kTry);
      std::string back(7, '\0');
      auto [rec, n] = co_await asio::async_read(s, asio::buffer(back), kTry);
      co_return std::pair{rec, back};
    }(addrs.front()));
    CHECK(!r.first);
    CHECK(r.second == "by name");
  }
}

TEST_CASE("netstack: a closed port refuses the connection", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  error_code ec;
  auto s = harness().stack->dial_tcp({v6 ? kPeer6 : kPeer4, 9999}, ec);  // bounded by dial_timeout
  CHECK(ec == asio::error::connection_refused);
  CHECK(!s.is_open());
}

TEST_CASE("netstack: destinations outside the allowed IPs are unreachable at once", "[netstack]") {
  auto& st = *harness().stack;
  const auto nowhere = ip("198.19.0.99");
  const auto start = Clock::now();
  error_code ec;
  auto s = st.dial_tcp({nowhere, 80}, ec);
  CHECK(ec == asio::error::host_unreachable);
  auto u = st.dial_udp({nowhere, 53}, ec);
  CHECK(ec == asio::error::host_unreachable);
  st.ping(ip("fd00:19::99"), 3000ms, ec);
  CHECK(ec == asio::error::host_unreachable);
  CHECK(Clock::now() - start < 1s);  // refused locally, no SYN into the void
}

TEST_CASE("netstack: a slow reader holds the sender back, memory stays bounded", "[netstack]") {
  // The peer's source offers 64 MB. After a warm-up at full speed the test reads 64 KB
  // every 5 ms for 2 s: without back-pressure the rest would pile up in this process.
  static constexpr uint64_t kSize = 64 << 20, kWarmup = 4 << 20, kChunk = 64 << 10;
  struct Result {
    error_code ec;
    uint64_t count = 0, wrong = 0, read_while_lagging = 0;
    size_t rss_before = 0, rss_max = 0;
  };
  auto r = run([]() -> awaitable<Result> {
    auto ex = co_await asio::this_coro::executor;
    Watchdog wd(ex, 90s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 9000});
    r.ec = ec;
    if (ec) co_return r;
    wd.watch(s);
    uint8_t head[8];
    put_u64(head, kSize);
    std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
    std::vector<uint8_t> buf(kChunk);
    auto take = [&](size_t n) -> awaitable<bool> {
      auto [rec, got] = co_await asio::async_read(s, asio::buffer(buf.data(), n), kTry);
      for (size_t i = 0; i < got; ++i) r.wrong += buf[i] != pattern(r.count + i);
      r.count += got;
      if (rec && rec != asio::error::eof) r.ec = rec;
      co_return !rec;
    };
    while (!r.ec && r.count < kWarmup) co_await take(kChunk);
    r.rss_before = r.rss_max = rss_bytes();
    asio::steady_timer pause(ex);
    for (auto end = Clock::now() + 2s; !r.ec && Clock::now() < end;) {
      if (!co_await take(kChunk)) break;
      r.read_while_lagging += kChunk;
      r.rss_max = std::max(r.rss_max, rss_bytes());
      pause.expires_after(5ms);
      co_await pause.async_wait(kTry);
    }
    while (!r.ec && r.count < kSize)
      if (!co_await take(std::min<uint64_t>(kChunk, kSize - r.count))) break;
    co_return r;
  }(), 120s);
  INFO(error_text(r.ec) << "; read " << r.read_while_lagging << " bytes while lagging; RSS "
                        << r.rss_before / 1024 << " KiB before, " << r.rss_max / 1024 << " KiB at most");
  REQUIRE(!r.ec);
  CHECK(r.count == kSize);
  CHECK(r.wrong == 0);
  // Growth is bounded by the receive window (4 MiB) plus the pipeline's buffers and
  // queues, not by what was sent; and the reader lagged enough that, without
  // back-pressure, what was left at the peer would have broken the bound.
  constexpr size_t kBound = 32u << 20;
  CHECK(kSize - kWarmup - r.read_while_lagging > kBound);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan's quarantine keeps freed memory resident and TSan shadows every byte: RSS
  // measures allocation churn there, not what is alive.
#else
  CHECK(r.rss_max - r.rss_before < kBound);
#endif
}

TEST_CASE("netstack: writes complete only as the peer's sink consumes", "[netstack]") {
  // The held sink reads nothing for 3 s. Our writes may fill our send buffer (4 MiB) and
  // the peer's receive window (4 MiB), then must wait until the sink reads.
  static constexpr uint64_t kSize = 24 << 20, kChunk = 64 << 10;
  static constexpr auto kHold = 3000ms;
  struct Result {
    error_code ec;
    std::vector<std::pair<Clock::duration, uint64_t>> progress;  // (since the header, bytes written)
    uint64_t count = 0, sum = 0, expected_sum = 0;
  };
  auto r = run([]() -> awaitable<Result> {
    Watchdog wd(co_await asio::this_coro::executor, 60s);
    Result r;
    auto [ec, s] = co_await dial({kPeer4, 9002});
    r.ec = ec;
    if (ec) co_return r;
    wd.watch(s);
    uint8_t head[8];
    put_u64(head, static_cast<uint64_t>(kHold.count()));
    std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(head), kTry);
    const auto start = Clock::now();
    std::vector<uint8_t> buf(kChunk);
    Fnv sum;
    for (uint64_t sent = 0; sent < kSize && !r.ec;) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(sent + i);
      sum.add(buf.data(), buf.size());
      std::tie(r.ec, std::ignore) = co_await asio::async_write(s, asio::buffer(buf), kTry);
      sent += buf.size();
      r.progress.emplace_back(Clock::now() - start, sent);
    }
    r.expected_sum = sum.h;
    if (r.ec) co_return r;
    s.shutdown_send();
    uint8_t reply[16];
    std::tie(r.ec, std::ignore) = co_await asio::async_read(s, asio::buffer(reply), kTry);
    r.count = get_u64(reply);
    r.sum = get_u64(reply + 8);
    co_return r;
  }());
  INFO(error_text(r.ec));
  REQUIRE(!r.ec);
  REQUIRE(!r.progress.empty());
  auto written_by = [&](Clock::duration t) {
    uint64_t w = 0;
    for (auto& [at, bytes] : r.progress)
      if (at <= t) w = bytes;
    return w;
  };
  const uint64_t held = written_by(2500ms);
  INFO("written after 0.5 s: " << written_by(500ms) << ", after 2.5 s: " << held
                               << ", last write done after "
                               << std::chrono::duration_cast<std::chrono::milliseconds>(r.progress.back().first).count()
                               << " ms");
  CHECK(held > 0);
  CHECK(held < 16u << 20);                    // buffers, not the whole stream
  CHECK(r.progress.back().first > 2800ms);    // the rest waited for the sink
  CHECK(r.count == kSize);
  CHECK(r.sum == r.expected_sum);
}

TEST_CASE("netstack: SYNs carry window scaling and SACK-permitted", "[netstack]") {
  const bool v6 = GENERATE(false, true);
  CAPTURE(v6);
  auto r = run([](wg::IpAddress to) -> awaitable<error_code> {
    auto [ec, s] = co_await dial({to, 7});
    co_return ec;
  }(v6 ? kPeer6 : kPeer4));
  REQUIRE(!r);
  auto& tun = *harness().tun;
  const TcpOptions syn = tun.syn_sent(v6 ? 6 : 4), syn_ack = tun.syn_ack_received(v6 ? 6 : 4);
  REQUIRE(syn.seen);
  CHECK(syn.sack_permitted);
  CHECK(syn.window_scale == 7);  // TCP_RCV_SCALE: a 4 MiB window
  CHECK(syn.mss == (v6 ? 1360 : 1380));
  // The peer's lwIP answers in kind: both ends then use scaling and SACK.
  REQUIRE(syn_ack.seen);
  CHECK(syn_ack.sack_permitted);
  CHECK(syn_ack.window_scale == 7);
}

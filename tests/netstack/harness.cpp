// The fixture of netstack_tests (harness.hpp): the peer process, the SYN capture, the
// Stack and Device of this process.
#include "harness.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "wg/crypto.hpp"

extern char** environ;

namespace netstack_test {

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

void CaptureTun::note(const uint8_t* pkt, size_t len, bool inbound) {
  if (!inbound) {
    if (auto dst = wg::packet_destination(pkt, len)) {
      std::lock_guard lock(mu_);
      auto it = std::find_if(sent_to_.begin(), sent_to_.end(), [&](auto& e) { return e.first == *dst; });
      if (it == sent_to_.end()) sent_to_.emplace_back(*dst, 1);
      else ++it->second;
    }
  }
  auto o = syn_options(pkt, len, inbound);
  if (!o) return;
  std::lock_guard lock(mu_);
  auto& slot = (inbound ? received_ : sent_)[(pkt[0] >> 4) == 6];
  if (!slot.seen) slot = *o;
}

Harness::Harness() {
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
  // A silent host: routed to the peer, whose Stack does not have the address and drops
  // what is sent to it (kSilent4 in harness.hpp).
  device->add_allowed_ip(*p, *wg::IpPrefix::parse("198.19.0.3/32"));
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

Harness::~Harness() {
  peer.reset();
  if (device) device->close();
  device.reset();
  tun.reset();
  stack.reset();
}

Harness& harness() {
  static Harness h;
  return h;
}

awaitable<std::tuple<error_code, TcpStream>> dial(const Endpoint& to) {
  co_return co_await harness().stack->async_dial_tcp(to, kTry);
}

awaitable<std::pair<error_code, std::string>> read_all(TcpStream& s, size_t max) {
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

}  // namespace netstack_test

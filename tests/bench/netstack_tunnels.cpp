// What several Stacks in one process cost: N tunnels (tests/netstack/tunnel_pair.hpp, all
// with the same addresses) move TCP at once for a bounded time, each x → y through its
// own pair of wg::Devices over 127.0.0.1. Prints each tunnel's and the total payload
// rate and the CPU of the process's one lwIP thread (every Stack's work runs there) and
// of the whole process. Compare `--tunnels 2` with two processes of `--tunnels 1` run at
// once (tests/bench/netstack_tunnels.sh does both, interleaved).
//
//   netstack_tunnels [--tunnels N (1-16)] [--seconds S (1-60)]
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../netstack/tunnel_pair.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;

// CPU seconds (user + system) of the threads named `name`, or of the process when empty.
double cpu_seconds(const std::string& name) {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (name.empty()) {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  }
  double total = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long utime = 0, stime = 0;
    for (int i = 3; rest >> field; ++i) {
      if (i == 14) utime = std::stoul(field);
      if (i == 15) {
        stime = std::stoul(field);
        break;
      }
    }
    total += static_cast<double>(utime + stime) / tick;
  }
  return total;
}

int arg(int argc, char** argv, const char* name, int dflt, int lo, int hi) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      const int v = std::atoi(argv[i + 1]);
      if (v < lo || v > hi) {
        std::fprintf(stderr, "netstack_tunnels: %s must be %d-%d\n", name, lo, hi);
        std::exit(2);
      }
      return v;
    }
  return dflt;
}

}  // namespace

int main(int argc, char** argv) try {
  const int n = arg(argc, argv, "--tunnels", 1, 1, 16);
  const int seconds = arg(argc, argv, "--seconds", 5, 1, 60);
  std::vector<std::unique_ptr<tunnel_pair::Tunnel>> tunnels;
  for (int i = 0; i < n; ++i) tunnels.push_back(std::make_unique<tunnel_pair::Tunnel>());
  const netstack::Endpoint to{*wg::IpAddress::parse("198.19.0.2"), 5001};
  std::vector<netstack::TcpListener> listeners;
  for (auto& t : tunnels) {
    netstack::error_code ec;
    listeners.push_back(t->y.stack->listen_tcp(to, ec));
    if (ec) throw std::runtime_error("listen: " + ec.message());
  }
  std::vector<std::atomic<uint64_t>> received(static_cast<size_t>(n));
  std::atomic<bool> measuring{false};
  std::vector<std::thread> threads;
  const auto cpu0 = std::pair{cpu_seconds("wg-netstack"), cpu_seconds("")};
  const auto start = Clock::now(), stop = start + std::chrono::seconds(seconds);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {  // y: reads and counts until EOF
      netstack::error_code ec;
      auto s = listeners[static_cast<size_t>(i)].accept(ec);
      std::vector<char> buf(65536);
      while (!ec) received[static_cast<size_t>(i)] += s.read_some(asio::buffer(buf), ec);
    });
    threads.emplace_back([&, i] {  // x: writes until the time is up (bounded by it)
      netstack::error_code ec;
      auto s = tunnels[static_cast<size_t>(i)]->x.stack->dial_tcp(to, ec);
      std::vector<char> buf(65536, 'x');
      while (!ec && Clock::now() < stop) s.write_all(asio::buffer(buf), ec);
      s.close();
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double lwip = cpu_seconds("wg-netstack") - cpu0.first, all = cpu_seconds("") - cpu0.second;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const double mbit = static_cast<double>(received[static_cast<size_t>(i)]) * 8 / elapsed / 1e6;
    total += mbit;
    std::printf("tunnel %d: %.0f Mbit/s\n", i + 1, mbit);
  }
  std::printf("tunnels %d total %.0f Mbit/s over %.1f s; lwIP thread %.0f %% of a core, process %.0f %%\n", n, total,
              elapsed, 100 * lwip / elapsed, 100 * all / elapsed);
  listeners.clear();
  tunnels.clear();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "netstack_tunnels: %s\n", e.what());
  return 1;
}

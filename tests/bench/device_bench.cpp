// Packets per second through the whole device pipeline in memory, one direction: two
// wg::Devices wired as in tests/unit/device_test.cpp, a window of packets injected into
// a's TUN and taken, in order, from b's.
//
//   bench ──inject──► [a: MemoryDevice] ─ wg::Device a ─► MemoryBind ─┐
//                                                                     │ MemoryNetwork
//   bench ◄──take──── [b: MemoryDevice] ─ wg::Device b ◄─ MemoryBind ◄┘
//
// The seams cost more than real ones would and are counted in: MemoryBind copies every
// datagram into a fresh std::vector (and MemoryDevice::write every delivered packet),
// so each packet pays two heap allocations and two extra copies that a socket and a TUN
// file descriptor would not. Both devices' threads (TUN reader, bind receiver, AEAD
// workers) share the machine's cores with the benchmark thread.
//
// BM_device_workers: the same with the AEAD handed to `workers` threads per device
// (inline_batch 1, so every batch of more than one packet goes to them), for how the
// pipeline scales with cores: run it under `taskset -c 0` and `taskset -c 0,1` (and on a
// larger machine, more) and compare.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/device.hpp"

namespace {

using namespace std::chrono_literals;

// An IPv4/UDP packet of `size` bytes from 198.19.0.<src> to 198.19.0.<dst> whose payload
// starts with a 64-bit sequence number.
std::vector<uint8_t> ip4_packet(uint8_t src, uint8_t dst, uint64_t seq, size_t size) {
  std::vector<uint8_t> p(size, 0);
  p[0] = 0x45;
  p[2] = static_cast<uint8_t>(size >> 8);
  p[3] = static_cast<uint8_t>(size);
  p[8] = 64;
  p[9] = 17;
  const uint8_t s[4] = {198, 19, 0, src}, d[4] = {198, 19, 0, dst};
  std::memcpy(&p[12], s, 4);
  std::memcpy(&p[16], d, 4);
  std::memcpy(&p[20], &seq, 8);
  for (size_t i = 28; i < size; ++i) p[i] = static_cast<uint8_t>(i);
  return p;
}

struct Node {
  Node(conn::MemoryNetwork& net, const wg::DeviceOptions& opts) : bind(net), dev(tun, bind, opts) {}
  tun::MemoryDevice tun;
  conn::MemoryBind bind;
  wg::Device dev;
  wg::PrivateKey key = wg::crypto::generate_private_key();
  wg::PublicKey pub() const { return wg::crypto::public_key(key); }
};

// a (198.19.0.1) and b (198.19.0.2), peers of each other; a knows b's endpoint.
struct Pair {
  explicit Pair(const wg::DeviceOptions& opts = {}) : a(net, opts), b(net, opts) {}
  conn::MemoryNetwork net;
  Node a, b;

  // Configures both and completes the handshake with one packet. False on failure.
  bool establish() {
    a.dev.set_private_key(a.key);
    b.dev.set_private_key(b.key);
    if (a.dev.up() || b.dev.up()) return false;
    auto a_to_b = a.dev.add_peer(b.pub());
    auto b_to_a = b.dev.add_peer(a.pub());
    a.dev.add_allowed_ip(*a_to_b, *wg::IpPrefix::parse("198.19.0.2/32"));
    b.dev.add_allowed_ip(*b_to_a, *wg::IpPrefix::parse("198.19.0.1/32"));
    a.dev.set_endpoint(*a_to_b, conn::MemoryBind::endpoint_for(b.dev.listen_port()));
    a.tun.inject(ip4_packet(1, 2, 0, 100));
    return b.tun.take(5s).has_value();
  }
};

// range(0): packets per window; range(1): packet size in bytes (IPv4 total length).
void one_way(benchmark::State& state, const wg::DeviceOptions& opts) {
  const auto window = static_cast<size_t>(state.range(0));
  const auto size = static_cast<size_t>(state.range(1));
  auto pair = std::make_unique<Pair>(opts);
  if (!pair->establish()) {
    state.SkipWithError("handshake did not complete");
    return;
  }

  // The packets taken from b are injected into a again in the next window, so the
  // benchmark itself allocates nothing per packet.
  std::vector<std::vector<uint8_t>> packets;
  for (size_t i = 0; i < window; ++i) packets.push_back(ip4_packet(1, 2, i + 1, size));

  uint64_t lost = 0;
  for (auto _ : state) {
    for (auto& p : packets) pair->a.tun.inject(std::move(p));
    for (auto& p : packets) {
      auto got = pair->b.tun.take(5s);
      if (!got) {
        ++lost;
        break;
      }
      p = std::move(*got);
    }
    if (lost) {
      state.SkipWithError("a packet was lost");
      break;
    }
  }
  const auto packets_done = static_cast<int64_t>(state.iterations() * window);
  state.SetItemsProcessed(packets_done);
  state.SetBytesProcessed(packets_done * static_cast<int64_t>(size));
  state.counters["dropped_bind"] =
      benchmark::Counter(static_cast<double>(pair->b.bind.dropped()));
  state.counters["batch"] = benchmark::Counter(static_cast<double>(pair->a.dev.batch_size()));
}

void BM_device_one_way(benchmark::State& state) { one_way(state, {}); }

// range(2): AEAD workers per device; every batch of more than one packet goes to them.
void BM_device_workers(benchmark::State& state) {
  wg::DeviceOptions opts;
  opts.workers = static_cast<size_t>(state.range(2));
  opts.inline_batch = 1;
  one_way(state, opts);
}

// About 2 s of measurement each (plus gbench's iteration estimate before it).
BENCHMARK(BM_device_one_way)
    ->ArgNames({"window", "bytes"})
    ->Args({1024, 1400})
    ->Args({1024, 64})
    ->Args({128, 1400})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK(BM_device_workers)
    ->ArgNames({"window", "bytes", "workers"})
    ->Args({1024, 1400, 1})
    ->Args({1024, 1400, 2})
    ->Args({1024, 1400, 4})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

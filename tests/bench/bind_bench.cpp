// Datagrams per second between two LinuxBinds over loopback: batches of 128 datagrams of
// 1420 bytes from A to B, with UDP GSO at the sender and GRO at the receiver on or off.
//
//   lockstep:  bench thread ── send 128 ──► A ─ lo ─► B ── receive 128 ──► bench thread
//   stream:    sender thread ── send 128, again and again ──► A ─ lo ─► B ──► bench thread
//
// lockstep is the cost of one batch through both ends on one core, nothing dropped.
// stream overlaps the two ends on two threads; the sender stays at most kWindow
// datagrams ahead of the receiver so that B's socket buffer never overflows.
// Receive buffers are 64 KB, as the core's (wg::kBufferSize).
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bind/linux.hpp"

namespace {

constexpr size_t kBatch = conn::LinuxBind::kBatchSize;
constexpr size_t kDatagram = 1420;
constexpr size_t kReceiveBuffer = 65536 + 64;
constexpr uint64_t kWindow = 2048;

conn::LinuxBind::Options offloads(bool gso, bool gro) {
  conn::LinuxBind::Options o;
  o.gso = gso;
  o.gro = gro;
  return o;
}

struct Link {
  conn::LinuxBind a, b;
  conn::ReceiveFn receive;
  conn::Endpoint to_b;
  std::vector<std::vector<uint8_t>> out_storage;
  std::vector<std::span<const uint8_t>> out;
  std::vector<std::vector<uint8_t>> in_storage;
  std::vector<std::span<uint8_t>> in;
  std::vector<uint8_t*> at;
  std::vector<size_t> sizes;
  std::vector<conn::Endpoint> eps;

  Link(bool gso, bool gro)
      : a(offloads(gso, true)), b(offloads(true, gro)), out_storage(kBatch, std::vector<uint8_t>(kDatagram, 0x5a)),
        in_storage(kBatch, std::vector<uint8_t>(kReceiveBuffer)), at(kBatch), sizes(kBatch), eps(kBatch) {
    std::error_code ec;
    uint16_t pa = 0, pb = 0;
    a.open(0, pa, ec);
    auto fns = b.open(0, pb, ec);
    if (ec || fns.empty()) return;
    receive = fns[0];
    to_b = *conn::Endpoint::parse("127.0.0.1:" + std::to_string(pb));
    out.assign(out_storage.begin(), out_storage.end());
    in.assign(in_storage.begin(), in_storage.end());
  }

  bool send() {
    std::error_code ec;
    a.send(out, to_b, ec);
    return !ec;
  }
  // The datagrams of one receive; false when the receive failed (B closed).
  bool receive_some(size_t& n) {
    std::error_code ec;
    n = receive(in, at, sizes, eps, ec);
    return !ec;
  }
};

void report(benchmark::State& state, const Link& link, uint64_t received) {
  state.SetItemsProcessed(static_cast<int64_t>(received));
  state.SetBytesProcessed(static_cast<int64_t>(received * kDatagram));
  state.counters["gso"] = link.a.gso_enabled();
  state.counters["gro"] = link.b.gro_enabled();
}

void BM_BindLockstep(benchmark::State& state) {
  Link link(state.range(0) != 0, state.range(1) != 0);
  if (!link.receive) return state.SkipWithError("open failed");
  uint64_t received = 0;
  for (auto _ : state) {
    if (!link.send()) return state.SkipWithError("send failed");
    for (size_t got = 0, n; got < kBatch; got += n)
      if (!link.receive_some(n)) return state.SkipWithError("receive failed");
    received += kBatch;
  }
  report(state, link, received);
}

void BM_BindStream(benchmark::State& state) {
  Link link(state.range(0) != 0, state.range(1) != 0);
  if (!link.receive) return state.SkipWithError("open failed");
  std::atomic<uint64_t> sent{0}, received{0};
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      if (sent.load(std::memory_order_relaxed) - received.load(std::memory_order_relaxed) + kBatch > kWindow) {
        std::this_thread::yield();
        continue;
      }
      if (!link.send()) {
        link.b.close();  // wakes the receive below
        break;
      }
      sent.fetch_add(kBatch, std::memory_order_relaxed);
    }
  });
  bool ok = true;
  for (auto _ : state) {
    for (size_t got = 0, n; ok && got < kBatch; got += n) {
      ok = link.receive_some(n);
      received.fetch_add(n, std::memory_order_relaxed);
    }
    if (!ok) break;
  }
  stop = true;
  sender.join();
  if (!ok) return state.SkipWithError("send or receive failed");
  report(state, link, received.load());
}

// Args: {gso at A, gro at B}.
BENCHMARK(BM_BindLockstep)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->UseRealTime();
BENCHMARK(BM_BindStream)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

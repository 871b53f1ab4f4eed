// Cost of the TUN offload engine on one thread: the Internet checksum at the sizes
// wireguard-go's checksum benchmark uses (its 1500-byte figure, 94 ns on an i5-12400, is
// the bar), splitting one 64 KB TCP super-packet into 1500-byte segments (read side),
// and planning GRO for a 128-packet batch of one TCP flow (write side).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "../support/packet_bytes.hpp"
#include "tunlinux/checksum.hpp"
#include "tunlinux/offload.hpp"

namespace {

using wgtest::put16;
using wgtest::put32;

using Bytes = std::vector<uint8_t>;
constexpr size_t kOffset = 16;


// IPv4 198.19.0.2:5001 -> 198.19.0.1:40000, TCP with timestamps, `payload` bytes; the
// TCP checksum either complete or (partial) just the pseudo-header sum.
Bytes tcp4(uint32_t seq, size_t payload, bool partial) {
  Bytes p(20 + 32 + payload);
  p[0] = 0x45;
  put16(&p[2], static_cast<uint16_t>(p.size()));
  put16(&p[6], 0x4000);
  p[8] = 64;
  p[9] = 6;
  const uint8_t src[4] = {198, 19, 0, 2}, dst[4] = {198, 19, 0, 1};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  put16(&p[10], static_cast<uint16_t>(~tunlinux::checksum(p.data(), 20)));
  uint8_t* t = &p[20];
  put16(t, 5001);
  put16(t + 2, 40000);
  put32(t + 4, seq);
  put32(t + 8, 1);
  t[12] = 8 << 4;
  t[13] = 0x10;
  put16(t + 14, 1024);
  const uint8_t ts[12] = {1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9};
  std::memcpy(t + 20, ts, sizeof ts);
  for (size_t i = 0; i < payload; ++i) t[32 + i] = static_cast<uint8_t>(i * 7);
  const uint16_t ph = tunlinux::pseudo_header_checksum(6, src, dst, static_cast<uint32_t>(p.size() - 20));
  put16(t + 16, partial ? ph : static_cast<uint16_t>(~tunlinux::checksum(t, p.size() - 20, ph)));
  return p;
}

void BM_Checksum(benchmark::State& state) {
  Bytes buf(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 31 + 7);
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    benchmark::DoNotOptimize(tunlinux::checksum(buf.data(), buf.size(), 0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Checksum)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Arg(1024)->Arg(1500)->Arg(2048)->Arg(4096)
    ->Arg(8192)->Arg(9001);

// One TSO super-packet of 64 KB (MSS 1448 + 52 bytes of headers = 1500-byte segments), as
// Tun::read splits it into 1500-byte buffers.
void BM_GsoSplitTcp64K(benchmark::State& state) {
  const Bytes pkt = tcp4(1000, 65535 - 52, true);
  tunlinux::VirtioNetHdr hdr;
  hdr.flags = tunlinux::kVirtioNetHdrFNeedsCsum;
  hdr.gso_type = tunlinux::kVirtioNetHdrGsoTcpV4;
  hdr.hdr_len = 52;
  hdr.gso_size = 1448;
  hdr.csum_start = 20;
  hdr.csum_offset = 16;
  std::vector<Bytes> store(64, Bytes(kOffset + 1500));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  std::vector<size_t> sizes(store.size());
  size_t segments = 0;
  for (auto _ : state) {
    std::error_code ec;
    segments = tunlinux::gso_split(hdr, pkt, bufs, sizes, kOffset, 1500, ec);
    if (ec) state.SkipWithError(ec.message().c_str());
    benchmark::DoNotOptimize(store[0].data());
  }
  state.counters["segments"] = static_cast<double>(segments);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * pkt.size()));
}
BENCHMARK(BM_GsoSplitTcp64K);

// 128 consecutive 1448-byte segments of one flow, as the core hands a decrypted batch to
// Tun::write: planning merges them into 3 writes (64 KB each at most).
void BM_GroTcp128(benchmark::State& state) {
  std::vector<Bytes> store;
  for (uint32_t i = 0; i < 128; ++i) {
    Bytes b(kOffset);
    const Bytes p = tcp4(1000 + i * 1448, 1448, false);
    b.insert(b.end(), p.begin(), p.end());
    store.push_back(std::move(b));
  }
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  tunlinux::Gro gro;  // ~20 KB on the stack, as in Tun::write
  for (auto _ : state) {
    gro.plan(bufs, kOffset, {});
    benchmark::DoNotOptimize(gro.writes().data());
  }
  state.counters["writes"] = static_cast<double>(gro.writes().size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 128));
}
BENCHMARK(BM_GroTcp128);

}  // namespace

BENCHMARK_MAIN();

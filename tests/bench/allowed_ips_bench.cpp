// Allowed IPs lookup cost: nanoseconds per longest-prefix match in a table of 10,000 IPv4
// and 10,000 IPv6 prefixes spread over 1,000 peers.
#include "wg/allowed_ips.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <random>
#include <vector>

namespace {

struct Peer {
  int id;
};

constexpr size_t kPrefixesPerFamily = 10'000;
constexpr size_t kPeers = 1'000;
constexpr size_t kQueries = 4096;  // a power of two, cycled through

struct Fixture {
  std::vector<Peer> peers;
  std::vector<wg::IpPrefix> v4, v6;
  wg::AllowedIps<Peer*> table;
  std::mt19937_64 rng{1};

  Fixture() : peers(kPeers) {
    for (size_t i = 0; i < kPeers; ++i) peers[i].id = static_cast<int>(i);
    // Lengths roughly as in real configs: mostly /24 and /32 for IPv4, /48, /64 and /128
    // for IPv6, some shorter aggregates.
    const std::array<uint8_t, 8> v4_bits = {8, 16, 20, 24, 24, 24, 32, 32};
    const std::array<uint8_t, 8> v6_bits = {32, 48, 48, 56, 64, 64, 128, 128};
    while (v4.size() < kPrefixesPerFamily) add(v4, random_prefix(4, v4_bits[rng() % 8]));
    while (v6.size() < kPrefixesPerFamily) add(v6, random_prefix(6, v6_bits[rng() % 8]));
  }

  // Keeps only distinct prefixes, so that the table really holds kPrefixesPerFamily each.
  void add(std::vector<wg::IpPrefix>& list, const wg::IpPrefix& p) {
    size_t before = table.size();
    table.insert(p, &peers[list.size() % kPeers]);
    if (table.size() > before) list.push_back(p);
  }

  wg::IpPrefix random_prefix(uint8_t family, uint8_t bits) {
    wg::IpPrefix p;
    p.addr.family = family;
    for (size_t k = 0; k < p.addr.size(); ++k) p.addr.bytes[k] = static_cast<uint8_t>(rng());
    p.bits = bits;
    return p.masked();
  }

  // Addresses inside a random prefix of the table (host bits random), or anywhere.
  std::vector<wg::IpAddress> queries(uint8_t family, bool inside) {
    const auto& prefixes = family == 4 ? v4 : v6;
    std::vector<wg::IpAddress> out;
    for (size_t i = 0; i < kQueries; ++i) {
      wg::IpAddress a;
      a.family = family;
      for (size_t k = 0; k < a.size(); ++k) a.bytes[k] = static_cast<uint8_t>(rng());
      if (inside) {
        const auto& p = prefixes[rng() % prefixes.size()];
        for (unsigned bit = 0; bit < p.bits; ++bit) {
          auto m = static_cast<uint8_t>(0x80u >> (bit % 8));
          uint8_t& byte = a.bytes[bit / 8];
          byte = static_cast<uint8_t>((byte & ~m) | (p.addr.bytes[bit / 8] & m));
        }
      }
      out.push_back(a);
    }
    return out;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void lookup(benchmark::State& state, uint8_t family, bool inside) {
  auto& f = fixture();
  const auto queries = f.queries(family, inside);
  size_t i = 0;
  size_t found = 0;
  for (auto _ : state) {
    const auto& a = queries[i++ & (kQueries - 1)];
    Peer* p = f.table.lookup(a.bytes.data(), a.family);
    found += p != nullptr;
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["hit_ratio"] =
      benchmark::Counter(static_cast<double>(found) / static_cast<double>(state.iterations()));
}

void BM_lookup_v4_hit(benchmark::State& state) { lookup(state, 4, true); }
void BM_lookup_v4_random(benchmark::State& state) { lookup(state, 4, false); }
void BM_lookup_v6_hit(benchmark::State& state) { lookup(state, 6, true); }
void BM_lookup_v6_random(benchmark::State& state) { lookup(state, 6, false); }

BENCHMARK(BM_lookup_v4_hit);
BENCHMARK(BM_lookup_v4_random);
BENCHMARK(BM_lookup_v6_hit);
BENCHMARK(BM_lookup_v6_random);

}  // namespace

BENCHMARK_MAIN();

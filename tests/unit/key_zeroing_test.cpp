// No copy of a session key outlives its keypair. Two devices on a fake clock exchange
// traffic on several threads (readers and crypto workers), their keys are zeroed
// (REJECT_AFTER_TIME * 3, or the peer removed), then every writable mapping of the
// process (/proc/self/maps, read through /proc/self/mem) is searched for every quarter
// of every key (8 bytes: a key split across two stores is found too; by chance, 8 bytes
// match about once in 2^64 places). The test holds its keys only masked (key XOR a
// random mask, compared as such, never put back together), so the search cannot find
// the test's own copies.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "reload.hpp"
#include "wg/config.hpp"
#include "wg/device.hpp"
#include "wg/uapi.hpp"
#include "wg/transport_aead.hpp"
#include "../support/device_pair.hpp"
#include "../support/eventually.hpp"
#include "skip.hpp"

namespace wg {

// Friend of Peer: the keys of its live sessions, as they are.
struct PeerKeysAccess {
  template <class F>
  static void each_key(Peer& p, F&& f) {
    std::lock_guard lock(p.keypairs_mu_);
    for (const KeypairPtr* kp : {&p.previous_, &p.current_, &p.next_}) {
      if (!*kp) continue;
      f((*kp)->send);
      f((*kp)->receive);
    }
  }
  // The handshake's secrets: chaining key, ephemeral private key, preshared key and
  // static-static secret. True when an initiation waits for its response.
  template <class F>
  static bool each_handshake_secret(Peer& p, F&& f) {
    std::lock_guard lock(p.handshake_mu_);
    const noise::Handshake& h = p.handshake_;
    f(h.chaining_key.data());
    f(h.local_ephemeral.data());
    f(h.preshared_key.data());
    f(h.precomputed_static_static.data());
    return h.state == noise::State::initiation_created;
  }
};

}  // namespace wg

using namespace wg;
using namespace std::chrono_literals;

namespace {

// A key as the test keeps it: masked = key ^ mask.
struct MaskedKey {
  std::array<uint8_t, kKeyLen> mask{}, masked{};
};

constexpr size_t kPiece = 8;
constexpr size_t kPieces = kKeyLen / kPiece;

// Are the 8 bytes at p quarter q of the key? p[i] ^ mask[i] is compared with masked[i];
// the volatile reads keep the compiler from forming key bytes (masked ^ mask) ahead.
bool holds_piece(const uint8_t* p, const MaskedKey& k, size_t q) {
  const volatile uint8_t* mask = k.mask.data() + q * kPiece;
  const volatile uint8_t* masked = k.masked.data() + q * kPiece;
  for (size_t i = 0; i < kPiece; ++i)
    if ((p[i] ^ mask[i]) != masked[i]) return false;
  return true;
}

// Do two masked keys hide the same key? (a ^ ma == b ^ mb  <=>  a ^ b == ma ^ mb)
bool same_key(const MaskedKey& x, const MaskedKey& y) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kKeyLen; ++i)
    diff = static_cast<uint8_t>(diff | (x.masked[i] ^ y.masked[i] ^ x.mask[i] ^ y.mask[i]));
  return diff == 0;
}

MaskedKey mask_key(const uint8_t* key) {
  MaskedKey k;
  random_bytes(k.mask.data(), kKeyLen);
  for (size_t i = 0; i < kKeyLen; ++i) k.masked[i] = static_cast<uint8_t>(key[i] ^ k.mask[i]);
  return k;
}

// Every session key the peers hold now, masked, each once.
void collect_keys(std::vector<MaskedKey>& keys, std::initializer_list<Peer*> peers) {
  for (Peer* p : peers)
    PeerKeysAccess::each_key(*p, [&](const SymmetricKey& key) {
      const MaskedKey k = mask_key(key.data());
      for (const auto& seen : keys)
        if (same_key(seen, k)) return;
      keys.push_back(k);
    });
}

struct Region {
  uintptr_t begin = 0, end = 0;
  std::string line;  // as /proc/self/maps lists it
};

std::vector<Region> writable_regions() {
  std::vector<Region> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    Region r;
    char perms[5] = {};
    unsigned long b = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &b, &e, perms) != 3) continue;
    if (perms[0] != 'r' || perms[1] != 'w') continue;
    r.begin = b;
    r.end = e;
    r.line = line;
    out.push_back(std::move(r));
  }
  return out;
}

struct Hit {
  size_t key;
  size_t piece;  // which quarter
  uintptr_t at;
  std::string region;
};

struct Scan {
  std::vector<Hit> hits;
  size_t bytes = 0;                  // read and searched
  std::vector<std::string> skipped;  // reserved, not memory in use (ASan's shadow)
};

// Larger writable mappings are reservations (ASan's shadow spans terabytes), not data.
constexpr uintptr_t kMaxRegion = uintptr_t{1} << 36;

// Searches every writable mapping for every key, through /proc/self/mem.
Scan scan_memory(const std::vector<MaskedKey>& keys) {
  Scan s;
  constexpr size_t kChunk = size_t{1} << 20;
  constexpr uintptr_t kPage = 4096;
  // The buffer holds what was read: a hit inside it is a copy of one already reported.
  void* mem = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* buf = static_cast<uint8_t*>(mem);
  const auto in_buf = [&](uintptr_t a) {
    return a + kPiece > reinterpret_cast<uintptr_t>(buf) && a < reinterpret_cast<uintptr_t>(buf) + kChunk;
  };
  const int fd = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  for (const Region& r : writable_regions()) {
    if (r.end - r.begin > kMaxRegion) {
      s.skipped.push_back(r.line);
      continue;
    }
    for (uintptr_t pos = r.begin; pos < r.end;) {
      const size_t want = static_cast<size_t>(std::min<uintptr_t>(kChunk, r.end - pos));
      const ssize_t got = pread(fd, buf, want, static_cast<off_t>(pos));
      if (got <= 0) {  // an unreadable page (a guard page): on to the next one
        pos = (pos | (kPage - 1)) + 1;
        continue;
      }
      const size_t n = static_cast<size_t>(got);
      s.bytes += n;
      for (size_t k = 0; k < keys.size(); ++k) {
        for (size_t q = 0; q < kPieces && n >= kPiece; ++q) {
          // (One byte of a key, alone, is no copy of it.)
          const auto first = static_cast<uint8_t>(keys[k].mask[q * kPiece] ^ keys[k].masked[q * kPiece]);
          const uint8_t* p = buf;
          const uint8_t* last = buf + n - kPiece;
          while (p <= last) {
            p = static_cast<const uint8_t*>(std::memchr(p, first, static_cast<size_t>(last - p) + 1));
            if (!p) break;
            const uintptr_t at = pos + static_cast<uintptr_t>(p - buf);
            if (holds_piece(p, keys[k], q) && !in_buf(at)) s.hits.push_back({k, q, at, r.line});
            ++p;
          }
        }
      }
      if (pos + n >= r.end) break;
      pos += n >= kPiece ? n - (kPiece - 1) : n;  // a piece across two reads is seen whole
    }
  }
  ::close(fd);
  secure_wipe(buf, kChunk);
  munmap(mem, kChunk);
  return s;
}

struct Task {
  std::string name;
  uintptr_t sp = 0;  // 0 when running (the kernel tells only a blocked thread's)
};

// Every thread of the process, named, with its stack pointer.
std::vector<Task> tasks() {
  std::vector<Task> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    Task t;
    std::ifstream(e.path() / "comm") >> t.name;
    t.name += " (" + e.path().filename().string() + ")";
    // /proc/PID/task/TID/syscall: number, six arguments, stack pointer, program counter.
    std::ifstream sc(e.path() / "syscall");
    std::string field;
    for (int i = 0; i < 8 && sc >> field; ++i) {}
    if (sc && field.rfind("0x", 0) == 0) t.sp = std::stoul(field, nullptr, 16);
    out.push_back(std::move(t));
  }
  return out;
}

std::string describe(const Scan& s) {
  std::string out = std::to_string(s.bytes >> 20) + " MiB searched, " + std::to_string(s.skipped.size()) +
                    " reservation(s) skipped\n";
  const auto threads = tasks();
  std::vector<Hit> hits = s.hits;
  std::sort(hits.begin(), hits.end(), [](const Hit& x, const Hit& y) { return x.at < y.at; });
  for (size_t i = 0; i < hits.size(); ++i) {
    const Hit& h = hits[i];
    // A whole key: its four quarters in a row.
    size_t run = 1;
    while (h.piece == 0 && run < kPieces && i + run < hits.size() && hits[i + run].key == h.key &&
           hits[i + run].piece == run && hits[i + run].at == h.at + run * kPiece)
      ++run;
    const bool whole = run == kPieces;
    if (whole) i += kPieces - 1;
    char at[32];
    std::snprintf(at, sizeof at, "0x%lx", static_cast<unsigned long>(h.at));
    out += "key " + std::to_string(h.key) + (whole ? "" : " quarter " + std::to_string(h.piece)) + " at " + at +
           " in " + h.region + "\n";
    Region r;
    std::sscanf(h.region.c_str(), "%lx-%lx", &r.begin, &r.end);
    for (const Task& t : threads) {
      if (t.sp < r.begin || t.sp >= r.end) continue;
      const bool below = h.at < t.sp;
      out += "  on the stack of " + t.name + ", " + std::to_string(below ? t.sp - h.at : h.at - t.sp) +
             (below ? " bytes below its stack pointer (a finished call's frame)\n"
                    : " bytes above its stack pointer, " + std::to_string(r.end - h.at) +
                          " below the top (a live frame, or its thread-local storage)\n");
    }
  }
  return out;
}

struct FakeClock {
  const TimePoint base = Clock::now();
  std::atomic<Clock::rep> offset{0};
  TimePoint now() const { return base + Clock::duration(offset.load()); }
  Clock::duration elapsed() const { return Clock::duration(offset.load()); }
};

using wgtest::eventually;

// Two devices on one fake clock with three crypto workers each; every batch of more than
// one packet goes to a worker, single packets are sealed and opened by the reading threads.
struct Pair {
  FakeClock clock;
  const std::chrono::system_clock::time_point wall_base = std::chrono::system_clock::now();
  wgtest::DevicePair pair{DeviceOptions{
      .workers = 3,
      .inline_batch = 1,
      .clock = [this] { return clock.now(); },
      .wall_clock = [this] {
        return wall_base + std::chrono::duration_cast<std::chrono::system_clock::duration>(clock.elapsed());
      },
      .error_backoff = {}}};
  Device& a = pair.a.dev;
  Device& b = pair.b.dev;
  uint64_t seq = 0;

  void advance(Clock::duration d) {
    clock.offset.fetch_add(d.count());
    REQUIRE(a.clock_moved());
    REQUIRE(b.clock_moved());
  }

  // Bursts both ways: 64 packets of assorted sizes injected at once, all taken.
  void exchange(int rounds) {
    for (int r = 0; r < rounds; ++r) {
      for (auto [from, to] : {std::pair{&pair.a.tun, &pair.b.tun}, std::pair{&pair.b.tun, &pair.a.tun}}) {
        const uint8_t src = from == &pair.a.tun ? 1 : 2;
        for (int i = 0; i < 64; ++i) from->inject(wgtest::ip4_packet(src, 3 - src, seq++, 64 + (i * 37) % 1300));
        for (int i = 0; i < 64; ++i) REQUIRE(to->take(5s));
      }
      // One packet at a time too: sealed and opened where it was read.
      pair.a.tun.inject(wgtest::ip4_packet(1, 2, seq++));
      REQUIRE(pair.b.tun.take(5s));
      pair.b.tun.inject(wgtest::ip4_packet(2, 1, seq++));
      REQUIRE(pair.a.tun.take(5s));
    }
  }

  // The keepalive a owes for b's last packet, waited for until b has it (b, having sent
  // data and heard nothing, would otherwise start a handshake at 15 s).
  void settle() {
    const uint64_t before = pair.b_to_a->stats().rx_bytes.load();
    advance(kKeepaliveTimeout + 1s);
    REQUIRE(eventually([&] { return pair.b_to_a->stats().rx_bytes.load() > before; }));
  }

  // Two sessions with traffic (the second a rekey), every key collected while in use.
  std::vector<MaskedKey> two_sessions() {
    std::vector<MaskedKey> keys;
    exchange(4);
    settle();
    REQUIRE(a.stats().handshakes_completed == 1);
    collect_keys(keys, {pair.a_to_b.get(), pair.b_to_a.get()});
    advance(kRekeyAfterTime);
    exchange(1);  // a's send past REKEY_AFTER_TIME starts the second handshake
    REQUIRE(eventually([&] { return a.stats().handshakes_completed == 2 && b.stats().handshakes_completed == 2; }));
    exchange(4);
    settle();
    collect_keys(keys, {pair.a_to_b.get(), pair.b_to_a.get()});
    REQUIRE(keys.size() == 4);
    // Every key is there to be found while it is in use: the search works.
    const Scan before = scan_memory(keys);
    for (size_t k = 0; k < keys.size(); ++k) {
      for (size_t q = 0; q < kPieces; ++q) {
        INFO("key " << k << " quarter " << q);
        CHECK(std::any_of(before.hits.begin(), before.hits.end(),
                          [&](const Hit& h) { return h.key == k && h.piece == q; }));
      }
    }
    return keys;
  }
};

}  // namespace

TEST_CASE("key zeroing: no byte of a session's keys is left in memory 540 s after its handshake",
          "[keypair][device][clock]") {
  Pair pr;
  const auto keys = pr.two_sessions();
  // Idle until the keys go.
  pr.advance(kRejectAfterTime * 3);
  REQUIRE(eventually([&] { return !pr.pair.a_to_b->has_session_keys() && !pr.pair.b_to_a->has_session_keys(); }));
  CHECK(pr.a.stats().handshakes_completed == 2);
  const Scan s = scan_memory(keys);
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

TEST_CASE("key zeroing: no byte of a removed peer's session keys is left in memory", "[keypair][device]") {
  Pair pr;
  const auto keys = pr.two_sessions();
  const PublicKey a_pub = pr.pair.a.pub(), b_pub = pr.pair.b.pub();
  pr.pair.a_to_b.reset();
  pr.pair.b_to_a.reset();
  pr.a.remove_peer(b_pub);
  pr.b.remove_peer(a_pub);
  const Scan s = scan_memory(keys);
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

TEST_CASE("key zeroing: down() leaves no byte of a session's keys in memory", "[keypair][device]") {
  Pair pr;
  const auto keys = pr.two_sessions();
  pr.a.down();
  pr.b.down();
  CHECK_FALSE(pr.pair.a_to_b->has_session_keys());
  CHECK_FALSE(pr.pair.b_to_a->has_session_keys());
  const Scan s = scan_memory(keys);
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

namespace {

// a's initiation to b, whose device is down, waiting for its response: its handshake
// secrets (and its preshared key) masked, each checked to be found while held.
struct HandshakeInProgress {
  Pair pr;
  std::vector<MaskedKey> keys;

  HandshakeInProgress() {
    PresharedKey psk;
    random_bytes(psk.data(), kKeyLen);
    pr.a.set_preshared_key(*pr.pair.a_to_b, psk);
    pr.b.set_preshared_key(*pr.pair.b_to_a, psk);
    psk.clear();
    scrub_stack();  // the test's own copies
    pr.b.down();
    pr.pair.a.tun.inject(wgtest::ip4_packet(1, 2, 1));  // starts the handshake
    REQUIRE(eventually([&] { return collect(); }));
    const Scan held = scan_memory(keys);
    for (size_t k = 0; k < keys.size(); ++k) {
      INFO("secret " << k);
      CHECK(std::any_of(held.hits.begin(), held.hits.end(), [&](const Hit& h) { return h.key == k; }));
    }
  }
  // The four secrets, once the initiation is made.
  bool collect() {
    std::vector<MaskedKey> now;
    const bool waiting = PeerKeysAccess::each_handshake_secret(
        *pr.pair.a_to_b, [&](const uint8_t* key) { now.push_back(mask_key(key)); });
    if (!waiting) return false;
    keys = std::move(now);
    return true;
  }
};

}  // namespace

TEST_CASE("key zeroing: down() leaves no byte of a handshake in progress", "[keypair][device]") {
  HandshakeInProgress h;
  h.pr.a.down();
  const Scan s = scan_memory({h.keys[0], h.keys[1]});  // chaining key, ephemeral
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

TEST_CASE("key zeroing: a removed peer leaves no byte of its handshake, preshared key or static-static secret",
          "[keypair][device]") {
  HandshakeInProgress h;
  const PublicKey b_pub = h.pr.pair.b.pub(), a_pub = h.pr.pair.a.pub();
  h.pr.pair.a_to_b.reset();
  h.pr.pair.b_to_a.reset();
  h.pr.a.remove_peer(b_pub);
  h.pr.b.remove_peer(a_pub);
  const Scan s = scan_memory(h.keys);
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

TEST_CASE("key zeroing: an initiation sent again leaves no byte of the one before", "[keypair][device][clock]") {
  HandshakeInProgress h;
  const std::vector<MaskedKey> first{h.keys[0], h.keys[1]};
  // REKEY_TIMEOUT later a's timer sends a new initiation, with a new ephemeral key (b,
  // down, has no timers to run).
  h.pr.clock.offset.fetch_add(std::chrono::duration_cast<Clock::duration>(kRekeyTimeout + 1s).count());
  REQUIRE(h.pr.a.clock_moved());
  REQUIRE(eventually([&] { return h.collect() && !same_key(h.keys[1], first[1]); }));
  const Scan s = scan_memory(first);
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
}

namespace {

// A private key set over the UAPI, as `wg set` sends it: generated here, held only masked
// (the key and its 64 hex digits, as two 32-byte halves), the request wiped once sent.
struct UapiKey {
  MaskedKey raw, hex_low, hex_high;

  static UapiKey make() {
    UapiKey k;
    PrivateKey key;
    random_bytes(key.data(), kKeyLen);
    std::string hex = key.to_hex();
    k.raw = mask_key(key.data());
    k.hex_low = mask_key(reinterpret_cast<const uint8_t*>(hex.data()));
    k.hex_high = mask_key(reinterpret_cast<const uint8_t*>(hex.data()) + kKeyLen);
    secure_wipe(hex.data(), hex.size());
    return k;
  }

  // "set=1", "private_key=HEX", "" over a socketpair to uapi::serve on its own thread
  // (which stays mapped, as glibc keeps finished threads' stacks); errno=0 expected.
  void set_on(Device& dev) const {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    std::thread server([&] { uapi::serve(dev, fds[1]); });
    // The client's side, which is another process in real use (wg(8)): its copies are
    // wiped here, byte by byte through volatile so no vector register holds the key, and
    // the stack below this frame zeroed after.
    char request[96] = "set=1\nprivate_key=";
    const size_t at = std::strlen(request);
    volatile char* out = request;
    for (size_t i = 0; i < kKeyLen; ++i) {
      out[at + i] = static_cast<char>(hex_low.masked[i] ^ hex_low.mask[i]);
      out[at + kKeyLen + i] = static_cast<char>(hex_high.masked[i] ^ hex_high.mask[i]);
    }
    std::memcpy(request + at + 2 * kKeyLen, "\n\n", 2);
    const size_t len = at + 2 * kKeyLen + 2;
    const bool sent = ::write(fds[0], request, len) == static_cast<ssize_t>(len);
    secure_wipe(request, sizeof request);
    scrub_stack();
    REQUIRE(sent);
    char reply[16] = {};
    size_t got = 0;
    while (got < 9) {
      const ssize_t n = ::read(fds[0], reply + got, sizeof reply - 1 - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fds[0]);
    server.join();
    ::close(fds[1]);
    CHECK(std::string(reply) == "errno=0\n\n");
  }
};

}  // namespace

// A rotation through the UAPI: the old private key leaves no byte behind, raw or in hex, in
// the UAPI's buffers, the stack of the thread that parsed it, or the device's identity.
TEST_CASE("key zeroing: a private key rotated over the UAPI leaves no copy, raw or in hex",
          "[keypair][device][uapi]") {
  Pair pr;
  pr.exchange(1);
  const UapiKey old_key = UapiKey::make(), new_key = UapiKey::make();
  old_key.set_on(pr.a);
  // The search finds the key the device holds now.
  {
    const Scan held = scan_memory({old_key.raw});
    CHECK_FALSE(held.hits.empty());
  }
  new_key.set_on(pr.a);
  const Scan s = scan_memory({old_key.raw, old_key.hex_low, old_key.hex_high});
  INFO(describe(s));
  CHECK(s.bytes > 0);
  CHECK(s.hits.empty());
  const Scan now = scan_memory({new_key.raw});
  CHECK_FALSE(now.hits.empty());
}

namespace {

// A key and its base64 text, held masked: the raw key, and the 44 characters as two
// overlapping 32-byte windows ([0, 32) and [12, 44)).
struct TextKey {
  MaskedKey raw, b64_head, b64_tail;

  static TextKey make() {
    TextKey k;
    PrivateKey key;
    random_bytes(key.data(), kKeyLen);
    std::string b64 = key.to_base64();
    k.raw = mask_key(key.data());
    k.b64_head = mask_key(reinterpret_cast<const uint8_t*>(b64.data()));
    k.b64_tail = mask_key(reinterpret_cast<const uint8_t*>(b64.data()) + 12);
    secure_wipe(b64.data(), b64.size());
    return k;
  }

  // Writes the 44 characters at `out`, byte by byte (no vector register holds them).
  void put_base64(volatile char* out) const {
    for (size_t i = 0; i < kKeyLen; ++i) out[i] = static_cast<char>(b64_head.masked[i] ^ b64_head.mask[i]);
    for (size_t i = 20; i < kKeyLen; ++i) out[12 + i] = static_cast<char>(b64_tail.masked[i] ^ b64_tail.mask[i]);
  }

  std::vector<MaskedKey> all() const { return {raw, b64_head, b64_tail}; }
};

// A wg-quick file with `priv` and, for the peer `peer`, the preshared key `psk`, written
// in place (as an editor that keeps the file does); the text is wiped once written.
void write_config(const std::string& path, const TextKey& priv, const TextKey& psk, const PublicKey& peer) {
  const std::string pub = peer.to_base64();
  char text[512];
  size_t n = 0;
  auto add = [&](const char* s) {
    const size_t len = std::strlen(s);
    std::memcpy(text + n, s, len);
    n += len;
  };
  add("[Interface]\nPrivateKey = ");
  priv.put_base64(text + n);
  n += 44;
  add("\nAddress = 198.19.0.1/24\n\n[Peer]\nPublicKey = ");
  add(pub.c_str());
  add("\nPresharedKey = ");
  psk.put_base64(text + n);
  n += 44;
  add("\nAllowedIPs = 198.19.0.2/32\n");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && ::write(fd, text, n) == static_cast<ssize_t>(n);
  if (fd >= 0) ::close(fd);
  secure_wipe(text, sizeof text);
  scrub_stack();  // the test's side of the file: not the code under test
  REQUIRE(written);
}

}  // namespace

// SIGHUP's path (programs::reload: the file read, parsed, applied as wg syncconf): after a
// reload to new keys, the old private key and preshared key are nowhere in memory, raw or
// as text, and neither is the peer's preshared key once the peer is removed.
TEST_CASE("key zeroing: a reload to new keys, then a peer removed, leave no old key or preshared key",
          "[keypair][device]") {
  Pair pr;
  pr.exchange(1);
  char dir[] = "/tmp/wgnet-keys.XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/wg0.conf";
  const PublicKey peer = pr.pair.b.pub();
  const TextKey priv1 = TextKey::make(), psk1 = TextKey::make(), priv2 = TextKey::make(), psk2 = TextKey::make();
  const auto load = [](const std::string& p) { return load_config(p); };

  write_config(path, priv1, psk1, peer);
  REQUIRE(programs::reload(pr.a, path, load, "test").ok);
  {
    const Scan held = scan_memory({priv1.raw, psk1.raw});
    CHECK_FALSE(held.hits.empty());  // the search finds the keys in use
  }
  write_config(path, priv2, psk2, peer);
  REQUIRE(programs::reload(pr.a, path, load, "test").ok);
  std::vector<MaskedKey> old;
  for (const TextKey* k : {&priv1, &psk1})
    for (const MaskedKey& m : k->all()) old.push_back(m);
  {
    const Scan s = scan_memory(old);
    INFO("after the reload to new keys: " << describe(s));
    CHECK(s.bytes > 0);
    CHECK(s.hits.empty());
  }
  pr.pair.a_to_b.reset();
  pr.a.remove_peer(peer);
  for (const MaskedKey& m : psk2.all()) old.push_back(m);
  {
    const Scan s = scan_memory(old);
    INFO("after the peer's removal: " << describe(s));
    CHECK(s.hits.empty());
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
}

// The same at the AEAD's level, for one idle thread: its contexts keep the key it used
// last until forget(), and work as before after it.
TEST_CASE("key zeroing: transport::forget wipes the key an idle thread's contexts hold", "[keypair][transport_aead]") {
  std::vector<uint8_t> pt(300, 0x5a), ct(316), expected(316), out(300);
  std::vector<MaskedKey> keys;
  {
    SymmetricKey key;
    random_bytes(key.data(), kKeyLen);
    keys.push_back(mask_key(key.data()));
    crypto::aead_seal(expected.data(), key.data(), 5, pt, {});
  }  // (the key wipes itself)
  const auto with_key = [&](auto&& f) {
    SymmetricKey key;
    for (size_t i = 0; i < kKeyLen; ++i) key.data()[i] = static_cast<uint8_t>(keys[0].masked[i] ^ keys[0].mask[i]);
    f(key.data());
  };

  // A thread that seals and opens once, then waits; and again when told to.
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;  // 1: first use done, 2: go again, 3: second use done
  bool sealed_right[2] = {}, opened[2] = {};
  std::thread t([&] {
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return step == 2; });
      }
      with_key([&](const uint8_t* key) {
        transport::seal(ct.data(), key, 5, pt);
        sealed_right[round] = ct == expected;
        opened[round] = transport::open(out.data(), key, 5, ct) && out == pt;
      });
      std::lock_guard lock(mu);
      step = round == 0 ? 1 : 3;
      cv.notify_all();
    }
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return step == 1; });
  }
  CHECK(sealed_right[0]);
  CHECK(opened[0]);
  const Scan held = scan_memory(keys);
  CHECK_FALSE(held.hits.empty());  // the idle thread's contexts have it

  with_key([](const uint8_t* key) { transport::forget(key); });
  const Scan s = scan_memory(keys);
  INFO(describe(s));
  CHECK(s.hits.empty());

  {
    std::lock_guard lock(mu);
    step = 2;
    cv.notify_all();
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return step == 3; });
  }
  t.join();
  CHECK(sealed_right[1]);
  CHECK(opened[1]);
}

// forget() takes each context's lock: threads sealing and opening under the key it wipes
// get every packet right (the key is set again where it was wiped).
TEST_CASE("key zeroing: transport::forget while other threads seal and open", "[keypair][transport_aead]") {
  uint8_t key[kKeyLen];
  random_bytes(key, sizeof key);
  constexpr int kPackets = 20000;
  std::vector<uint8_t> pt(200, 0x33);
  std::vector<std::vector<uint8_t>> expected(16, std::vector<uint8_t>(216));
  for (uint64_t c = 0; c < expected.size(); ++c) crypto::aead_seal(expected[c].data(), key, c, pt, {});
  std::atomic<int> wrong{0}, running{2};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&] {
      std::vector<uint8_t> ct(216), out(200);
      for (int n = 0; n < kPackets; ++n) {
        const uint64_t c = static_cast<uint64_t>(n) % expected.size();
        transport::seal(ct.data(), key, c, pt);
        if (ct != expected[c] || !transport::open(out.data(), key, c, ct) || out != pt) wrong.fetch_add(1);
      }
      running.fetch_sub(1);
    });
  int forgets = 0;
  while (running.load() > 0) {
    transport::forget(key);
    ++forgets;
  }
  for (auto& t : threads) t.join();
  secure_wipe(key, sizeof key);
  CHECK(forgets > 0);
  CHECK(wrong.load() == 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
// zmm16-31 as they are, where OpenSSL's AVX-512 ChaCha20 keeps its key. (This file's code
// is not built for AVX-512, so nothing of the test's own is in them.)
[[gnu::target("avx512f"), gnu::noinline]] void read_zmm16_31(uint8_t* out) {
  asm volatile(
      "vmovdqu64 %%zmm16, 0(%0)\n\tvmovdqu64 %%zmm17, 64(%0)\n\tvmovdqu64 %%zmm18, 128(%0)\n\t"
      "vmovdqu64 %%zmm19, 192(%0)\n\tvmovdqu64 %%zmm20, 256(%0)\n\tvmovdqu64 %%zmm21, 320(%0)\n\t"
      "vmovdqu64 %%zmm22, 384(%0)\n\tvmovdqu64 %%zmm23, 448(%0)\n\tvmovdqu64 %%zmm24, 512(%0)\n\t"
      "vmovdqu64 %%zmm25, 576(%0)\n\tvmovdqu64 %%zmm26, 640(%0)\n\tvmovdqu64 %%zmm27, 704(%0)\n\t"
      "vmovdqu64 %%zmm28, 768(%0)\n\tvmovdqu64 %%zmm29, 832(%0)\n\tvmovdqu64 %%zmm30, 896(%0)\n\t"
      "vmovdqu64 %%zmm31, 960(%0)" ::"r"(out)
      : "memory");
}

// Vector registers are saved to memory that nobody wipes: by glibc's lazy symbol binding
// (every register, on the stack), by a signal frame. So after a packet none may hold the
// key, whole or a quarter of it.
TEST_CASE("key zeroing: no vector register holds the key after a packet is sealed or opened",
          "[keypair][transport_aead]") {
  if (!__builtin_cpu_supports("avx512f")) WGNET_SKIP("no AVX-512: OpenSSL does not use zmm16-31 here");
  std::vector<uint8_t> pt(300, 0x5a), ct(316), out(300);
  MaskedKey k;
  {
    SymmetricKey key;
    random_bytes(key.data(), kKeyLen);
    k = mask_key(key.data());
  }
  uint8_t regs[2][16 * 64];
  {
    SymmetricKey key;
    for (size_t i = 0; i < kKeyLen; ++i) key.data()[i] = static_cast<uint8_t>(k.masked[i] ^ k.mask[i]);
    for (size_t size : {size_t{0}, size_t{64}, pt.size()}) {
      transport::seal(ct.data(), key.data(), 1, std::span(pt.data(), size));
      read_zmm16_31(regs[0]);
      REQUIRE(transport::open(out.data(), key.data(), 1, std::span(ct.data(), size + kAeadTagLen)));
      read_zmm16_31(regs[1]);
      std::string found;
      for (size_t r = 0; r < 2; ++r)
        for (size_t at = 0; at + kPiece <= sizeof regs[r]; ++at)
          for (size_t q = 0; q < kPieces; ++q)
            if (holds_piece(regs[r] + at, k, q))
              found += std::string(r ? "open" : "seal") + ": zmm" + std::to_string(16 + at / 64) + " byte " +
                       std::to_string(at % 64) + " holds quarter " + std::to_string(q) + "\n";
      INFO(size << " bytes\n" << found);
      CHECK(found.empty());
    }
  }
  secure_wipe(regs, sizeof regs);
}
#endif

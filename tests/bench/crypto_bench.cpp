// Cost of WireGuard's cryptography on one thread: Noise handshakes per second, transport
// ChaCha20-Poly1305 through libsodium (crypto::aead_*), through OpenSSL 3's EVP AEAD
// directly, and through wg::transport (what the pipeline calls: OpenSSL's ChaCha20 and
// Poly1305 composed by hand), and the BLAKE2s primitives, so the code that serves bulk
// transport is chosen by data.
#include <benchmark/benchmark.h>

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "wg/crypto.hpp"
#include "wg/messages.hpp"
#include "wg/noise.hpp"
#include "wg/transport_aead.hpp"

namespace {

using namespace std::chrono_literals;
using wg::noise::Handshake;
using wg::noise::Identity;
using wg::noise::Tai64n;

// --- handshakes --------------------------------------------------------------------------

// Alice (initiator) and Bob (responder), each with its handshake state for the other, as
// in tests/unit/noise_test.cpp.
struct Pair {
  Identity alice = Identity::from_private(wg::crypto::generate_private_key());
  Identity bob = Identity::from_private(wg::crypto::generate_private_key());
  Handshake a;  // Alice's state for Bob
  Handshake b;  // Bob's state for Alice
  wg::TimePoint now = wg::TimePoint{} + 1000h;
  uint64_t second = 0x400000006553f100;

  Pair() {
    a.remote_static = bob.public_key;
    a.set_keys(alice);
    b.remote_static = alice.public_key;
    b.set_keys(bob);
  }

  // A strictly increasing TAI64N label, so every initiation passes the replay rule.
  Tai64n next_timestamp() {
    ++second;
    Tai64n t{};
    for (int i = 0; i < 8; ++i) t[i] = static_cast<uint8_t>(second >> (56 - 8 * i));
    return t;
  }
};

// One whole handshake: both sides' work, ephemeral key generation included (4 X25519
// on each side plus 2 public-key derivations). mac1/mac2 are left out; they are one
// keyed BLAKE2s each (see BM_blake2s_mac).
void BM_handshake_full(benchmark::State& state) {
  Pair p;
  uint32_t index = 1;
  for (auto _ : state) {
    wg::MessageInitiation init;
    wg::MessageResponse resp;
    bool ok = wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(),
                                           p.next_timestamp(), index, init);
    auto in = wg::noise::consume_initiation(init, p.bob);
    ok = ok && in;
    // Past the 20 ms flood window, as a real peer's next initiation would be.
    p.now += 1s;
    ok = ok && wg::noise::accept_initiation(p.b, *in, p.now) == wg::noise::AcceptResult::accepted;
    ok = ok && wg::noise::create_response(p.b, wg::crypto::generate_private_key(), index + 1, resp);
    ok = ok && wg::noise::consume_response(p.a, p.alice, resp);
    auto ik = wg::noise::derive_session(p.a);
    auto rk = wg::noise::derive_session(p.b);
    if (!ok || !ik || !rk || !(ik->send == rk->receive)) {
      state.SkipWithError("handshake failed");
      break;
    }
    benchmark::DoNotOptimize(ik->send.data());
    index += 2;
  }
  state.SetItemsProcessed(state.iterations());
}

// The initiator's first step alone (ephemeral generation included).
void BM_handshake_initiation_create(benchmark::State& state) {
  Pair p;
  const Tai64n ts = p.next_timestamp();
  wg::MessageInitiation init;
  for (auto _ : state) {
    if (!wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(), ts, 1, init)) {
      state.SkipWithError("create_initiation failed");
      break;
    }
    benchmark::DoNotOptimize(&init);
  }
  state.SetItemsProcessed(state.iterations());
}

// What the responder's handshake worker pays per initiation before matching it to a peer
// (after mac1): consume_initiation is stateless, so the same message is reused.
void BM_handshake_initiation_consume(benchmark::State& state) {
  Pair p;
  wg::MessageInitiation init;
  if (!wg::noise::create_initiation(p.a, p.alice, wg::crypto::generate_private_key(), p.next_timestamp(), 1,
                                    init)) {
    state.SkipWithError("create_initiation failed");
    return;
  }
  for (auto _ : state) {
    auto in = wg::noise::consume_initiation(init, p.bob);
    if (!in) {
      state.SkipWithError("consume_initiation failed");
      break;
    }
    benchmark::DoNotOptimize(in->chaining_key.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_x25519(benchmark::State& state) {
  const wg::PrivateKey priv = wg::crypto::generate_private_key();
  const wg::PublicKey pub = wg::crypto::public_key(wg::crypto::generate_private_key());
  for (auto _ : state) {
    auto shared = wg::crypto::x25519(priv, pub);
    benchmark::DoNotOptimize(shared->data());
  }
  state.SetItemsProcessed(state.iterations());
}

// --- transport AEAD ----------------------------------------------------------------------

// WireGuard's transport nonce: 4 zero bytes || 64-bit little-endian counter.
void wg_nonce(uint8_t nonce[12], uint64_t counter) {
  std::memset(nonce, 0, 4);
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
}

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter>;

// One EVP context per direction, reused for every packet of one key (one per thread in a
// pipeline). Per packet only the IV changes, unless `rekey` is set: then the key is loaded
// again too, as one context serving many keypairs would have to.
class OpensslAead {
public:
  OpensslAead(const uint8_t key[wg::kKeyLen], bool rekey) : rekey_(rekey) {
    std::memcpy(key_, key, sizeof key_);
    ok_ = enc_ && dec_ &&
          EVP_EncryptInit_ex(enc_.get(), EVP_chacha20_poly1305(), nullptr, key_, nullptr) == 1 &&
          EVP_DecryptInit_ex(dec_.get(), EVP_chacha20_poly1305(), nullptr, key_, nullptr) == 1;
  }
  ~OpensslAead() { wg::secure_wipe(key_, sizeof key_); }
  bool ok() const { return ok_; }

  // dst holds n + 16 bytes. Transport data has no associated data.
  bool seal(uint8_t* dst, uint64_t counter, const uint8_t* src, size_t n) {
    uint8_t iv[12];
    wg_nonce(iv, counter);
    int len = 0, fin = 0;
    return EVP_EncryptInit_ex(enc_.get(), nullptr, nullptr, rekey_ ? key_ : nullptr, iv) == 1 &&
           EVP_EncryptUpdate(enc_.get(), dst, &len, src, static_cast<int>(n)) == 1 &&
           EVP_EncryptFinal_ex(enc_.get(), dst + len, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(enc_.get(), EVP_CTRL_AEAD_GET_TAG, wg::kAeadTagLen, dst + n) == 1;
  }

  // src holds n bytes including the 16-byte tag; dst gets n - 16.
  bool open(uint8_t* dst, uint64_t counter, const uint8_t* src, size_t n) {
    if (n < wg::kAeadTagLen) return false;
    const size_t plain = n - wg::kAeadTagLen;
    uint8_t iv[12];
    wg_nonce(iv, counter);
    int len = 0, fin = 0;
    return EVP_DecryptInit_ex(dec_.get(), nullptr, nullptr, rekey_ ? key_ : nullptr, iv) == 1 &&
           EVP_CIPHER_CTX_ctrl(dec_.get(), EVP_CTRL_AEAD_SET_TAG, wg::kAeadTagLen,
                               const_cast<uint8_t*>(src + plain)) == 1 &&
           EVP_DecryptUpdate(dec_.get(), dst, &len, src, static_cast<int>(plain)) == 1 &&
           EVP_DecryptFinal_ex(dec_.get(), dst + len, &fin) == 1;
  }

private:
  CipherCtx enc_{EVP_CIPHER_CTX_new()}, dec_{EVP_CIPHER_CTX_new()};
  uint8_t key_[wg::kKeyLen];
  bool rekey_;
  bool ok_ = false;
};

struct AeadData {
  wg::SymmetricKey key;
  std::vector<uint8_t> plain, sealed, out;
  explicit AeadData(size_t n) : plain(n), sealed(n + wg::kAeadTagLen), out(n + wg::kAeadTagLen) {
    wg::random_bytes(key.data(), key.size());
    wg::random_bytes(plain.data(), plain.size());
    wg::crypto::aead_seal(sealed.data(), key.data(), 7, plain, {});
  }
};

// The two libraries must agree byte for byte, or their speeds are not comparable.
bool openssl_matches_sodium(AeadData& d, OpensslAead& ossl) {
  std::vector<uint8_t> mine(d.sealed.size()), back(d.plain.size());
  return ossl.seal(mine.data(), 7, d.plain.data(), d.plain.size()) && mine == d.sealed &&
         ossl.open(back.data(), 7, d.sealed.data(), d.sealed.size()) && back == d.plain;
}

void BM_aead_seal_sodium(benchmark::State& state) {
  AeadData d(static_cast<size_t>(state.range(0)));
  uint64_t counter = 0;
  for (auto _ : state) {
    wg::crypto::aead_seal(d.out.data(), d.key.data(), counter++, d.plain, {});
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_aead_open_sodium(benchmark::State& state) {
  AeadData d(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    // The same packet each time: the replay window is not the AEAD's business.
    if (!wg::crypto::aead_open(d.out.data(), d.key.data(), 7, d.sealed, {})) {
      state.SkipWithError("aead_open failed");
      break;
    }
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void openssl_seal(benchmark::State& state, bool rekey) {
  AeadData d(static_cast<size_t>(state.range(0)));
  OpensslAead ossl(d.key.data(), rekey);
  if (!ossl.ok() || !openssl_matches_sodium(d, ossl)) {
    state.SkipWithError("OpenSSL ChaCha20-Poly1305 disagrees with libsodium");
    return;
  }
  uint64_t counter = 0;
  for (auto _ : state) {
    if (!ossl.seal(d.out.data(), counter++, d.plain.data(), d.plain.size())) {
      state.SkipWithError("EVP seal failed");
      break;
    }
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void openssl_open(benchmark::State& state, bool rekey) {
  AeadData d(static_cast<size_t>(state.range(0)));
  OpensslAead ossl(d.key.data(), rekey);
  if (!ossl.ok() || !openssl_matches_sodium(d, ossl)) {
    state.SkipWithError("OpenSSL ChaCha20-Poly1305 disagrees with libsodium");
    return;
  }
  for (auto _ : state) {
    if (!ossl.open(d.out.data(), 7, d.sealed.data(), d.sealed.size())) {
      state.SkipWithError("EVP open failed");
      break;
    }
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// What the pipeline calls: one thread's contexts, keyed once, a new nonce per packet.
void BM_aead_seal_transport(benchmark::State& state) {
  AeadData d(static_cast<size_t>(state.range(0)));
  uint64_t counter = 0;
  for (auto _ : state) {
    wg::transport::seal(d.out.data(), d.key.data(), counter++, d.plain);
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_aead_open_transport(benchmark::State& state) {
  AeadData d(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    if (!wg::transport::open(d.out.data(), d.key.data(), 7, d.sealed)) {
      state.SkipWithError("transport::open failed");
      break;
    }
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_aead_seal_openssl(benchmark::State& state) { openssl_seal(state, false); }
void BM_aead_open_openssl(benchmark::State& state) { openssl_open(state, false); }
void BM_aead_seal_openssl_rekey(benchmark::State& state) { openssl_seal(state, true); }
void BM_aead_open_openssl_rekey(benchmark::State& state) { openssl_open(state, true); }

// --- BLAKE2s -----------------------------------------------------------------------------

void BM_blake2s_hash32(benchmark::State& state) {
  std::array<uint8_t, 32> in{};
  uint8_t out[wg::kHashLen];
  for (auto _ : state) {
    wg::crypto::hash(out, in);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

// mac1 covers the first 116 bytes of an initiation.
void BM_blake2s_mac(benchmark::State& state) {
  std::array<uint8_t, 32> key{};
  std::array<uint8_t, wg::kInitiationMac1Offset> msg{};
  uint8_t out[wg::kMacLen];
  for (auto _ : state) {
    wg::crypto::mac(out, key, msg);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_blake2s_hmac32(benchmark::State& state) {
  std::array<uint8_t, 32> key{}, data{};
  uint8_t out[wg::kHashLen];
  for (auto _ : state) {
    wg::crypto::hmac(out, key, data);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

// KDF_n with n = range(0) outputs: n + 1 HMACs.
void BM_kdf(benchmark::State& state) {
  std::array<uint8_t, 32> ck{}, input{};
  uint8_t o1[32], o2[32], o3[32];
  const auto n = state.range(0);
  for (auto _ : state) {
    wg::crypto::kdf(ck, input, o1, n >= 2 ? o2 : nullptr, n >= 3 ? o3 : nullptr);
    benchmark::DoNotOptimize(o1);
    benchmark::DoNotOptimize(o2);
    benchmark::DoNotOptimize(o3);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_handshake_full);
BENCHMARK(BM_handshake_initiation_create);
BENCHMARK(BM_handshake_initiation_consume);
BENCHMARK(BM_x25519);

BENCHMARK(BM_aead_seal_sodium)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_seal_openssl)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_seal_transport)->Arg(0)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_seal_openssl_rekey)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_open_sodium)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_open_openssl)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_open_transport)->Arg(0)->Arg(64)->Arg(1420)->Arg(9000);
BENCHMARK(BM_aead_open_openssl_rekey)->Arg(64)->Arg(1420)->Arg(9000);

BENCHMARK(BM_blake2s_hash32);
BENCHMARK(BM_blake2s_mac);
BENCHMARK(BM_blake2s_hmac32);
BENCHMARK(BM_kdf)->Arg(1)->Arg(2)->Arg(3);

}  // namespace

BENCHMARK_MAIN();

// Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s as in the paper's section 5.4.
#include "wg/noise.hpp"

#include <cstring>

namespace wg::noise {
namespace {

constexpr char kConstruction[] = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
constexpr char kIdentifier[] = "WireGuard v1 zx2c4 Jason@zx2c4.com";

using Span = std::span<const uint8_t>;

Span bytes(const char* s) { return {reinterpret_cast<const uint8_t*>(s), std::strlen(s)}; }
template <class K>
Span bytes(const K& k) { return {k.data(), k.size()}; }

struct InitialState {
  uint8_t chaining_key[kHashLen];
  uint8_t hash[kHashLen];
  InitialState() {
    crypto::hash(chaining_key, bytes(kConstruction));
    crypto::hash(hash, Span(chaining_key, kHashLen), bytes(kIdentifier));
  }
};
const InitialState& initial() {
  static const InitialState s;
  return s;
}

// h = HASH(h || data)
void mix_hash(uint8_t h[kHashLen], Span data) { crypto::hash(h, Span(h, kHashLen), data); }

// ck = KDF1(ck, data)
void mix_key(SymmetricKey& ck, Span data) { crypto::kdf(bytes(ck), data, ck.data()); }

// Noise's EncryptAndHash: seals under `key`, nonce 0, ad = h; out holds plain and tag.
template <size_t N>
void encrypt_and_hash(uint8_t h[kHashLen], const SymmetricKey& key, Span plain, uint8_t (&out)[N]) {
  crypto::aead_seal(out, key.data(), 0, plain, Span(h, kHashLen));
  mix_hash(h, Span(out, N));
}

// Noise's DecryptAndHash: false, and the hash unchanged, if `in` does not open.
template <size_t N>
bool decrypt_and_hash(uint8_t h[kHashLen], const SymmetricKey& key, const uint8_t (&in)[N], uint8_t* plain) {
  if (!crypto::aead_open(plain, key.data(), 0, Span(in, N), Span(h, kHashLen))) return false;
  mix_hash(h, Span(in, N));
  return true;
}

// (ck, key) = KDF2(ck, dh)
void mix_dh(SymmetricKey& ck, SymmetricKey& key, const SymmetricKey& dh) {
  crypto::kdf(bytes(ck), bytes(dh), ck.data(), key.data());
}

// Wipes the stack below its caller: libb2's blake2s_final leaves KDF output there.
[[gnu::noinline]] void wipe_stack_below() {
  uint8_t area[4096];
  secure_wipe(area, sizeof area);
}

}  // namespace

Tai64n tai64n(std::chrono::system_clock::time_point t) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since - secs).count();
  // TAI is 10 s ahead of UTC at the epoch; implementations add 2^62 + 10.
  uint64_t s = 0x400000000000000aull + static_cast<uint64_t>(secs.count());
  uint32_t n = static_cast<uint32_t>(nanos) & ~((1u << 24) - 1);
  Tai64n out;
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(s >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(n >> (24 - 8 * i));
  return out;
}

bool tai64n_after(const Tai64n& a, const Tai64n& b) {
  return std::memcmp(a.data(), b.data(), a.size()) > 0;
}

Identity Identity::from_private(const PrivateKey& k) { return {k, crypto::public_key(k)}; }

void Handshake::set_keys(const Identity& local) {
  auto ss = crypto::x25519(local.private_key, remote_static);
  if (ss) precomputed_static_static = *ss;
  else precomputed_static_static.clear();
  static_static_local = local.public_key;
}

const SymmetricKey& Handshake::static_static(const Identity& local) {
  if (!static_static_local || !(*static_static_local == local.public_key))
    set_keys(local);
  return precomputed_static_static;
}

void Handshake::invalidate_keys() {
  precomputed_static_static.clear();
  static_static_local.reset();
}

void Handshake::clear() {
  state = State::zeroed;
  secure_wipe(hash, sizeof hash);
  chaining_key.clear();
  local_ephemeral.clear();
  remote_ephemeral.clear();
  local_index = 0;
  remote_index = 0;
}

namespace {

// Our ephemeral key goes out in the clear and into the chain.
void send_ephemeral(Handshake& hs, const PrivateKey& ephemeral, uint8_t (&field)[kKeyLen]) {
  hs.local_ephemeral = ephemeral;
  PublicKey eph_pub = crypto::public_key(ephemeral);
  std::memcpy(field, eph_pub.data(), kKeyLen);
  mix_key(hs.chaining_key, bytes(eph_pub));
  mix_hash(hs.hash, bytes(eph_pub));
}

}  // namespace

bool create_initiation(Handshake& hs, const Identity& local, const PrivateKey& ephemeral,
                       const Tai64n& timestamp, uint32_t sender_index, MessageInitiation& out) {
  if (hs.static_static(local).is_zero()) return false;
  std::memcpy(hs.hash, initial().hash, kHashLen);
  std::memcpy(hs.chaining_key.data(), initial().chaining_key, kHashLen);
  mix_hash(hs.hash, bytes(hs.remote_static));

  std::memset(&out, 0, sizeof out);
  out.type = static_cast<uint32_t>(MessageType::initiation);
  out.sender = sender_index;

  send_ephemeral(hs, ephemeral, out.ephemeral);

  auto es = crypto::x25519(ephemeral, hs.remote_static);
  if (!es) return false;
  SymmetricKey key;
  mix_dh(hs.chaining_key, key, *es);
  encrypt_and_hash(hs.hash, key, bytes(local.public_key), out.encrypted_static);

  mix_dh(hs.chaining_key, key, hs.precomputed_static_static);
  encrypt_and_hash(hs.hash, key, Span(timestamp.data(), timestamp.size()), out.encrypted_timestamp);

  hs.local_index = sender_index;
  hs.state = State::initiation_created;
  return true;
}

std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local,
                                                     const StaticStaticLookup& lookup) {
  if (msg.type != static_cast<uint32_t>(MessageType::initiation)) return std::nullopt;
  ConsumedInitiation in;
  std::memcpy(in.hash, initial().hash, kHashLen);
  std::memcpy(in.chaining_key.data(), initial().chaining_key, kHashLen);
  mix_hash(in.hash, bytes(local.public_key));

  std::memcpy(in.remote_ephemeral.data(), msg.ephemeral, kKeyLen);
  mix_key(in.chaining_key, bytes(in.remote_ephemeral));
  mix_hash(in.hash, bytes(in.remote_ephemeral));

  auto es = crypto::x25519(local.private_key, in.remote_ephemeral);
  if (!es) return std::nullopt;
  SymmetricKey key;
  mix_dh(in.chaining_key, key, *es);
  if (!decrypt_and_hash(in.hash, key, msg.encrypted_static, in.remote_static.data())) return std::nullopt;

  auto ss = lookup(in.remote_static);
  if (!ss || ss->is_zero()) return std::nullopt;
  mix_dh(in.chaining_key, key, *ss);
  if (!decrypt_and_hash(in.hash, key, msg.encrypted_timestamp, in.timestamp.data())) return std::nullopt;
  in.remote_index = msg.sender;
  return in;
}

std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local) {
  return consume_initiation(msg, local, [&](const PublicKey& remote) {
    return crypto::x25519(local.private_key, remote);
  });
}

AcceptResult accept_initiation(Handshake& hs, const ConsumedInitiation& in, TimePoint now) {
  if (!tai64n_after(in.timestamp, hs.latest_timestamp)) return AcceptResult::replayed;
  if (hs.last_initiation_consumption && now - *hs.last_initiation_consumption < kHandshakeInitiationRate)
    return AcceptResult::flood;
  std::memcpy(hs.hash, in.hash, kHashLen);
  hs.chaining_key = in.chaining_key;
  hs.remote_ephemeral = in.remote_ephemeral;
  hs.remote_index = in.remote_index;
  hs.latest_timestamp = in.timestamp;
  hs.last_initiation_consumption = now;
  hs.local_ephemeral.clear();
  hs.state = State::initiation_consumed;
  return AcceptResult::accepted;
}

bool create_response(Handshake& hs, const PrivateKey& ephemeral, uint32_t sender_index,
                     MessageResponse& out) {
  if (hs.state != State::initiation_consumed) return false;
  std::memset(&out, 0, sizeof out);
  out.type = static_cast<uint32_t>(MessageType::response);
  out.sender = sender_index;
  out.receiver = hs.remote_index;

  send_ephemeral(hs, ephemeral, out.ephemeral);

  auto ee = crypto::x25519(ephemeral, hs.remote_ephemeral);
  if (!ee) return false;
  mix_key(hs.chaining_key, bytes(*ee));
  auto se = crypto::x25519(ephemeral, hs.remote_static);
  if (!se) return false;
  mix_key(hs.chaining_key, bytes(*se));

  uint8_t tau[kHashLen];
  SymmetricKey key;
  crypto::kdf(bytes(hs.chaining_key), bytes(hs.preshared_key), hs.chaining_key.data(), tau,
              key.data());
  mix_hash(hs.hash, Span(tau, kHashLen));
  secure_wipe(tau, sizeof tau);
  encrypt_and_hash(hs.hash, key, {}, out.encrypted_nothing);

  hs.local_index = sender_index;
  hs.state = State::response_created;
  return true;
}

bool consume_response(Handshake& hs, const Identity& local, const MessageResponse& msg) {
  if (msg.type != static_cast<uint32_t>(MessageType::response)) return false;
  if (hs.state != State::initiation_created || msg.receiver != hs.local_index) return false;

  // Work on copies: a forged response must not disturb the pending handshake.
  uint8_t hash[kHashLen];
  std::memcpy(hash, hs.hash, kHashLen);
  SymmetricKey ck = hs.chaining_key;
  PublicKey remote_eph;
  std::memcpy(remote_eph.data(), msg.ephemeral, kKeyLen);
  mix_key(ck, bytes(remote_eph));
  mix_hash(hash, bytes(remote_eph));

  auto ee = crypto::x25519(hs.local_ephemeral, remote_eph);
  if (!ee) return false;
  mix_key(ck, bytes(*ee));
  auto se = crypto::x25519(local.private_key, remote_eph);
  if (!se) return false;
  mix_key(ck, bytes(*se));

  uint8_t tau[kHashLen];
  SymmetricKey key;
  crypto::kdf(bytes(ck), bytes(hs.preshared_key), ck.data(), tau, key.data());
  mix_hash(hash, Span(tau, kHashLen));
  secure_wipe(tau, sizeof tau);
  uint8_t nothing[1];
  if (!decrypt_and_hash(hash, key, msg.encrypted_nothing, nothing)) {
    secure_wipe(hash, sizeof hash);
    return false;
  }

  std::memcpy(hs.hash, hash, kHashLen);
  secure_wipe(hash, sizeof hash);
  hs.chaining_key = ck;
  hs.remote_ephemeral = remote_eph;
  hs.remote_index = msg.sender;
  hs.state = State::response_consumed;
  return true;
}

std::optional<SessionKeys> derive_session(Handshake& hs) {
  SessionKeys k;
  if (hs.state == State::response_consumed) k.initiator = true;
  else if (hs.state != State::response_created) return std::nullopt;
  SymmetricKey first, second;
  crypto::kdf(bytes(hs.chaining_key), {}, first.data(), second.data());
  wipe_stack_below();
  k.send = k.initiator ? first : second;
  k.receive = k.initiator ? second : first;
  k.local_index = hs.local_index;
  k.remote_index = hs.remote_index;
  hs.clear();
  return k;
}

}  // namespace wg::noise

// Noise_IKpsk2 handshake of WireGuard: create/consume pairs for initiation and response,
// TAI64N timestamps and the derivation of transport keys. Sans-I/O: ephemerals,
// timestamps, indices and `now` are passed in, so a transcript can be replayed exactly.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

#include "wg/crypto.hpp"
#include "wg/messages.hpp"

namespace wg::noise {

// TAI64N label: 8 bytes big-endian seconds (+2^62 + 10), 4 bytes big-endian nanoseconds.
using Tai64n = std::array<uint8_t, 12>;
// From a wall-clock time; nanoseconds are rounded down to 2^24 ns so the timestamp
// does not leak fine timing (as other implementations do).
Tai64n tai64n(std::chrono::system_clock::time_point t);
// Strictly later: the replay rule for initiations.
bool tai64n_after(const Tai64n& a, const Tai64n& b);

struct Identity {
  PrivateKey private_key;
  PublicKey public_key;
  static Identity from_private(const PrivateKey& k);
};

enum class State { zeroed, initiation_created, initiation_consumed, response_created, response_consumed };

// Per-peer handshake state. Owned by the peer and guarded by its handshake mutex.
struct Handshake {
  // Never change while the peer exists (set at configuration).
  PublicKey remote_static;
  PresharedKey preshared_key;
  // Derived from our private key and remote_static; all zero means no handshake possible.
  SymmetricKey precomputed_static_static;
  // The local public key precomputed_static_static belongs to; none until the first
  // handshake computes it (one X25519 each, so adding 65,536 peers does not cost 65,536
  // of them up front, under the device's configuration lock). Checked at every use
  // against the identity the caller holds, so a key change between the caller's copy
  // of the identity and its use cannot leave a secret for the wrong key behind.
  std::optional<PublicKey> static_static_local;

  State state = State::zeroed;
  uint8_t hash[kHashLen] = {};
  SymmetricKey chaining_key;
  PrivateKey local_ephemeral;
  PublicKey remote_ephemeral;
  uint32_t local_index = 0;
  uint32_t remote_index = 0;
  Tai64n latest_timestamp{};
  std::optional<TimePoint> last_initiation_consumption;

  // Recomputes precomputed_static_static for `local`.
  void set_keys(const Identity& local);
  // The static-static secret for `local`, computed first if it was for another key
  // (or none yet); all zero when remote_static is a low-order point.
  const SymmetricKey& static_static(const Identity& local);
  // Forgets precomputed_static_static (the local key changed or went).
  void invalidate_keys();
  // Forgets the ephemeral state (not the static keys nor the replay timestamp).
  void clear();
};

// Fills `out` except mac1/mac2. False when the static-static secret is zero.
bool create_initiation(Handshake& hs, const Identity& local, const PrivateKey& ephemeral,
                       const Tai64n& timestamp, uint32_t sender_index, MessageInitiation& out);

// What an initiation reveals once decrypted, before it is matched to a peer.
struct ConsumedInitiation {
  PublicKey remote_static;
  PublicKey remote_ephemeral;
  uint32_t remote_index = 0;
  Tai64n timestamp{};
  uint8_t hash[kHashLen] = {};
  SymmetricKey chaining_key;
};
// The responder's static-static secret for an initiator's static key (the peer's
// Handshake::static_static), or nothing when no peer has that key.
using StaticStaticLookup = std::function<std::optional<SymmetricKey>(const PublicKey& remote_static)>;
// Decrypts and checks an initiation. `lookup` is asked once, after the initiator's
// static key is decrypted, so a responder that keeps each peer's secret (the Device)
// does one X25519 per initiation instead of two, and an unknown key costs no second.
std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local,
                                                     const StaticStaticLookup& lookup);
// The same with the static-static secret computed here (tests, tools).
std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local);

enum class AcceptResult { accepted, replayed, flood };
// Commits a consumed initiation to the peer's handshake if its timestamp is new and the
// peer has not sent an initiation within the last 20 ms.
AcceptResult accept_initiation(Handshake& hs, const ConsumedInitiation& in, TimePoint now);

// Responder: after accept_initiation. Fills `out` except mac1/mac2.
bool create_response(Handshake& hs, const PrivateKey& ephemeral, uint32_t sender_index,
                     MessageResponse& out);

// Initiator: msg.receiver must equal hs.local_index (the caller found hs by it).
// On failure nothing in hs changes.
bool consume_response(Handshake& hs, const Identity& local, const MessageResponse& msg);

struct SessionKeys {
  SymmetricKey send;
  SymmetricKey receive;
  uint32_t local_index = 0;
  uint32_t remote_index = 0;
  bool initiator = false;
};
// After create_response (responder) or consume_response (initiator): derives the
// transport keys and clears the handshake's ephemeral state.
std::optional<SessionKeys> derive_session(Handshake& hs);

}  // namespace wg::noise

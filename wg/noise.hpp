// WireGuard's Noise_IKpsk2 handshake. Randomness, time and indices are passed in.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

#include "wg/crypto.hpp"
#include "wg/messages.hpp"

namespace wg::noise {

// Big-endian seconds + 2^62 + 10 (8 bytes), then big-endian nanoseconds (4 bytes).
using Tai64n = std::array<uint8_t, 12>;
// Nanoseconds rounded down to 2^24 to hide fine timing.
Tai64n tai64n(std::chrono::system_clock::time_point t);
// Strictly later: an initiation's replay rule.
bool tai64n_after(const Tai64n& a, const Tai64n& b);

struct Identity {
  PrivateKey private_key;
  PublicKey public_key;
  static Identity from_private(const PrivateKey& k);
};

enum class State { zeroed, initiation_created, initiation_consumed, response_created, response_consumed };

// Per-peer handshake state, guarded by the peer's handshake_mu_.
struct Handshake {
  // Constant for the peer's life.
  PublicKey remote_static;
  PresharedKey preshared_key;
  // All zero: no handshake possible.
  SymmetricKey precomputed_static_static;
  // The local key precomputed_static_static is for, checked at each use.
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

  void set_keys(const Identity& local);
  // All zero for a low-order remote_static.
  const SymmetricKey& static_static(const Identity& local);
  void invalidate_keys();
  // Forgets ephemeral state, not the static keys or the replay timestamp.
  void clear();
};

// Fills `out` except mac1/mac2. False when the static-static secret is zero.
bool create_initiation(Handshake& hs, const Identity& local, const PrivateKey& ephemeral,
                       const Tai64n& timestamp, uint32_t sender_index, MessageInitiation& out);

// A decrypted initiation, not yet matched to a peer.
struct ConsumedInitiation {
  PublicKey remote_static;
  PublicKey remote_ephemeral;
  uint32_t remote_index = 0;
  Tai64n timestamp{};
  uint8_t hash[kHashLen] = {};
  SymmetricKey chaining_key;
};
// The peer's Handshake::static_static, or nothing for an unknown key.
using StaticStaticLookup = std::function<std::optional<SymmetricKey>(const PublicKey& remote_static)>;
// `lookup` runs once the initiator's static key is decrypted.
std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local,
                                                     const StaticStaticLookup& lookup);
// For tests and tools.
std::optional<ConsumedInitiation> consume_initiation(const MessageInitiation& msg,
                                                     const Identity& local);

enum class AcceptResult { accepted, replayed, flood };
// Commits the initiation if its timestamp is new and the peer sent none in the last 20 ms.
AcceptResult accept_initiation(Handshake& hs, const ConsumedInitiation& in, TimePoint now);

// Responder: after accept_initiation. Fills `out` except mac1/mac2.
bool create_response(Handshake& hs, const PrivateKey& ephemeral, uint32_t sender_index,
                     MessageResponse& out);

// Initiator: msg.receiver must equal hs.local_index. On failure hs is unchanged.
bool consume_response(Handshake& hs, const Identity& local, const MessageResponse& msg);

struct SessionKeys {
  SymmetricKey send;
  SymmetricKey receive;
  uint32_t local_index = 0;
  uint32_t remote_index = 0;
  bool initiator = false;
};
// After create_response or consume_response; clears the ephemeral state.
std::optional<SessionKeys> derive_session(Handshake& hs);

}  // namespace wg::noise

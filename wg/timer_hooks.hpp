// The data path's decisions, sans-I/O: for each peer event, the timer hooks it runs, in
// the kernel's order, and what the pipeline must do next. Callers hold timers_mu_.
#pragma once

#include <cstdint>

#include "wg/keypair.hpp"
#include "wg/timers.hpp"

namespace wg {

// `retry`: a retransmission, which keeps the attempt count.
void on_initiation_sent(Timers& t, bool retry, TimePoint now);

// Before sending the response; the new session awaits confirmation.
void on_initiation_consumed(Timers& t, TimePoint now);

void on_response_consumed(Timers& t, TimePoint now);

// A transport batch of one keypair, after decryption and replay check.
struct InboundEvent {
  bool authenticated = false;  // some packet passed
  bool data = false;           // some packet was not a keepalive
  bool confirmed_session = false;  // Peer::confirm_session succeeded
};

struct InboundActions {
  bool roam = false;             // adopt the packet's source as endpoint
  bool rekey = false;            // initiate now (keys near REJECT_AFTER_TIME)
  bool send_staged = false;      // a session opened: send what waits
};

InboundActions on_transport_received(Timers& t, const Keypair& kp, const InboundEvent& e, TimePoint now);

// Whether `kp` (null: no session) may seal `nonce`; if not, packets wait for a handshake.
inline bool may_send(const Keypair* kp, uint64_t nonce, TimePoint now) {
  return kp && keypair_can_send(*kp, nonce, now);
}

// Runs before the batch leaves, since the reply's hooks may run before the send returns.
// `data`: not only keepalives.
void on_transport_sent(Timers& t, bool data, TimePoint now);

}  // namespace wg

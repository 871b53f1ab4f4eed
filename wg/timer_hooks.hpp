// For each peer event, the timer hooks in the kernel's order and what the pipeline does
// next. Callers hold timers_mu_.
#pragma once

#include <cstdint>

#include "wg/keypair.hpp"
#include "wg/timers.hpp"

namespace wg {

// A retry keeps the attempt count.
void on_initiation_sent(Timers& t, bool retry, TimePoint now);

// Before sending the response.
void on_initiation_consumed(Timers& t, TimePoint now);

void on_response_consumed(Timers& t, TimePoint now);

// One keypair's batch, after decryption and replay check.
struct InboundEvent {
  bool authenticated = false;  // any packet
  bool data = false;           // any non-keepalive
  bool confirmed_session = false;
};

struct InboundActions {
  bool roam = false;             // adopt the source as endpoint
  bool rekey = false;
  bool send_staged = false;
};

InboundActions on_transport_received(Timers& t, const Keypair& kp, const InboundEvent& e, TimePoint now);

// kp null: no session.
inline bool may_send(const Keypair* kp, uint64_t nonce, TimePoint now) {
  return kp && keypair_can_send(*kp, nonce, now);
}

// Before the batch leaves: the reply's hooks may run before the send returns.
void on_transport_sent(Timers& t, bool data, TimePoint now);

}  // namespace wg

// The data path's decisions, sans-I/O: for each event of a peer's life (a handshake
// message sent or consumed, a transport batch authenticated or sent) the timer hooks it
// runs, in the order the kernel module runs them, and what the pipeline must then do.
// Fed `now` and the peer's Timers (the caller holds the peer's timer mutex); the threaded
// loops in send.cpp and receive.cpp only carry the answers out.
#pragma once

#include <cstdint>

#include "wg/keypair.hpp"
#include "wg/timers.hpp"

namespace wg {

// We sent an initiation; `retry` keeps the attempt count (a retransmission).
void on_initiation_sent(Timers& t, bool retry, TimePoint now);

// We consumed an initiation and are about to send the response: the responder's session
// is derived (it waits for the initiator's first packet to be confirmed).
void on_initiation_consumed(Timers& t, TimePoint now);

// We consumed the response to our initiation: the initiator's session is complete.
void on_response_consumed(Timers& t, TimePoint now);

// A transport batch of one keypair, after decryption and the replay check.
struct InboundEvent {
  bool authenticated = false;  // at least one packet passed decryption and replay
  bool data = false;           // at least one carried a packet (not a keepalive)
  bool confirmed_session = false;  // it confirmed our responder session (Peer::confirm_session)
};

struct InboundActions {
  bool roam = false;             // reply where the authenticated packet came from
  bool rekey = false;            // send an initiation now (keys near REJECT_AFTER_TIME)
  bool send_staged = false;      // a session just opened: what waits for it may go
};

InboundActions on_transport_received(Timers& t, const Keypair& kp, const InboundEvent& e, TimePoint now);

// Before staged packets leave: may `kp` (null: no session) seal the message with `nonce`?
// If not, the packets wait and a handshake is due.
inline bool may_send(const Keypair* kp, uint64_t nonce, TimePoint now) {
  return kp && keypair_can_send(*kp, nonce, now);
}

// A transport batch is about to leave (`data`: it carries a packet, not only a
// keepalive). Its hooks run before it leaves: the answer can be back before the send
// returns, and the answer's hooks must find these done.
void on_transport_sent(Timers& t, bool data, TimePoint now);

}  // namespace wg

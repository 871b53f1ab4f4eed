// Timer hooks per event (timer_hooks.hpp).
#include "wg/timer_hooks.hpp"

namespace wg {

void on_initiation_sent(Timers& t, bool retry, TimePoint now) {
  if (!retry) t.reset_attempts();
  t.handshake_initiated(now);
  t.any_authenticated_packet_sent(now);
  t.any_authenticated_packet_traversal(now);
}

void on_initiation_consumed(Timers& t, TimePoint now) {
  t.any_authenticated_packet_received(now);
  t.any_authenticated_packet_traversal(now);
  t.session_derived(now);
  t.any_authenticated_packet_sent(now);  // the response
}

void on_response_consumed(Timers& t, TimePoint now) {
  t.any_authenticated_packet_received(now);
  t.any_authenticated_packet_traversal(now);
  t.handshake_complete(now);
  t.session_derived(now);
}

InboundActions on_transport_received(Timers& t, const Keypair& kp, const InboundEvent& e, TimePoint now) {
  InboundActions a;
  if (!e.authenticated) return a;
  // Roaming: authenticated traffic shows where the peer is.
  a.roam = true;
  if (e.confirmed_session) {
    t.handshake_complete(now);
    a.send_staged = true;
  }
  t.any_authenticated_packet_received(now);
  t.any_authenticated_packet_traversal(now);
  if (e.data) t.data_received(now);
  // Once per session, shortly before the responder would reject it.
  if (rekey_due_on_receive(kp, now) && !t.sent_lastminute_handshake) {
    t.sent_lastminute_handshake = true;
    a.rekey = true;
  }
  return a;
}

void on_transport_sent(Timers& t, bool data, TimePoint now) {
  t.any_authenticated_packet_sent(now);
  t.any_authenticated_packet_traversal(now);
  if (data) t.data_sent(now);
}

}  // namespace wg

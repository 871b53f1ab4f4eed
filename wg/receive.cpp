// The inbound data path and handshake processing.
//
// Inbound flow:
//  1. bind_receiver reads a batch of datagrams and their senders into pooled buffers.
//  2. Each is classified by type and exact length. Handshake messages are copied to the
//     handshake queue (handshake_worker); transport packets are looked up by receiver
//     index to their keypair and grouped into one batch per keypair.
//  3. Each batch enters its peer's inbound queue (order) and the crypto job queue.
//  4. A worker decrypts the batch in place (decrypt_batch).
//  5. flush_inbound, in order per peer: replay window, session confirmation, timers,
//     roaming, inner source against allowed IPs, then one batched write to the device.
#include <cstring>

#include "wg/device.hpp"
#include "wg/base/log.hpp"
#include "wg/timer_hooks.hpp"
#include "wg/transport_aead.hpp"

namespace wg {
namespace {

std::optional<IpAddress> endpoint_ip(const conn::Endpoint& ep) {
  if (ep.family == 4) return IpAddress::v4(ep.addr.data());
  if (ep.family == 6) return IpAddress::v6(ep.addr.data());
  return std::nullopt;
}

// Length of the IP packet at the front of a decrypted payload (padding removed), or 0
// if it is not a well-formed IPv4/IPv6 header.
size_t inner_packet_length(const uint8_t* p, size_t n) {
  if (n >= 20 && (p[0] >> 4) == 4) {
    size_t total = (size_t{p[2]} << 8) | p[3];
    return total >= 20 && total <= n ? total : 0;
  }
  if (n >= 40 && (p[0] >> 4) == 6) {
    size_t total = ((size_t{p[4]} << 8) | p[5]) + 40;
    return total <= n ? total : 0;
  }
  return 0;
}

}  // namespace

// 1-3. Receive, classify, group. The bind may hand several datagrams out of one buffer
// (a coalesced message, conn::ReceiveFn): each batch entry then points into it and holds
// one share of it (BufferPool::share), and the entry that drops the last share gives the
// buffer back (release_inbound). Buffers no entry took stay for the next receive.
void Device::bind_receiver(conn::ReceiveFn receive) {
  std::array<uint8_t*, kMaxBatch> bufs{};
  std::array<std::span<uint8_t>, kMaxBatch> spans;
  std::array<uint8_t*, kMaxBatch> at{};
  std::array<size_t, kMaxBatch> sizes{};
  std::array<conn::Endpoint, kMaxBatch> eps;
  std::array<uint32_t, kMaxBatch> shares{};   // entries handed on, per buffer
  std::array<Batch*, kMaxBatch> ready{};      // batches of this pass, to hand on at its end
  size_t have = 0;
  ReadDepth depth(batch_);
  if (!buffers_.hold(bufs.data(), have, depth.want(), &receivers_stop_)) {  // stopping
    buffers_.give(bufs.data(), have);
    return;
  }
  unsigned failures = 0;  // receives failed in a row

  for (;;) {
    for (size_t i = 0; i < have; ++i) spans[i] = {bufs[i], kBufferSize};
    std::error_code ec;
    size_t n = receive(std::span(spans.data(), have), std::span(at.data(), have), std::span(sizes.data(), have),
                       std::span(eps.data(), have), ec);
    if (ec) {
      if (!keep_reading_after(ec, failures, "receive", false)) break;
      continue;
    }
    failures = 0;

    // Batches being built in this pass, one per keypair (usually one in all).
    std::array<Batch*, 8> open{};
    size_t open_n = 0, ready_n = 0;
    std::optional<IndexTable::Entry> last;
    uint32_t last_index = 0;
    std::fill_n(shares.begin(), have, 0);
    size_t k = 0;  // the buffer holding datagram i: never after i, never decreasing (ReceiveFn)

    for (size_t i = 0; i < n; ++i) {
      uint8_t* d = at[i];
      const size_t from = k;
      while (k <= i && !(d >= bufs[k] && sizes[i] <= kBufferSize && d + sizes[i] <= bufs[k] + kBufferSize)) ++k;
      if (k > i) {  // not where the bind promised: a bug in it, never a datagram's doing
        log::error("receive: datagram {} of {} outside its buffers, dropped", i, n);
        stats_.dropped_invalid.fetch_add(1, std::memory_order_relaxed);
        k = from;
        continue;
      }
      auto type = classify_message(d, sizes[i]);
      if (!type) {
        stats_.dropped_invalid.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (*type != MessageType::transport) {
        queue_handshake(d, sizes[i], eps[i]);  // copies it
        continue;
      }
      auto h = load_message<MessageTransportHeader>(d);
      if (!last || h.receiver != last_index) {
        last = index_table_.lookup(h.receiver);
        last_index = h.receiver;
      }
      if (!last || !last->keypair) {
        stats_.dropped_invalid.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Batch* b = nullptr;
      for (size_t o = 0; o < open_n; ++o)
        if (open[o]->keypair == last->keypair && open[o]->count < kMaxBatch) b = open[o];
      if (!b) {
        if (open_n == open.size()) {  // many keypairs in one read: close the oldest
          ready[ready_n++] = open[0];
          std::memmove(open.data(), open.data() + 1, (open_n - 1) * sizeof(Batch*));
          --open_n;
        }
        b = open[open_n++] = batches_.take();
        b->kind = Batch::Kind::inbound;
        b->peer = last->peer;
        b->keypair = last->keypair;
      }
      ++shares[k];
      b->owners[b->count] = bufs[k];
      b->bufs[b->count] = d;
      b->sizes[b->count] = sizes[i];
      b->counters[b->count] = h.counter;
      b->sources[b->count++] = eps[i];
    }
    for (size_t o = 0; o < open_n; ++o) ready[ready_n++] = open[o];

    // Every share is counted before any batch is handed on (a worker may drop them at
    // once); the buffers no entry took stay.
    size_t kept = 0;
    for (size_t j = 0; j < have; ++j) {
      if (shares[j] == 0)
        bufs[kept++] = bufs[j];
      else if (shares[j] > 1)
        BufferPool::share(bufs[j], shares[j]);
    }
    depth.used(have - kept, have);
    for (size_t q = 0; q < ready_n; ++q) {
      ready[q]->peer->queue_inbound(PeerAccess{}, ready[q]);
      submit(ready[q]);
    }
    have = kept;
    if (!buffers_.hold(bufs.data(), have, depth.want(), &receivers_stop_)) break;  // stopping
  }
  buffers_.give(bufs.data(), have);
}

// An inbound batch's buffers, each given back when its last entry is done with it.
void Device::release_inbound(Batch& b) {
  std::array<uint8_t*, kMaxBatch> free;
  size_t m = 0;
  for (size_t i = 0; i < b.count; ++i)
    if (BufferPool::drop(b.owners[i])) free[m++] = b.owners[i];
  buffers_.give(free.data(), m);
}

// 4 and 5 for one batch, on a crypto worker or inline.
void Device::decrypt_worker(Batch* b) {
  const PeerPtr peer = b->peer;  // the flush gives b back
  decrypt_batch(*b);
  flush_inbound(*peer, b);
}

// 4. Decrypt in place; sizes become plaintext sizes.
void Device::decrypt_batch(Batch& b) {
  const Keypair& kp = *b.keypair;
  const bool fresh = keypair_can_receive(kp, now());
  for (size_t i = 0; i < b.count; ++i) {
    uint8_t* d = b.bufs[i];
    size_t n = b.sizes[i];
    b.ok[i] = fresh && transport::open(d + kHeadroom, kp.receive.data(), b.counters[i],
                                       std::span<const uint8_t>(d + kHeadroom, n - kHeadroom));
    b.sizes[i] = n - kHeadroom - kAeadTagLen;
  }
}

// 5. In order per peer.
void Device::flush_inbound(Peer& p, Batch* done) {
  p.drain_inbound(PeerAccess{}, done, [&](Batch* b) {
    Keypair& kp = *b->keypair;
    std::array<std::span<uint8_t>, kMaxBatch> out;
    size_t m = 0;
    bool authenticated = false, data = false;
    uint64_t bytes = 0;
    const conn::Endpoint* source = nullptr;
    {
      std::shared_lock cl(config_mu_);
      for (size_t i = 0; i < b->count; ++i) {
        if (!b->ok[i]) {
          stats_.dropped_decrypt.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (!kp.replay.validate(b->counters[i], kRejectAfterMessages)) {
          stats_.dropped_replay.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        authenticated = true;
        source = &b->sources[i];
        bytes += b->sizes[i] + kTransportMinSize;
        if (b->sizes[i] == 0) continue;  // keepalive
        const uint8_t* pkt = b->bufs[i] + kHeadroom;
        size_t len = inner_packet_length(pkt, b->sizes[i]);
        auto src = len ? packet_source(pkt, len) : std::nullopt;
        if (!src) {
          stats_.dropped_invalid.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (allowed_ips_.lookup(*src) != &p) {
          stats_.dropped_source.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        out[m++] = {b->bufs[i], kHeadroom + len};
        data = true;
      }
    }

    if (authenticated && !p.removed()) {
      const auto now = this->now();
      // The responder's new session is confirmed by the initiator's first packet under it.
      const bool confirmed = p.confirm_session(PeerAccess{}, kp);
      InboundActions a;
      const auto deadline = p.with_timers(PeerAccess{}, [&](Timers& t) {
        a = on_transport_received(t, kp, {.authenticated = true, .data = data, .confirmed_session = confirmed}, now);
        return t.next_deadline();
      });
      if (a.roam) store_endpoint(p, source);
      // Counted once the packet's effects on the session and the timers are made.
      p.count_received(PeerAccess{}, bytes);
      if (confirmed) handshake_completed(p, "responder");
      if (a.send_staged) send_staged(p);
      if (a.rekey) send_initiation(p, false);
      if (confirmed)
        timer_list_.poke(p);
      else
        timer_list_.poke_before(p, deadline);
    }
    if (m > 0) {
      std::error_code ec;
      tun_.write(std::span(out.data(), m), kHeadroom, ec);
      if (ec) log::verbose("tun write: {}", ec.message());
    }
    release_inbound(*b);
    batches_.give(b);
  });
}

// --- handshakes ---

// A full queue drops, except that it takes an eighth more of the messages whose mac2
// proves their source address, and of initiations from a peer's known endpoint: past the
// rate at which the handshake thread answers with cookies, a flood from spoofed sources
// fills the queue, and a real peer's cookie-bearing retry (or its rekey from where it
// was) must still get in. The checks (two keyed BLAKE2s unless mac2 is zero, a hash
// lookup) are spent only while the queue is full.
void Device::queue_handshake(const uint8_t* msg, size_t size, const conn::Endpoint& from) {
  const size_t queued = hs_jobs_.size();
  if (queued >= options_.handshake_queue) {  // else admitted without looking
    uint8_t src[18];
    const std::span<const uint8_t> source(src, from.destination_bytes(src));
    const auto type = classify_message(msg, size);
    if (!type || !admission_.may_queue(std::span(msg, size), *type, source, queued, now())) {
      stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  HandshakeJob job;
  std::memcpy(job.data, msg, size);
  job.size = size;
  job.from = from;
  hs_jobs_.push(job);
}

void Device::handshake_worker() {
  size_t left = 0;
  while (auto job = hs_jobs_.pop(&left)) {
    if (closing_) return;  // what is still queued is dropped
    handle_handshake(*job, admission_.under_load(left, now()));
  }
}

void Device::handle_handshake(HandshakeJob& job, bool under_load) {
  auto type = classify_message(job.data, job.size);
  if (!type) return;
  if (*type == MessageType::cookie_reply) {
    consume_cookie_reply(job);
    return;
  }
  {
    std::shared_lock lock(config_mu_);
    if (!identity_) return;
  }
  const std::span<const uint8_t> msg(job.data, job.size);
  uint8_t src[18];
  const std::span<const uint8_t> source(src, job.from.destination_bytes(src));
  const auto now = this->now();
  switch (admission_.admit(msg, *type, source, endpoint_ip(job.from), under_load, now)) {
    case HandshakeAdmission::Verdict::drop:
      stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
      return;
    case HandshakeAdmission::Verdict::cookie_reply: {
      uint32_t sender;
      std::memcpy(&sender, job.data + 4, 4);
      const auto reply = admission_.cookie_reply(msg, sender, source, now);
      send_message(nullptr, &job.from, std::span(reinterpret_cast<const uint8_t*>(&reply), sizeof reply));
      stats_.cookie_replies_sent.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    case HandshakeAdmission::Verdict::consume:
      break;
  }
  stats_.handshakes_computed.fetch_add(1, std::memory_order_relaxed);
  if (*type == MessageType::initiation) consume_initiation_message(job);
  else consume_response_message(job);
}

void Device::consume_initiation_message(HandshakeJob& job) {
  auto msg = load_message<MessageInitiation>(job.data);
  std::shared_ptr<const noise::Identity> id;
  {
    std::shared_lock lock(config_mu_);
    id = identity_;
  }
  if (!id || !up_) return;
  // The peer is found by the static key the initiation reveals, and its kept
  // static-static secret spares the second X25519 (computed here on its first use).
  PeerPtr p;
  auto in = noise::consume_initiation(msg, *id, [&](const PublicKey& remote) -> std::optional<SymmetricKey> {
    p = lookup_peer(remote);
    if (!p) return std::nullopt;
    return p->static_static(PeerAccess{}, *id);
  });
  if (!in || !p) {
    stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto now = this->now();
  MessageResponse resp;
  noise::SessionKeys keys;
  switch (p->answer_initiation(PeerAccess{}, *in, now, resp, keys)) {
    case Peer::Answer::refused:
      stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
      return;
    case Peer::Answer::failed:
      return;
    case Peer::Answer::answered:
      break;
  }
  p->count_received(PeerAccess{}, job.size);
  store_endpoint(*p, &job.from);
  install_keypair(*p, keys, false);
  // The timers before the response leaves: the initiator's first data can be here (and
  // arm the keepalive it is owed) before send_to_peer returns; hooks run after it would
  // cancel that keepalive and date the session's zeroing from later.
  p->with_timers(PeerAccess{}, [&](Timers& t) { on_initiation_consumed(t, now); });
  p->count_sent(PeerAccess{}, sizeof resp);
  send_message(p.get(), nullptr, std::span(reinterpret_cast<const uint8_t*>(&resp), sizeof resp));
  timer_list_.poke(*p);
}

void Device::consume_response_message(HandshakeJob& job) {
  auto msg = load_message<MessageResponse>(job.data);
  auto entry = index_table_.lookup(msg.receiver);
  if (!entry || entry->keypair) {
    stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  PeerPtr p = entry->peer;
  std::shared_ptr<const noise::Identity> id;
  {
    std::shared_lock lock(config_mu_);
    id = identity_;
  }
  if (!id || !up_) return;
  const auto keys = p->consume_response(PeerAccess{}, *id, msg);
  if (!keys) {
    stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto now = this->now();
  p->count_received(PeerAccess{}, job.size);
  store_endpoint(*p, &job.from);
  install_keypair(*p, *keys, true);
  p->with_timers(PeerAccess{}, [&](Timers& t) { on_response_consumed(t, now); });
  handshake_completed(*p, "initiator");
  // Confirm the session to the responder: staged data, or a keepalive.
  send_keepalive(*p);
  timer_list_.poke(*p);
}

void Device::consume_cookie_reply(HandshakeJob& job) {
  auto msg = load_message<MessageCookieReply>(job.data);
  auto entry = index_table_.lookup(msg.receiver);
  if (!entry) return;
  if (entry->peer->consume_cookie_reply(PeerAccess{}, msg, now()))
    stats_.cookie_replies_received.fetch_add(1, std::memory_order_relaxed);
  else
    stats_.dropped_handshake.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace wg

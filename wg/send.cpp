// The outbound data path.
//
// Outbound flow:
//  1. tun_reader reads a batch of plaintext packets from the tun::Device into pooled
//     buffers, kHeadroom bytes in, so the transport header can be prepended in place.
//  2. Each packet is routed by its destination through the allowed-IPs trie to a peer.
//  3. stage_packets appends them to the peer's staged queue; send_staged takes the
//     current keypair (or asks for a handshake), assigns nonces in order and cuts batches.
//  4. Each batch enters the peer's outbound queue (order) and the crypto job queue.
//  5. A worker encrypts the batch in place (encrypt_batch).
//  6. flush_outbound sends finished batches from the head of the peer's queue, in
//     order, through the Bind, and runs the timer hooks.
#include <cstring>

#include "wg/device.hpp"
#include "wg/base/log.hpp"
#include "wg/timer_hooks.hpp"
#include "wg/transport_aead.hpp"

namespace wg {

// 1-2. Read and route; one reader per queue of the device.
void Device::tun_reader(tun::Device& dev) {
  std::array<uint8_t*, kMaxBatch> bufs{};
  std::array<std::span<uint8_t>, kMaxBatch> spans;
  std::array<size_t, kMaxBatch> sizes{};
  size_t have = 0;
  unsigned failures = 0;  // reads failed in a row
  ReadDepth depth(batch_);

  while (!closing_) {
    if (!buffers_.hold(bufs.data(), have, depth.want())) break;  // closing
    for (size_t i = 0; i < have; ++i) spans[i] = {bufs[i], kBufferSize - kTailroom};

    std::error_code ec;
    const size_t n = dev.read(std::span(spans.data(), have), std::span(sizes.data(), have), kHeadroom, ec);
    if (ec) {
      // Logged once per run of failures; a device failing every read is not spun on.
      if (!keep_reading_after(ec, failures, "tun read", true)) break;
      continue;
    }
    failures = 0;
    depth.used(n, have);
    const size_t kept = route_and_stage(bufs.data(), sizes.data(), n);
    for (size_t i = n; i < have; ++i) bufs[kept + i - n] = bufs[i];
    have = kept + (have - n);
  }
  buffers_.give(bufs.data(), have);
}

size_t Device::route_and_stage(uint8_t** bufs, const size_t* sizes, size_t n) {
  std::array<PeerPtr, kMaxBatch> route;
  {
    std::shared_lock lock(config_mu_);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* pkt = bufs[i] + kHeadroom;
      auto dst = packet_destination(pkt, sizes[i]);
      Peer* p = dst ? allowed_ips_.lookup(*dst) : nullptr;
      route[i] = p ? p->shared_from_this() : nullptr;
      if (!p) stats_.dropped_no_route.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Hand each peer its packets in read order; the buffers become the peer's.
  size_t kept = 0;
  std::array<uint8_t*, kMaxBatch> group;
  std::array<size_t, kMaxBatch> group_sizes;
  std::array<bool, kMaxBatch> taken{};
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (!route[i]) {
      bufs[kept++] = bufs[i];  // no peer: reuse the buffer
      continue;
    }
    PeerPtr peer = route[i];
    size_t g = 0;
    for (size_t j = i; j < n; ++j) {
      if (route[j] != peer) continue;
      group[g] = bufs[j];
      group_sizes[g++] = sizes[j];
      route[j].reset();
      taken[j] = true;
    }
    stage_packets(*peer, group.data(), group_sizes.data(), g);
  }
  return kept;
}

// 3. Stage, then send what a session allows.
void Device::stage_packets(Peer& p, uint8_t* const* bufs, const size_t* sizes, size_t n) {
  // They wait (and are bounded) when send_staged will not send them now: the device is
  // down, or no session may seal them.
  const KeypairPtr kp = p.current_keypair(PeerAccess{});
  p.stage(PeerAccess{}, bufs, sizes, n, !up_ || !may_send(kp.get(), kp ? kp->send_nonce.load() : 0, now()));
  send_staged(p);
}

void Device::send_keepalive(Peer& p) {
  p.stage_keepalive(PeerAccess{});
  send_staged(p);
}

void Device::send_staged(Peer& p) {
  if (!up_ || p.removed()) return;
  const KeypairPtr kp = p.current_keypair(PeerAccess{});
  const auto now = this->now();
  bool need_handshake;
  if (!may_send(kp.get(), kp ? kp->send_nonce.load() : 0, now)) {
    need_handshake = p.has_staged(PeerAccess{});  // they wait for the session it makes
  } else {
    // 4. Order first, then parallel crypto.
    auto cut = p.cut_staged(PeerAccess{}, kp, batches_, batch_, [&](Batch* b) { submit(b); });
    need_handshake = cut.nonces_exhausted || (cut.any && rekey_due_on_send(*kp, cut.last_nonce, now));
  }
  if (need_handshake) send_initiation(p, false);
}

// 5 and 6 for one batch, on a crypto worker or inline.
void Device::encrypt_worker(Batch* b) {
  const PeerPtr peer = b->peer;  // the flush gives b back
  encrypt_batch(*b);
  flush_outbound(*peer, b);
}

// 5. Encrypt in place: header in the headroom, zero padding to a multiple of 16 (but
// not past the MTU), tag after. b.ok[i] records whether the packet carried data.
void Device::encrypt_batch(Batch& b) {
  const size_t mtu = static_cast<size_t>(tun_.mtu());
  const Keypair& kp = *b.keypair;
  for (size_t i = 0; i < b.count; ++i) {
    uint8_t* buf = b.bufs[i];
    size_t len = b.sizes[i];
    size_t padded = (len + kTransportPadding - 1) & ~(kTransportPadding - 1);
    if (padded > mtu) padded = std::max(mtu, len);
    std::memset(buf + kHeadroom + len, 0, padded - len);
    MessageTransportHeader h{static_cast<uint32_t>(MessageType::transport), kp.remote_index,
                             b.counters[i]};
    std::memcpy(buf, &h, sizeof h);
    transport::seal(buf + kHeadroom, kp.send.data(), b.counters[i],
                    std::span<const uint8_t>(buf + kHeadroom, padded));
    b.ok[i] = len > 0;
    b.sizes[i] = kHeadroom + padded + kAeadTagLen;
  }
}

// 6. Send in order. Whoever completes the head batch sends it and everything finished
// behind it; a worker that finds a flush under way leaves its batch to that flusher.
void Device::flush_outbound(Peer& p, Batch* done) {
  p.drain_outbound(PeerAccess{}, done, [&](Batch* b) {
    std::array<std::span<const uint8_t>, kMaxBatch> dgrams;
    bool data = false;
    uint64_t bytes = 0;
    for (size_t i = 0; i < b->count; ++i) {
      dgrams[i] = {b->bufs[i], b->sizes[i]};
      data |= b->ok[i];
      bytes += b->sizes[i];
    }
    if (!p.removed()) {
      // The timers first: the answer may be back before send_to_peer returns, and its
      // hooks (any packet received clears the new-handshake timer) must find these done.
      auto now = this->now();
      const auto deadline = p.with_timers(PeerAccess{}, [&](Timers& t) {
        on_transport_sent(t, data, now);
        return t.next_deadline();
      });
      p.count_sent(PeerAccess{}, bytes);
      send_to_peer(p, std::span(dgrams.data(), b->count));
      timer_list_.poke_before(p, deadline);
    }
    buffers_.give(b->bufs.data(), b->count);
    batches_.give(b);
  });
}

void Device::send_to_peer(Peer& p, std::span<const std::span<const uint8_t>> datagrams) {
  std::optional<conn::Endpoint> ep = p.endpoint();
  if (!ep) return;  // no endpoint yet: the peer must reach us first
  bool had_source = ep->has_source;
  std::error_code ec;
  bind_.send(datagrams, *ep, ec);
  if (ec) log::verbose("send to {}: {}", ep->to_string(), ec.message());
  if (had_source && !ep->has_source) p.endpoint_source_failed(PeerAccess{}, *ep);  // the Bind cleared it
}

// A peer whose initiation was refused (nobody listens at its endpoint: it may be starting)
// retries sooner than REKEY_TIMEOUT, and its staged packets go as soon as it answers.
void Device::endpoint_refused(const conn::Endpoint& destination) {
  const auto now = this->now();
  const TimePoint last{Clock::duration(last_initiation_.load(std::memory_order_relaxed))};
  if (now - kRekeyTimeout > last) return;  // not now - last: last starts at min()
  std::vector<PeerPtr> peers;  // copied: no peer lock is taken under config_mu_ here
  {
    std::shared_lock lock(config_mu_);
    peers.reserve(peers_.size());
    for (const auto& [key, q] : peers_) peers.push_back(q);
  }
  PeerPtr p;
  for (auto& q : peers) {
    const auto ep = q->endpoint();
    if (ep && ep->same_destination(destination)) {
      p = std::move(q);
      break;
    }
  }
  if (!p) return;
  const auto sent = p->last_initiation(PeerAccess{});
  if (!sent) return;
  const auto gap = p->with_timers(PeerAccess{}, [&](Timers& t) { return t.initiation_refused(*sent); });
  if (!gap) return;
  p->allow_initiation_after(PeerAccess{}, *sent, *gap);
  timer_list_.poke_before(*p, *sent + *gap);
}

// Handshake initiation: at most one per REKEY_TIMEOUT, counted for the retry limit.
void Device::send_initiation(Peer& p, bool retry) {
  if (!up_ || p.removed()) return;
  auto now = this->now();
  MessageInitiation msg;
  std::shared_ptr<const noise::Identity> id;
  {
    std::shared_lock lock(config_mu_);
    id = identity_;
  }
  if (!id || !p.create_initiation(PeerAccess{}, *id, now, noise::tai64n(wall_now()), msg)) return;
  // The timers and counters before the message leaves: a response can be back (and its
  // handshake_complete run) before send_to_peer returns; arming the retransmission after
  // it would resend an initiation that was already answered.
  p.with_timers(PeerAccess{}, [&](Timers& t) { on_initiation_sent(t, retry, now); });
  last_initiation_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  p.count_sent(PeerAccess{}, sizeof msg);
  p.record_initiation(PeerAccess{}, wall_now());
  send_message(&p, nullptr, std::span(reinterpret_cast<const uint8_t*>(&msg), sizeof msg));
  timer_list_.poke(p);
}

void Device::send_message(Peer* p, const conn::Endpoint* to, std::span<const uint8_t> msg) {
  if (!control_thread_) {
    std::span<const uint8_t> d = msg;
    std::error_code ec;
    conn::Endpoint dst = to ? *to : conn::Endpoint{};
    if (p) send_to_peer(*p, std::span(&d, 1));
    else bind_.send(std::span(&d, 1), dst, ec);
    return;
  }
  uint8_t* buf;
  if (buffers_.try_take(&buf, 1) != 1) return;  // every buffer in use: lost, as UDP may
  Batch* b = batches_.take();
  b->kind = Batch::Kind::control;
  if (p) b->peer = p->shared_from_this();
  if (to) b->sources[0] = *to;
  std::memcpy(buf, msg.data(), msg.size());
  b->bufs[0] = buf;
  b->sizes[0] = msg.size();
  b->count = 1;
  messages_queued_.fetch_add(1);
  jobs_.push(b);
}

void Device::send_control(Batch* b) {
  std::span<const uint8_t> d(b->bufs[0], b->sizes[0]);
  if (b->peer) {
    send_to_peer(*b->peer, std::span(&d, 1));
  } else {
    std::error_code ec;
    bind_.send(std::span(&d, 1), b->sources[0], ec);
  }
  messages_sent_.fetch_add(1);
  buffers_.give(b->bufs.data(), 1);
  batches_.give(b);
}

}  // namespace wg

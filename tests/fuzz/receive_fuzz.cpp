// Fuzzes the whole receive path of wg::Device (wg/receive.cpp, wg/noise.cpp,
// wg/cookie.cpp): handshake and transport messages from a second peer ("H", played by
// this file with the sans-I/O noise and cookie objects) to a real Device over an
// in-memory TUN and a Bind that records what the device sends.
//
//   fuzz input ──ops──> this file (peer H: noise::Handshake, CookieGenerator/Checker)
//                          │ datagrams                     ▲ what the device sends
//                          ▼                               │ (responses, cookies, data)
//                 Device::handle_handshake ────────> FuzzBind::send
//                 Device::bind_receiver ─> decrypt_batch ─> flush_inbound ─> MemoryDevice
//
// Determinism: the Device runs its own threads (workers, handshakes, timers, TUN), which
// would finish an input's work after the input returned. So the receive steps run here,
// on the fuzzer's thread, through a friend of Device (DeviceFuzzAccess): bind_receiver
// with a receive function that returns the input's batch once, and handle_handshake for
// handshake messages, as the handshake thread would call it (handshake_queue 0 keeps
// that thread idle). inline_batch covers every batch, so decryption and the in-order
// flush to the TUN happen inside bind_receiver; the Bind has no receive functions, so
// no receiver thread runs. The timer thread stays, but every input brings a fresh peer
// and lasts milliseconds: none of its deadlines (seconds) comes due meanwhile.
//
// Speed (from the seeds, 60 s each, one after the other on a 2-core machine that was
// running another fuzzer: 240-280 inputs/s before, 910-1,130 with what follows):
//   - a handshake costs about nine X25519 (~35 us each here), the bulk of the time that
//     is left; so at most four per input, and flags bit 2 gives H and the device a
//     session before the first op (the keys of one real handshake that World ran at
//     start-up, installed through DeviceFuzzAccess as a completed handshake installs
//     them), so that transport inputs need none;
//   - polling the TUN never waits (MemoryDevice::take with a zero timeout returns at
//     once, without a futex wait);
//   - each input removes its peer when it ends and takes it off the timer thread's list
//     (DeviceFuzzAccess::settle): an input that allocated more than it freed makes
//     libFuzzer run it again and scan the heap with LeakSanitizer, which had taken half
//     the time (and after 1,000 such inputs libFuzzer turns leak detection off: what
//     the device keeps lazily, pooled buffers and grown tables, can still do that in a
//     long campaign).
//   - for long campaigns, preset fuzz-campaign (scripts/fuzz_campaign.sh) puts a hash in
//     place of X25519 and ASan's quarantine at 32 MB.
//
// Input: a flags byte (bit 0: preshared key; bit 1: H sends from IPv6; bit 2: a session
// exists before the first op, one the device answered (it waits for H's first packet to
// confirm it), or with bit 3 one it initiated), then up to 64 ops (at most four of them
// handshakes), each
// an op byte (low 3 bits the kind; 0x08: recompute mac1/mac2 after mutating, "gets past
// mac1"; 0x10: the device is under load) and its operands:
//   0 raw datagram (len, bytes): anything, with valid macs when 0x08 is set
//   1 H initiates: a real initiation, mutated by (offset, xor) pairs
//   2 the device initiates; H answers with a real response, mutated likewise
//   3 transport data on H's chosen session: counter step, payload (an IPv4 packet from
//     an allowed source with 0x20, from a foreign one with 0x40 too), a flipped bit (0x80)
//   4 choose H's session (previous ones stay usable, as the device keeps three)
//   5 a real cookie reply to the device's last initiation, mutated
//   6 hand the queued transport batch to the device now
//
// Checked beyond "no crash":
//   - whatever the device sends decrypts under a session H agreed, with counters that
//     never repeat; its responses and initiations carry a valid mac1 (and mac2, once H
//     gave it a cookie); a cookie reply to H's last stamped message is accepted by H;
//   - an unmutated first initiation (not under load) is answered, and the answer
//     completes H's handshake;
//   - the TUN gets only packets H sent on an agreed session from an allowed source, each
//     at most once (no replay), and every untampered packet with a new counter on the
//     latest session arrives.
//   cmake --preset fuzz && cmake --build build-fuzz --target receive_fuzz
//   build-fuzz/bin/receive_fuzz -max_total_time=60 tests/fuzz/corpus/receive
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "tun/memory.hpp"
#include "wg/device.hpp"
#include "wg/timer_hooks.hpp"
#include "../support/peer_access.hpp"
#include "wg/transport_aead.hpp"

namespace wg {

// The private receive steps, for this target only.
struct DeviceFuzzAccess {
  // One batch through bind_receiver: classify, look up, decrypt, flush to the TUN. As a
  // socket would, the batch is handed out over as many reads as the receiver's buffers
  // take (ReadDepth), then the receive is cancelled.
  static void receive(Device& d, std::vector<std::vector<uint8_t>>& batch, const conn::Endpoint& from) {
    size_t next = 0;
    conn::ReceiveFn fn = [&](std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
                             std::span<size_t> sizes, std::span<conn::Endpoint> eps, std::error_code& ec) -> size_t {
      if (next == batch.size()) {
        ec = std::make_error_code(std::errc::operation_canceled);
        return 0;
      }
      size_t n = std::min(batch.size() - next, bufs.size());
      for (size_t i = 0; i < n; ++i) {
        const auto& dgram = batch[next + i];
        if (!dgram.empty()) std::memcpy(bufs[i].data(), dgram.data(), dgram.size());
        at[i] = bufs[i].data();
        sizes[i] = dgram.size();
        eps[i] = from;
      }
      next += n;
      ec.clear();
      return n;
    };
    d.bind_receiver(fn);
  }

  // One handshake message, as the handshake thread handles it.
  static void handshake(Device& d, std::span<const uint8_t> msg, const conn::Endpoint& from, bool under_load) {
    Device::HandshakeJob job;
    std::memcpy(job.data, msg.data(), msg.size());
    job.size = msg.size();
    job.from = from;
    d.handle_handshake(job, under_load);
  }

  // A session as a completed handshake leaves it (consume_initiation_message or
  // consume_response_message without the messages): a fresh index, the keypair, the
  // timers' events. Returns the device's index.
  static uint32_t install_session(Device& d, Peer& p, noise::SessionKeys keys, bool initiator) {
    keys.local_index = d.index_table_.new_index(p.shared_from_this());
    d.install_keypair(p, keys, initiator);
    const auto now = Clock::now();
    p.with_timers(PeerTestAccess::key(), [&](Timers& t) {
      if (initiator)
        on_response_consumed(t, now);
      else
        on_initiation_consumed(t, now);
    });
    d.timer_list_.poke(p);
    return keys.local_index;
  }

  // After remove_all_peers: waits (at most a second) until the timer thread is not
  // scanning, then takes the removed peers off its list, where it would drop them only
  // at its next wake-up, in some later input; and forgets the rate limiter's sources.
  // The input then frees what it allocated, so libFuzzer's leak check (it runs
  // LeakSanitizer after any input that allocated more than it freed, and gives up after
  // 1,000 such inputs) rarely runs and stays armed.
  static void settle(Device& d) {
    const std::vector<PeerPtr> gone = d.timer_list_.take_removed();
    d.admission_.clear_rate_limiter();
  }  // the peers go here
};

}  // namespace wg

namespace {

using namespace wg;

// Records every datagram the device sends; it never receives (no receive functions).
class FuzzBind final : public conn::Bind {
public:
  std::vector<conn::ReceiveFn> open(uint16_t, uint16_t& actual, std::error_code& ec) override {
    actual = 51820;
    ec.clear();
    return {};
  }
  void close() override {}
  void send(std::span<const std::span<const uint8_t>> bufs, conn::Endpoint&, std::error_code& ec) override {
    std::lock_guard lock(mu_);
    for (auto& b : bufs) sent_.emplace_back(b.begin(), b.end());
    ec.clear();
  }
  void set_mark(uint32_t, std::error_code& ec) override { ec.clear(); }
  size_t batch_size() const override { return 128; }
  std::vector<std::vector<uint8_t>> take() {
    std::lock_guard lock(mu_);
    return std::exchange(sent_, {});
  }

private:
  std::mutex mu_;
  std::vector<std::vector<uint8_t>> sent_;
};

PrivateKey key_from(uint8_t seed) {
  std::array<uint8_t, kKeyLen> b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  return PrivateKey(std::span<const uint8_t, kKeyLen>(b));
}

struct World {
  noise::Identity dev_id = noise::Identity::from_private(key_from(1));
  noise::Identity h_id = noise::Identity::from_private(key_from(2));
  PresharedKey psk = [] {
    std::array<uint8_t, kKeyLen> b{};
    b.fill(0x5a);
    return PresharedKey(std::span<const uint8_t, kKeyLen>(b));
  }();
  // H's handshake with the device, static-static secret computed once (with/without psk).
  noise::Handshake h_template[2];
  tun::MemoryDevice tun{1420, 1 << 16};
  FuzzBind bind;
  Device dev{tun, bind, DeviceOptions{.workers = 1, .handshake_queue = 0, .inline_batch = kMaxBatch}};
  const IpPrefix allowed4 = *IpPrefix::parse("198.19.0.2/32");
  const IpPrefix allowed6 = *IpPrefix::parse("fd00:19::2/128");
  // The two ends of one real handshake, run once: the keys of every pre-established
  // session (a transport input then costs no X25519 at all).
  noise::SessionKeys h_session, dev_session;

  World() {
    dev.set_private_key(dev_id.private_key);
    if (dev.up()) __builtin_trap();
    for (int k = 0; k < 2; ++k) {
      h_template[k].remote_static = dev_id.public_key;
      if (k) h_template[k].preshared_key = psk;
      h_template[k].set_keys(h_id);
    }
    noise::Handshake hi = h_template[0], hr;
    hr.remote_static = h_id.public_key;
    hr.set_keys(dev_id);
    MessageInitiation mi;
    MessageResponse mr;
    if (!noise::create_initiation(hi, h_id, key_from(50), noise::tai64n(std::chrono::system_clock::now()), 1, mi))
      __builtin_trap();
    auto ci = noise::consume_initiation(mi, dev_id);
    if (!ci || noise::accept_initiation(hr, *ci, Clock::now()) != noise::AcceptResult::accepted ||
        !noise::create_response(hr, key_from(51), 2, mr) || !noise::consume_response(hi, h_id, mr))
      __builtin_trap();
    auto hk = noise::derive_session(hi), dk = noise::derive_session(hr);
    if (!hk || !dk) __builtin_trap();
    h_session = *hk;
    dev_session = *dk;
  }
};

World& world() {
  static World w;
  return w;
}

struct Session {
  explicit Session(const noise::SessionKeys& k)
      : send(k.send), receive(k.receive), local_index(k.local_index), remote_index(k.remote_index) {}
  uint32_t id = 0;
  SymmetricKey send, receive;
  uint32_t local_index;   // H's: the device addresses H's packets to it
  uint32_t remote_index;  // the device's
  uint64_t next_counter = 0;  // H's next fresh counter
  uint64_t device_counter_seen_max = 0;
  std::set<uint64_t> device_counters;  // counters the device used towards H
};

// What one input does, op by op.
class Run {
public:
  Run(World& w, uint8_t flags, uint32_t serial) : w_(w), psk_(flags & 1) {
    // A fresh source per input: the rate limiter's buckets then start full each time.
    from_.family = flags & 2 ? 6 : 4;
    if (from_.family == 4) {
      from_.addr = {198, 18, static_cast<uint8_t>(serial >> 8), static_cast<uint8_t>(serial)};
    } else {
      from_.addr = {0xfd, 0, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(serial >> 8),
                    static_cast<uint8_t>(serial)};
    }
    from_.port = 51820;
    gen_.init(w.dev_id.public_key);
    h_checker_.init(w.h_id.public_key);
    peer_ = w.dev.add_peer(w.h_id.public_key);
    if (psk_) w.dev.set_preshared_key(*peer_, w.psk);
    w.dev.set_endpoint(*peer_, from_);
    w.dev.add_allowed_ip(*peer_, w.allowed4);
    w.dev.add_allowed_ip(*peer_, w.allowed6);
    w.bind.take();
    while (w.tun.take(std::chrono::milliseconds(0))) {
    }
    if (flags & 4) preestablished(flags & 8);
  }

  void op(uint8_t code, std::span<const uint8_t>& in) {
    // Each handshake costs about eight X25519 operations: a few per input reach every
    // state, more would only slow the fuzzer down.
    if ((code & 7) == 1 || (code & 7) == 2) {
      if (handshakes_ == kMaxHandshakes) return;
      ++handshakes_;
    }
    switch (code & 7) {
      case 0: case 7: raw(code, in); break;
      case 1: h_initiates(code, in); break;
      case 2: device_initiates(code, in); break;
      case 3: data(code, in); break;
      case 4: if (!sessions_.empty()) chosen_ = next(in) % sessions_.size(); break;
      case 5: cookie_reply(code, in); break;
      case 6: flush(); break;
    }
  }

  void finish() { flush(); }

  // Nothing of the input outlives it (see DeviceFuzzAccess::settle).
  ~Run() {
    peer_.reset();
    w_.dev.remove_all_peers();
    w_.bind.take();
    while (w_.tun.take(std::chrono::milliseconds(0))) {
    }
    DeviceFuzzAccess::settle(w_.dev);
  }

private:
  static uint8_t next(std::span<const uint8_t>& in) {
    if (in.empty()) return 0;
    uint8_t b = in[0];
    in = in.subspan(1);
    return b;
  }

  // Reads a count and that many (offset, xor) pairs and applies them; true if any
  // changed a byte. A changed sender index (bytes 4-7) lets the device address H by an
  // index H chose for another session.
  bool mutate(std::span<uint8_t> msg, std::span<const uint8_t>& in) {
    size_t pairs = next(in) % 8;
    bool changed = false;
    for (size_t i = 0; i < pairs; ++i) {
      uint8_t off = next(in), x = next(in);
      size_t at = off % msg.size();
      msg[at] ^= x;
      changed |= x != 0;
      if (x != 0 && at >= 4 && at < 8) sender_forged_ = true;
    }
    return changed;
  }

  // H and the device share a session before the first op, as after a handshake that the
  // device answered (it waits for H's first packet to confirm it) or, with
  // device_initiated, one it initiated (it sends on it at once).
  void preestablished(bool device_initiated) {
    noise::SessionKeys dev = w_.dev_session, h = w_.h_session;
    dev.remote_index = h.local_index = 0x3000;
    h.remote_index = DeviceFuzzAccess::install_session(w_.dev, *peer_, dev, device_initiated);
    add_session(Session(h));
  }

  void stamp(std::span<uint8_t> msg) {
    gen_.add_macs(msg, Clock::now());
    stamped_.assign(msg.begin(), msg.end());
  }

  // A handshake message goes to handle_handshake at once (after the queued transport).
  void deliver_handshake(std::span<const uint8_t> msg, bool under_load) {
    flush();
    last_delivered_.assign(msg.begin(), msg.end());
    DeviceFuzzAccess::handshake(w_.dev, msg, from_, under_load);
    collect();
  }

  void raw(uint8_t code, std::span<const uint8_t>& in) {
    size_t len = next(in);
    len = std::min(len, in.size());
    std::vector<uint8_t> d(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(len));
    in = in.subspan(len);
    auto type = classify_message(d.data(), d.size());
    if (type && (*type == MessageType::initiation || *type == MessageType::response) && (code & 0x08)) stamp(d);
    if (type && *type != MessageType::transport) deliver_handshake(d, code & 0x10);
    else queue(std::move(d));
  }

  noise::Tai64n next_timestamp() {
    noise::Tai64n t{};
    uint64_t secs = 0x400000000000000aull + 1'000'000 + ++timestamps_;
    for (int i = 0; i < 8; ++i) t[i] = static_cast<uint8_t>(secs >> (56 - 8 * i));
    return t;
  }

  void h_initiates(uint8_t code, std::span<const uint8_t>& in) {
    h_init_ = w_.h_template[psk_];
    MessageInitiation m;
    h_init_index_ = 0x1000 + ++indices_;
    if (!noise::create_initiation(*h_init_, w_.h_id, key_from(static_cast<uint8_t>(100 + indices_)),
                                  next_timestamp(), h_init_index_, m))
      __builtin_trap();
    std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(&m), sizeof m);
    stamp(bytes);
    bool changed = mutate(bytes, in);
    if (code & 0x08) stamp(bytes);
    bool under_load = code & 0x10;
    const bool first = !accepted_initiation_;
    responses_ = 0;
    deliver_handshake(bytes, under_load);
    // The first real initiation of an input, not under load, must be answered (later
    // ones within 20 ms are a flood the device may ignore).
    if (!changed && !under_load && first && responses_ == 0) __builtin_trap();
  }

  void device_initiates(uint8_t code, std::span<const uint8_t>& in) {
    flush();
    w_.dev.initiate_handshake(*peer_);
    collect();
    if (!device_init_) return;  // rate-limited (REKEY_TIMEOUT since its last one)
    auto msg = *device_init_;
    device_init_.reset();
    // H keeps its static-static secret as a responder would (one X25519 fewer).
    auto ci = noise::consume_initiation(msg, w_.h_id, [&](const PublicKey& remote) {
      return remote == w_.dev_id.public_key
                 ? std::optional(w_.h_template[psk_].precomputed_static_static)
                 : std::nullopt;
    });
    if (!ci) __builtin_trap();  // the device's own initiation must decrypt for H
    noise::Handshake hs = w_.h_template[psk_];
    if (noise::accept_initiation(hs, *ci, Clock::now()) != noise::AcceptResult::accepted) __builtin_trap();
    MessageResponse r;
    uint32_t idx = 0x2000 + ++indices_;
    if (!noise::create_response(hs, key_from(static_cast<uint8_t>(200 + indices_)), idx, r)) __builtin_trap();
    auto keys = noise::derive_session(hs);
    if (!keys) __builtin_trap();
    std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(&r), sizeof r);
    stamp(bytes);
    mutate(bytes, in);
    if (code & 0x08) stamp(bytes);
    pending_ = Session(*keys);
    deliver_handshake(bytes, code & 0x10);
    pending_.reset();
  }

  // A cookie reply to the last message the device stamped (an initiation or a
  // response): the device's generator only takes a reply to that one.
  void cookie_reply(uint8_t code, std::span<const uint8_t>& in) {
    if (last_device_msg_.empty()) return;
    uint32_t sender;
    std::memcpy(&sender, last_device_msg_.data() + 4, 4);
    auto reply = h_checker_.create_reply(last_device_msg_, sender, kDeviceSource, Clock::now());
    std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(&reply), sizeof reply);
    gave_cookie_ = !mutate(bytes, in);
    deliver_handshake(bytes, code & 0x10);
  }

  void data(uint8_t code, std::span<const uint8_t>& in) {
    uint8_t step = next(in);
    size_t len = std::min<size_t>(next(in), in.size());
    std::span<const uint8_t> payload = in.first(len);
    in = in.subspan(len);
    uint8_t flip = code & 0x80 ? next(in) : 0;
    if (sessions_.empty()) return;
    Session& s = sessions_[chosen_ % sessions_.size()];
    uint64_t counter;
    if (step & 0x80) counter = s.next_counter - std::min<uint64_t>(s.next_counter, step & 0x7f);
    else counter = s.next_counter + step;
    const bool fresh = counter >= s.next_counter;
    if (fresh) s.next_counter = counter + 1;

    std::vector<uint8_t> plain;
    const bool wrap = code & 0x20, foreign = code & 0x40;
    if (wrap) {
      // IPv4 header, then (session id, counter) so the TUN side can tell packets apart.
      const size_t total = 20 + 12 + len;
      plain = {0x45, 0, static_cast<uint8_t>(total >> 8), static_cast<uint8_t>(total), 0, 0, 0, 0, 64, 17, 0, 0,
               198, 19, 0, static_cast<uint8_t>(foreign ? 99 : 2), 198, 19, 0, 1};
      for (int i = 0; i < 4; ++i) plain.push_back(static_cast<uint8_t>(s.id >> (8 * i)));
      for (int i = 0; i < 8; ++i) plain.push_back(static_cast<uint8_t>(counter >> (8 * i)));
    }
    plain.insert(plain.end(), payload.begin(), payload.end());
    std::vector<uint8_t> d(kTransportHeaderSize + plain.size() + kAeadTagLen);
    MessageTransportHeader h{static_cast<uint32_t>(MessageType::transport), s.remote_index, counter};
    std::memcpy(d.data(), &h, sizeof h);
    transport::seal(d.data() + kTransportHeaderSize, s.send.data(), counter, plain);
    if (code & 0x80) d[kTransportHeaderSize + flip % (d.size() - kTransportHeaderSize)] ^= 1;
    if (wrap && !foreign && !(code & 0x80)) {
      sent_ok_.insert({s.id, counter});
      // A new counter on the newest session, untampered: it must reach the TUN.
      if (fresh && s.id == sessions_.back().id && !newest_unreliable_) must_arrive_.insert({s.id, counter});
    }
    queue(std::move(d));
  }

  void queue(std::vector<uint8_t> d) {
    batch_.push_back(std::move(d));
    if (batch_.size() == kMaxBatch) flush();
  }

  void flush() {
    if (!batch_.empty()) {
      DeviceFuzzAccess::receive(w_.dev, batch_, from_);
      batch_.clear();
      collect();
    }
    while (auto p = w_.tun.take(std::chrono::milliseconds(0))) {
      // Only H's own packets from an allowed source, once each.
      if (p->size() < 32 || (*p)[0] != 0x45 || (*p)[15] != 2) __builtin_trap();
      uint32_t id = 0;
      uint64_t counter = 0;
      for (int i = 0; i < 4; ++i) id |= uint32_t{(*p)[20 + i]} << (8 * i);
      for (int i = 0; i < 8; ++i) counter |= uint64_t{(*p)[24 + i]} << (8 * i);
      if (!sent_ok_.count({id, counter}) || !arrived_.insert({id, counter}).second) __builtin_trap();
      must_arrive_.erase({id, counter});
    }
    if (!must_arrive_.empty()) __builtin_trap();  // a good packet was lost
  }

  Session* session_for(uint32_t local_index) {
    for (auto& s : sessions_)
      if (s.local_index == local_index) return &s;
    return nullptr;
  }

  // What the device sent since the last look.
  void collect() {
    for (auto& d : w_.bind.take()) {
      auto type = classify_message(d.data(), d.size());
      if (!type) __builtin_trap();  // the device sends only well-formed messages
      switch (*type) {
        case MessageType::response: {
          if (!h_checker_.check_mac1(d)) __builtin_trap();
          ++responses_;
          accepted_initiation_ = true;  // whichever message it answered
          auto r = load_message<MessageResponse>(d.data());
          last_device_msg_ = d;
          if (gave_cookie_ && !h_checker_.check_mac2(d, kDeviceSource, Clock::now())) __builtin_trap();
          if (!h_init_ || r.receiver != h_init_index_) {  // an answer to a mutated sender
            unreliable();
            break;
          }
          // The device answered our initiation: H must be able to complete it.
          if (!noise::consume_response(*h_init_, w_.h_id, r)) __builtin_trap();
          auto keys = noise::derive_session(*h_init_);
          if (!keys) __builtin_trap();
          h_init_.reset();
          add_session(Session(*keys));
          break;
        }
        case MessageType::initiation: {
          if (!h_checker_.check_mac1(d)) __builtin_trap();
          if (gave_cookie_ && !h_checker_.check_mac2(d, kDeviceSource, Clock::now())) __builtin_trap();
          device_init_ = load_message<MessageInitiation>(d.data());
          last_device_msg_ = d;
          break;
        }
        case MessageType::cookie_reply: {
          auto reply = load_message<MessageCookieReply>(d.data());
          bool ok = gen_.consume_reply(reply, Clock::now());
          // A reply to the last message H stamped, delivered as stamped, must decrypt.
          if (!ok && last_delivered_ == stamped_) __builtin_trap();
          break;
        }
        case MessageType::transport: {
          auto h = load_message<MessageTransportHeader>(d.data());
          if (pending_ && h.receiver == pending_->local_index) {
            add_session(*pending_);  // the device took H's response: its keepalive says so
            pending_.reset();
          }
          Session* s = session_for(h.receiver);
          if (!s) {  // to an index a mutated response gave it
            unreliable();
            break;
          }
          std::vector<uint8_t> plain(d.size() - kTransportMinSize);
          if (!transport::open(plain.data(), s->receive.data(), h.counter,
                               std::span(d).subspan(kTransportHeaderSize))) {
            if (!sender_forged_) __builtin_trap();  // sealed with a key H never agreed
            unreliable();
            break;
          }
          // A nonce used twice under one key (a forged index may share a session's).
          if (!s->device_counters.insert(h.counter).second && !sender_forged_) __builtin_trap();
          if (!plain.empty()) __builtin_trap();  // nothing entered the TUN: keepalives only
          break;
        }
      }
    }
  }

  void unreliable() {
    newest_unreliable_ = true;
    must_arrive_.clear();
  }

  void add_session(Session s) {
    s.id = static_cast<uint32_t>(sessions_.size() + 1);
    sessions_.push_back(std::move(s));
    chosen_ = sessions_.size() - 1;
    // Counters sent on older sessions are no longer owed (the device may drop them).
    must_arrive_.clear();
    newest_unreliable_ = false;
  }

  World& w_;
  const bool psk_;
  conn::Endpoint from_;
  PeerPtr peer_;
  CookieGenerator gen_;     // H's macs towards the device
  CookieChecker h_checker_;  // H's own mac1/mac2 checks and cookie replies
  std::vector<uint8_t> stamped_, last_delivered_;
  std::optional<noise::Handshake> h_init_;
  uint32_t h_init_index_ = 0;
  std::optional<MessageInitiation> device_init_;
  std::vector<uint8_t> last_device_msg_;
  // The device's address as H sees it, for the cookies H hands it.
  static constexpr uint8_t kDeviceSource[3] = {'d', 'e', 'v'};
  std::optional<Session> pending_;
  bool gave_cookie_ = false;
  bool sender_forged_ = false;
  bool accepted_initiation_ = false;
  size_t responses_ = 0;
  static constexpr int kMaxHandshakes = 4;
  int handshakes_ = 0;
  uint32_t indices_ = 0;
  uint64_t timestamps_ = 0;
  std::vector<Session> sessions_;
  size_t chosen_ = 0;
  std::vector<std::vector<uint8_t>> batch_;
  std::set<std::pair<uint32_t, uint64_t>> sent_ok_, arrived_, must_arrive_;
  // The device may have replaced keypairs without H knowing (it took a mutated message
  // that still decrypted): H's newest session is then no longer owed delivery.
  bool newest_unreliable_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint32_t serial = 0;
  if (size == 0) return 0;
  World& w = world();
  Run run(w, data[0], ++serial);
  std::span<const uint8_t> in(data + 1, size - 1);
  size_t ops = 0;
  while (!in.empty() && ops++ < 64) {
    uint8_t code = in[0];
    in = in.subspan(1);
    run.op(code, in);
  }
  run.finish();
  return 0;
}

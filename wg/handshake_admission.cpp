#include "wg/handshake_admission.hpp"

namespace wg {
namespace {

std::string key_of(std::span<const uint8_t> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

}  // namespace

void HandshakeAdmission::endpoint_moved(std::optional<std::span<const uint8_t>> before,
                                        std::optional<std::span<const uint8_t>> after) {
  std::lock_guard lock(known_mu_);
  if (before) {
    auto it = known_.find(key_of(*before));
    if (it != known_.end() && --it->second == 0) known_.erase(it);
  }
  if (after) ++known_[key_of(*after)];
}

bool HandshakeAdmission::known(std::span<const uint8_t> source) const {
  std::lock_guard lock(known_mu_);
  return known_.contains(key_of(source));
}

bool HandshakeAdmission::may_queue(std::span<const uint8_t> msg, MessageType type, std::span<const uint8_t> source,
                                   size_t queued, TimePoint now) {
  if (queued < queue_limit_) return true;
  if (queued >= queue_limit_ + queue_limit_ / 8) return false;
  return cookies_.check_mac2(msg, source, now) || (type == MessageType::initiation && known(source));
}

bool HandshakeAdmission::under_load(size_t queued, TimePoint now) { return load_.under_load(queued, now); }

HandshakeAdmission::Verdict HandshakeAdmission::admit(std::span<const uint8_t> msg, MessageType type,
                                                      std::span<const uint8_t> source,
                                                      const std::optional<IpAddress>& ip, bool under_load,
                                                      TimePoint now) {
  if (!cookies_.check_mac1(msg)) return Verdict::drop;
  if (!under_load) return Verdict::consume;
  if (!cookies_.check_mac2(msg, source, now)) {
    // A rekey or a restarted peer from where a peer of ours is: answered at once while the
    // budget lasts; a flood spoofing peers' endpoints then gets cookies like the rest.
    if (type == MessageType::initiation && known(source) && load_.spend_known(now)) return Verdict::consume;
    return Verdict::cookie_reply;
  }
  return ip && limiter_.allow(*ip, now) ? Verdict::consume : Verdict::drop;
}

}  // namespace wg

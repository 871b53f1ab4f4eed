// Keys derive from the receiver's public key; cookies from a secret renewed every 2 min.
#include "wg/cookie.hpp"

#include <cstring>

namespace wg {
namespace {

constexpr char kLabelMac1[] = "mac1----";
constexpr char kLabelCookie[] = "cookie--";

std::span<const uint8_t> label(const char* s) {
  return {reinterpret_cast<const uint8_t*>(s), 8};
}

size_t mac1_offset(size_t n) { return n - 2 * kMacLen; }
size_t mac2_offset(size_t n) { return n - kMacLen; }

}  // namespace

void CookieChecker::init(const PublicKey& local_public) {
  std::lock_guard lock(mu_);
  crypto::hash(mac1_key_, label(kLabelMac1), local_public.span());
  crypto::hash(encryption_key_.data(), label(kLabelCookie), local_public.span());
  secret_set_.reset();
}

bool CookieChecker::check_mac1(std::span<const uint8_t> msg) const {
  if (msg.size() < 2 * kMacLen) return false;
  uint8_t mac[kMacLen];
  std::lock_guard lock(mu_);
  crypto::mac(mac, std::span<const uint8_t>(mac1_key_, kHashLen), msg.first(mac1_offset(msg.size())));
  return ct_equal(mac, msg.data() + mac1_offset(msg.size()), kMacLen);
}

void CookieChecker::cookie_for(uint8_t out[kMacLen], std::span<const uint8_t> src, TimePoint now) {
  if (!secret_set_ || now - *secret_set_ >= kCookieSecretMaxAge) {
    random_bytes(secret_.data(), kKeyLen);
    secret_set_ = now;
  }
  crypto::mac(out, secret_.span(), src);
}

bool CookieChecker::check_mac2(std::span<const uint8_t> msg, std::span<const uint8_t> src,
                               TimePoint now) {
  if (msg.size() < 2 * kMacLen) return false;
  // A zero mac2 means no cookie (5.4.4): refused before the lock and the hashes.
  static constexpr uint8_t kZero[kMacLen] = {};
  if (std::memcmp(msg.data() + mac2_offset(msg.size()), kZero, kMacLen) == 0) return false;
  std::lock_guard lock(mu_);
  // No cookie outlives the secret.
  if (!secret_set_ || now - *secret_set_ >= kCookieSecretMaxAge) return false;
  uint8_t cookie[kMacLen];
  uint8_t mac[kMacLen];
  cookie_for(cookie, src, now);
  crypto::mac(mac, std::span<const uint8_t>(cookie, kMacLen), msg.first(mac2_offset(msg.size())));
  bool ok = ct_equal(mac, msg.data() + mac2_offset(msg.size()), kMacLen);
  secure_wipe(cookie, sizeof cookie);
  return ok;
}

MessageCookieReply CookieChecker::create_reply(std::span<const uint8_t> msg, uint32_t receiver,
                                               std::span<const uint8_t> src, TimePoint now) {
  MessageCookieReply reply;
  std::memset(&reply, 0, sizeof reply);
  reply.type = static_cast<uint32_t>(MessageType::cookie_reply);
  reply.receiver = receiver;
  random_bytes(reply.nonce, sizeof reply.nonce);
  std::lock_guard lock(mu_);
  uint8_t cookie[kMacLen];
  cookie_for(cookie, src, now);
  crypto::xaead_seal(reply.encrypted_cookie, encryption_key_.data(), reply.nonce,
                     std::span<const uint8_t>(cookie, kMacLen),
                     msg.subspan(mac1_offset(msg.size()), kMacLen));
  secure_wipe(cookie, sizeof cookie);
  return reply;
}

void CookieGenerator::init(const PublicKey& remote_public) {
  std::lock_guard lock(mu_);
  crypto::hash(mac1_key_, label(kLabelMac1), remote_public.span());
  crypto::hash(decryption_key_.data(), label(kLabelCookie), remote_public.span());
  has_last_mac1_ = false;
  cookie_set_.reset();
}

void CookieGenerator::add_macs(std::span<uint8_t> msg, TimePoint now) {
  std::lock_guard lock(mu_);
  uint8_t* mac1 = msg.data() + mac1_offset(msg.size());
  uint8_t* mac2 = msg.data() + mac2_offset(msg.size());
  crypto::mac(mac1, std::span<const uint8_t>(mac1_key_, kHashLen),
              std::span<const uint8_t>(msg.data(), mac1_offset(msg.size())));
  std::memcpy(last_mac1_, mac1, kMacLen);
  has_last_mac1_ = true;
  if (cookie_set_ && now - *cookie_set_ < kCookieValidity) {
    crypto::mac(mac2, std::span<const uint8_t>(cookie_, kMacLen),
                std::span<const uint8_t>(msg.data(), mac2_offset(msg.size())));
  } else {
    std::memset(mac2, 0, kMacLen);
  }
}

bool CookieGenerator::consume_reply(const MessageCookieReply& reply, TimePoint now) {
  std::lock_guard lock(mu_);
  if (!has_last_mac1_) return false;
  uint8_t cookie[kMacLen];
  if (!crypto::xaead_open(cookie, decryption_key_.data(), reply.nonce,
                          std::span<const uint8_t>(reply.encrypted_cookie, sizeof reply.encrypted_cookie),
                          std::span<const uint8_t>(last_mac1_, kMacLen)))
    return false;
  std::memcpy(cookie_, cookie, kMacLen);
  secure_wipe(cookie, sizeof cookie);
  cookie_set_ = now;
  // One reply per message sent: a replayed reply finds nothing to open against.
  has_last_mac1_ = false;
  return true;
}

}  // namespace wg

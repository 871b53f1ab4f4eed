// mac1/mac2 and cookie replies (the paper's 5.4.4 and 5.4.7). Sans-I/O; thread-safe.
#pragma once

#include <mutex>
#include <optional>
#include <span>

#include "wg/crypto.hpp"
#include "wg/messages.hpp"

namespace wg {

// Checks the macs of handshake messages to us; makes cookie replies.
class CookieChecker {
public:
  void init(const PublicKey& local_public);

  // msg is a whole initiation or response (mac1 at size-32, mac2 at size-16).
  bool check_mac1(std::span<const uint8_t> msg) const;
  // src: the sender's address and port as any stable byte string.
  bool check_mac2(std::span<const uint8_t> msg, std::span<const uint8_t> src, TimePoint now);
  MessageCookieReply create_reply(std::span<const uint8_t> msg, uint32_t receiver,
                                  std::span<const uint8_t> src, TimePoint now);

private:
  void cookie_for(uint8_t out[kMacLen], std::span<const uint8_t> src, TimePoint now);

  mutable std::mutex mu_;
  uint8_t mac1_key_[kHashLen] = {};
  SymmetricKey encryption_key_;
  SymmetricKey secret_;
  std::optional<TimePoint> secret_set_;
};

// Stamps our handshake messages to one peer; takes its cookie replies.
class CookieGenerator {
public:
  void init(const PublicKey& remote_public);

  // msg: a whole initiation or response.
  void add_macs(std::span<uint8_t> msg, TimePoint now);
  // For the last message stamped, once; false if it does not decrypt or was consumed.
  bool consume_reply(const MessageCookieReply& reply, TimePoint now);

private:
  std::mutex mu_;
  uint8_t mac1_key_[kHashLen] = {};
  SymmetricKey decryption_key_;
  uint8_t last_mac1_[kMacLen] = {};
  bool has_last_mac1_ = false;
  uint8_t cookie_[kMacLen] = {};
  std::optional<TimePoint> cookie_set_;
};

}  // namespace wg

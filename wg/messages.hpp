// The wire format and protocol constants, named as in the paper. Integers are
// little-endian; the structs are copied with memcpy, never cast over a buffer.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace wg {

static_assert(std::endian::native == std::endian::little,
              "message structs assume a little-endian host");

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using namespace std::chrono_literals;

// --- protocol constants (the paper's section 6) ---
inline constexpr uint64_t kRekeyAfterMessages = 1ull << 60;
inline constexpr uint64_t kRejectAfterMessages = ~0ull - (1ull << 13);  // 2^64 - 2^13 - 1
inline constexpr auto kRekeyAfterTime = 120s;
inline constexpr auto kRejectAfterTime = 180s;
inline constexpr auto kRekeyAttemptTime = 90s;
inline constexpr auto kRekeyTimeout = 5s;
inline constexpr auto kRekeyTimeoutJitterMax = 334ms;
// The first retry of an initiation the network refused (ours, not the paper's).
inline constexpr auto kRefusedRetry = 100ms;
inline constexpr auto kKeepaliveTimeout = 10s;
inline constexpr auto kCookieRefreshTime = 120s;
inline constexpr auto kHandshakeInitiationRate = 20ms;
inline constexpr int kMaxTimerHandshakes = static_cast<int>(kRekeyAttemptTime / kRekeyTimeout);  // 18
inline constexpr auto kCookieSecretMaxAge = 120s;
inline constexpr auto kCookieValidity = kRekeyAfterTime - kRekeyTimeout;  // 115 s
inline constexpr uint16_t kDefaultMtu = 1420;

// --- message types and sizes ---
enum class MessageType : uint32_t { initiation = 1, response = 2, cookie_reply = 3, transport = 4 };

inline constexpr size_t kInitiationSize = 148;
inline constexpr size_t kResponseSize = 92;
inline constexpr size_t kCookieReplySize = 64;
inline constexpr size_t kTransportHeaderSize = 16;
inline constexpr size_t kTransportMinSize = kTransportHeaderSize + 16;  // header + empty AEAD
inline constexpr size_t kTransportPadding = 16;                          // plaintext multiple
inline constexpr size_t kMaxMessageSize = 65535;
inline constexpr size_t kMaxPacketSize = kMaxMessageSize - kTransportMinSize;

struct MessageInitiation {
  uint32_t type;
  uint32_t sender;
  uint8_t ephemeral[32];
  uint8_t encrypted_static[32 + 16];
  uint8_t encrypted_timestamp[12 + 16];
  uint8_t mac1[16];
  uint8_t mac2[16];
};

struct MessageResponse {
  uint32_t type;
  uint32_t sender;
  uint32_t receiver;
  uint8_t ephemeral[32];
  uint8_t encrypted_nothing[16];
  uint8_t mac1[16];
  uint8_t mac2[16];
};

struct MessageCookieReply {
  uint32_t type;
  uint32_t receiver;
  uint8_t nonce[24];
  uint8_t encrypted_cookie[16 + 16];
};

struct MessageTransportHeader {
  uint32_t type;
  uint32_t receiver;
  uint64_t counter;
};

static_assert(sizeof(MessageInitiation) == kInitiationSize);
static_assert(sizeof(MessageResponse) == kResponseSize);
static_assert(sizeof(MessageCookieReply) == kCookieReplySize);
static_assert(sizeof(MessageTransportHeader) == kTransportHeaderSize);

// mac1 covers everything before it, mac2 everything before mac2.
inline constexpr size_t kInitiationMac1Offset = offsetof(MessageInitiation, mac1);
inline constexpr size_t kResponseMac1Offset = offsetof(MessageResponse, mac1);

// nullopt unless a known type, zero reserved bytes and its exact length.
inline std::optional<MessageType> classify_message(const uint8_t* p, size_t n) {
  if (n < 4) return std::nullopt;
  uint32_t t;
  std::memcpy(&t, p, 4);
  switch (static_cast<MessageType>(t)) {
    case MessageType::initiation:
      if (n == kInitiationSize) return MessageType::initiation;
      break;
    case MessageType::response:
      if (n == kResponseSize) return MessageType::response;
      break;
    case MessageType::cookie_reply:
      if (n == kCookieReplySize) return MessageType::cookie_reply;
      break;
    case MessageType::transport:
      if (n >= kTransportMinSize) return MessageType::transport;
      break;
  }
  return std::nullopt;
}

template <class M>
M load_message(const uint8_t* p) {
  M m;
  std::memcpy(&m, p, sizeof m);
  return m;
}

}  // namespace wg

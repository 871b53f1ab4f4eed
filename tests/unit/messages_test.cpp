// classify_message over every type, length and first byte; the wire layout and the
// protocol constants of messages.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "wg/messages.hpp"

namespace {

using namespace std::chrono_literals;
using wg::MessageType;

// The valid lengths of each type: exact for handshake messages, a minimum for transport.
bool valid_length(MessageType t, size_t n) {
  switch (t) {
    case MessageType::initiation: return n == wg::kInitiationSize;
    case MessageType::response: return n == wg::kResponseSize;
    case MessageType::cookie_reply: return n == wg::kCookieReplySize;
    case MessageType::transport: return n >= wg::kTransportMinSize;
  }
  return false;
}

// A buffer of n bytes (non-zero filler) whose first four bytes are the little-endian type.
std::vector<uint8_t> datagram(uint32_t type, size_t n) {
  std::vector<uint8_t> b(std::max<size_t>(n, 4), 0xa5);
  b[0] = static_cast<uint8_t>(type);
  b[1] = static_cast<uint8_t>(type >> 8);
  b[2] = static_cast<uint8_t>(type >> 16);
  b[3] = static_cast<uint8_t>(type >> 24);
  return b;
}

constexpr MessageType kTypes[] = {MessageType::initiation, MessageType::response,
                                  MessageType::cookie_reply, MessageType::transport};

size_t nominal_size(MessageType t) {
  switch (t) {
    case MessageType::initiation: return wg::kInitiationSize;
    case MessageType::response: return wg::kResponseSize;
    case MessageType::cookie_reply: return wg::kCookieReplySize;
    case MessageType::transport: return wg::kTransportMinSize;
  }
  return 0;
}

}  // namespace

TEST_CASE("messages: each type is classified at exactly its valid lengths", "[messages]") {
  for (MessageType t : kTypes) {
    const auto type = static_cast<uint32_t>(t);
    std::vector<size_t> lengths;
    for (size_t n = 0; n <= 200; ++n) lengths.push_back(n);
    const size_t exact = nominal_size(t);
    for (size_t n : {exact - 1, exact, exact + 1, size_t{1000}, size_t{1452}, wg::kMaxMessageSize})
      lengths.push_back(n);
    for (size_t n : lengths) {
      CAPTURE(type, n);
      const auto buf = datagram(type, n);
      const auto got = wg::classify_message(buf.data(), n);
      if (valid_length(t, n)) {
        REQUIRE(got);
        CHECK(*got == t);
      } else {
        CHECK_FALSE(got);
      }
    }
  }
}

TEST_CASE("messages: the exact sizes are the paper's", "[messages]") {
  CHECK(wg::kInitiationSize == 148);
  CHECK(wg::kResponseSize == 92);
  CHECK(wg::kCookieReplySize == 64);
  CHECK(wg::kTransportMinSize == 32);
  // One byte short or long of a handshake message is nothing; transport only has a floor.
  for (MessageType t : kTypes) {
    const auto type = static_cast<uint32_t>(t);
    const size_t exact = nominal_size(t);
    CAPTURE(type);
    CHECK(wg::classify_message(datagram(type, exact).data(), exact) == t);
    CHECK_FALSE(wg::classify_message(datagram(type, exact - 1).data(), exact - 1));
    const auto longer = wg::classify_message(datagram(type, exact + 1).data(), exact + 1);
    if (t == MessageType::transport) CHECK(longer == t);
    else CHECK_FALSE(longer);
  }
}

TEST_CASE("messages: every first byte other than 1..4 is rejected", "[messages]") {
  for (int first = 0; first <= 255; ++first) {
    for (MessageType t : kTypes) {
      const size_t n = nominal_size(t);
      CAPTURE(first, n);
      const auto buf = datagram(static_cast<uint32_t>(first), n);
      const auto got = wg::classify_message(buf.data(), n);
      if (first == static_cast<int>(t)) {
        CHECK(got == t);
      } else if (first >= 1 && first <= 4) {
        // A known type at another type's length: only transport may be longer.
        const auto other = static_cast<MessageType>(first);
        if (valid_length(other, n)) CHECK(got == other);
        else CHECK_FALSE(got);
      } else {
        CHECK_FALSE(got);
      }
    }
  }
}

TEST_CASE("messages: nonzero reserved bytes are rejected", "[messages]") {
  for (MessageType t : kTypes) {
    const size_t n = nominal_size(t);
    for (int pos = 1; pos <= 3; ++pos) {
      for (int value = 1; value <= 255; ++value) {
        CAPTURE(static_cast<uint32_t>(t), pos, value);
        auto buf = datagram(static_cast<uint32_t>(t), n);
        buf[pos] = static_cast<uint8_t>(value);
        CHECK_FALSE(wg::classify_message(buf.data(), n));
      }
    }
  }
}

TEST_CASE("messages: fewer than four bytes are nothing", "[messages]") {
  const uint8_t buf[4] = {4, 0, 0, 0};
  for (size_t n = 0; n < 4; ++n) CHECK_FALSE(wg::classify_message(buf, n));
}

TEST_CASE("messages: struct layout matches the wire format", "[messages]") {
  CHECK(offsetof(wg::MessageInitiation, sender) == 4);
  CHECK(offsetof(wg::MessageInitiation, ephemeral) == 8);
  CHECK(offsetof(wg::MessageInitiation, encrypted_static) == 40);
  CHECK(offsetof(wg::MessageInitiation, encrypted_timestamp) == 88);
  CHECK(wg::kInitiationMac1Offset == 116);
  CHECK(offsetof(wg::MessageInitiation, mac2) == 132);

  CHECK(offsetof(wg::MessageResponse, sender) == 4);
  CHECK(offsetof(wg::MessageResponse, receiver) == 8);
  CHECK(offsetof(wg::MessageResponse, ephemeral) == 12);
  CHECK(offsetof(wg::MessageResponse, encrypted_nothing) == 44);
  CHECK(wg::kResponseMac1Offset == 60);
  CHECK(offsetof(wg::MessageResponse, mac2) == 76);

  CHECK(offsetof(wg::MessageCookieReply, receiver) == 4);
  CHECK(offsetof(wg::MessageCookieReply, nonce) == 8);
  CHECK(offsetof(wg::MessageCookieReply, encrypted_cookie) == 32);

  CHECK(offsetof(wg::MessageTransportHeader, receiver) == 4);
  CHECK(offsetof(wg::MessageTransportHeader, counter) == 8);

  // Little-endian on the wire.
  const uint8_t wire[wg::kTransportHeaderSize] = {4, 0, 0, 0, 0x78, 0x56, 0x34, 0x12,
                                                  1, 2, 3, 4, 5, 6, 7, 8};
  const auto h = wg::load_message<wg::MessageTransportHeader>(wire);
  CHECK(h.type == 4);
  CHECK(h.receiver == 0x12345678);
  CHECK(h.counter == 0x0807060504030201);
}

TEST_CASE("messages: protocol constants are the paper's", "[messages]") {
  CHECK(wg::kRekeyAfterMessages == uint64_t{1} << 60);
  CHECK(wg::kRejectAfterMessages == 18446744073709543423ull);  // 2^64 - 2^13 - 1
  CHECK(wg::kRekeyAfterTime == 120s);
  CHECK(wg::kRejectAfterTime == 180s);
  CHECK(wg::kRekeyAttemptTime == 90s);
  CHECK(wg::kRekeyTimeout == 5s);
  CHECK(wg::kKeepaliveTimeout == 10s);
  CHECK(wg::kMaxTimerHandshakes == 18);
  CHECK(wg::kCookieSecretMaxAge == 120s);
  CHECK(wg::kCookieValidity == 115s);
  CHECK(wg::kHandshakeInitiationRate == 20ms);
  CHECK(wg::kRekeyTimeoutJitterMax == 334ms);
}

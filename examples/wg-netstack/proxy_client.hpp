// What the SOCKS5 and HTTP proxies share about a client before they relay: a deadline on
// its greeting, a close that lets an error reply reach it, and the proxy's own
// policy errors.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>

#include "relay.hpp"

namespace wgns {

// Closes a socket when a deadline passes unless disarm() came first: a client that sends
// half a greeting and then nothing must not keep its connection (slowloris). Lives on the
// socket's (single-threaded) executor and must be destroyed before the socket; a wait
// that already completed when the deadline is disarmed or destroyed does nothing.
class Deadline {
public:
  Deadline(tcp::socket& s, std::chrono::steady_clock::duration after);
  ~Deadline() { disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  void disarm();
  bool expired() const { return state_->expired; }

private:
  struct State {
    bool armed = true;
    bool expired = false;
  };
  asio::steady_timer timer_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// After an error reply: sends FIN, then reads and discards what the client still sends
// for up to kLingerTime (or kLingerBytes), then closes. Closing at once with unread bytes
// in the receive queue makes the kernel send a reset, and a client that gets the reset
// before it read the reply loses the reply (RFC 9112 section 9.6, "lingering close").
inline constexpr auto kLingerTime = std::chrono::seconds(2);
inline constexpr size_t kLingerBytes = 16 * 1024 * 1024;
// Stream: tcp::socket or TlsStream.
template <class Stream>
awaitable<void> close_after_reply(Stream& s);

// Targets the proxies refuse on their own account (not the tunnel's answer).
enum class ProxyError {
  own_address = 1,  // the target is the netstack's own tunnel address
};
const boost::system::error_category& proxy_category();
inline error_code make_error_code(ProxyError e) { return {static_cast<int>(e), proxy_category()}; }

}  // namespace wgns

template <>
struct boost::system::is_error_code_enum<wgns::ProxyError> : std::true_type {};

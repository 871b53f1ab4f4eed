// The client greeting's deadline, the lingering close after an error reply, and the
// proxy's error category.
#include "proxy_client.hpp"

#include <string>

#include "tls_stream.hpp"

namespace wgns {

Deadline::Deadline(tcp::socket& s, std::chrono::steady_clock::duration after) : timer_(s.get_executor()) {
  timer_.expires_after(after);
  // The handler holds the state, not the Deadline: it may run after the Deadline is gone,
  // and then finds armed == false and leaves the socket alone.
  timer_.async_wait([&s, state = state_](const error_code& ec) {
    if (ec || !state->armed) return;
    state->armed = false;
    state->expired = true;
    error_code ignored;
    s.close(ignored);  // the pending read of the handshake ends with operation_aborted
  });
}

void Deadline::disarm() {
  state_->armed = false;
  timer_.cancel();
}

template <class Stream>
awaitable<void> close_after_reply(Stream& s) {
  shutdown_send(s);
  if (lowest_socket(s).is_open()) {
    Deadline linger(lowest_socket(s), kLingerTime);
    uint8_t discard[4096];
    for (size_t total = 0; total < kLingerBytes;) {
      auto [rec, n] = co_await s.async_read_some(asio::buffer(discard), kTry);
      if (rec) break;  // EOF from the client, or the linger time is up
      total += n;
    }
  }
  close_stream(s);
}
template awaitable<void> close_after_reply(tcp::socket&);
template awaitable<void> close_after_reply(TlsStream&);

namespace {
class ProxyCategory : public boost::system::error_category {
public:
  const char* name() const noexcept override { return "wg-netstack"; }
  std::string message(int ev) const override {
    switch (static_cast<ProxyError>(ev)) {
      case ProxyError::own_address:
        return "the proxy's own tunnel address (refused: it would only reach the proxy itself)";
    }
    return "unknown wg-netstack error";
  }
};
}  // namespace

const boost::system::error_category& proxy_category() {
  static const ProxyCategory category;
  return category;
}

}  // namespace wgns

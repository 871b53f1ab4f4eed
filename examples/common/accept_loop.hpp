// The programs' TCP accept loop: a cap on the connections served at once, and no busy
// loop when the process runs out of file descriptors.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace programs {

struct AcceptOptions {
  std::string name;  // the listener in log lines: "SOCKS5 on 127.0.0.1:1080"
  // Connections served at once (0: no cap). A connection past it is accepted and reset at
  // once, so its client learns it will not be served instead of waiting in the backlog.
  size_t max_connections = 0;
  std::function<void()> on_refused;  // a connection is reset for either reason, called before (may be empty)
};

// At most `max` connections served at once (0: no cap); a stretch at the cap is logged
// once when it starts and once when it ends. One thread's.
class ConnectionCap {
public:
  ConnectionCap(std::string name, size_t max) : name_(std::move(name)), max_(max) {}
  // One more connection: true to serve it (holding a slot()), false to refuse it.
  bool admit();
  // Counts a connection being served until the handle is dropped.
  std::shared_ptr<void> slot();

private:
  std::string name_;
  size_t max_;
  std::shared_ptr<size_t> open_ = std::make_shared<size_t>(0);
  bool at_cap_ = false;
};

// Accepts on `acceptor` until it is closed, serving each connection (TCP_NODELAY set) in
// its own coroutine `serve(socket)` on the acceptor's executor, which must be one thread.
// Out of descriptors (EMFILE, ENFILE), it closes a descriptor held in reserve, accepts and
// resets the waiting connections with it, takes the reserve back and pauses 100 ms before
// accepting again: clients are refused, not left to spin the loop. Each such episode, and
// each stretch at max_connections, is logged once when it starts and once when it ends.
boost::asio::awaitable<void> accept_loop(
    boost::asio::ip::tcp::acceptor& acceptor, AcceptOptions options,
    std::function<boost::asio::awaitable<void>(boost::asio::ip::tcp::socket)> serve);

}  // namespace programs

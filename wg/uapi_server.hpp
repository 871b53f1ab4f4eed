// The UAPI's Unix-socket server.
#pragma once

#include <atomic>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "wg/base/fd.hpp"
#include "wg/uapi.hpp"

namespace wg::uapi {

// A thread per connection. A reserve descriptor lets it accept at the descriptor limit
// rather than spin on accept().
class Server {
public:
  // Owns listen_fd.
  Server(Device& dev, int listen_fd, size_t max_connections = kMaxConnections);
  ~Server();
  // Closes every connection and joins their threads.
  void stop();
  // For tests.
  size_t connections();

private:
  struct Conn {
    UniqueFd fd;
    ConnActivity activity;
    std::thread thread;
  };
  void accept_loop();
  // At max_connections, evicts first unless room_made.
  void take(UniqueFd fd, bool room_made);
  // False if none waits. Needs mu_.
  bool evict_locked();
  void reap_locked();

  Device& dev_;
  UniqueFd listen_fd_;
  const size_t max_connections_;
  UniqueFd spare_fd_;  // acceptor thread only
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<Conn> conns_;  // guarded by mu_; the acceptor joins finished ones
  std::thread acceptor_;
};

// wg(8) looks for kSocketDir/NAME.sock.
inline constexpr const char* kSocketDir = "/var/run/wireguard";

// Mode 0600; a stale socket is replaced, a live one is an error. -1 with `error` set.
int listen_unix(const std::string& path, std::string& error);

}  // namespace wg::uapi

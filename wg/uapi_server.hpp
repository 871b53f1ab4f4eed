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

// A thread per connection, at most max_connections. A reserve descriptor lets it accept
// at the descriptor limit, then serve (evicting the quietest) or answer
// kErrorNoDescriptors, never spinning on accept().
class Server {
public:
  // Owns listen_fd (see listen_unix).
  Server(Device& dev, int listen_fd, size_t max_connections = kMaxConnections);
  ~Server();
  // Closes the socket and every connection and joins their threads.
  void stop();
  // For tests.
  size_t connections();

private:
  struct Conn {
    UniqueFd fd;  // empty once its thread closed it
    ConnActivity activity;
    std::thread thread;
  };
  void accept_loop();
  // Serves fd or answers kErrorNoThread. At max_connections, first evicts unless room_made.
  void take(UniqueFd fd, bool room_made);
  // Shuts down the waiting connection quiet longest; false if none waits. Needs mu_.
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

// wg(8) looks for interface NAME's socket at kSocketDir/NAME.sock.
inline constexpr const char* kSocketDir = "/var/run/wireguard";

// Binds `path` with mode 0600, creating directories 0755. A live socket there is an
// error; a stale one is replaced. Returns the fd, or -1 with `error` set.
int listen_unix(const std::string& path, std::string& error);

}  // namespace wg::uapi

// The UAPI's Unix-socket server: the socket file wg(8) finds, one thread per connection,
// bounded connections and descriptor exhaustion survived. The protocol itself is
// wg/uapi.hpp.
#pragma once

#include <atomic>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "wg/base/fd.hpp"
#include "wg/uapi.hpp"

namespace wg::uapi {

// Listens on a Unix socket and serves each connection on its own thread, at most
// max_connections at once (see kMaxConnections). Survives the descriptor limit: one
// descriptor is kept in reserve so that a connection at the limit is still accepted and
// either served (after closing the connection quiet longest) or answered
// kErrorNoDescriptors, never left in the backlog with accept() failing in a loop.
class Server {
public:
  // Takes ownership of a listening socket (see listen_unix).
  Server(Device& dev, int listen_fd, size_t max_connections = kMaxConnections);
  ~Server();
  // Closes the listening socket and every connection, and waits for their threads.
  void stop();
  // Connections being served now (for tests).
  size_t connections();

private:
  struct Conn {
    UniqueFd fd;  // empty once the connection's thread has closed it
    ConnActivity activity;
    std::thread thread;
  };
  void accept_loop();
  // Starts serving an accepted connection (or answers it -EAGAIN and closes it when no
  // thread can be had). Past max_connections it first closes the quietest one, unless
  // room_made says the caller has.
  void take(UniqueFd fd, bool room_made);
  // Shuts down the waiting connection quiet longest; false if none waits. Holds mu_.
  bool evict_locked();
  void reap_locked();

  Device& dev_;
  UniqueFd listen_fd_;
  const size_t max_connections_;
  UniqueFd spare_fd_;  // the reserve descriptor; only the acceptor thread touches it
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<Conn> conns_;  // guarded by mu_; finished ones (fd empty) are joined by the acceptor
  std::thread acceptor_;
};

// Where wg(8) looks for the socket of a userspace interface NAME: kSocketDir/NAME.sock.
inline constexpr const char* kSocketDir = "/var/run/wireguard";

// Creates /var/run/wireguard (0755) style directories and binds `path` with mode 0600
// (umask 0177). A path whose socket still answers is in use: error, never removed; a
// stale file is replaced. Returns the fd or -1 with `error` set.
int listen_unix(const std::string& path, std::string& error);

}  // namespace wg::uapi

// The cross-platform userspace API (`get=1` / `set=1`) that `wg` and `wg-quick` speak,
// with wireguard-go's keys and its `errno=-N` replies, and a Unix-socket server for it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <istream>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wg/device.hpp"

namespace wg::uapi {

// Error codes as wireguard-go reports them (negative errno values).
inline constexpr int kErrorIo = -5;          // -EIO
inline constexpr int kErrorProtocol = -71;   // -EPROTO: a line that is not key=value
inline constexpr int kErrorInvalid = -22;    // -EINVAL: unknown key or bad value
inline constexpr int kErrorPortInUse = -98;  // -EADDRINUSE

// The body of a `get=1` reply (without the trailing errno line).
std::string get(Device& dev);
// The same body in pieces of about 64 KiB, each handed to `sink` as soon as it is
// formatted (and wiped after: it may hold keys). Stops at the first piece sink refuses
// (returns false), so a client that hangs up mid-dump stops costing CPU at once. Returns
// whether every piece was taken.
bool get(Device& dev, const std::function<bool(std::string_view)>& sink);

// Applies the lines of a `set=1` request (without the `set=1` line and the final blank
// line). Returns 0 or a negative error code; lines before an error stay applied, as in
// wireguard-go. `error` (if given) receives a one-line reason, never key material.
int set(Device& dev, std::string_view lines, std::string* error = nullptr);

// Limits of the UAPI server. A line longer than kMaxLine or a `set=1` request larger than
// kMaxRequest is answered kErrorIo (what wireguard-go answers for a line its scanner
// cannot hold) and ends the connection: the rest of it cannot be told apart from junk.
// kMaxRequest holds a setconf of about 500,000 peers.
inline constexpr size_t kMaxLine = 64 * 1024;
inline constexpr size_t kMaxRequest = 64 * 1024 * 1024;
// Connections served at once. `wg` opens one per command and closes it; past this, a new
// connection closes the one that has waited longest for its next bytes, so clients that
// connect and send nothing never lock `wg` out.
inline constexpr size_t kMaxConnections = 256;
// What a connection the server cannot take is answered (before it is closed): the
// daemon's descriptor limit is reached and no waiting connection can make room
// (-EMFILE), or no thread can be started for it (-EAGAIN).
inline constexpr int kErrorNoDescriptors = -24;  // -EMFILE
inline constexpr int kErrorNoThread = -11;       // -EAGAIN

// Serves one connection: any number of requests until EOF, an invalid operation or an
// over-long line (both answered, then the connection ends). Returns when the peer hangs
// up or the fd is shut down (the server does that to stop or to make room). The caller
// closes the fd. `waiting` (if given) is set while serve() is blocked on the client (in a
// read or a write), and `last_read_ns` to the steady-clock time of the last bytes read:
// the server closes the waiting connection quiet longest when it needs room.
struct ConnActivity {
  std::atomic<bool> waiting{true};
  std::atomic<int64_t> last_read_ns{0};
};
void serve(Device& dev, int fd, ConnActivity* activity = nullptr);

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
    int fd;  // -1 once the connection's thread has closed it
    ConnActivity activity;
    std::thread thread;
  };
  void accept_loop();
  // Starts serving an accepted connection (or answers it -EAGAIN and closes it when no
  // thread can be had). Past max_connections it first closes the quietest one, unless
  // room_made says the caller has.
  void take(int fd, bool room_made);
  // Shuts down the waiting connection quiet longest; false if none waits. Holds mu_.
  bool evict_locked();
  void reap_locked();

  Device& dev_;
  int listen_fd_;
  const size_t max_connections_;
  int spare_fd_ = -1;  // the reserve descriptor; only the acceptor thread touches it
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<Conn> conns_;  // guarded by mu_; finished ones (fd -1) are joined by the acceptor
  std::thread acceptor_;
};

// Where wg(8) looks for the socket of a userspace interface NAME: kSocketDir/NAME.sock.
inline constexpr const char* kSocketDir = "/var/run/wireguard";

// Creates /var/run/wireguard (0755) style directories and binds `path` with mode 0600
// (umask 0177). A path whose socket still answers is in use: error, never removed; a
// stale file is replaced. Returns the fd or -1 with `error` set.
int listen_unix(const std::string& path, std::string& error);

}  // namespace wg::uapi

// The cross-platform userspace API (`get=1` / `set=1`) that `wg` and `wg-quick` speak,
// with wireguard-go's keys and its `errno=-N` replies, and a Unix-socket server for it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <istream>
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

// Serves one connection: any number of requests until EOF. Returns when the peer hangs
// up or `stop` is set (the server shuts the fd down to unblock it).
void serve(Device& dev, int fd);

// Listens on a Unix socket and serves each connection on its own thread.
class Server {
public:
  // Takes ownership of a listening socket (see listen_unix).
  Server(Device& dev, int listen_fd);
  ~Server();
  void stop();

private:
  void accept_loop();
  Device& dev_;
  int listen_fd_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  struct Conn {
    int fd;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Conn> conns_;  // finished ones are joined at the next accept
  std::thread acceptor_;
};

// Creates /var/run/wireguard (0755) style directories and binds `path` with mode 0600
// (umask 077). A path whose socket still answers is in use: error, never removed; a
// stale file is replaced. Returns the fd or -1 with `error` set.
int listen_unix(const std::string& path, std::string& error);

}  // namespace wg::uapi

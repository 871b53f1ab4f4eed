// The cross-platform userspace API (`get=1` / `set=1`) that `wg` and `wg-quick` speak,
// with wireguard-go's keys and its `errno=-N` replies: the codec and one connection's
// conversation over any stream fd. The Unix-socket server is wg/uapi_server.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

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

// A client's bytes as a reason quotes them: bytes outside printable ASCII as \xNN.
std::string escaped(std::string_view s);

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
  // The clock of last_read_ns: steady, in nanoseconds.
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
void serve(Device& dev, int fd, ConnActivity* activity = nullptr);
// Writes a reply's end, `errno=CODE` and the blank line; false when the client is gone.
bool write_errno(int fd, int code, ConnActivity* activity = nullptr);

}  // namespace wg::uapi

// The cross-platform userspace API of `wg` (`get=1`, `set=1`), as wireguard-go speaks it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "wg/device.hpp"

namespace wg::uapi {

// Negative errno values, as wireguard-go replies.
inline constexpr int kErrorIo = -5;          // -EIO
inline constexpr int kErrorProtocol = -71;   // -EPROTO: a line that is not key=value
inline constexpr int kErrorInvalid = -22;    // -EINVAL: unknown key or bad value
inline constexpr int kErrorPortInUse = -98;  // -EADDRINUSE

// A `get=1` reply without the errno line.
std::string get(Device& dev);
// The same in pieces of about 64 KiB, each wiped after `sink`. Stops when sink returns
// false; returns whether every piece was taken.
bool get(Device& dev, const std::function<bool(std::string_view)>& sink);

// Applies a `set=1` request's lines (without `set=1` and the blank line). Returns 0 or a
// negative code; lines before an error stay applied, as in wireguard-go. `error` gets a
// reason without key material.
int set(Device& dev, std::string_view lines, std::string* error = nullptr);

// Longer lines or requests are answered kErrorIo, as in wireguard-go, and end the connection.
inline constexpr size_t kMaxLine = 64 * 1024;
inline constexpr size_t kMaxRequest = 64 * 1024 * 1024;
// Past this, a new connection evicts the one idle longest, so silent clients cannot lock
// `wg` out.
inline constexpr size_t kMaxConnections = 256;
// Replies to a connection refused for lack of descriptors or of a thread.
inline constexpr int kErrorNoDescriptors = -24;  // -EMFILE
inline constexpr int kErrorNoThread = -11;       // -EAGAIN

// serve() sets `waiting` while blocked on the client and `last_read_ns` at each read; the
// server evicts by them.
struct ConnActivity {
  std::atomic<bool> waiting{true};
  std::atomic<int64_t> last_read_ns{0};
  // Steady clock, ns.
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
// Serves requests until EOF, an invalid operation or over-long line (answered first), or
// shutdown of fd. The caller closes fd.
void serve(Device& dev, int fd, ConnActivity* activity = nullptr);
// Writes `errno=CODE` and the blank line; false when the client is gone.
bool write_errno(int fd, int code, ConnActivity* activity = nullptr);

}  // namespace wg::uapi

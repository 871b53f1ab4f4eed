// The cross-platform userspace API of `wg`, as wireguard-go speaks it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "wg/device.hpp"

namespace wg::uapi {

inline constexpr int kErrorIo = -5;          // -EIO
inline constexpr int kErrorProtocol = -71;   // -EPROTO
inline constexpr int kErrorInvalid = -22;    // -EINVAL
inline constexpr int kErrorPortInUse = -98;  // -EADDRINUSE

// Without the errno line.
std::string get(Device& dev);
// In pieces, each wiped after `sink`; false if sink refused one.
bool get(Device& dev, const std::function<bool(std::string_view)>& sink);

// Returns 0 or a negative code; lines before an error stay applied. `error` holds no
// key material.
int set(Device& dev, std::string_view lines, std::string* error = nullptr);

// Longer lines or requests get kErrorIo and end the connection.
inline constexpr size_t kMaxLine = 64 * 1024;
inline constexpr size_t kMaxRequest = 64 * 1024 * 1024;
// Past this, a new connection evicts the longest idle.
inline constexpr size_t kMaxConnections = 256;
inline constexpr int kErrorNoDescriptors = -24;  // -EMFILE
inline constexpr int kErrorNoThread = -11;       // -EAGAIN

// Set by serve(); the server evicts by them.
struct ConnActivity {
  std::atomic<bool> waiting{true};
  std::atomic<int64_t> last_read_ns{0};
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
// Until EOF, an error or shutdown of fd. The caller closes fd.
void serve(Device& dev, int fd, ConnActivity* activity = nullptr);
// False when the client is gone.
bool write_errno(int fd, int code, ConnActivity* activity = nullptr);

}  // namespace wg::uapi

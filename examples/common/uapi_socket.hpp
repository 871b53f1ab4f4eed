// The UAPI socket's life cycle, as the daemons share it: a Unix socket that wg(8) finds
// at kSocketDir/NAME.sock (or a path of the user's), made here or inherited, whose file
// is removed when its owner ends.
#pragma once

#include <string>

#include "wg/base/fd.hpp"

namespace programs {

// An interface name the kernel and wg(8) take: 1 to 15 characters, no '/', ':' or
// white space, not "." or "..". kInterfaceNameRule says so to a user.
bool valid_interface_name(const std::string& name);
inline constexpr const char* kInterfaceNameRule = "an interface name is 1-15 characters without '/', ':' or spaces";

// Holds the listening descriptor until release() hands it to wg::uapi::Server, and the
// file's removal until destruction. Not thread-safe; move-only.
class UapiSocket {
 public:
  UapiSocket() = default;  // none: no descriptor, nothing to remove

  // Listens on `path` as wg::uapi::listen_unix does (directory 0755 if made, socket
  // 0600, a stale socket replaced, a live one refused); the file is ours to remove.
  // Throws std::runtime_error with listen_unix's message.
  static UapiSocket listen(std::string path);
  // The socket kSocketDir/NAME.sock, for interface NAME.
  static UapiSocket listen_interface(const std::string& name);
  // Adopts a listening descriptor made elsewhere (WG_UAPI_FD). With a path, the file
  // there passes to us with the descriptor (a re-executed daemon removes what its parent
  // made); without, nothing is removed.
  static UapiSocket adopt(int fd, std::string path = {});

  UapiSocket(UapiSocket&& other) noexcept;
  UapiSocket& operator=(UapiSocket&& other) noexcept;
  ~UapiSocket();  // unlinks path() if the file is still ours

  explicit operator bool() const { return static_cast<bool>(fd_); }
  int fd() const { return fd_.get(); }
  // The descriptor, for wg::uapi::Server (which owns it from then on); the file stays ours.
  int release() { return fd_.release(); }
  // What the destructor does, now: the descriptor closed if still held, the file removed
  // if ours.
  void close();
  const std::string& path() const { return path_; }

 private:
  wg::UniqueFd fd_;
  std::string path_;
  bool remove_ = false;
};

}  // namespace programs

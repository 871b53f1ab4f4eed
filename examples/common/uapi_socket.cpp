#include "uapi_socket.hpp"

#include <net/if.h>

#include <stdexcept>
#include <utility>

#include "wg/uapi_server.hpp"

namespace programs {

bool valid_interface_name(const std::string& n) {
  return !n.empty() && n.size() < IFNAMSIZ && n != "." && n != ".." &&
         n.find_first_of("/ \t\n\v\f\r:") == std::string::npos;
}

UapiSocket UapiSocket::listen(std::string path) {
  std::string err;
  wg::UniqueFd fd(wg::uapi::listen_unix(path, err));
  if (!fd) throw std::runtime_error(err);
  UapiSocket s;
  s.fd_ = std::move(fd);
  s.path_ = std::move(path);
  s.remove_ = true;
  return s;
}

UapiSocket UapiSocket::listen_interface(const std::string& name) {
  return listen(std::string(wg::uapi::kSocketDir) + "/" + name + ".sock");
}

UapiSocket UapiSocket::adopt(int fd, std::string path) {
  UapiSocket s;
  s.fd_.reset(fd);
  s.remove_ = !path.empty();
  s.path_ = std::move(path);
  return s;
}

UapiSocket::UapiSocket(UapiSocket&& other) noexcept
    : fd_(std::move(other.fd_)), path_(std::move(other.path_)), remove_(std::exchange(other.remove_, false)) {}

UapiSocket& UapiSocket::operator=(UapiSocket&& other) noexcept {
  if (this != &other) {
    UapiSocket old(std::move(*this));
    fd_ = std::move(other.fd_);
    path_ = std::move(other.path_);
    remove_ = std::exchange(other.remove_, false);
  }
  return *this;
}

UapiSocket::~UapiSocket() { close(); }

void UapiSocket::close() {
  fd_.reset();
  if (std::exchange(remove_, false)) ::unlink(path_.c_str());
}

}  // namespace programs

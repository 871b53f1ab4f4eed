// The UAPI's Unix-socket server (wg/uapi_server.hpp).
#include "wg/uapi_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "wg/base/log.hpp"

namespace wg::uapi {

Server::Server(Device& dev, int listen_fd, size_t max_connections)
    : dev_(dev), listen_fd_(listen_fd), max_connections_(std::max<size_t>(1, max_connections)) {
  spare_fd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  acceptor_ = std::thread([this] { accept_loop(); });
}

Server::~Server() { stop(); }

void Server::stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_.get(), SHUT_RDWR);
  acceptor_.join();
  listen_fd_.reset();
  spare_fd_.reset();
  std::list<Conn> conns;
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_)
      if (c.fd) ::shutdown(c.fd.get(), SHUT_RDWR);
    conns.swap(conns_);
  }
  for (auto& c : conns) c.thread.join();
}

size_t Server::connections() {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(conns_.begin(), conns_.end(), [](const Conn& c) { return bool(c.fd); }));
}

void Server::reap_locked() {
  std::erase_if(conns_, [](Conn& c) {
    if (c.fd) return false;
    c.thread.join();
    return true;
  });
}

bool Server::evict_locked() {
  Conn* victim = nullptr;
  for (auto& c : conns_) {
    if (!c.fd || !c.activity.waiting) continue;
    if (!victim || c.activity.last_read_ns < victim->activity.last_read_ns) victim = &c;
  }
  if (!victim) return false;
  // Its thread then reads EOF and closes the fd; never chosen twice.
  victim->activity.waiting = false;
  victim->activity.last_read_ns = INT64_MAX;
  ::shutdown(victim->fd.get(), SHUT_RDWR);
  return true;
}

void Server::accept_loop() {
  while (!stopping_) {
    pollfd pfd{listen_fd_.get(), POLLIN, 0};
    int r = ::poll(&pfd, 1, 200);
    {
      std::lock_guard lock(mu_);
      reap_locked();
    }
    if (!spare_fd_) spare_fd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (r <= 0 || stopping_) continue;
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd) {
      take(std::move(fd), false);
      continue;
    }
    if (errno != EMFILE && errno != ENFILE) continue;
    // Out of descriptors: evict the quietest connection and accept on the reserve
    // descriptor, or with nothing to evict, answer and close.
    bool room;
    {
      std::lock_guard lock(mu_);
      room = evict_locked();
    }
    if (spare_fd_) {
      spare_fd_.reset();
      fd.reset(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    if (fd && room) {
      take(std::move(fd), true);
    } else if (fd) {
      log::error("UAPI: out of file descriptors, connection refused");
      write_errno(fd.get(), kErrorNoDescriptors);
    } else {
      // The evicted fd is not closed yet: wait rather than spin.
      ::poll(nullptr, 0, 10);
    }
  }
}

void Server::take(UniqueFd fd, bool room_made) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  size_t open = static_cast<size_t>(std::count_if(conns_.begin(), conns_.end(), [](const Conn& c) { return bool(c.fd); }));
  if (open >= max_connections_ && !room_made) evict_locked();
  Conn& c = conns_.emplace_back();
  c.fd = std::move(fd);
  c.activity.last_read_ns = ConnActivity::now_ns();
  try {
    c.thread = std::thread([this, &c] {
      serve(dev_, c.fd.get(), &c.activity);
      std::lock_guard lock(mu_);
      c.fd.reset();
    });
  } catch (const std::system_error&) {
    log::error("UAPI: cannot start a thread, connection refused");
    write_errno(c.fd.get(), kErrorNoThread);
    conns_.pop_back();
  }
}

int listen_unix(const std::string& path, std::string& error) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    error = "socket path too long: " + path;
    return -1;
  }
  std::error_code fec;
  auto dir = std::filesystem::path(path).parent_path();
  // A directory we create is 0755 whatever the umask, as for wireguard-go; an existing
  // one keeps its mode.
  if (!dir.empty() && std::filesystem::create_directories(dir, fec) && !fec) ::chmod(dir.c_str(), 0755);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  // 0600: only the owner may connect.
  mode_t old = ::umask(0177);
  int r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (r < 0 && errno == EADDRINUSE) {
    // Only a socket that no longer answers is removed: another daemon may own it.
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    bool alive = probe && ::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (alive) {
      ::umask(old);
      error = "UAPI socket " + path + " is in use by another process";
      return -1;
    }
    ::unlink(path.c_str());
    r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  ::umask(old);
  if (r < 0 || ::listen(fd.get(), 16) < 0) {
    error = "cannot listen on " + path + ": " + std::strerror(errno);
    return -1;
  }
  return fd.release();
}

}  // namespace wg::uapi

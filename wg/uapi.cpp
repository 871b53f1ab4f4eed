// UAPI: the text protocol of wireguard-go's ipc package, over any stream fd.
#include "wg/uapi.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "wg/log.hpp"

namespace wg::uapi {
namespace {

template <class T>
bool parse_uint(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

struct SetError {
  int code;
  std::string reason;
};

class Setter {
public:
  explicit Setter(Device& dev) : dev_(dev) {}

  // Returns nullopt on success.
  std::optional<SetError> line(std::string_view key, std::string_view value) {
    if (!in_peer_) {
      if (key == "public_key") return begin_peer(value);
      return device_key(key, value);
    }
    if (key == "public_key") return begin_peer(value);
    return peer_key(key, value);
  }

private:
  std::optional<SetError> device_key(std::string_view key, std::string_view value) {
    if (key == "private_key") {
      auto k = PrivateKey::from_hex(value);
      if (!k) return SetError{kErrorInvalid, "invalid private_key"};
      if (k->is_zero()) dev_.set_private_key(std::nullopt);
      else dev_.set_private_key(*k);
      return std::nullopt;
    }
    if (key == "listen_port") {
      uint16_t port;
      if (!parse_uint(value, port)) return SetError{kErrorInvalid, "invalid listen_port"};
      if (auto ec = dev_.set_listen_port(port))
        return SetError{ec == std::errc::address_in_use ? kErrorPortInUse : kErrorIo,
                        "cannot listen on port " + std::to_string(port) + ": " + ec.message()};
      return std::nullopt;
    }
    if (key == "fwmark") {
      uint32_t mark = 0;
      if (!value.empty() && !parse_uint(value, mark)) return SetError{kErrorInvalid, "invalid fwmark"};
      if (auto ec = dev_.set_fwmark(mark)) return SetError{kErrorIo, "fwmark: " + ec.message()};
      return std::nullopt;
    }
    if (key == "replace_peers") {
      if (value != "true") return SetError{kErrorInvalid, "invalid replace_peers"};
      dev_.remove_all_peers();
      return std::nullopt;
    }
    return SetError{kErrorInvalid, "invalid UAPI device key: " + std::string(key)};
  }

  std::optional<SetError> begin_peer(std::string_view value) {
    auto k = PublicKey::from_hex(value);
    if (!k) return SetError{kErrorInvalid, "invalid public_key"};
    in_peer_ = true;
    created_ = false;
    peer_ = dev_.lookup_peer(*k);
    if (!peer_) {
      peer_ = dev_.add_peer(*k);  // null for our own key: its lines are ignored
      created_ = peer_ != nullptr;
    }
    return std::nullopt;
  }

  std::optional<SetError> peer_key(std::string_view key, std::string_view value) {
    if (key == "update_only") {
      if (value != "true") return SetError{kErrorInvalid, "invalid update_only"};
      if (created_) {
        dev_.remove_peer(peer_->public_key());
        peer_.reset();
      }
      return std::nullopt;
    }
    if (key == "remove") {
      if (value != "true") return SetError{kErrorInvalid, "invalid remove"};
      if (peer_) dev_.remove_peer(peer_->public_key());
      peer_.reset();
      return std::nullopt;
    }
    if (key == "preshared_key") {
      auto k = PresharedKey::from_hex(value);
      if (!k) return SetError{kErrorInvalid, "invalid preshared_key"};
      if (peer_) dev_.set_preshared_key(*peer_, *k);
      return std::nullopt;
    }
    if (key == "endpoint") {
      auto ep = conn::Endpoint::parse(value);
      if (!ep) return SetError{kErrorInvalid, "invalid endpoint: " + std::string(value)};
      if (peer_) dev_.set_endpoint(*peer_, *ep);
      return std::nullopt;
    }
    if (key == "persistent_keepalive_interval") {
      uint16_t secs;
      if (!parse_uint(value, secs)) return SetError{kErrorInvalid, "invalid persistent_keepalive_interval"};
      if (peer_) dev_.set_persistent_keepalive(*peer_, secs);
      return std::nullopt;
    }
    if (key == "replace_allowed_ips") {
      if (value != "true") return SetError{kErrorInvalid, "invalid replace_allowed_ips"};
      if (peer_) dev_.clear_allowed_ips(*peer_);
      return std::nullopt;
    }
    if (key == "allowed_ip") {
      bool remove = !value.empty() && value.front() == '-';
      if (remove) value.remove_prefix(1);
      auto p = IpPrefix::parse(value);
      if (!p || value.find('/') == std::string_view::npos)
        return SetError{kErrorInvalid, "invalid allowed_ip: " + std::string(value)};
      if (peer_) {
        if (remove) dev_.remove_allowed_ip(*peer_, *p);
        else dev_.add_allowed_ip(*peer_, *p);
      }
      return std::nullopt;
    }
    if (key == "protocol_version") {
      if (value != "1") return SetError{kErrorInvalid, "invalid protocol_version"};
      return std::nullopt;
    }
    return SetError{kErrorInvalid, "invalid UAPI peer key: " + std::string(key)};
  }

  Device& dev_;
  bool in_peer_ = false;
  bool created_ = false;
  PeerPtr peer_;
};

bool write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Line reader over a blocking fd, bounded so a client cannot make us buffer without end.
class LineReader {
public:
  explicit LineReader(int fd) : fd_(fd) {}
  // False on EOF/error or an over-long line.
  bool next(std::string& line) {
    for (;;) {
      auto nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(buf_, pos_, nl - pos_);
        pos_ = nl + 1;
        if (pos_ > 4096) {
          buf_.erase(0, pos_);
          pos_ = 0;
        }
        return true;
      }
      if (buf_.size() - pos_ > kMaxLine) return false;
      char tmp[4096];
      ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

private:
  static constexpr size_t kMaxLine = 1 << 16;
  int fd_;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace

std::string get(Device& dev) {
  std::string out;
  get(dev, [&](std::string_view piece) {
    out.append(piece);
    return true;
  });
  return out;
}

bool get(Device& dev, const std::function<bool(std::string_view)>& sink) {
  constexpr size_t kPiece = 64 * 1024;
  std::string out;
  out.reserve(kPiece + 4096);
  auto add = [&](std::string_view k, const std::string& v) {
    out.append(k);
    out.push_back('=');
    out.append(v);
    out.push_back('\n');
  };
  auto flush = [&] {
    bool ok = out.empty() || sink(out);
    secure_wipe(out.data(), out.size());
    out.clear();
    return ok;
  };
  if (auto k = dev.private_key()) {
    std::string hex = k->to_hex();
    add("private_key", hex);
    secure_wipe(hex.data(), hex.size());
  }
  if (dev.listen_port()) add("listen_port", std::to_string(dev.listen_port()));
  if (dev.fwmark()) add("fwmark", std::to_string(dev.fwmark()));
  auto peers = dev.peers();
  std::sort(peers.begin(), peers.end(), [](const PeerPtr& a, const PeerPtr& b) {
    return std::memcmp(a->public_key().data(), b->public_key().data(), kKeyLen) < 0;
  });
  for (auto& p : peers) {
    add("public_key", p->public_key().to_hex());
    std::string psk = dev.preshared_key(*p).to_hex();
    add("preshared_key", psk);
    secure_wipe(psk.data(), psk.size());
    add("protocol_version", "1");
    {
      std::lock_guard lock(p->endpoint_mu_);
      if (p->endpoint_) add("endpoint", p->endpoint_->to_string());
    }
    int64_t ns = p->stats_.last_handshake_ns.load();
    add("last_handshake_time_sec", std::to_string(ns / 1000000000));
    add("last_handshake_time_nsec", std::to_string(ns % 1000000000));
    add("tx_bytes", std::to_string(p->stats_.tx_bytes.load()));
    add("rx_bytes", std::to_string(p->stats_.rx_bytes.load()));
    add("persistent_keepalive_interval", std::to_string(dev.persistent_keepalive(*p)));
    for (auto& prefix : dev.allowed_ips(*p)) add("allowed_ip", prefix.to_string());
    if (out.size() >= kPiece && !flush()) return false;
  }
  return flush();
}

int set(Device& dev, std::string_view lines, std::string* error) {
  Setter setter(dev);
  while (!lines.empty()) {
    auto nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl);
    lines = nl == std::string_view::npos ? std::string_view{} : lines.substr(nl + 1);
    if (line.empty()) break;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      if (error) *error = "failed to parse line (no '=')";
      return kErrorProtocol;
    }
    if (auto err = setter.line(line.substr(0, eq), line.substr(eq + 1))) {
      if (error) *error = err->reason;
      return err->code;
    }
  }
  return 0;
}

void serve(Device& dev, int fd) {
  LineReader reader(fd);
  std::string line;
  while (reader.next(line)) {
    if (line == "get=1") {
      // The request ends with a blank line.
      if (!reader.next(line) || !line.empty()) {
        write_all(fd, "errno=" + std::to_string(kErrorProtocol) + "\n\n");
        return;
      }
      // Written as it is formatted: a client that hangs up stops the dump at once.
      bool ok = get(dev, [fd](std::string_view piece) { return write_all(fd, piece); });
      if (!ok || !write_all(fd, "errno=0\n\n")) return;
    } else if (line == "set=1") {
      std::string request;
      bool ended = false;
      while (reader.next(line)) {
        if (line.empty()) {
          ended = true;
          break;
        }
        request += line;
        request += '\n';
      }
      if (!ended) {
        secure_wipe(request.data(), request.size());
        return;
      }
      std::string reason;
      int code = set(dev, request, &reason);
      secure_wipe(request.data(), request.size());
      if (code != 0) log::error("UAPI set: {}", reason);
      if (!write_all(fd, "errno=" + std::to_string(code) + "\n\n")) return;
    } else {
      log::error("UAPI: invalid operation");
      write_all(fd, "errno=" + std::to_string(kErrorInvalid) + "\n\n");
      return;
    }
  }
}

Server::Server(Device& dev, int listen_fd) : dev_(dev), listen_fd_(listen_fd) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

Server::~Server() { stop(); }

void Server::stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<Conn> conns;
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_) ::shutdown(c.fd, SHUT_RDWR);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c.thread.join();
    ::close(c.fd);
  }
}

void Server::accept_loop() {
  while (!stopping_) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, 200);
    if (r <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      break;
    }
    // Reap connections that ended, so a long-running daemon does not collect threads.
    std::erase_if(conns_, [](Conn& c) {
      if (!c.finished->load()) return false;
      c.thread.join();
      ::close(c.fd);
      return true;
    });
    auto finished = std::make_shared<std::atomic<bool>>(false);
    conns_.push_back({fd, std::thread([this, fd, finished] {
                        serve(dev_, fd);
                        finished->store(true);
                      }),
                      finished});
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
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, fec);
    if (!fec) ::chmod(dir.c_str(), 0755);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  mode_t old = ::umask(077);
  int r = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (r < 0 && errno == EADDRINUSE) {
    // Another daemon may own it: only a socket that no longer answers is removed.
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool alive = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) ::close(probe);
    if (alive) {
      ::umask(old);
      ::close(fd);
      error = "UAPI socket " + path + " is in use by another process";
      return -1;
    }
    ::unlink(path.c_str());
    r = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  ::umask(old);
  if (r < 0 || ::listen(fd, 16) < 0) {
    error = "cannot listen on " + path + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace wg::uapi

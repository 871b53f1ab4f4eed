// wireguard-go's ipc text protocol, over any stream fd.
#include "wg/uapi.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "wg/base/log.hpp"
#include "wg/base/shown.hpp"

namespace wg::uapi {
namespace {

template <class T>
bool parse_uint(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

// For log lines: at most 64 bytes, escaped so a client cannot inject terminal escapes,
// and nothing that may be a key (a misplaced key= line).
std::string printable(std::string_view s) {
  constexpr size_t kMax = 64;
  if (looks_like_key(s)) return "(not shown: it may be key material)";
  std::string out = escaped(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out;
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
                        "cannot open UDP port " + std::to_string(port) + ": " + ec.message()};
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
    return SetError{kErrorInvalid, "invalid UAPI device key: " + printable(key)};
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
      // Undoes a peer this set created; a second update_only finds it gone.
      if (created_ && peer_) dev_.remove_peer(peer_->public_key());
      if (created_) peer_.reset();
      created_ = false;
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
      if (!ep) return SetError{kErrorInvalid, "invalid endpoint: " + printable(value)};
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
        return SetError{kErrorInvalid, "invalid allowed_ip: " + printable(value)};
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
    return SetError{kErrorInvalid, "invalid UAPI peer key: " + printable(key)};
  }

  Device& dev_;
  bool in_peer_ = false;
  bool created_ = false;
  PeerPtr peer_;
};

// Marks the connection waiting, so evictable, while it blocks on the client.
class Waiting {
public:
  explicit Waiting(ConnActivity* a) : a_(a) {
    if (a_) a_->waiting = true;
  }
  ~Waiting() {
    if (a_) a_->waiting = false;
  }
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

private:
  ConnActivity* a_;
};

bool write_all(int fd, std::string_view s, ConnActivity* activity) {
  while (!s.empty()) {
    ssize_t n;
    {
      Waiting w(activity);
      n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads lines of at most kMaxLine bytes from a blocking fd.
class LineReader {
public:
  enum class Status { line, end, too_long };
  LineReader(int fd, ConnActivity* activity) : fd_(fd), activity_(activity) {}
  // `end`: EOF, an error, or the fd shut down.
  Status next(WipedString& line) {
    for (;;) {
      auto nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(buf_, pos_, nl - pos_);
        pos_ = nl + 1;
        if (pos_ > 4096) {
          buf_.erase(0, pos_);
          pos_ = 0;
        }
        return Status::line;
      }
      if (buf_.size() - pos_ > kMaxLine) return Status::too_long;
      char tmp[4096];
      ssize_t n;
      {
        Waiting w(activity_);
        n = ::read(fd_, tmp, sizeof tmp);
      }
      if (activity_) activity_->last_read_ns = ConnActivity::now_ns();
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::end;
      buf_.append(tmp, static_cast<size_t>(n));
      secure_wipe(tmp, static_cast<size_t>(n));
    }
  }

private:
  int fd_;
  ConnActivity* activity_;
  WipedString buf_;  // holds keys in hex: wiped as it moves and when freed
  size_t pos_ = 0;
};

}  // namespace

bool write_errno(int fd, int code, ConnActivity* activity) {
  return write_all(fd, "errno=" + std::to_string(code) + "\n\n", activity);
}

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
    std::string psk = p->preshared_key().to_hex();
    add("preshared_key", psk);
    secure_wipe(psk.data(), psk.size());
    add("protocol_version", "1");
    if (auto ep = p->endpoint()) add("endpoint", ep->to_string());
    int64_t ns = p->stats().last_handshake_ns.load();
    add("last_handshake_time_sec", std::to_string(ns / 1000000000));
    add("last_handshake_time_nsec", std::to_string(ns % 1000000000));
    add("tx_bytes", std::to_string(p->stats().tx_bytes.load()));
    add("rx_bytes", std::to_string(p->stats().rx_bytes.load()));
    add("persistent_keepalive_interval", std::to_string(p->persistent_keepalive()));
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

void serve(Device& dev, int fd, ConnActivity* activity) {
  using Status = LineReader::Status;
  LineReader reader(fd, activity);
  WipedString line;
  // Every exit: the lines' short-string bytes, and the stack below us.
  struct Scrub {
    WipedString& line;
    ~Scrub() {
      secure_wipe(line.data(), line.size());
      scrub_stack();
    }
  } scrub{line};
  for (;;) {
    Status st = reader.next(line);
    if (st == Status::end) return;
    if (st == Status::line && line == "get=1") {
      // A blank line must follow, as in wireguard-go.
      st = reader.next(line);
      if (st == Status::end) return;
      if (st != Status::line || !line.empty()) {
        log::error("UAPI get: trailing characters");
        if (!write_errno(fd, kErrorInvalid, activity) || st == Status::too_long) return;
        continue;
      }
      // Streamed: a client that hangs up stops the dump.
      bool ok = get(dev, [fd, activity](std::string_view piece) { return write_all(fd, piece, activity); });
      if (!ok || !write_errno(fd, 0, activity)) return;
    } else if (st == Status::line && line == "set=1") {
      // Read whole before applying: an endless request holds no lock, and one cut short
      // by EOF is not applied.
      WipedString request;
      Status last;
      for (;;) {
        last = reader.next(line);
        if (last != Status::line || line.empty()) break;
        if (request.size() + line.size() + 1 > kMaxRequest) {
          last = Status::too_long;
          break;
        }
        request += line;
        request += '\n';
      }
      // A client that only half-closed still reads the error.
      int code = last == Status::end ? kErrorProtocol : kErrorIo;
      if (last == Status::line) {
        std::string reason;
        code = set(dev, std::string_view(request), &reason);
        if (code != 0) log::error("UAPI set: {}", reason);
      } else if (last == Status::too_long) {
        log::error("UAPI set: a line over {} bytes or a request over {} bytes", kMaxLine, kMaxRequest);
      }
      secure_wipe(request.data(), request.size());
      secure_wipe(line.data(), line.size());
      scrub_stack();
      if (!write_errno(fd, code, activity) || last != Status::line) return;
    } else {
      // Answered, then closed: what follows cannot be parsed.
      log::error("UAPI: invalid operation");
      write_errno(fd, kErrorInvalid, activity);
      return;
    }
  }
}

}  // namespace wg::uapi

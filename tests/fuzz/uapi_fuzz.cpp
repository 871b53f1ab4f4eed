// Fuzzes the UAPI codec (wg/uapi.cpp) on a real wg::Device over an in-memory TUN and
// Bind, kept down (no sockets, no traffic). An input that starts with "get=1" or "set=1"
// is a whole conversation served by uapi::serve over a socketpair; any other input is
// the body of one `set=1`, applied with uapi::set.
// Checked beyond "no crash": every reply and return code is 0 or one of wireguard-go's
// errno values, with a reason exactly when it is an error; the reason never quotes a
// private or preshared key; and what `get=1` then reports, written back as a `set=1` to
// a fresh device, reads back the same (the codec round-trips the device's state).
//   cmake --preset fuzz && cmake --build build-fuzz --target uapi_fuzz
//   build-fuzz/bin/uapi_fuzz -max_total_time=60 tests/fuzz/corpus/uapi
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "bind/memory.hpp"
#include "tun/memory.hpp"
#include "wg/base/shown.hpp"
#include "wg/uapi.hpp"

namespace {

// A Device that no input can leave changed for the next: reset() clears what set= sets.
struct Node {
  explicit Node(conn::MemoryNetwork& net) : bind(net), dev(tun, bind, wg::DeviceOptions{.workers = 1}) {}
  void reset() {
    dev.set_private_key(std::nullopt);
    dev.remove_all_peers();
    dev.set_listen_port(0);
    dev.set_fwmark(0);
  }
  tun::MemoryDevice tun;
  conn::MemoryBind bind;
  wg::Device dev;
};

Node& node_a() {
  static conn::MemoryNetwork net;
  static Node n(net);
  return n;
}

Node& node_b() {
  static conn::MemoryNetwork net;
  static Node n(net);
  return n;
}

bool known_code(int c) {
  return c == 0 || c == wg::uapi::kErrorIo || c == wg::uapi::kErrorProtocol || c == wg::uapi::kErrorInvalid ||
         c == wg::uapi::kErrorPortInUse;
}

// get=1 as a set=1 body: the read-only keys go, the rest is what set= takes.
std::string as_set(std::string_view get) {
  std::string out;
  while (!get.empty()) {
    auto nl = get.find('\n');
    if (nl == std::string_view::npos) __builtin_trap();  // every line of get ends
    auto line = get.substr(0, nl);
    get.remove_prefix(nl + 1);
    auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) __builtin_trap();
    auto key = line.substr(0, eq);
    if (key == "last_handshake_time_sec" || key == "last_handshake_time_nsec" || key == "tx_bytes" ||
        key == "rx_bytes")
      continue;
    (out += line) += '\n';
  }
  return out;
}

void check_roundtrip(Node& a) {
  const std::string got = wg::uapi::get(a.dev);
  Node& b = node_b();
  b.reset();
  std::string reason;
  if (wg::uapi::set(b.dev, as_set(got), &reason) != 0) __builtin_trap();
  if (wg::uapi::get(b.dev) != got) __builtin_trap();
}

// No private or preshared key value (16 or more hex digits) appears in `reason` unless
// the request also holds it on another line, as a reason would quote that line: the
// reasons' own words have no such run of digits, so one there was quoted from a line.
// (An escaped byte's digits can complete one: "\x80" before "2030405060708090" reads
// "0203040506070809"; that input is a seed.)
void check_no_secret(std::string_view request, const std::string& reason) {
  std::string rest;
  std::string_view text = request;
  std::vector<std::string_view> secrets;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.starts_with("private_key=")) secrets.push_back(line.substr(12));
    else if (line.starts_with("preshared_key=")) secrets.push_back(line.substr(14));
    else (rest += wg::escaped(line)) += '\n';
  }
  for (auto s : secrets)
    if (s.size() >= 16 && s.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos &&
        reason.find(s) != std::string::npos && rest.find(s) == std::string::npos)
      __builtin_trap();
}

// Replies of serve(): get bodies and errno lines, each request's answer ending in
// "errno=N\n\n".
void check_replies(std::string_view replies) {
  while (!replies.empty()) {
    auto nl = replies.find('\n');
    if (nl == std::string_view::npos) __builtin_trap();
    auto line = replies.substr(0, nl);
    replies.remove_prefix(nl + 1);
    if (line.starts_with("errno=")) {
      int code = 0;
      try {
        code = std::stoi(std::string(line.substr(6)));
      } catch (...) {
        __builtin_trap();
      }
      if (!known_code(code) || !replies.starts_with("\n")) __builtin_trap();
      replies.remove_prefix(1);
    } else if (line.find('=') == std::string_view::npos) {
      __builtin_trap();
    }
  }
}

// One thread plays the client for every input. A thread per input (three inputs in four
// are conversations) grew ASan's registry of threads, which keeps about 1 KB for every
// thread that ever ran (uapi_fuzz's RSS 106 MB -> 475 MB in 45 minutes) and stops the
// process at 2^22 threads: a campaign of 10^7 inputs would have died of it.
class ClientThread {
public:
  static ClientThread& get() {
    static ClientThread* one = new ClientThread;  // never destroyed: it outlives every input
    return *one;
  }
  // Starts `job` there; finish() waits for it.
  void start(const std::function<void()>& job) {
    std::lock_guard lock(mu_);
    job_ = &job;
    cv_.notify_all();
  }
  void finish() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return job_ == nullptr; });
  }

private:
  ClientThread() : thread_([this] { loop(); }) { thread_.detach(); }
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return job_ != nullptr; });
      lock.unlock();
      (*job_)();
      lock.lock();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* job_ = nullptr;
  std::thread thread_;
};

void serve_conversation(Node& n, std::string_view input) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) __builtin_trap();
  std::string replies;
  // The client: sends everything, says it is done, and reads every reply.
  const std::function<void()> client = [&] {
    std::string_view rest = input;
    while (!rest.empty()) {
      ssize_t w = ::send(fds[1], rest.data(), rest.size(), MSG_NOSIGNAL);
      if (w <= 0) break;  // the server hung up first
      rest.remove_prefix(static_cast<size_t>(w));
    }
    ::shutdown(fds[1], SHUT_WR);
    char buf[4096];
    for (ssize_t r; (r = ::read(fds[1], buf, sizeof buf)) > 0;) replies.append(buf, static_cast<size_t>(r));
  };
  ClientThread& thread = ClientThread::get();
  thread.start(client);
  wg::uapi::serve(n.dev, fds[0]);
  ::shutdown(fds[0], SHUT_RDWR);
  thread.finish();
  ::close(fds[0]);
  ::close(fds[1]);
  check_replies(replies);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;  // the server's own line limit is 64 KiB
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Node& a = node_a();
  a.reset();
  if (input.starts_with("get=1\n") || input.starts_with("set=1\n")) {
    serve_conversation(a, input);
  } else {
    std::string reason;
    int code = wg::uapi::set(a.dev, input, &reason);
    if (!known_code(code) || (code == 0) != reason.empty()) __builtin_trap();
    check_no_secret(input, reason);
  }
  check_roundtrip(a);
  return 0;
}

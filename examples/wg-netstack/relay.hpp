// The relay of wg-netstack: copies bytes both ways between a local socket and a tunnel
// stream, holding a buffer per direction only while bytes flow.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>

#include "netstack/stack.hpp"

namespace wgns {

namespace asio = boost::asio;
using boost::system::error_code;
using asio::awaitable;
using asio::ip::tcp;
inline constexpr auto kTry = asio::as_tuple(asio::use_awaitable);

// The buffer of one direction: none while the connection is idle, kMin to kMax bytes
// while bytes flow. A read that fills it doubles it for the next read; a read that does
// not found the source drained, so the buffer is released and the relay waits for
// readability holding nothing; the next one is half as big (or as big as that read,
// if larger). An idle relayed connection costs no buffer: 64 KiB per direction made it
// 135 KB, and glibc kept the memory after the connections closed.
class RelayBuffer {
public:
  static constexpr size_t kMin = 4 * 1024, kMax = 64 * 1024;

  // The buffer for the next read: allocated (not zeroed) if none is held.
  asio::mutable_buffer get() {
    if (!data_) data_ = std::make_unique_for_overwrite<uint8_t[]>(size_);
    return {data_.get(), size_};
  }
  // After a read of n bytes into get(), once they are written on. True if the read
  // drained the source (the buffer is released: wait for readability before get()).
  bool consumed(size_t n) {
    if (n >= size_) {
      if (size_ < kMax) {
        data_.reset();
        size_ *= 2;
      }
      return false;
    }
    data_.reset();
    size_ = std::clamp(std::max(size_ / 2, std::bit_ceil(n)), kMin, kMax);
    return true;
  }
  size_t held() const { return data_ ? size_ : 0; }  // bytes allocated now
  size_t next_size() const { return size_; }

private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = kMin;
};

// The same few operations on both kinds of stream.
inline auto wait_readable(tcp::socket& s) { return s.async_wait(tcp::socket::wait_read, kTry); }
inline auto wait_readable(netstack::TcpStream& s) { return s.async_wait_readable(kTry); }
inline void shutdown_send(tcp::socket& s) {
  error_code ec;
  s.shutdown(tcp::socket::shutdown_send, ec);
}
inline void shutdown_send(netstack::TcpStream& s) { s.shutdown_send(); }
inline void close_stream(tcp::socket& s) {
  error_code ec;
  s.close(ec);
}
inline void close_stream(netstack::TcpStream& s) { s.close(); }
// A reset instead of a FIN: linger 0 on a kernel socket, tcp_abort in the netstack.
inline void abort_stream(tcp::socket& s) {
  error_code ec;
  s.set_option(asio::socket_base::linger(true, 0), ec);
  s.close(ec);
}
inline void abort_stream(netstack::TcpStream& s) { s.abort(); }
// A pipe or terminal ([STDIOTunnel]: stdin one way, stdout the other): a half-close is
// the end of the descriptor.
inline auto wait_readable(asio::posix::stream_descriptor& d) {
  return d.async_wait(asio::posix::stream_descriptor::wait_read, kTry);
}
inline void close_stream(asio::posix::stream_descriptor& d) {
  error_code ec;
  d.close(ec);
}
inline void shutdown_send(asio::posix::stream_descriptor& d) { close_stream(d); }
inline void abort_stream(asio::posix::stream_descriptor& d) { close_stream(d); }

// Copies one direction until EOF (then half-closes the other side) or an error (then
// resets both, which ends the other direction too). Waits for readability, not in a
// read, whenever the source is drained. An error is passed on as a reset, never as a
// FIN: when the peer behind the tunnel resets a download (it restarted), a FIN would
// tell the client the stream had ended where it was cut, and a client that reads to
// EOF would take the truncated bytes for the whole; the same for an upload whose client
// reset.
template <class From, class To>
awaitable<void> pump(From& from, To& to, bool& failed) {
  RelayBuffer buf;
  for (bool drained = true;;) {
    if (drained) {
      auto [wec] = co_await wait_readable(from);
      if (wec) {
        failed = true;
        break;
      }
    }
    auto [ec, n] = co_await from.async_read_some(buf.get(), kTry);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.get(), n), kTry);
      if (wec) {
        failed = true;
        break;
      }
    }
    drained = buf.consumed(n);
    if (ec) {
      if (ec != asio::error::eof) failed = true;
      break;
    }
  }
  if (failed) {
    abort_stream(from);
    abort_stream(to);
  } else {
    shutdown_send(to);
  }
}

// Relays between a and b until both directions ended, then closes both.
template <class A, class B>
awaitable<void> relay(A& a, B& b) {
  using namespace asio::experimental::awaitable_operators;
  bool failed = false;
  co_await (pump(a, b, failed) && pump(b, a, failed));
  close_stream(a);
  close_stream(b);
}

}  // namespace wgns

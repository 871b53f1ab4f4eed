// The TLS-wrapped HTTP proxy of [http] CertFile/KeyFile (wireproxy's HTTPS proxy: the
// client speaks TLS to the proxy, and HTTP or CONNECT inside it): the server side of a
// TLS connection over an accepted socket, as an Asio stream the HTTP proxy and the relay
// use like a tcp::socket.
//
// OpenSSL reads and writes the non-blocking socket itself; an operation that would block
// waits for the socket to become readable or writable and tries again. One read and one
// write may be pending at once (the relay's two directions), as on a tcp::socket; they
// run on the socket's executor and complete through it, never inside the initiating call.
// shutdown_send() sends TLS's close_notify and then a TCP FIN, the TLS form of a
// half-close: reading stays possible.
#pragma once

#include <boost/asio/compose.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <string>

#include "relay.hpp"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace wgns {

// A certificate chain and its private key, loaded once for every connection.
class TlsServerContext {
public:
  // PEM files as wireproxy takes them (CertFile: the chain, leaf first). Throws
  // std::runtime_error with the file and OpenSSL's reason.
  TlsServerContext(const std::string& cert_file, const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;
  SSL_CTX* native() const { return ctx_; }

private:
  SSL_CTX* ctx_ = nullptr;
};

class TlsStream {
public:
  using executor_type = tcp::socket::executor_type;

  TlsStream(tcp::socket s, const TlsServerContext& ctx);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() { return sock_.get_executor(); }
  tcp::socket& socket() { return sock_; }

  // The TLS handshake (the client speaks first).
  template <class Token>
  auto async_handshake(Token&& token) {
    return run<void(error_code)>(Op::handshake, {}, std::forward<Token>(token));
  }
  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return run<void(error_code, size_t)>(Op::read, first_buffer(buffers), std::forward<Token>(token));
  }
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    asio::const_buffer b = first_buffer(buffers);
    return run<void(error_code, size_t)>(Op::write, asio::mutable_buffer(const_cast<void*>(b.data()), b.size()),
                                         std::forward<Token>(token));
  }
  // Completes when a read would make progress: decrypted bytes are buffered, or the socket
  // is readable (a whole record may not have arrived yet; the read then waits for it).
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return run<void(error_code)>(Op::wait_readable, {}, std::forward<Token>(token));
  }

  // close_notify, then FIN (once; later calls do nothing).
  void shutdown_send();
  void close();  // close_notify if not yet sent, then the socket
  void abort();  // a reset, no close_notify

private:
  enum class Op { handshake, read, write, wait_readable };
  enum class Step { done, want_read, want_write };

  template <class Seq>
  static auto first_buffer(const Seq& s) {
    for (auto it = asio::buffer_sequence_begin(s); it != asio::buffer_sequence_end(s); ++it)
      if (asio::buffer_size(*it) > 0) return *it;
    return *asio::buffer_sequence_begin(s);
  }

  // One attempt of an operation without blocking: done (with ec and n), or what to wait for.
  Step attempt(Op op, asio::mutable_buffer b, error_code& ec, size_t& n);

  template <class Signature, class Token>
  auto run(Op op, asio::mutable_buffer b, Token&& token) {
    return asio::async_compose<Token, Signature>(
        [this, op, b, started = false, waited = false](auto& self, error_code wait_ec = {}) mutable {
          // The first step is posted: the operation never completes inside its initiation.
          if (!started) {
            started = true;
            asio::post(sock_.get_executor(), std::move(self));
            return;
          }
          error_code ec = wait_ec;
          size_t n = 0;
          Step step = Step::done;
          if (!ec && !sock_.is_open()) ec = asio::error::operation_aborted;
          // wait_readable is done once the socket was readable: only a read can tell
          // whether a whole record has come.
          if (!ec && !(op == Op::wait_readable && waited)) step = attempt(op, b, ec, n);
          waited = step != Step::done;
          if (step == Step::want_read) sock_.async_wait(tcp::socket::wait_read, std::move(self));
          else if (step == Step::want_write) sock_.async_wait(tcp::socket::wait_write, std::move(self));
          else if constexpr (std::is_same_v<Signature, void(error_code)>) self.complete(ec);
          else self.complete(ec, n);
        },
        token, sock_);
  }

  tcp::socket sock_;
  SSL* ssl_ = nullptr;
  bool sent_close_notify_ = false;
};

// The relay's operations (relay.hpp) on a TLS stream.
inline auto wait_readable(TlsStream& s) { return s.async_wait_readable(kTry); }
inline void shutdown_send(TlsStream& s) { s.shutdown_send(); }
inline void close_stream(TlsStream& s) { s.close(); }
inline void abort_stream(TlsStream& s) { s.abort(); }

// The TCP socket under a client stream (for the handshake deadline).
inline tcp::socket& lowest_socket(tcp::socket& s) { return s; }
inline tcp::socket& lowest_socket(TlsStream& s) { return s.socket(); }

}  // namespace wgns

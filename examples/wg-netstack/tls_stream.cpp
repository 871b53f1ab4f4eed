// The server side of TLS for the HTTPS proxy; see tls_stream.hpp.
#include "tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>
#include <unistd.h>

namespace wgns {
namespace {

std::string openssl_reason() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// An OpenSSL failure as an error code: the system's errno for a socket error, else
// ssl_error (the peer's protocol error or a truncated stream).
error_code failure(int ssl_error) {
  if (ssl_error == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
  if (ssl_error == SSL_ERROR_SYSCALL && errno != 0) return {errno, boost::system::system_category()};
  // A TCP EOF without close_notify is an unexpected EOF to OpenSSL 3 (SSL_ERROR_SSL with
  // SSL_R_UNEXPECTED_EOF_WHILE_READING); to the proxy it is the end of the stream, as for a
  // plain socket.
  if (ssl_error == SSL_ERROR_SYSCALL) return asio::error::eof;
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return asio::error::eof;
  return asio::error::connection_reset;
}

}  // namespace

TlsServerContext::TlsServerContext(const std::string& cert_file, const std::string& key_file) {
  // OpenSSL's own words for a missing file are "system library::No such file or directory".
  for (auto [what, path] : {std::pair{"CertFile ", &cert_file}, std::pair{"KeyFile ", &key_file}})
    if (::access(path->c_str(), R_OK) != 0) throw std::runtime_error(what + *path + ": " + std::strerror(errno));
  ctx_ = SSL_CTX_new(TLS_server_method());
  if (!ctx_) throw std::runtime_error("TLS: " + openssl_reason());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // No resumption (no tickets to send after the handshake), no renegotiation: a
  // connection's only TLS work after the handshake is its records.
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  // Writes may complete in part (a record at a time) and be retried from a moved buffer;
  // an idle connection gives its record buffers back.
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1) {
    auto why = openssl_reason();
    SSL_CTX_free(ctx_);
    throw std::runtime_error("CertFile " + cert_file + ": " + why);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx_) != 1) {
    auto why = openssl_reason();
    SSL_CTX_free(ctx_);
    throw std::runtime_error("KeyFile " + key_file + ": " + why);
  }
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

TlsStream::TlsStream(tcp::socket s, const TlsServerContext& ctx) : sock_(std::move(s)) {
  error_code ec;
  sock_.non_blocking(true, ec);
  ssl_ = SSL_new(ctx.native());
  if (!ssl_ || ec || SSL_set_fd(ssl_, sock_.native_handle()) != 1) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    sock_.close(ec);  // every operation then fails with operation_aborted
    ERR_clear_error();
    return;
  }
  SSL_set_accept_state(ssl_);
}

TlsStream::~TlsStream() {
  close();
  SSL_free(ssl_);
}

TlsStream::Step TlsStream::attempt(Op op, asio::mutable_buffer b, error_code& ec, size_t& n) {
  if (!ssl_) {
    ec = asio::error::operation_aborted;
    return Step::done;
  }
  if ((op == Op::read || op == Op::write) && b.size() == 0) return Step::done;  // as Asio's sockets
  if (op == Op::wait_readable) {
    if (SSL_pending(ssl_) > 0 || !SSL_is_init_finished(ssl_)) return Step::done;
    // Readable socket: done next time round.
    return Step::want_read;
  }
  ERR_clear_error();
  errno = 0;
  int r = 0;
  switch (op) {
    case Op::handshake:
      r = SSL_do_handshake(ssl_);
      break;
    case Op::read:
      r = SSL_read_ex(ssl_, b.data(), b.size(), &n);
      break;
    case Op::write:
      r = SSL_write_ex(ssl_, b.data(), b.size(), &n);
      break;
    case Op::wait_readable:
      break;
  }
  if (r == 1) return Step::done;
  n = 0;
  const int err = SSL_get_error(ssl_, r);
  if (err == SSL_ERROR_WANT_READ) return Step::want_read;
  if (err == SSL_ERROR_WANT_WRITE) return Step::want_write;
  ec = failure(err);
  return Step::done;
}

void TlsStream::shutdown_send() {
  if (!ssl_ || sent_close_notify_ || !sock_.is_open()) return;
  sent_close_notify_ = true;
  // One SSL_shutdown writes close_notify without waiting for the client's. If the socket
  // cannot take the alert now (its send buffer is full), the FIN alone says as much.
  if (SSL_is_init_finished(ssl_)) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  error_code ec;
  sock_.shutdown(tcp::socket::shutdown_send, ec);
}

void TlsStream::close() {
  shutdown_send();
  error_code ec;
  sock_.close(ec);
}

void TlsStream::abort() {
  sent_close_notify_ = true;
  error_code ec;
  sock_.set_option(asio::socket_base::linger(true, 0), ec);
  sock_.close(ec);
}

}  // namespace wgns

// A TLS session over another byte stream (transport layer, private): OpenSSL's record layer through
// a BIO of this stream's own, so that a connection runs over TLS exactly as over a socket (TCP or
// Unix) or memory. The session (SSL_CTX, role, peer verification) is set up by src/tls; this
// file only moves bytes.
//
// Reads over a socket: OpenSSL reads the socket itself (read_some_now, with read-ahead into its
// ~80 KiB record buffer) once it is readable, and decrypts into the connection's read block;
// no buffer of ours in between. Over memory, ciphertext is read into a buffer here first.
//
// Writes keep the connection's gathered slices: small slices are coalesced into records of up
// to 16 KiB (a record per small HTTP/2 frame would cost a MAC and 22 bytes each), large ones are
// encrypted in place, and all records of a flush leave in one write to the inner stream.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/byte_stream.h"

typedef struct ssl_st SSL;

namespace ferry::http2 {

class TlsStream final : public ByteStream {
 public:
  // Takes ssl (configured for its role, freed with the stream) over inner.
  TlsStream(std::unique_ptr<ByteStream> inner, SSL* ssl);
  ~TlsStream() override;
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Runs the handshake: done(ec) once, on the executor (never inline). On failure, error()
  // says why (OpenSSL's reason and the certificate verification result). Once; before any read
  // or write.
  void async_handshake(std::function<void(const asio::error_code&)> done);
  // After the handshake: waits until application data has arrived (left for the first read),
  // done(ec) once, from the loop. A client waits for the server's HTTP/2 SETTINGS so: with
  // TLS 1.3 a server refuses a client certificate only after the client's handshake is done,
  // and the refusal then surfaces here, as a handshake error, rather than as a lost connection.
  void async_wait_for_data(std::function<void(const asio::error_code&)> done);
  // Abandons a pending async_handshake or async_wait_for_data: closes the inner stream, and its
  // done(operation_aborted) is posted to the executor rather than kept here. A done that holds
  // its caller's coroutine (which owns this stream) would otherwise keep both alive for good
  // once the loop stops running: the owner's shutdown calls this.
  void cancel_handshake();
  // Why the handshake or a later operation failed, as OpenSSL put it; empty when it did not.
  const std::string& error() const { return error_; }
  SSL* ssl() const { return ssl_; }

  // ByteStream. A read ends with eof only after the peer's close_notify; a connection that
  // ends without one (a bare TCP FIN) reads as asio::ssl::error::stream_truncated, which a
  // reader must take as an error wherever the end delimits what it reads (an HTTP/1.1 body
  // without a length). close_gracefully() sends a close_notify first; close() does not.
  // write_some_now encrypts everything it is given (256 KiB at most per batch) and
  // returns the plaintext bytes whose records the inner stream took in full. What it encrypted
  // but could not send stays here, and the async_write that must follow, with the slices from
  // the returned offset on, sends it first instead of encrypting those bytes again.
  const asio::any_io_executor& executor() const override { return inner_->executor(); }
  void async_read_some(asio::mutable_buffer into,
                       std::shared_ptr<ByteStreamClient> client) override;
  std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) override;
  void async_write(std::span<const asio::const_buffer> buffers,
                   std::shared_ptr<ByteStreamClient> client) override;
  void close() override;
  void close_gracefully() override;
  std::string peer_address() const override { return inner_->peer_address(); }
  // An idle connection's buffers: over a socket, a read that waits with no part of a record
  // here can be cancelled, and the wait for the next bytes then holds none of OpenSSL's buffers
  // either (SSL_free_buffers: about 100 KiB given back; taken again by the next read or write).
  bool waits_without_buffer() const override { return direct_; }
  bool cancel_read() override;
  void async_wait_readable(std::shared_ptr<ByteStreamClient> client) override;

 private:
  struct Relay;  // the inner stream's client: routes its completions back here
  friend struct TlsBio;

  void handshake_step();
  void finish_handshake(const asio::error_code& ec);
  void peek_step();
  // Waits for ciphertext: for the socket to be readable (direct_), or reads it into in_.
  void wait_inner();
  void on_inner_read(const asio::error_code& ec, std::size_t n);
  void on_inner_written(const asio::error_code& ec);
  // Decrypts buffered records into read_into_: the bytes produced; ec on a fatal error or the
  // peer's close_notify (eof).
  std::size_t decrypt(asio::error_code& ec);
  void complete_read(const asio::error_code& ec, std::size_t n);
  // Encrypts plaintext from offset `from` of slices into out_, up to kBatch bytes (whole
  // slices' worth or a record's boundary): the plaintext bytes taken.
  std::size_t encrypt(std::span<const iovec> slices, std::size_t from, asio::error_code& ec);
  void pump_write();
  // Sends out_ (records OpenSSL made while reading) with no write of the caller's in progress:
  // what the socket takes now, the rest with an inner async_write.
  void send_records_now();
  void complete_write(const asio::error_code& ec);
  void fail(const char* what, asio::error_code& ec);

  std::unique_ptr<ByteStream> inner_;
  SSL* ssl_;
  std::shared_ptr<Relay> relay_;
  std::string error_;
  bool handshaking_ = false;
  bool handshake_done_ = false;
  bool waiting_for_data_ = false;
  std::function<void(const asio::error_code&)> on_handshake_;

  // Whether OpenSSL reads the inner stream itself (read_some_now, into its record buffer, with
  // read-ahead), waiting with async_wait_readable: a socket. Else ciphertext is read into in_.
  bool direct_;
  bool drained_ = false;          // the last read_some_now found less than it asked for
  asio::error_code inner_error_;  // the inner stream's end or error, met by read_some_now
  // Ciphertext read from the inner stream (not direct_): [in_begin_, in_end_) not yet given to
  // OpenSSL.
  std::unique_ptr<std::uint8_t[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  bool inner_reading_ = false;
  asio::mutable_buffer read_into_;
  std::shared_ptr<ByteStreamClient> read_client_;
  std::shared_ptr<ByteStreamClient> wait_client_;  // async_wait_readable's

  // Ciphertext to send: out_[out_sent_..) is unsent; it covers out_plain_ bytes of plaintext
  // past those the caller was told are written.
  std::vector<std::uint8_t> out_;
  std::size_t out_sent_ = 0;
  std::size_t out_plain_ = 0;
  bool inner_writing_ = false;  // an inner async_write is sending out_[out_sent_..)
  // Records OpenSSL made while out_ was being sent (while reading): they go right after it.
  std::vector<std::uint8_t> queued_;
  // A small-slice record being filled.
  std::array<std::uint8_t, 16384> record_;
  std::size_t record_size_ = 0;
  // The async_write in progress: its slices and how far they are encrypted.
  std::vector<iovec> write_slices_;
  std::size_t write_total_ = 0;
  std::size_t write_done_ = 0;
  std::shared_ptr<ByteStreamClient> write_client_;
};

}  // namespace ferry::http2

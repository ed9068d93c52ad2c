// Implementation of src/transport/tls_stream.h.
#include "transport/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "asio/post.hpp"
#include "asio/ssl/error.hpp"

namespace ferry::http2 {
namespace {

constexpr std::size_t kInSize = 64 * 1024 + 1024;  // a 64 KiB read plus a partial record
constexpr std::size_t kRecord = 16384;             // TLS's largest plaintext record
// OpenSSL's record buffer when it reads from the socket itself: five whole records (more than a
// 64 KiB read block's worth) per recv, and room for a partial one.
constexpr std::size_t kReadAhead = 5 * (kRecord + 256) + 1024;
constexpr std::size_t kBatch = 256 * 1024;  // plaintext encrypted per send at most

asio::error_code protocol_error() { return asio::error_code(EPROTO, asio::system_category()); }

// The connection's end as the reader must take it: eof only after the peer's close_notify;
// without one the end may be an attacker's (or a middlebox's) cut, and a body that ends with
// the connection would pass as whole (RFC 8446 §6.1, RFC 5246 §7.2.1).
asio::error_code end_of(const asio::error_code& inner, SSL* ssl) {
  if (inner != asio::error::eof || (SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN) != 0) {
    return inner;
  }
  return asio::ssl::error::stream_truncated;
}

}  // namespace

// The BIO OpenSSL reads ciphertext from (the socket itself, or in_) and writes it to (out_): no
// copies into BIO buffers of its own, no locks.
struct TlsBio {
  static TlsStream* of(BIO* bio) { return static_cast<TlsStream*>(BIO_get_data(bio)); }

  static int read(BIO* bio, char* out, int len) {
    TlsStream* s = of(bio);
    BIO_clear_retry_flags(bio);
    if (s->direct_) {  // into OpenSSL's record buffer, up to all of its free space (read-ahead)
      asio::error_code ec;
      const std::size_t n =
          s->inner_->read_some_now(asio::buffer(out, static_cast<std::size_t>(len)), ec);
      s->drained_ = n < static_cast<std::size_t>(len);
      if (n > 0) return static_cast<int>(n);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        BIO_set_retry_read(bio);
        return -1;
      }
      s->inner_error_ = ec ? ec : asio::error::eof;
      return 0;
    }
    const std::size_t avail = s->in_end_ - s->in_begin_;
    if (avail == 0) {
      BIO_set_retry_read(bio);
      return -1;
    }
    const std::size_t n = std::min<std::size_t>(avail, static_cast<std::size_t>(len));
    std::memcpy(out, s->in_.get() + s->in_begin_, n);
    s->in_begin_ += n;
    if (s->in_begin_ == s->in_end_) s->in_begin_ = s->in_end_ = 0;
    return static_cast<int>(n);
  }

  static int write(BIO* bio, const char* data, int len) {
    TlsStream* s = of(bio);
    BIO_clear_retry_flags(bio);
    // As bytes (not chars): the same type both sides, so that the copy is a memmove rather than
    // a converting loop.
    const auto* p = reinterpret_cast<const std::uint8_t*>(data);
    // While out_ is being sent (an inner async_write points into it), records OpenSSL makes
    // (while reading: a TLS 1.3 KeyUpdate's answer, a refusal to renegotiate) queue apart: an
    // append could move out_'s bytes from under the write, and they must leave after it.
    std::vector<std::uint8_t>& to = s->inner_writing_ ? s->queued_ : s->out_;
    to.insert(to.end(), p, p + len);
    return len;
  }

  static long ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ferry");
      BIO_meth_set_read(m, read);
      BIO_meth_set_write(m, write);
      BIO_meth_set_ctrl(m, ctrl);
      BIO_meth_set_create(m, create);
      return m;
    }();
    return m;
  }
};

struct TlsStream::Relay final : ByteStreamClient {
  TlsStream* tls;  // null once the stream is gone
  // What an inner async_write sends: it must outlive the stream, since the write (which keeps
  // this relay alive) may complete after the stream is destroyed: the buffer it was given, and
  // the ciphertext it points into, handed over by a stream destroyed mid-write.
  asio::const_buffer out_buffer;
  std::vector<std::uint8_t> orphaned_out;
  explicit Relay(TlsStream* t) : tls(t) {}
  void on_read(const asio::error_code& ec, std::size_t n) override {
    if (tls != nullptr) tls->on_inner_read(ec, n);
  }
  void on_written(const asio::error_code& ec) override {
    if (tls != nullptr) tls->on_inner_written(ec);
  }
  void on_readable(const asio::error_code& ec) override {
    if (tls != nullptr) tls->on_inner_read(ec, 0);
  }
};

TlsStream::TlsStream(std::unique_ptr<ByteStream> inner, SSL* ssl)
    : inner_(std::move(inner)),
      ssl_(ssl),
      relay_(std::make_shared<Relay>(this)),
      direct_(inner_->waits_without_buffer()) {
  BIO* bio = BIO_new(TlsBio::method());
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);
  if (direct_) {
    SSL_set_read_ahead(ssl_, 1);
    SSL_set_default_read_buffer_len(ssl_, kReadAhead);
  } else {
    in_.reset(new std::uint8_t[kInSize]);
  }
  out_.reserve(kRecord + 1024);
}

TlsStream::~TlsStream() {
  relay_->tls = nullptr;
  if (inner_writing_) relay_->orphaned_out = std::move(out_);  // the bytes stay where they are
  SSL_free(ssl_);
}

void TlsStream::fail(const char* what, asio::error_code& ec) {
  error_ = what;
  std::string reasons;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!reasons.empty()) reasons += "; ";
    reasons += reason != nullptr ? reason : "unknown";
  }
  if (!reasons.empty()) error_ += ": " + reasons;
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    error_ += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
  }
  if (!ec) ec = protocol_error();
}

// --- handshake -------------------------------------------------------------------------------

void TlsStream::async_handshake(std::function<void(const asio::error_code&)> done) {
  on_handshake_ = std::move(done);
  handshaking_ = true;
  asio::post(inner_->executor(), [relay = relay_] {
    if (relay->tls != nullptr) relay->tls->handshake_step();
  });
}

void TlsStream::handshake_step() {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  asio::error_code ec;
  if (r != 1 && SSL_get_error(ssl_, r) != SSL_ERROR_WANT_READ) {
    ec = inner_error_;
    fail(!ec                      ? "TLS handshake failed"
         : ec == asio::error::eof ? "TLS handshake failed: the peer closed the connection"
                                  : "TLS handshake failed: connection lost",
         ec);
  }
  // Our flight first (even an alert before failing: the peer then learns why).
  if (out_sent_ < out_.size()) {
    relay_->out_buffer = asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_);
    inner_writing_ = true;
    if (ec) handshaking_ = false;  // the write's completion then just drops the alert
    inner_->async_write({&relay_->out_buffer, 1}, relay_);
    if (ec) finish_handshake(ec);
    return;
  }
  if (ec) return finish_handshake(ec);
  if (r == 1) return finish_handshake({});
  wait_inner();
}

void TlsStream::finish_handshake(const asio::error_code& ec) {
  handshaking_ = false;
  handshake_done_ = !ec;
  auto done = std::move(on_handshake_);
  if (done) done(ec);  // may delete this stream: the last thing done here
}

void TlsStream::async_wait_for_data(std::function<void(const asio::error_code&)> done) {
  on_handshake_ = std::move(done);
  waiting_for_data_ = true;
  asio::post(inner_->executor(), [relay = relay_] {
    if (relay->tls != nullptr) relay->tls->peek_step();
  });
}

void TlsStream::peek_step() {
  ERR_clear_error();
  std::uint8_t byte;
  std::size_t got = 0;
  const int r = SSL_peek_ex(ssl_, &byte, 1, &got);
  asio::error_code ec;
  if (r != 1) {
    if (SSL_get_error(ssl_, r) == SSL_ERROR_WANT_READ) return wait_inner();
    ec = inner_error_;
    fail(ec ? "TLS: the server closed the connection" : "TLS handshake failed", ec);
  }
  waiting_for_data_ = false;
  auto done = std::move(on_handshake_);
  if (done) done(ec);  // may delete this stream
}

void TlsStream::cancel_handshake() {
  if (!on_handshake_) return;
  handshaking_ = false;
  waiting_for_data_ = false;
  inner_->close();
  asio::post(inner_->executor(),
             [done = std::move(on_handshake_)] { done(asio::error::operation_aborted); });
  on_handshake_ = nullptr;
}

// --- reading ---------------------------------------------------------------------------------

void TlsStream::wait_inner() {
  inner_reading_ = true;
  if (direct_) return inner_->async_wait_readable(relay_);
  if (in_begin_ > 0 && kInSize - in_end_ < kRecord + 64) {  // move a partial record to the front
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  inner_->async_read_some(asio::buffer(in_.get() + in_end_, kInSize - in_end_), relay_);
}

void TlsStream::async_read_some(asio::mutable_buffer into,
                                std::shared_ptr<ByteStreamClient> client) {
  read_into_ = into;
  read_client_ = std::move(client);
  asio::error_code ec;
  std::size_t n = 0;
  if (!handshake_done_) {
    ec = asio::error::not_connected;
  } else if (SSL_has_pending(ssl_) || (direct_ ? !drained_ : in_begin_ != in_end_)) {
    // Records here, or (direct_) the socket may have more: OpenSSL's last read of it filled
    // what it asked for. When it did not, the wait comes first: asio's wait re-arms epoll
    // (an epoll_ctl) where a read's speculative recv would cost the same, so that a small call
    // makes the same syscalls over TLS as in cleartext.
    n = decrypt(ec);
  }
  if (n > 0 || ec) {
    // Records already here: completed from the loop, never inline (the caller may be inside
    // its previous read's completion).
    asio::post(inner_->executor(), [relay = relay_, ec, n] {
      if (relay->tls != nullptr) relay->tls->complete_read(ec, n);
    });
    return;
  }
  wait_inner();
}

void TlsStream::on_inner_read(const asio::error_code& ec, std::size_t n) {
  inner_reading_ = false;
  if (waiting_for_data_) {
    if (ec) {
      asio::error_code e = ec;
      fail("TLS: the server closed the connection", e);
      waiting_for_data_ = false;
      auto done = std::move(on_handshake_);
      if (done) done(e);
      return;
    }
    in_end_ += n;
    return peek_step();
  }
  if (handshaking_) {
    if (ec) {
      asio::error_code e = ec;
      fail(ec == asio::error::eof ? "TLS handshake failed: the peer closed the connection"
                                  : "TLS handshake failed: connection lost",
           e);
      return finish_handshake(e);
    }
    in_end_ += n;
    return handshake_step();
  }
  if (wait_client_ != nullptr) {  // async_wait_readable's, for an idle connection
    auto client = std::move(wait_client_);
    return client->on_readable(ec);
  }
  if (read_client_ == nullptr) return;
  if (ec) return complete_read(end_of(ec, ssl_), 0);
  in_end_ += n;
  asio::error_code dec;
  const std::size_t got = decrypt(dec);
  if (got > 0 || dec) return complete_read(dec, got);
  wait_inner();  // a partial record (or a spurious wake-up): more ciphertext needed
}

std::size_t TlsStream::decrypt(asio::error_code& ec) {
  auto* p = static_cast<std::uint8_t*>(read_into_.data());
  const std::size_t size = read_into_.size();
  std::size_t total = 0;
  ERR_clear_error();
  while (total < size) {
    std::size_t got = 0;
    const int r = SSL_read_ex(ssl_, p + total, size - total, &got);
    if (r == 1) {
      total += got;
      // The socket had no more when OpenSSL last read it: return what is here rather than try
      // it again (a recv that finds nothing, on every small call's path).
      if (direct_ && drained_ && !SSL_has_pending(ssl_)) break;
      continue;
    }
    const int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) break;
    if (total == 0) {
      if (err == SSL_ERROR_ZERO_RETURN) {
        ec = asio::error::eof;  // close_notify
      } else if (inner_error_) {
        ec = end_of(inner_error_, ssl_);  // the socket's own end (with no close_notify), or error
        ERR_clear_error();
      } else {
        fail("TLS read failed", ec);
      }
    }
    break;
  }
  // Reading may have produced records of our own (a TLS 1.3 key update's answer, a refusal to
  // renegotiate): they leave with the write in progress (queued_ behind it while it is being
  // sent), or now when there is none.
  if (out_sent_ < out_.size() && !inner_writing_ && write_client_ == nullptr) send_records_now();
  return total;
}

void TlsStream::send_records_now() {
  asio::error_code ec;
  const iovec rest{out_.data() + out_sent_, out_.size() - out_sent_};
  out_sent_ += inner_->write_some_now(std::span<const iovec>(&rest, 1), ec);
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
    return;
  }
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) return;
  // The socket is full: the rest goes in the background. A write of the caller's started
  // meanwhile waits for it (async_write), and write_some_now takes nothing until it is done.
  relay_->out_buffer = asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_);
  inner_writing_ = true;
  inner_->async_write({&relay_->out_buffer, 1}, relay_);
}

bool TlsStream::cancel_read() {
  // Only a read waiting for the socket, with no part of a record in OpenSSL's buffer.
  // Not while records of our own are being sent: the socket's cancel would end that write too.
  if (!direct_ || read_client_ == nullptr || !inner_reading_ || inner_writing_ ||
      SSL_has_pending(ssl_)) {
    return false;
  }
  return inner_->cancel_read();
}

void TlsStream::async_wait_readable(std::shared_ptr<ByteStreamClient> client) {
  wait_client_ = std::move(client);
  if (SSL_has_pending(ssl_)) {
    asio::post(inner_->executor(), [relay = relay_] {
      if (relay->tls != nullptr) relay->tls->on_inner_read({}, 0);
    });
    return;
  }
  // Nothing buffered: OpenSSL's record buffers go back too (it takes them again when it next
  // reads or writes), and so does the ciphertext buffer when no write holds it.
  SSL_free_buffers(ssl_);
  if (!inner_writing_ && write_client_ == nullptr && out_sent_ == out_.size()) {
    std::vector<std::uint8_t>().swap(out_);
    out_sent_ = 0;
  }
  inner_reading_ = true;
  inner_->async_wait_readable(relay_);
}

void TlsStream::complete_read(const asio::error_code& ec, std::size_t n) {
  auto client = std::move(read_client_);
  if (client != nullptr) client->on_read(ec, n);
}

// --- writing ---------------------------------------------------------------------------------

std::size_t TlsStream::encrypt(std::span<const iovec> slices, std::size_t from,
                               asio::error_code& ec) {
  std::size_t taken = 0;
  auto seal = [&](const void* data, std::size_t n) {
    std::size_t written = 0;
    if (SSL_write_ex(ssl_, data, n, &written) != 1) {
      fail("TLS write failed", ec);
      return false;
    }
    return true;
  };
  ERR_clear_error();
  std::size_t offset = 0;  // of the current slice's start in the plaintext
  for (const iovec& slice : slices) {
    const std::size_t len = slice.iov_len;
    if (offset + len <= from) {
      offset += len;
      continue;
    }
    const auto* p = static_cast<const std::uint8_t*>(slice.iov_base);
    std::size_t skip = from > offset ? from - offset : 0;
    offset += len;
    std::size_t rest = len - skip;
    p += skip;
    while (rest > 0) {
      if (record_size_ == 0 && rest >= kRecord) {  // whole records straight from the slice
        const std::size_t n = rest - rest % kRecord;
        if (!seal(p, n)) return taken;
        p += n, rest -= n, taken += n;
        continue;
      }
      const std::size_t n = std::min(rest, kRecord - record_size_);
      std::memcpy(record_.data() + record_size_, p, n);
      record_size_ += n, p += n, rest -= n, taken += n;
      if (record_size_ == kRecord) {
        if (!seal(record_.data(), record_size_)) return taken;
        record_size_ = 0;
      }
    }
    if (taken >= kBatch) break;
  }
  if (record_size_ > 0) {
    seal(record_.data(), record_size_);
    record_size_ = 0;
  }
  return taken;
}

std::size_t TlsStream::write_some_now(std::span<const iovec> slices, asio::error_code& ec) {
  if (!handshake_done_) {
    ec = asio::error::not_connected;
    return 0;
  }
  if (inner_writing_) {  // records of our own are being sent (send_records_now): after them
    ec = asio::error::would_block;
    return 0;
  }
  std::size_t total = 0;
  for (const iovec& s : slices) total += s.iov_len;
  std::size_t done = 0;  // plaintext whose records the inner stream has taken
  while (true) {
    if (out_sent_ < out_.size()) {
      const iovec rest{out_.data() + out_sent_, out_.size() - out_sent_};
      out_sent_ += inner_->write_some_now(std::span<const iovec>(&rest, 1), ec);
      if (ec && ec != asio::error::would_block && ec != asio::error::try_again) return done;
      ec.clear();
      if (out_sent_ < out_.size()) {  // the rest goes with the async_write that follows
        if (done == 0) ec = asio::error::would_block;
        return done;
      }
      out_.clear();
      out_sent_ = 0;
      done += out_plain_;
      out_plain_ = 0;
    }
    if (done == total) return done;
    out_plain_ = encrypt(slices, done, ec);
    if (ec) return done;
  }
}

void TlsStream::async_write(std::span<const asio::const_buffer> buffers,
                            std::shared_ptr<ByteStreamClient> client) {
  write_client_ = std::move(client);
  write_slices_.clear();
  write_total_ = 0;
  for (const asio::const_buffer& b : buffers) {
    write_slices_.push_back({const_cast<void*>(b.data()), b.size()});
    write_total_ += b.size();
  }
  // What write_some_now encrypted but could not send covers the start of these buffers.
  write_done_ = out_plain_;
  out_plain_ = 0;
  if (!handshake_done_) {
    asio::post(inner_->executor(), [relay = relay_] {
      if (relay->tls != nullptr) relay->tls->complete_write(asio::error::not_connected);
    });
    return;
  }
  if (inner_writing_) return;  // records of our own are being sent: on_inner_written goes on
  pump_write();
}

void TlsStream::pump_write() {
  if (out_sent_ == out_.size() && write_done_ < write_total_) {
    out_.clear();
    out_sent_ = 0;
    asio::error_code ec;
    write_done_ += encrypt(write_slices_, write_done_, ec);
    if (ec) {
      asio::post(inner_->executor(), [relay = relay_, ec] {
        if (relay->tls != nullptr) relay->tls->complete_write(ec);
      });
      return;
    }
  }
  if (out_sent_ < out_.size()) {
    relay_->out_buffer = asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_);
    inner_writing_ = true;
    inner_->async_write({&relay_->out_buffer, 1}, relay_);
    return;
  }
  asio::post(inner_->executor(), [relay = relay_] {
    if (relay->tls != nullptr) relay->tls->complete_write({});
  });
}

void TlsStream::on_inner_written(const asio::error_code& ec) {
  inner_writing_ = false;
  out_.clear();
  out_sent_ = 0;
  // Records made while out_ was being sent go next, before anything encrypted after them (a
  // KeyUpdate's answer comes before the records under the new key).
  if (!queued_.empty()) out_.swap(queued_);
  if (handshaking_) {
    if (ec) {
      asio::error_code e = ec;
      fail("TLS handshake failed: connection lost", e);
      return finish_handshake(e);
    }
    return handshake_step();
  }
  if (write_client_ == nullptr) {  // a handshake alert, a close, or records made while reading
    if (!ec && out_sent_ < out_.size() && handshake_done_) send_records_now();
    return;
  }
  if (ec) return complete_write(ec);
  if (write_done_ < write_total_ || out_sent_ < out_.size()) return pump_write();
  complete_write({});
}

void TlsStream::complete_write(const asio::error_code& ec) {
  auto client = std::move(write_client_);
  if (client != nullptr) client->on_written(ec);
}

void TlsStream::close() {
  // No close_notify: the connection has already said goodbye at the HTTP/2 level (GOAWAY), and
  // a close is also how a failed or timed-out handshake ends.
  inner_->close();
}

void TlsStream::close_gracefully() {
  // The connection has said all it had to: a close_notify tells the peer its end is not a cut
  // (a peer reading a body delimited by the connection's end needs it), best effort; then the
  // socket under it lingers as a plain one would.
  if (handshake_done_ && !inner_writing_ && error_.empty()) {  // not after a fatal error
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
    if (out_sent_ < out_.size()) {
      asio::error_code ignored;
      const iovec rest{out_.data() + out_sent_, out_.size() - out_sent_};
      out_sent_ += inner_->write_some_now(std::span<const iovec>(&rest, 1), ignored);
    }
  }
  inner_->close_gracefully();
}

}  // namespace ferry::http2

// Implementation of src/http2/connection.h.
#include "http2/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>

#include "asio/post.hpp"
#include "asio/write.hpp"
#include "http2/session_memory.h"

namespace ferry::http2 {
namespace {

// While this much is already queued behind a write in progress, stop asking nghttp2 for more:
// the socket is the bottleneck, and the streams' own queues (bounded by their writers) hold it.
constexpr std::size_t kMaxPendingOutput = 1u << 20;

// A DATA payload up to this size is copied in after its frame header rather than sent by
// reference: for a small message the copy costs less than splitting it off its queue and
// counting references to its block, and the small frames of a batch of answers then go out as
// one contiguous slice instead of two iovecs each.
constexpr std::size_t kCopiedPayload = 256;

// Slices per sendmsg: the kernel's limit. asio's gathered write_some stops at 64 buffers: a read
// that answered more than 32 unary calls (two slices each) took a second syscall for the rest.
constexpr std::size_t kMaxIov = IOV_MAX;

// Writes as much of `chain` as the socket takes now, without blocking: returns the bytes
// written; ec is would_block when it took none, or the socket's error.
std::size_t write_some_gathered(int fd, const SliceChain& chain, std::vector<iovec>& iov,
                                asio::error_code& ec) {
  std::size_t written = 0;
  std::size_t next = 0;  // the first slice not yet handed to the kernel
  while (next < chain.slice_count()) {
    iov.clear();
    std::size_t batch = 0;
    for (; next < chain.slice_count() && iov.size() < kMaxIov; ++next) {
      const Slice& s = chain.slice(next);
      iov.push_back({const_cast<std::uint8_t*>(s.data()), s.size()});
      batch += s.size();
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = iov.size();
    ssize_t n;
    do {
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = asio::error_code(errno, asio::system_category());
      } else if (written == 0) {
        ec = asio::error::would_block;
      }
      return written;
    }
    written += static_cast<std::size_t>(n);
    if (static_cast<std::size_t>(n) < batch) return written;  // the socket's buffer is full
  }
  return written;
}

Stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

}  // namespace

struct Connection::Callbacks {
  static Connection& self(void* user_data) { return *static_cast<Connection*>(user_data); }

  // Control frames and DATA frame padding: small, so copied into the pending output.
  static ssize_t send(nghttp2_session*, const std::uint8_t* data, std::size_t length, int,
                            void* user_data) {
    self(user_data).pending_.append_copy(data, length);
    return static_cast<ssize_t>(length);
  }

  // A DATA frame: its 9-byte header is copied, its payload moved by reference from the stream.
  static int send_data(nghttp2_session*, nghttp2_frame* frame, const std::uint8_t* framehd,
                       std::size_t length, nghttp2_data_source* source, void* user_data) {
    Connection& c = self(user_data);
    auto* stream = static_cast<Stream*>(source->ptr);
    if (length <= kCopiedPayload) {
      std::uint8_t* out = c.pending_.reserve(9 + length);
      std::memcpy(out, framehd, 9);
      stream->outbound.copy_to(0, length, out + 9);
      c.pending_.commit(9 + length);
      stream->outbound.consume(length);
    } else {
      c.pending_.append_copy(framehd, 9);
      c.pending_.append(stream->outbound.split_front(length));
    }
    assert(frame->data.padlen == 0);
    (void)frame;
    stream->on_outbound_taken();
    return 0;
  }

  static ssize_t read_data(nghttp2_session* session, std::int32_t, std::uint8_t*,
                                 std::size_t length, std::uint32_t* flags,
                                 nghttp2_data_source* source, void*) {
    auto* stream = static_cast<Stream*>(source->ptr);
    const std::size_t available = stream->outbound.size();
    const std::size_t n = std::min(length, available);
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == available && stream->outbound_end) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!stream->trailers.empty() || !stream->literal_trailers.empty()) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        absl::InlinedVector<nghttp2_nv, 8> nva(stream->literal_trailers.begin(),
                                               stream->literal_trailers.end());
        for (const Header& h : stream->trailers) nva.push_back(make_nv(h.name, h.value));
        if (nghttp2_submit_trailer(session, stream->id_, nva.data(), nva.size()) != 0) {
          return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      stream->deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  static int begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    Connection& c = self(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST ||
        c.role_ != Role::kServer) {
      return 0;
    }
    Stream* stream = c.observer_->on_stream_open(frame->hd.stream_id);
    if (stream == nullptr) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    stream->id_ = frame->hd.stream_id;
    c.link(stream);
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream);
    return 0;
  }

  static int header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                    std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                    std::uint8_t, void* user_data) {
    Stream* stream = self(user_data).find_stream(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    const bool ok = stream->on_header(
        std::string_view(reinterpret_cast<const char*>(name), namelen),
        std::string_view(reinterpret_cast<const char*>(value), valuelen));
    // Resets the stream (RST_STREAM INTERNAL_ERROR) without tearing down the connection.
    return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }

  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Connection& c = self(user_data);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      c.goaway_received_ = true;
      c.observer_->on_goaway(frame->goaway.last_stream_id, frame->goaway.error_code);
      return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    Stream* stream = c.find_stream(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS) stream->on_headers_done();
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) stream->on_remote_end();
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t stream_id,
                        const std::uint8_t* data, std::size_t len, void* user_data) {
    Connection& c = self(user_data);
    Stream* stream = c.find_stream(stream_id);
    if (stream == nullptr) {
      nghttp2_session_consume(session, stream_id, len);
      return 0;
    }
    detail::Block* block = c.read_block_;
    if (block != nullptr && data >= block->data() && data + len <= block->data() + block->used) {
      stream->on_data(Slice(block, data, len));  // zero-copy: a view of the read block
    } else {
      stream->on_data(Slice::copy_of(data, len));
    }
    return 0;
  }

  static int stream_close(nghttp2_session* session, std::int32_t stream_id, std::uint32_t error,
                          void* user_data) {
    Connection& c = self(user_data);
    Stream* stream = c.find_stream(stream_id);
    if (stream == nullptr) return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
    c.unlink(stream);
    stream->on_closed(error);
    return 0;
  }

  // A server that has sent its whole response (END_STREAM) while the client is still sending
  // asks it to stop with RST_STREAM(NO_ERROR) (RFC 9113 8.1), as gRPC servers do. Without it a
  // client that never half-closes (a bidi call ended by a status mid-stream) keeps the stream,
  // its call and its unread DATA alive on both sides until the connection goes. Sent only once
  // the END_STREAM frame is out: submitted earlier, RST_STREAM would overtake queued DATA.
  static int frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    Connection& c = self(user_data);
    if (c.role_ == Role::kServer &&
        (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static nghttp2_session_callbacks* make() {
    nghttp2_session_callbacks* cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_send_callback(cbs, send);
    nghttp2_session_callbacks_set_send_data_callback(cbs, send_data);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, frame_send);
    return cbs;
  }
};

Connection::Connection(asio::ip::tcp::socket socket, Role role, const ConnectionLimits& settings,
                       ConnectionObserver* observer)
    : executor_(socket.get_executor()), socket_(std::move(socket)), role_(role),
      observer_(observer) {
  asio::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);  // no 40 ms delayed-ACK stalls
  // flush() writes synchronously first (write_now); it must never block the loop.
  socket_.non_blocking(true, ignored);

  static nghttp2_session_callbacks* const callbacks = Callbacks::make();
  nghttp2_option* option;
  nghttp2_option_new(&option);
  // The application acknowledges DATA as it consumes it: flow control bounds its memory.
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_no_closed_streams(option, 1);
  if (role == Role::kServer) {
    nghttp2_session_server_new3(&session_, callbacks, this, option, session_memory());
  } else {
    nghttp2_session_client_new3(&session_, callbacks, this, option, session_memory());
  }
  nghttp2_option_del(option);

  std::vector<nghttp2_settings_entry> entries = {
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, settings.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, settings.max_header_list_size},
  };
  if (role == Role::kServer) {
    entries.push_back({NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.max_concurrent_streams});
  } else {
    entries.push_back({NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
  }
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries.data(), entries.size());
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<std::int32_t>(settings.connection_window));
}

Connection::~Connection() {
  // Normally close() has emptied the list. If not (the loop stopped first), forget the streams
  // without calling into a layer above that may already be gone.
  while (streams_ != nullptr) unlink(streams_);
  nghttp2_session_del(session_);
  if (read_block_ != nullptr) detail::block_unref(read_block_);
}

void Connection::start() {
  schedule_flush();
  start_read();
}

std::string Connection::peer_address() const {
  asio::error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  if (ec) return "unknown";
  return (endpoint.address().is_v6() ? "ipv6:[" : "ipv4:") + endpoint.address().to_string() +
         (endpoint.address().is_v6() ? "]:" : ":") + std::to_string(endpoint.port());
}

bool Connection::accepts_new_streams() const {
  return !closed_ && !goaway_received_ && nghttp2_session_check_request_allowed(session_) != 0;
}

std::int32_t Connection::submit_request(Stream* stream, std::span<const nghttp2_nv> headers) {
  if (closed_) return NGHTTP2_ERR_EOF;
  nghttp2_data_provider provider;
  provider.source.ptr = stream;
  provider.read_callback = Callbacks::read_data;
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &provider, stream);
  if (id < 0) return id;
  stream->id_ = id;
  stream->has_provider_ = true;
  link(stream);
  schedule_flush();
  return id;
}

int Connection::submit_response(Stream* stream, std::span<const nghttp2_nv> headers,
                                bool with_data) {
  if (closed_) return NGHTTP2_ERR_EOF;
  nghttp2_data_provider provider;
  provider.source.ptr = stream;
  provider.read_callback = Callbacks::read_data;
  const int rv = nghttp2_submit_response(session_, stream->id_, headers.data(), headers.size(),
                                          with_data ? &provider : nullptr);
  if (rv == 0 && with_data) stream->has_provider_ = true;
  schedule_flush();
  return rv;
}

void Connection::resume(Stream* stream) {
  if (closed_) return;
  if (stream->deferred_) {
    stream->deferred_ = false;
    nghttp2_session_resume_data(session_, stream->id_);
  }
  schedule_flush();
}

void Connection::reset(Stream* stream, std::uint32_t error_code) {
  if (closed_ || stream->id_ <= 0) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream->id_, error_code);
  schedule_flush();
}

void Connection::consume(Stream* stream, std::size_t n) {
  if (closed_ || n == 0 || stream->id_ <= 0) return;
  nghttp2_session_consume(session_, stream->id_, n);
  schedule_flush();
}

void Connection::consume_connection(std::size_t n) {
  if (closed_ || n == 0) return;
  nghttp2_session_consume_connection(session_, n);
  schedule_flush();
}

void Connection::shutdown() {
  if (closed_) return;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  schedule_flush();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // The session is kept (it is deleted with the Connection) but forgets every stream now.
  while (streams_ != nullptr) {
    Stream* stream = streams_;
    unlink(stream);
    nghttp2_session_set_stream_user_data(session_, stream->id_, nullptr);
    stream->on_closed(kConnectionLost);
  }
  pending_.clear();
  observer_->on_connection_closed();
}

void Connection::link(Stream* stream) {
  stream->prev_ = nullptr;
  stream->next_ = streams_;
  if (streams_ != nullptr) streams_->prev_ = stream;
  streams_ = stream;
}

Stream* Connection::find_stream(std::int32_t id) {
  if (recent_stream_ != nullptr && recent_stream_->id_ == id) return recent_stream_;
  Stream* stream = stream_of(session_, id);
  if (stream != nullptr) recent_stream_ = stream;
  return stream;
}

void Connection::unlink(Stream* stream) {
  if (recent_stream_ == stream) recent_stream_ = nullptr;
  if (stream->prev_ != nullptr) stream->prev_->next_ = stream->next_;
  if (stream->next_ != nullptr) stream->next_->prev_ = stream->prev_;
  if (streams_ == stream) streams_ = stream->next_;
  stream->prev_ = stream->next_ = nullptr;
}

void Connection::start_read() {
  // Reuse the last block when no slice kept it; else take a fresh one.
  if (read_block_ != nullptr && read_block_->refs.load(std::memory_order_acquire) != 1) {
    detail::block_unref(read_block_);
    read_block_ = nullptr;
  }
  if (read_block_ == nullptr) read_block_ = BufferPool::instance().acquire();
  read_block_->used = 0;
  socket_.async_read_some(
      asio::buffer(read_block_->data(), BufferPool::kBlockSize),
      [self = shared_from_this()](const asio::error_code& ec, std::size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(const asio::error_code& ec, std::size_t n) {
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  read_block_->used = static_cast<std::uint32_t>(n);
  receiving_ = true;  // until the flush below: nothing needs to post one
  ssize_t rv;
  {
    detail::CollectWakeups collect(wakeups_);
    rv = nghttp2_session_mem_recv(session_, read_block_->data(), n);
  }
  // A read that filled the block says more is waiting (a stream of large messages): the next
  // read is then under way before the woken coroutines run, which may take a while (say,
  // parsing those messages), so that the peer's data keeps flowing; without it 64 KiB streaming
  // lost a tenth of its throughput. Otherwise (small RPCs) the answers go out first, and the
  // read's speculative recv, which finds nothing, stays off their path.
  const bool read_early = rv >= 0 && n == BufferPool::kBlockSize;
  if (read_early && nghttp2_session_want_read(session_)) start_read();
  // Coroutines woken by what was read resume now, outside nghttp2's callbacks; what they write
  // goes out with the flush below.
  wakeups_.run_all();
  receiving_ = false;
  if (rv < 0) {
    // A protocol error: nghttp2 has queued GOAWAY where it could; send it, then close.
    nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    flush();
    close_if_done();
    if (!writing_now_) close();
    return;
  }
  // Everything this read delivered has been dispatched, and handlers and coroutines that did not
  // suspend have answered: one flush sends it all, now rather than from a posted flush a turn of
  // the loop later (a post and an epoll_wait saved per read, and the answer leaves sooner).
  flush();
  if (!read_early && !closed_ && nghttp2_session_want_read(session_)) start_read();
}

void Connection::schedule_flush() {
  if (flush_scheduled_ || closed_ || receiving_) return;
  flush_scheduled_ = true;
  asio::post(executor_, [self = shared_from_this()] { self->flush(); });
}

void Connection::flush() {
  flush_scheduled_ = false;
  while (!closed_) {
    if (pending_.size() < kMaxPendingOutput) {
      if (nghttp2_session_send(session_) != 0) {
        close();
        return;
      }
    }
    if (writing_now_ || pending_.empty()) break;
    if (!write_now()) break;  // the rest goes out asynchronously (or the connection closed)
  }
  close_if_done();
}

void Connection::close_if_done() {
  if (closed_ || writing_now_ || !pending_.empty()) return;
  if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) close();
}

bool Connection::write_now() {
  // Appended, not move-assigned: both chains keep their slice storage (a move hands pending_'s
  // over and leaves it to grow again, a malloc every few flushes), and pending_ keeps writing
  // into the tail of its block.
  writing_.append(std::move(pending_));
  // One non-blocking gathered write first: with room in the socket's buffer (the usual case) it
  // takes everything, and no completion is posted, so a flush costs one syscall and no extra
  // turn of the event loop.
  asio::error_code ec;
  const std::size_t n = write_some_gathered(socket_.native_handle(), writing_, sys_iov_, ec);
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    writing_.clear();
    close();
    return false;
  }
  if (n == writing_.size()) {
    writing_.clear();
    return true;
  }
  writing_.consume(n);
  iov_.clear();
  writing_.append_buffers(iov_);
  writing_now_ = true;
  asio::async_write(socket_, iov_,
                    [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
                      self->writing_now_ = false;
                      self->writing_.clear();
                      if (ec) {
                        self->close();
                        return;
                      }
                      self->flush();
                    });
  return false;
}

}  // namespace ferry::http2

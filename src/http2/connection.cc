// Implementation of src/http2/connection.h.
#include "http2/connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <utility>

#include "asio/post.hpp"
#include "http2/read_block.h"
#include "http2/session_callbacks.h"
#include "http2/session_memory.h"

namespace ferry::http2 {
namespace {

// While this much is already queued behind a write in progress, stop asking nghttp2 for more:
// the byte stream is the bottleneck, and the streams' own queues (bounded by their writers)
// hold it.
constexpr std::size_t kMaxPendingOutput = 1u << 20;

Stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

}  // namespace

// Unused in this build (connection_ferry.cc defines the real one).
struct Connection::FerryEngine {};

Connection::Connection(std::unique_ptr<ByteStream> stream, Role role,
                       const ConnectionLimits& settings, ConnectionObserver* observer)
    : executor_(stream->executor()),
      stream_(std::move(stream)),
      role_(role),
      observer_(observer),
      parts_(settings.write_policy.calls_per_write),
      answer_bytes_(settings.write_policy.bytes_per_write),
      max_queued_(settings.max_queued_send_bytes),
      max_held_(settings.max_held_bytes) {
  nghttp2_session_callbacks* const callbacks = Callbacks::table();
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

void Connection::set_lifecycle(const LifecyclePolicy& policy) {
  LifecyclePolicy p = policy;
  if (!stream_->waits_without_buffer()) p.release_buffers_after = kNever;
  if (p.active()) lifecycle_ = std::make_unique<Lifecycle>(*this, p);
}

void Connection::start() {
  if (lifecycle_ != nullptr) lifecycle_->start();
  schedule_flush();
  start_read();
}

bool Connection::accepts_new_streams() const {
  return !closed_ && !goaway_received_ && !write_failed_ &&
         nghttp2_session_check_request_allowed(session_) != 0;
}

std::int32_t Connection::submit_request(Stream* stream, std::span<const HeaderField> headers) {
  // After GOAWAY nghttp2 would accept the request and fail it only when sending.
  if (!accepts_new_streams()) return -1;
  nghttp2_data_provider provider;
  provider.source.ptr = stream;
  provider.read_callback = Callbacks::read_data;
  NvArray nva;
  append_nv(headers, nva);
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), &provider, stream);
  if (id < 0) return -1;
  stream->id_ = id;
  stream->has_provider_ = true;
  link(stream);
  schedule_flush();
  return id;
}

bool Connection::submit_response(Stream* stream, std::span<const HeaderField> headers,
                                 bool with_data) {
  if (closed_) return false;
  nghttp2_data_provider provider;
  provider.source.ptr = stream;
  provider.read_callback = Callbacks::read_data;
  NvArray nva;
  append_nv(headers, nva);
  const int rv = nghttp2_submit_response(session_, stream->id_, nva.data(), nva.size(),
                                         with_data ? &provider : nullptr);
  if (rv == 0 && with_data) {
    stream->has_provider_ = true;
    count_queued(stream);
  }
  schedule_flush();
  return rv == 0;
}

void Connection::count_queued(Stream* stream) {
  const std::size_t size = stream->outbound.size();
  if (size > stream->queued_counted_) {
    queued_ += size - stream->queued_counted_;
    stream->queued_counted_ = size;
  }
}

void Connection::resume(Stream* stream) {
  if (closed_) return;
  count_queued(stream);
  if (stream->deferred_) {
    stream->deferred_ = false;
    nghttp2_session_resume_data(session_, stream->id_);
  }
  schedule_flush();
}

void Connection::reset(Stream* stream, ErrorCode error) {
  if (closed_ || stream->id_ <= 0) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream->id_,
                            static_cast<std::uint32_t>(error));
  schedule_flush();
}

void Connection::consume(Stream* stream, std::size_t n) {
  if (closed_ || n == 0 || stream->id_ <= 0) return;
  nghttp2_session_consume(session_, stream->id_, n);
  schedule_flush();
}

void Connection::change_held(Stream* stream, std::ptrdiff_t delta) {
  (void)stream;
  held_ = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(held_) + delta);
  // A peer that starts large messages on many streams and trickles them: each stream's share is
  // bounded (MessageLimits::max_held_receive_bytes), their sum is bounded here.
  if (delta > 0 && held_ > max_held_) terminate(ErrorCode::kEnhanceYourCalm, "held_bytes");
}

void Connection::consume_connection(std::size_t n) {
  if (closed_ || n == 0) return;
  nghttp2_session_consume_connection(session_, n);
  schedule_flush();
}

std::int32_t Connection::goaway_last_stream_id() {
  // Never above what an earlier GOAWAY named (RFC 9113 6.8: it must not increase).
  goaway_last_stream_id_ =
      std::min(goaway_last_stream_id_, nghttp2_session_get_last_proc_stream_id(session_));
  return goaway_last_stream_id_;
}

void Connection::shutdown() {
  if (closed_) return;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, goaway_last_stream_id(), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  schedule_flush();
}

void Connection::terminate(ErrorCode error, std::string_view debug) {
  if (closed_) return;
  local_close_reason_ = debug;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, goaway_last_stream_id(),
                        static_cast<std::uint32_t>(error),
                        reinterpret_cast<const std::uint8_t*>(debug.data()), debug.size());
  close_after_write_ = true;
  schedule_flush();
}

void Connection::ping() {
  if (closed_) return;
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
  schedule_flush();
}

void Connection::close() { close_stream(/*gracefully=*/false); }

void Connection::close_stream(bool gracefully) {
  if (closed_) return;
  closed_ = true;
  if (lifecycle_ != nullptr) lifecycle_->stop();
  if (gracefully) {
    stream_->close_gracefully();
  } else {
    stream_->close();
  }
  // The session is kept (it is deleted with the Connection) but forgets every stream now.
  while (streams_ != nullptr) {
    Stream* stream = streams_;
    unlink(stream);
    nghttp2_session_set_stream_user_data(session_, stream->id_, nullptr);
    stream->local_close_reason_ = local_close_reason_;
    stream->on_closed(ErrorCode::kConnectionLost);
  }
  pending_.clear();
  observer_->on_connection_closed();
}

void Connection::link(Stream* stream) {
  ++open_streams_;
  ++streams_opened_;
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

void Connection::on_queued_taken(Stream* stream, std::size_t n) {
  n = std::min(n, stream->queued_counted_);
  stream->queued_counted_ -= n;
  queued_ -= n;
  if (send_waiters_ && queued_ < max_queued_) wake_send_waiters(stream);
}

bool Connection::peer_window_closed() const {
  return nghttp2_session_get_remote_window_size(session_) <= 0;
}

void Connection::wake_send_waiters(const Stream* except) {
  // Rare: writers wait on their own streams, so each open stream is told (a stream that does
  // not wait ignores it).
  send_waiters_ = false;
  for (Stream* s = streams_; s != nullptr; s = s->next_) {
    if (s != except) s->on_outbound_taken();
  }
}

void Connection::unlink(Stream* stream) {
  queued_ -= stream->queued_counted_;
  stream->queued_counted_ = 0;
  --open_streams_;
  if (recent_stream_ == stream) recent_stream_ = nullptr;
  if (stream->prev_ != nullptr) stream->prev_->next_ = stream->next_;
  if (stream->next_ != nullptr) stream->next_->prev_ = stream->prev_;
  if (streams_ == stream) streams_ = stream->next_;
  stream->prev_ = stream->next_ = nullptr;
}

void Connection::start_read() {
  read_block_ = next_read_block(read_block_);
  read_pending_ = true;
  stream_->async_read_some(asio::buffer(read_block_->data(), BufferPool::kBlockSize),
                           shared_from_this());
}

void Connection::release_idle_memory() { release_idle_session_memory(); }

bool Connection::release_read_buffers() {
  if (closed_ || write_failed_ || parking_ != ReadParking::kNone || open_streams_ != 0 ||
      writing_now_ || !pending_.empty() || receiving_ || !nghttp2_session_want_read(session_)) {
    return false;
  }
  if (!stream_->cancel_read()) return false;
  parking_ = ReadParking::kCancelling;
  return true;
}

void Connection::on_readable(const asio::error_code& ec) {
  parking_ = ReadParking::kNone;
  read_pending_ = false;
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  if (lifecycle_ != nullptr) lifecycle_->on_buffers_taken();
  start_read();
}

void Connection::on_read(const asio::error_code& ec, std::size_t n) {
  read_pending_ = false;
  if (closed_) return;
  if (parking_ == ReadParking::kCancelling) {
    parking_ = ReadParking::kNone;
    if (ec == asio::error::operation_aborted) {
      // The cancelled read: give the blocks back and wait for bytes without them.
      detail::block_unref(read_block_);
      read_block_ = nullptr;
      pending_.clear();
      writing_.clear();
      parking_ = ReadParking::kWaiting;
      read_pending_ = true;
      stream_->async_wait_readable(shared_from_this());
      return;
    }
    // The bytes had arrived before the cancel: an ordinary read.
  }
  if (ec) {
    close();
    return;
  }
  ++reads_;
  read_block_->used = static_cast<std::uint32_t>(n);
  receiving_ = true;  // until the flush below: nothing needs to post one
  // The read is parsed in parts (http2/read_parts.h): when a part's calls are parsed and more
  // of the read remains, their answers leave before parsing goes on, so that the peer works on
  // them while this end parses the rest. A read of few calls is one part.
  ssize_t rv;
  std::size_t parsed = 0;
  for (;;) {
    parts_.start_part();
    {
      detail::CollectWakeups collect(wakeups_);
      rv = nghttp2_session_mem_recv(session_, read_block_->data() + parsed, n - parsed);
    }
    if (rv < 0) break;
    parsed += static_cast<std::size_t>(rv);
    // Paused on the read's last bytes: the answers go first as below, then one more call
    // (with no bytes) lets nghttp2 finish the frame it paused in, whose END_STREAM a server's
    // unary call waits for before its handler runs.
    if (parsed >= n && !std::exchange(paused_in_data_, false)) break;
    // Paused with the part full: answer it now. The wake-ups the part's own raise (a server's
    // handler runner calling another to take the rest) run here too, not posted: a posted one
    // per part would hold the calls of the next part until this read is done, and take the
    // thread's recycled operation memory, so that the next read's operation is a malloc.
    for (int round = 0; round < 4 && !wakeups_.empty(); ++round) {
      detail::CollectWakeups collect(wakeups_);
      run_wakeups();
    }
    run_wakeups();
    if (closed_) {
      receiving_ = false;
      return;
    }
    flush();
    if (closed_) {
      receiving_ = false;
      return;
    }
  }
  // A read that filled the block says more is waiting (a stream of large messages): the next
  // read is then under way before the woken coroutines run, which may take a while (say,
  // parsing those messages), so that the peer's data keeps flowing; without it 64 KiB streaming
  // lost a tenth of its throughput. Otherwise (small RPCs) the answers go out first, and the
  // read's speculative recv, which finds nothing, stays off their path.
  const bool read_early = rv >= 0 && n == BufferPool::kBlockSize;
  if (read_early && nghttp2_session_want_read(session_)) start_read();
  // Coroutines woken by what was read resume now, outside nghttp2's callbacks; what they write
  // goes out with the flush below (large answers earlier, each once it is built).
  run_wakeups();
  receiving_ = false;
  if (rv < 0) {
    // A protocol error: nghttp2 has queued GOAWAY where it could; send it, then close. The
    // calls are told it was this side's doing, and why (a static string of nghttp2's).
    local_close_reason_ = nghttp2_strerror(static_cast<int>(rv));
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
  // (A write that failed in that flush may have started the read already.)
  if (!read_early && !closed_ && !read_pending_ && nghttp2_session_want_read(session_)) {
    start_read();
  }
  if (write_failed_ && !read_pending_) close();
}

void Connection::run_wakeups() {
  if (!answer_bytes_.on()) {
    wakeups_.run_all();
    return;
  }
  // queued_ grows as the woken calls queue answers and falls as flushes hand them to nghttp2.
  answer_bytes_.start(queued_);
  wakeups_.run_all({&Connection::between_calls, this});
}

void Connection::between_calls(void* arg) {
  auto* self = static_cast<Connection*>(arg);
  if (self->closed_ || !self->answer_bytes_.due(self->queued_)) return;
  self->flush();
  self->answer_bytes_.start(self->queued_);
}

void Connection::schedule_flush() {
  if (flush_scheduled_ || closed_ || receiving_) return;
  flush_scheduled_ = true;
  asio::post(executor_, [self = shared_from_this()] { self->flush(); });
}

void Connection::flush() {
  flush_scheduled_ = false;
  if (write_failed_) {
    close_if_done();
    return;
  }
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
  if (closed_) return;
  if (write_failed_) {
    if (!read_pending_ && !receiving_ && !nghttp2_session_want_read(session_)) close();
    return;
  }
  if (writing_now_ || !pending_.empty()) return;
  // Our GOAWAY is out (and, after a graceful one, every stream is done).
  if (close_after_write_) {
    close_stream(/*gracefully=*/true);
    return;
  }
  if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
    close_stream(/*gracefully=*/true);
  }
}

bool Connection::write_now() {
  // Appended, not move-assigned: both chains keep their slice storage (a move hands pending_'s
  // over and leaves it to grow again, a malloc every few flushes), and pending_ keeps writing
  // into the tail of its block.
  writing_.append(std::move(pending_));
  // One non-blocking gathered write first: with room in the stream's buffer (the usual case) it
  // takes everything, and no completion is posted, so a flush costs one syscall and no extra
  // turn of the event loop.
  sys_iov_.clear();
  for (std::size_t i = 0; i < writing_.slice_count(); ++i) {
    const Slice& s = writing_.slice(i);
    sys_iov_.push_back({const_cast<std::uint8_t*>(s.data()), s.size()});
  }
  asio::error_code ec;
  const std::size_t n = stream_->write_some_now(sys_iov_, ec);
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    on_write_failed();
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
  stream_->async_write(iov_, shared_from_this());
  return false;
}

void Connection::on_written(const asio::error_code& ec) {
  writing_now_ = false;
  writing_.clear();
  if (ec) {
    on_write_failed();
    return;
  }
  flush();
}

void Connection::on_write_failed() {
  write_failed_ = true;
  writing_.clear();
  pending_.clear();
  if (read_pending_ || receiving_) return;  // that read goes on, and ends it
  if (nghttp2_session_want_read(session_)) {
    start_read();
  } else {
    close();
  }
}

}  // namespace ferry::http2

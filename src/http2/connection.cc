// Implementation of src/http2/connection.h over ferry's own HTTP/2 session
// (http2/session/session.h): the byte stream, the read blocks, the write path, the wake-ups and
// the lifecycle here; the protocol is the session's.
#include "http2/connection.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "asio/post.hpp"
#include "asio/steady_timer.hpp"
#include "http2/session/session.h"

namespace ferry::http2 {
namespace {

// While this much is already queued behind a write in progress, stop framing more: the byte
// stream is the bottleneck, and the streams' own queues (bounded by their writers) hold it.
constexpr std::size_t kMaxPendingOutput = 1u << 20;

session::Role session_role(Role role) {
  return role == Role::kServer ? session::Role::kServer : session::Role::kClient;
}

}  // namespace

// The session and what the connection keeps for it. The host forwards the session's events to
// the connection.
struct Connection::Engine final : session::SessionHost {
  Engine(Connection& c, Role role, const ConnectionLimits& limits)
      : connection(c), session(session_role(role), limits, *this, c.pending_), timer(c.executor_) {}

  // Keeps the timer on the session's next deadline (our SETTINGS' ACK, a shutdown's second
  // GOAWAY); nothing to do when it has not moved, which is every call but a few per connection.
  void arm_timer() {
    const session::Session::Clock::time_point next = session.next_deadline();
    if (next == armed) return;
    armed = next;
    if (next == session::Session::Clock::time_point::max()) {
      timer.cancel();
      return;
    }
    timer.expires_at(next);
    // The wait keeps the connection alive until it fires or is cancelled (close_stream()).
    timer.async_wait([self = connection.shared_from_this(), this](const asio::error_code& ec) {
      if (ec || self->closed_) return;
      armed = session::Session::Clock::time_point::max();
      session.on_timer(session::Session::Clock::now());
      self->on_session_timer();
    });
  }

  Stream* on_stream_open(std::uint32_t id) override {
    Stream* stream = connection.observer_->on_stream_open(static_cast<std::int32_t>(id));
    if (stream != nullptr) connection.link(stream);
    return stream;
  }
  void on_stream_closing(Stream* stream) override { connection.unlink(stream); }
  void on_outbound_framed(Stream* stream, std::size_t n) override {
    connection.on_queued_taken(stream, n);
  }
  void on_goaway(std::uint32_t last_stream_id, ErrorCode error) override {
    connection.observer_->on_goaway(static_cast<std::int32_t>(last_stream_id), error);
  }
  void on_peer_settings() override {
    connection.observer_->on_peer_settings();
    if (connection.lifecycle_ != nullptr) connection.lifecycle_->on_peer_settings();
  }
  void on_ping(bool ack) override {
    if (connection.lifecycle_ == nullptr) return;
    if (ack) {
      connection.lifecycle_->on_ping_ack();
    } else {
      connection.lifecycle_->on_ping_received();
    }
  }
  void on_connection_window_opened() override {
    // Writers held because the peer read nothing may go on.
    if (connection.send_waiters_) connection.wake_send_waiters();
  }

  Connection& connection;
  session::Session session;  // writes into connection.pending_
  // The start of a frame the last read ended in, at read_block_->data() + leftover_at: moved to
  // the front of the next read's block (the session parses whole frames only).
  std::size_t leftover = 0;
  std::size_t leftover_at = 0;
  std::size_t read_space = 0;  // what the read under way may fill
  asio::steady_timer timer;
  session::Session::Clock::time_point armed = session::Session::Clock::time_point::max();
};

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
  engine_ = std::make_unique<Engine>(*this, role, settings);
}

Connection::~Connection() {
  // Normally close() has emptied the list. If not (the loop stopped first), forget the streams
  // without calling into a layer above that may already be gone.
  while (streams_ != nullptr) unlink(streams_);
  engine_->session.forget_streams();
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
  return !closed_ && !write_failed_ && engine_->session.accepts_new_streams();
}

std::int32_t Connection::submit_request(Stream* stream, std::span<const HeaderField> headers) {
  if (!accepts_new_streams()) return -1;
  const std::int32_t id = engine_->session.submit_request(stream, headers);
  if (id < 0) return -1;
  stream->has_provider_ = true;
  link(stream);
  schedule_flush();
  return id;
}

bool Connection::submit_response(Stream* stream, std::span<const HeaderField> headers,
                                 bool with_data) {
  if (closed_) return false;
  const bool ok = engine_->session.submit_response(stream, headers, with_data);
  if (ok && with_data) {
    stream->has_provider_ = true;
    count_queued(stream);
  }
  schedule_flush();
  return ok;
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
  engine_->session.resume(stream);
  schedule_flush();
}

void Connection::reset(Stream* stream, ErrorCode error) {
  if (closed_ || stream->id_ <= 0) return;
  engine_->session.reset(stream, error);
  schedule_flush();
}

void Connection::consume(Stream* stream, std::size_t n) {
  if (closed_ || n == 0 || stream->id_ <= 0) return;
  engine_->session.consume(stream, n);
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
  engine_->session.consume_connection(n);
  schedule_flush();
}

void Connection::shutdown() {
  if (closed_) return;
  engine_->session.shutdown();
  schedule_flush();
}

void Connection::terminate(ErrorCode error, std::string_view debug) {
  if (closed_) return;
  if (local_close_reason_.empty()) local_close_reason_ = debug;
  engine_->session.terminate(error, debug);
  close_after_write_ = true;
  schedule_flush();
}

void Connection::ping() {
  if (closed_) return;
  engine_->session.ping();
  schedule_flush();
}

void Connection::on_session_timer() {
  if (closed_) return;
  if (engine_->session.failed()) {
    // SETTINGS_TIMEOUT: the GOAWAY is written; send it, then close (as after a protocol error).
    if (local_close_reason_.empty()) {
      local_close_reason_ = error_code_name(engine_->session.error_code());
    }
    close_after_write_ = true;
  }
  flush();
}

void Connection::close() { close_stream(/*gracefully=*/false); }

void Connection::close_stream(bool gracefully) {
  if (closed_) return;
  closed_ = true;
  if (lifecycle_ != nullptr) lifecycle_->stop();
  engine_->timer.cancel();
  if (gracefully) {
    stream_->close_gracefully();
  } else {
    stream_->close();
  }
  engine_->session.forget_streams();
  while (streams_ != nullptr) {
    Stream* stream = streams_;
    unlink(stream);
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

void Connection::on_queued_taken(Stream* stream, std::size_t n) {
  n = std::min(n, stream->queued_counted_);
  stream->queued_counted_ -= n;
  queued_ -= n;
  if (send_waiters_ && queued_ < max_queued_) wake_send_waiters(stream);
}

bool Connection::peer_window_closed() const {
  return engine_->session.peer_connection_window() <= 0;
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
  if (stream->prev_ != nullptr) stream->prev_->next_ = stream->next_;
  if (stream->next_ != nullptr) stream->next_->prev_ = stream->prev_;
  if (streams_ == stream) streams_ = stream->next_;
  stream->prev_ = stream->next_ = nullptr;
}

// --- reading -------------------------------------------------------------------------------

void Connection::start_read() {
  // The start of a frame the last read ended in goes first: to the front of this block when no
  // slice of it is held, else copied into a fresh one (at most a frame, 16 KiB + 9).
  detail::Block* old = read_block_;
  const std::size_t keep = engine_->leftover;
  if (old != nullptr && old->refs.load(std::memory_order_acquire) == 1) {
    if (keep > 0 && engine_->leftover_at > 0)
      std::memmove(old->data(), old->data() + engine_->leftover_at, keep);
  } else {
    detail::Block* fresh = BufferPool::instance().acquire();
    if (keep > 0) std::memcpy(fresh->data(), old->data() + engine_->leftover_at, keep);
    if (old != nullptr) detail::block_unref(old);
    read_block_ = fresh;
  }
  engine_->leftover_at = 0;
  read_block_->used = static_cast<std::uint32_t>(keep);
  engine_->read_space = BufferPool::kBlockSize - keep;
  read_pending_ = true;
  stream_->async_read_some(asio::buffer(read_block_->data() + keep, engine_->read_space),
                           shared_from_this());
}

bool Connection::release_read_buffers() {
  if (closed_ || write_failed_ || parking_ != ReadParking::kNone || open_streams_ != 0 ||
      writing_now_ || !pending_.empty() || receiving_ || engine_->leftover != 0 ||
      !engine_->session.want_read()) {
    return false;
  }
  if (!stream_->cancel_read()) return false;
  engine_->session.trim();
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
  const std::size_t end = engine_->leftover + n;
  read_block_->used = static_cast<std::uint32_t>(end);
  receiving_ = true;  // until the flush below: nothing needs to post one
  // The read is parsed in parts (http2/read_parts.h): when a part's calls are parsed and more
  // of the read remains, their answers leave before parsing goes on.
  std::size_t parsed = 0;
  for (;;) {
    parts_.start_part();
    session::Session::ReceiveResult r;
    {
      detail::CollectWakeups collect(wakeups_);
      r = engine_->session.receive({read_block_->data() + parsed, end - parsed}, read_block_,
                                   &parts_);
    }
    parsed += r.consumed;
    if (engine_->session.failed() || closed_ || !r.paused) break;
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
  engine_->leftover = end - parsed;
  engine_->leftover_at = parsed;
  const bool failed = engine_->session.failed();
  // A read that filled the block says more is waiting: the next read is then under way before
  // the woken coroutines run (see connection.cc).
  const bool read_early = !failed && !closed_ && n == engine_->read_space;
  if (read_early && engine_->session.want_read()) start_read();
  run_wakeups();
  receiving_ = false;
  if (closed_) return;
  if (engine_->session.failed()) {
    // A protocol error (or a flood): the session has written GOAWAY; send it, then close. The
    // calls are told it was this side's doing, and why.
    // (Named by its code; the reason went to the peer as the GOAWAY's debug data.)
    if (local_close_reason_.empty()) {
      local_close_reason_ = error_code_name(engine_->session.error_code());
    }
    flush();
    close_if_done();
    if (!writing_now_) close();
    return;
  }
  flush();
  if (!read_early && !closed_ && !read_pending_ && engine_->session.want_read()) start_read();
  if (write_failed_ && !read_pending_) close();
}

void Connection::run_wakeups() {
  if (!answer_bytes_.on()) {
    wakeups_.run_all();
    return;
  }
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

// --- writing -------------------------------------------------------------------------------

void Connection::flush() {
  flush_scheduled_ = false;
  if (write_failed_) {
    close_if_done();
    return;
  }
  while (!closed_) {
    if (pending_.size() < kMaxPendingOutput) engine_->session.produce(kMaxPendingOutput);
    if (closed_) return;
    if (lifecycle_ != nullptr && engine_->session.take_data_sent()) lifecycle_->on_data_sent();
    if (writing_now_ || pending_.empty()) break;
    if (!write_now()) break;  // the rest goes out asynchronously (or the connection closed)
  }
  if (!closed_) engine_->arm_timer();
  close_if_done();
}

void Connection::close_if_done() {
  if (closed_) return;
  if (write_failed_) {
    if (!read_pending_ && !receiving_ && !engine_->session.want_read()) close();
    return;
  }
  if (writing_now_ || !pending_.empty()) return;
  // Our GOAWAY is out (and, after a graceful one, every stream is done).
  if (close_after_write_) {
    close_stream(/*gracefully=*/true);
    return;
  }
  if (!engine_->session.want_read() && !engine_->session.want_write())
    close_stream(/*gracefully=*/true);
}

bool Connection::write_now() {
  // Appended, not move-assigned: both chains keep their slice storage.
  writing_.append(std::move(pending_));
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
    engine_->session.on_output_written();
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
  engine_->session.on_output_written();
  flush();
}

void Connection::on_write_failed() {
  write_failed_ = true;
  writing_.clear();
  pending_.clear();
  if (read_pending_ || receiving_) return;  // that read goes on, and ends it
  if (engine_->session.want_read()) {
    start_read();
  } else {
    close();
  }
}

}  // namespace ferry::http2

// One HTTP/2 connection: ferry's own HTTP/2 session (http2/session/session.h) over a byte stream
// (http2 layer, private). Reads go into pooled blocks and DATA reaches streams as slices of them;
// DATA is sent without copying by gathering frame headers and the streams' pooled slices into one
// write. The byte stream is a socket, TLS or memory (transport/byte_stream.h): one engine for all.
// Everything happens on the stream's executor, which must be single-threaded (one io_context run
// by one thread): no locks. The layer above speaks HeaderField, ErrorCode and Stream.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/wakeups.h"
#include "ferry/limits.h"
#include "ferry/slice_chain.h"
#include "http2/client_transport.h"
#include "http2/error_code.h"
#include "http2/header_block.h"
#include "http2/lifecycle.h"
#include "http2/read_parts.h"
#include "http2/stream.h"
#include "transport/byte_stream.h"

namespace ferry::http2 {

enum class Role { kClient, kServer };

// The layer above, told about connection-wide events.
class ConnectionObserver {
 public:
  virtual ~ConnectionObserver() = default;
  // Server: the peer opened stream `id`. Return the Stream that will own it (the connection
  // reports to it until on_closed), or null to refuse it with RST_STREAM(REFUSED_STREAM).
  virtual Stream* on_stream_open(std::int32_t id) = 0;
  // The peer sent GOAWAY: streams above last_stream_id were not processed.
  virtual void on_goaway(std::int32_t last_stream_id, ErrorCode error) = 0;
  // The connection is closed; every open stream got on_closed first.
  virtual void on_connection_closed() = 0;
  // The peer sent SETTINGS (the first one is its connection preface; each later one too).
  virtual void on_peer_settings() {}
};

class Connection final : public std::enable_shared_from_this<Connection>,
                         public ByteStreamClient,
                         public ClientTransport {
 public:
  // limits: what this end advertises (SETTINGS) and enforces.
  Connection(std::unique_ptr<ByteStream> stream, Role role, const ConnectionLimits& limits,
             ConnectionObserver* observer);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Before start(): the limits on this connection's life and the keepalive PINGs
  // (http2/lifecycle.h). Without it the connection lives until closed.
  void set_lifecycle(const LifecyclePolicy& policy);

  // Sends the preface and SETTINGS and starts reading.
  void start() override;

  // Client: opens a stream with request headers; its DATA comes from the stream's outbound
  // queue. Returns the stream id, or -1 when no stream can be opened (closed, GOAWAY received,
  // stream ids exhausted).
  std::int32_t submit_request(Stream* stream, std::span<const HeaderField> headers) override;
  // Server: response headers; with_data attaches the stream's outbound queue as the body (ended
  // by outbound_end + trailers), without it the headers end the stream (Trailers-Only). False
  // when the connection cannot send them (closed).
  bool submit_response(Stream* stream, std::span<const HeaderField> headers,
                       bool with_data) override;
  // Outbound data or the end was queued on stream: let the session send it.
  void resume(Stream* stream) override;
  // Whether the streams' queued outbound bytes have reached ConnectionLimits::
  // max_queued_send_bytes: a streaming writer then waits (its Stream::on_outbound_taken is
  // called once they fall below it again).
  bool send_queue_full() const override { return queued_ >= max_queued_; }
  // Whether the peer's connection-level window is used up: it reads nothing at all, so no
  // stream can send (a writer may then wait even with its own queue empty, starving nobody).
  bool peer_window_closed() const override;
  // The caller found the queue full and waits for on_outbound_taken.
  void wait_for_send_room() override { send_waiters_ = true; }
  // Writers waiting for room are told to look again (room was made, or the peer's window
  // opened): each open stream but `except` gets on_outbound_taken.
  void wake_send_waiters(const Stream* except = nullptr);
  // RST_STREAM with the given code.
  void reset(Stream* stream, ErrorCode error) override;
  // The application took n bytes of the stream's DATA: WINDOW_UPDATE them.
  void consume(Stream* stream, std::size_t n) override;
  // The same for the connection window only: bytes of a stream that is closing (may be called
  // from Stream::on_closed), which would otherwise stay charged to the window all streams share.
  void consume_connection(std::size_t n) override;
  // The streams' held memory (ConnectionLimits::max_held_bytes): past the bound the connection
  // ends with GOAWAY ENHANCE_YOUR_CALM.
  void change_held(Stream* stream, std::ptrdiff_t delta) override;
  std::size_t held_bytes() const { return held_; }

  // Graceful shutdown: GOAWAY(last processed stream); existing streams go on, new ones are
  // refused (REFUSED_STREAM, so that the peer retries them elsewhere) from the moment the
  // GOAWAY is queued; the connection closes when the last stream is done.
  void shutdown() override;
  // Closes the byte stream now; every open stream gets on_closed(kConnectionLost).
  void close() override;
  // Ends the connection for an error of the peer's: GOAWAY(error, debug), then close. debug
  // must be a static string: the streams closed then are told it as the reason
  // (Stream::local_close_reason).
  void terminate(ErrorCode error, std::string_view debug);
  // Sends a PING (keepalive); the ACK reaches the lifecycle.
  void ping();
  // An idle connection (no stream open, nothing being written) gives its read block and its
  // output block back to the pool and waits for the peer's next bytes without a buffer; the
  // next read takes a block again. False when it cannot now (streams open, a write pending, a
  // byte stream that cannot wait without reading).
  bool release_read_buffers();

  // Counters for the lifecycle: reads completed, streams open now and ever opened.
  std::uint64_t reads() const { return reads_; }
  std::size_t open_streams() const { return open_streams_; }
  std::uint64_t streams_opened() const { return streams_opened_; }

  bool is_open() const override { return !closed_; }
  // Whether a new stream may still be opened (open, no GOAWAY either way).
  bool accepts_new_streams() const override;
  const asio::any_io_executor& executor() const override { return executor_; }
  std::string peer_address() const { return stream_->peer_address(); }

  // ByteStreamClient: the byte stream's completions.
  void on_read(const asio::error_code& ec, std::size_t n) override;
  void on_written(const asio::error_code& ec) override;
  void on_readable(const asio::error_code& ec) override;

 private:
  // The HTTP/2 session (http2/session), its host (what forwards the session's events here), its
  // timer and the read block's unparsed rest.
  struct Engine;
  // The session's timer fired.
  void on_session_timer();

  void start_read();
  // Runs the wake-ups a read raised, flushing between them once their answers pass
  // WritePolicy::bytes_per_write.
  void run_wakeups();
  // Adds what the stream queued since it was last counted to queued_.
  void count_queued(Stream* stream);
  static void between_calls(void* self);
  void schedule_flush();
  void flush();
  // Writes pending_: at once if the stream takes it all (true), else the rest asynchronously
  // (false; flush() runs again on completion). False too when the connection closed.
  bool write_now();
  void link(Stream* stream);
  void unlink(Stream* stream);
  void close_if_done();
  // close(); gracefully when everything this end had to say is written (its GOAWAY): the byte
  // stream is then closed with ByteStream::close_gracefully().
  void close_stream(bool gracefully);
  // A write failed (the peer reset or closed the connection): stop writing, but read what the
  // peer sent before it went, which may say why (a GOAWAY: its refused streams can then be
  // retried); the read ends in the same error and closes. Closes at once when no read is due.
  void on_write_failed();
  // Bytes of stream's outbound queue the peer took (send_data): the connection's count falls.
  void on_queued_taken(Stream* stream, std::size_t n);

  asio::any_io_executor executor_;
  std::unique_ptr<ByteStream> stream_;
  Role role_;
  ConnectionObserver* observer_;
  std::unique_ptr<Engine> engine_;

  detail::Block* read_block_ = nullptr;  // the block being parsed (DATA: slices of it)
  SliceChain pending_;                   // frames the session produced, not yet written
  SliceChain writing_;                   // frames handed to the byte stream
  std::vector<iovec> sys_iov_;           // write_now's gathered view of writing_
  std::vector<asio::const_buffer> iov_;  // the same for the asynchronous rest
  bool writing_now_ = false;
  bool read_pending_ = false;  // an async_read_some or async_wait_readable is under way
  bool write_failed_ = false;  // on_write_failed(): nothing more is written
  // release_read_buffers(): the pending read was cancelled (its completion will release the
  // block and wait without one), or that wait is under way.
  enum class ReadParking : std::uint8_t { kNone, kCancelling, kWaiting };
  ReadParking parking_ = ReadParking::kNone;
  bool flush_scheduled_ = false;
  // Inside on_read's parse: on_read flushes when it returns, so nothing posts a flush meanwhile.
  bool receiving_ = false;
  detail::WakeupQueue wakeups_;  // raised while parsing a read, run when it is parsed
  ReadParts parts_;              // where a read's parse pauses to send what it answered
  AnswerBytes answer_bytes_;     // when run_wakeups writes between the calls it runs
  bool closed_ = false;
  std::string_view local_close_reason_;  // this side's reason to close, for the streams
  Stream* streams_ = nullptr;            // open streams, for close()
  std::size_t queued_ = 0;               // sum of the open streams' queued_counted_
  std::size_t max_queued_;               // ConnectionLimits::max_queued_send_bytes
  std::size_t max_held_;                 // ConnectionLimits::max_held_bytes
  std::size_t held_ = 0;                 // what the streams' unfinished messages keep alive
  bool send_waiters_ = false;            // a writer waits for queued_ to fall below max_queued_
  std::size_t open_streams_ = 0;
  std::uint64_t streams_opened_ = 0;
  std::uint64_t reads_ = 0;
  std::unique_ptr<Lifecycle> lifecycle_;  // null when no limit is on
  bool close_after_write_ = false;        // terminate(): close once the GOAWAY is out
};

}  // namespace ferry::http2

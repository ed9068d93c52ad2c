// What client and server calls share (calls layer, private): an HTTP/2 stream whose inbound DATA
// is deframed into a queue of messages, acknowledged to the peer's flow control only as the
// application reads them, and whose outbound messages are encoded in place into pooled blocks,
// the writer suspending while too much is queued. One executor thread owns a call; only the
// reference count may be touched from elsewhere.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "call/deadline_queue.h"
#include "call/event.h"
#include "call/message_format.h"
#include "ferry/buffer_pool.h"
#include "ferry/compression.h"
#include "ferry/frame_decoder.h"
#include "ferry/limits.h"
#include "ferry/trace_context.h"
#include "http2/connection.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

using CallLimits = MessageLimits;

class CallStream : public http2::Stream, private Deadline {
 public:
  // A writer suspends while more than this is queued on its stream and not yet taken by the
  // connection (which takes it as the peer's flow-control window allows).
  static constexpr std::size_t kWriteHighWater = 256 * 1024;

  // deadlines: the queue of the call's thread, which times arm_deadline (null for a call that
  // never reached a connection).
  CallStream(const asio::any_io_executor& executor, http2::StreamCarrier* connection,
             const CallLimits& limits, DeadlineQueue* deadlines);

  // Reference counting: the connection holds one while the stream is open, the application
  // one per handle. The last release deletes the call on its executor's thread.
  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref();
  // unref() for callers with nothing of the call's below them on the stack (a completion the
  // executor runs, a coroutine resumed by one, the connection reporting the stream closed), on
  // the call's thread: the last reference deletes the call at once rather than posting the
  // deletion (a posted operation and a turn of the loop saved per call).
  void unref_inline();

  const asio::any_io_executor& executor() const { return executor_; }

  // Why the call was aborted locally (cancelled, deadline, connection lost, bad message); OK
  // while it was not.
  const absl::Status& abort_status() const { return abort_; }

  // Whether the message most recently taken by a read arrived compressed (flag 1).
  bool last_message_compressed() const { return last_compressed_; }

  // Messages received complete (read or not) and messages queued to send, for interceptors.
  std::size_t messages_received() const { return messages_received_; }
  // Whether expect_single_message() was called.
  bool expects_single_message() const { return single_message_; }
  std::size_t messages_sent() const { return messages_sent_; }
  // The same messages' payload bytes as they crossed the wire (compressed when they were; the
  // 5-byte gRPC prefix not counted): gRPC's "compressed message size" metrics.
  std::size_t message_bytes_received() const { return message_bytes_received_; }
  std::size_t message_bytes_sent() const { return message_bytes_sent_; }

  // The tracer told of each message sent and taken (ferry/trace_context.h), or null: set when
  // the tracer records messages, which must then outlive the call's messages (the call's owner
  // keeps it). On the call's thread.
  void set_message_tracer(CallTracer* tracer) { tracer_ = tracer; }

 protected:
  ~CallStream() override { disarm_deadline(); }

  // The call's deadline: on_deadline() runs on the call's thread when it passes, unless the
  // call disarmed it first (it ended, or its stream closed).
  void arm_deadline(std::chrono::steady_clock::time_point when) { deadlines_->add(this, when); }
  void disarm_deadline() {
    if (deadlines_ != nullptr) deadlines_->remove(this);
  }
  // What the deadline does (Deadline's hook, for the subclasses to say).
  void on_deadline() override = 0;

  // The peer's grpc-encoding (from its headers, before any DATA): compressed messages are then
  // accepted and inflated. An encoding ferry does not support is remembered, and a compressed
  // message that arrives in it fails the call with INTERNAL (the spec's rule for a client; the
  // server refuses such a call before reading).
  void set_inbound_encoding(std::string_view grpc_encoding);
  // What outbound messages are compressed with (unless a write opts out); set before the first.
  void set_send_compression(Compression compression) { send_compression_ = compression; }
  Compression send_compression() const { return send_compression_; }

  // Waits for the next message and parses it into msg. False at the end of the inbound stream
  // or once the call is aborted; a message that fails to parse aborts the call (INTERNAL).
  asio::awaitable<bool> read_message(google::protobuf::MessageLite& msg);
  // The same for a message read raw: its serialized bytes (inflated if it arrived compressed)
  // replace out's, by reference to the blocks they arrived in when not compressed.
  asio::awaitable<bool> read_message(SliceChain& out);
  // Without waiting: parses the next queued message into msg. 1 when it did, 0 when none is
  // queued, -1 when the call is aborted or the message does not parse (which aborts it).
  int take_message(google::protobuf::MessageLite& msg);
  // The same, raw (-1 only when the call is aborted or a compressed message does not inflate).
  int take_message(SliceChain& out);
  // Whether a complete message is queued.
  bool has_message() const { return ready_head_ < ready_.size(); }
  // read_message's step, without the wait: true when it took the next message into msg (a
  // protobuf message or, raw, a SliceChain), false at the end of the inbound stream (or once the
  // call is aborted), nullopt when the caller must await inbound_progress() and try again.
  template <class Message>
  std::optional<bool> next_message(Message& msg) {
    const int taken = take_message(msg);
    if (taken != 0) return taken > 0;
    if (inbound_done()) return false;
    return std::nullopt;
  }
  // What next_message waits for: a message arrived, the inbound side ended or the call was
  // aborted (or nothing: try again).
  asio::awaitable<void> inbound_progress() { return read_event_.wait(); }
  // The inbound side may carry one message only (a unary or server-streaming call's request, a
  // unary call's response): a second one fails the call with UNIMPLEMENTED, gRPC's cardinality
  // rule.
  void expect_single_message();
  // INTERNAL when the inbound stream ended inside a message (a truncated message), else OK.
  absl::Status check_inbound_complete() const;

  // How the messages cross the wire, when not as gRPC's binary protobuf in
  // Length-Prefixed-Messages (call/message_format.h): set once, before the first DATA.
  void set_message_format(const MessageFormat& format);
  const MessageFormat& message_format() const { return format_; }
  // An unframed call's body that came with its headers rather than as DATA (a Connect GET's
  // query): the one message once the inbound side ends.
  void set_unframed_body(std::string_view bytes) {
    format_state_->body.append_copy(bytes.data(), bytes.size());
  }
  // An unframed body as it came so far, taken out (inflated when the inbound encoding says it
  // is compressed) so that it is not the call's message: a Connect unary call's error body.
  absl::StatusOr<std::string> take_unframed_body();
  // Frames with this flag bit (gRPC-Web's trailers, 0x80) end the inbound messages and go to
  // on_end_frame instead of the reader; before the first DATA.
  void accept_end_frames(std::uint8_t flag) {
    FrameDecoderOptions options = decoder_.options();
    options.end_frame_flag = flag;
    decoder_.set_options(options);
  }
  // Such a frame arrived (its payload as it came; compressed when its flag says so).
  virtual void on_end_frame(DecodedMessage&& frame) { (void)frame; }
  // Appends a frame the protocol sends beside the messages (gRPC-Web's trailers, Connect's
  // end-of-stream message) to the outbound queue, written as the body is (base64 for text).
  void enqueue_frame(std::uint8_t flags, std::string_view payload);

  // Encodes msg onto the outbound queue (and marks the end of the outbound side when last),
  // asks the connection to send it, then waits while the queue is above the high-water mark.
  // The message is compressed with send_compression() unless options.no_compression.
  asio::awaitable<absl::Status> write_message(const google::protobuf::MessageLite& msg, bool last,
                                              WriteOptions options);
  // The same for a message already serialized, sent by reference (its slices are shared, never
  // copied, and never compressed: compressing would copy them). The send limit applies.
  asio::awaitable<absl::Status> write_message(const SliceChain& raw, bool last);
  // write_message without the wait: queues msg (and the end, when last) and lets the connection
  // send it.
  absl::Status queue_message(const google::protobuf::MessageLite& msg, bool last,
                             WriteOptions options);
  absl::Status queue_message(const SliceChain& raw, bool last, WriteOptions options);
  // The encode-and-queue half of write_message, without waiting.
  absl::Status enqueue_message(const google::protobuf::MessageLite& msg, WriteOptions options);
  absl::Status enqueue_message(const SliceChain& raw, WriteOptions options);

  // Aborts the call: the first status wins; every waiting read and write wakes and fails.
  void abort(absl::Status status);
  // The call was just aborted (abort_ holds why); once per call. Default: nothing.
  virtual void on_aborted() {}
  // The stream is closed: the call's own reaction (its status), between the common steps of
  // on_closed: the window, the connection and the deadline are let go before it, waiters are
  // woken and the connection's reference dropped after it.
  virtual void on_stream_closed(http2::ErrorCode error) = 0;
  void wake_all() {
    read_event_.notify();
    write_event_.notify();
  }
  // Whether more outbound data makes sense (subclasses: the call has not ended).
  virtual bool can_write() const = 0;
  // Whether the inbound side will bring no more messages (beyond those queued).
  virtual bool inbound_done() const { return remote_ended_ || closed_; }
  // A malformed or oversized inbound message: the subclass ends the call with status.
  virtual void on_receive_error(absl::Status status) = 0;
  // A message that arrived whole (and inflated) but does not parse as its type; status says why
  // (INTERNAL). The protocol decides the code: on_receive_error with it, unless overridden.
  virtual void on_parse_error(absl::Status status) { on_receive_error(std::move(status)); }
  // Inbound messages were queued or the inbound side ended.
  virtual void on_inbound_progress() {}
  // A read, write or finish waiting on this call was cancelled through its completion handler's
  // cancellation slot (asio per-operation cancellation): the subclass ends the call, which
  // wakes every waiter. On the call's thread.
  virtual void on_operation_cancelled() = 0;
  // The Event hook (call/event.h) that calls on_operation_cancelled.
  static void cancel_operation(void* self);
  // A read took a message and delivered it (parsed, or inflated for a raw read); compressed:
  // its flag. A message that fails to parse calls on_receive_error instead.
  virtual void on_message_taken(bool compressed) { (void)compressed; }

  // http2::Stream
  void on_data(Slice chunk) override;
  void on_remote_end() override;
  void on_outbound_taken() override;
  void on_closed(http2::ErrorCode error) final;

  asio::any_io_executor executor_;
  http2::StreamCarrier* connection_;  // null once the stream is closed
  CallLimits limits_;
  bool remote_ended_ = false;
  bool closed_ = false;
  absl::Status abort_;

 private:
  // write_message and read_message for either kind of message (a protobuf message or raw
  // bytes): one coroutine frame per operation.
  template <class Message>
  asio::awaitable<absl::Status> write_any(const Message& message, bool last, WriteOptions options);
  template <class Message>
  asio::awaitable<bool> read_any(Message& out);
  template <class Message>
  absl::Status queue_any(const Message& message, bool last, WriteOptions options);

  // Over the connection's bound on queued bytes: whether this stream's writer waits
  // (write_message).
  bool must_wait_for_send_room() const;
  void acknowledge(std::size_t n);
  // Gives the connection window back for DATA not read yet (the messages stay readable).
  void release_window();
  // Moves the next queued message's payload to out and gives its window back.
  bool pop_ready(DecodedMessage& out);
  // Copies small queued messages out of read blocks other than current (see the .cc).
  void pack_stale(const detail::Block* current);

  // After on_data: the memory the unfinished message keeps alive, checked against the call's
  // budget (MessageLimits::max_held_receive_bytes) and told to the connection.
  void account_held();
  // on_data's decoding, once a chunk is in the decoder: queues the complete messages.
  void decode_ready();
  // on_data for a body that is not plain gRPC framing (base64 text, or one bare message).
  void on_formatted_data(const Slice& chunk);
  // At the end of an unframed body: the body is the one message.
  void queue_unframed_body();
  // enqueue_message for a call whose format is not plain.
  absl::Status enqueue_formatted(const google::protobuf::MessageLite& msg, WriteOptions options);
  // Appends one framed message (or protocol frame) to outbound as the format writes it.
  void append_formatted(SliceChain&& framed);

  // Inflates a compressed message's payload into out, or says why it cannot.
  absl::Status inflate(const SliceChain& payload, SliceChain& out) const;

  // Queued messages below this size are packed when their read block goes stale; larger ones
  // use at least a quarter of the blocks they keep.
  static constexpr std::size_t kPackBelow = BufferPool::kBlockSize / 4;

  // A complete message waiting for the reader, and how many of the DATA bytes not yet given
  // back to flow control it accounts for (given back when it is read).
  struct Ready {
    DecodedMessage message;
    std::size_t held;
  };

  DeadlineQueue* deadlines_;
  std::atomic<int> refs_{1};
  Compression send_compression_ = Compression::kIdentity;
  Compression recv_compression_ = Compression::kIdentity;
  bool last_compressed_ = false;
  bool single_message_ = false;
  CallTracer* tracer_ = nullptr;  // set_message_tracer
  std::size_t messages_received_ = 0;
  std::size_t messages_sent_ = 0;
  std::size_t message_bytes_received_ = 0;
  std::size_t message_bytes_sent_ = 0;
  std::string unsupported_encoding_;  // the peer's grpc-encoding when ferry cannot inflate it
  MessageFormat format_;
  // The state of a format that is not plain; null for gRPC's plain binary messages, whose calls
  // pay nothing for the other protocols.
  std::unique_ptr<MessageFormatState> format_state_;
  FrameDecoder decoder_;
  absl::InlinedVector<Ready, 1> ready_;
  std::size_t ready_head_ = 0;
  std::size_t packed_upto_ = 0;    // ready_ before this index has been through pack_stale
  std::size_t held_ = 0;           // sum of Ready::held
  std::size_t unacked_ = 0;        // DATA bytes received and not yet given back; always >= held_
  std::size_t held_reported_ = 0;  // memory the unfinished message keeps, as the connection knows
  Event read_event_;
  Event write_event_;
};

}  // namespace ferry::detail

// Implementation of src/call/call_stream.h.
#include "call/call_stream.h"

#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "call/json_message.h"
#include "codec/gzip.h"
#include "common/ref.h"
#include "ferry/frame_encoder.h"
#include "ferry/trace_context.h"
#include "google/protobuf/message_lite.h"

namespace ferry::detail {
namespace {

// Messages of all calls on a thread are encoded back to back into this chain's block and then
// moved (by reference) to their stream: many small responses share one pooled block. Small
// inbound messages packed out of stale read blocks (pack_stale) go here too.
SliceChain& encode_scratch() {
  thread_local SliceChain scratch;
  return scratch;
}

// Where a compressed message is inflated for parsing, one message at a time: consumed after each
// parse (not cleared), so its slice storage and its last block are reused, not reallocated.
SliceChain& inflate_scratch() {
  thread_local SliceChain scratch;
  return scratch;
}

// gRPC's status for a request or response count the method does not allow (doc/statuscodes.md).
absl::Status cardinality_violation() {
  return absl::UnimplementedError(
      "cardinality violation: a second message where the method carries one (unary side)");
}

}  // namespace

CallStream::CallStream(const asio::any_io_executor& executor, http2::StreamCarrier* connection,
                       const CallLimits& limits, DeadlineQueue* deadlines)
    : executor_(executor),
      connection_(connection),
      limits_(limits),
      deadlines_(deadlines),
      decoder_(FrameDecoderOptions{limits.max_receive_message_size, false}),
      read_event_(executor),
      write_event_(executor) {
  read_event_.on_cancel(&CallStream::cancel_operation, this);
  write_event_.on_cancel(&CallStream::cancel_operation, this);
}

void CallStream::cancel_operation(void* self) {
  auto* stream = static_cast<CallStream*>(self);
  Ref<CallStream> keep(stream);  // what the subclass sets off may drop the other references
  stream->on_operation_cancelled();
}

void CallStream::on_closed(http2::ErrorCode error) {
  release_window();
  if (held_reported_ != 0 && connection_ != nullptr) {
    connection_->change_held(this, -static_cast<std::ptrdiff_t>(held_reported_));
    held_reported_ = 0;
  }
  closed_ = true;
  connection_ = nullptr;
  disarm_deadline();
  on_stream_closed(error);
  wake_all();
  // The connection's reference. It calls this last and touches the stream no more.
  unref_inline();
}

void CallStream::unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Timers and queues belong to the executor's thread: delete there.
  asio::post(executor_, [this] { delete this; });
}

void CallStream::unref_inline() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void CallStream::set_inbound_encoding(std::string_view grpc_encoding) {
  const std::optional<Compression> known = parse_compression(grpc_encoding);
  if (grpc_encoding.empty() || known == Compression::kIdentity) return;
  if (known) {
    recv_compression_ = *known;
  } else {
    unsupported_encoding_ = grpc_encoding;
  }
  FrameDecoderOptions options = decoder_.options();
  options.compression_negotiated = true;
  decoder_.set_options(options);
}

absl::Status CallStream::inflate(const SliceChain& payload, SliceChain& out) const {
  if (!unsupported_encoding_.empty()) {
    return absl::InternalError(
        absl::StrCat("received a message compressed with grpc-encoding '", unsupported_encoding_,
                     "', which is not supported (supported: identity,gzip)"));
  }
  // Lazily, one message at a time as the application reads: inflating on arrival would let a
  // window's worth of small bombs each take up to the receive limit.
  return decompress_payload(payload, recv_compression_, limits_.max_receive_message_size, out);
}

void CallStream::abort(absl::Status status) {
  if (abort_.ok()) {
    abort_ = std::move(status);
    on_aborted();
  }
  wake_all();
}

void CallStream::release_window() {
  // Bytes held by queued messages are acknowledged on the connection only: the stream is going,
  // so its own window no longer matters, and a closed stream's ids must not be touched. Unread
  // bytes of a stream closed normally (the application read fewer messages than arrived) were
  // otherwise charged to the shared connection window forever.
  if (connection_ != nullptr) connection_->consume_connection(unacked_);
  unacked_ = 0;
  held_ = 0;
  for (std::size_t i = ready_head_; i < ready_.size(); ++i) ready_[i].held = 0;
}

void CallStream::acknowledge(std::size_t n) {
  if (n == 0) return;
  unacked_ -= n;
  if (connection_ != nullptr) connection_->consume(this, n);
}

void CallStream::pack_stale(const detail::Block* current) {
  // A small message still queued from an earlier read pins that read's 64 KiB block for a few
  // bytes. A reader that falls behind while each message arrives in its own read (a trickle)
  // then held a block per message: 1,000 messages of 100 bytes, 64 MiB, far beyond the window.
  // Such messages are copied, packed together, once a later read shows their block is stale;
  // the messages of the current read share its block and cost nothing, so a reader that keeps
  // up never pays for a copy.
  if (packed_upto_ < ready_head_) packed_upto_ = ready_head_;
  for (; packed_upto_ < ready_.size(); ++packed_upto_) {
    SliceChain& payload = ready_[packed_upto_].message.payload;
    if (payload.slice_count() == 1 && payload.slice(0).block() == current) break;
    if (payload.empty() || payload.size() >= kPackBelow) continue;  // large ones fill blocks
    SliceChain& scratch = encode_scratch();
    const std::size_t n = payload.size();
    payload.copy_to(0, n, scratch.reserve(n));
    scratch.commit(n);
    payload = scratch.split_front(n);
  }
}

void CallStream::on_data(Slice chunk) {
  unacked_ += chunk.size();
  if (!abort_.ok()) {  // nobody will read it: give the window back at once
    acknowledge(unacked_ - held_);
    return;
  }
  if (!format_.plain_body()) [[unlikely]] {
    on_formatted_data(chunk);
  } else {
    if (ready_head_ < ready_.size()) pack_stale(chunk.block());
    decoder_.push(std::move(chunk));
    decode_ready();
  }
  // Nothing to count for messages that arrived whole (the usual case): no call.
  if (decoder_.buffered_bytes() != 0 || held_reported_ != 0 || format_state_ != nullptr)
      [[unlikely]] {
    account_held();
  }
}

void CallStream::account_held() {
  std::size_t held = decoder_.held_bytes();
  if (format_state_ != nullptr && !format_state_->body.empty()) {
    held += format_state_->body_loose.pinned_bytes(format_state_->body);
  }
  // MessageLimits::max_held_receive_bytes: the call's own share.
  if (held > limits_.held_receive_budget() && abort_.ok()) {
    acknowledge(unacked_ - held_);
    on_receive_error(absl::ResourceExhaustedError(absl::StrCat(
        "the unfinished message holds ", held, " bytes of memory, more than the limit (",
        limits_.held_receive_budget(), " bytes): it arrives in pieces too small for its blocks")));
  }
  // ConnectionLimits::max_held_bytes: the connection's sum, which may end the connection.
  if (held != held_reported_ && connection_ != nullptr) {
    const auto delta =
        static_cast<std::ptrdiff_t>(held) - static_cast<std::ptrdiff_t>(held_reported_);
    held_reported_ = held;
    connection_->change_held(this, delta);
  }
}

void CallStream::decode_ready() {
  DecodedMessage message;
  while (true) {
    absl::StatusOr<bool> got = decoder_.next(message);
    if (!got.ok()) {
      acknowledge(unacked_ - held_);
      on_receive_error(got.status());
      return;
    }
    if (!*got) break;
    if (message.end_frame) [[unlikely]] {
      // Holds no window (acknowledged below). A compressed one (gRPC-Web allows it) is inflated
      // with the stream's encoding first.
      if (message.compressed) {
        SliceChain plain;
        if (absl::Status s = inflate(message.payload, plain); !s.ok()) {
          acknowledge(unacked_ - held_);
          on_receive_error(std::move(s));
          return;
        }
        message.payload = std::move(plain);
        message.compressed = false;
      }
      on_end_frame(std::move(message));
      continue;
    }
    message_bytes_received_ += message.payload.size();
    if (++messages_received_ > 1 && single_message_) {
      acknowledge(unacked_ - held_);
      on_receive_error(cardinality_violation());
      return;
    }
    // Bytes of this message that arrived in earlier chunks were acknowledged then; it holds at
    // most what is still unacknowledged, so every byte is given back exactly once.
    const std::size_t held = std::min(kFramePrefixSize + message.payload.size(), unacked_ - held_);
    held_ += held;
    ready_.push_back(Ready{std::move(message), held});
  }
  // Complete messages hold the window until read (a slow reader stops the sender). The bytes of
  // a message still arriving are acknowledged only while no complete message waits, so that one
  // larger than the window completes for a reader that keeps up. Acknowledging them always let
  // each queued message hold just its last DATA frame's worth of window: a reader behind on
  // 64 KiB messages in 16 KiB frames held four times the window (window x message / frame).
  if (ready_head_ == ready_.size()) acknowledge(unacked_ - held_);
  read_event_.notify();
  on_inbound_progress();
}

void CallStream::expect_single_message() {
  single_message_ = true;
  if (messages_received_ > 1 && abort_.ok()) on_receive_error(cardinality_violation());
}

void CallStream::set_message_format(const MessageFormat& format) {
  format_ = format;
  if (!format.plain() && format_state_ == nullptr) {
    format_state_ = std::make_unique<MessageFormatState>();
  }
}

absl::Status CallStream::check_inbound_complete() const {
  if (format_state_ != nullptr && !format_state_->base64.complete()) {
    return absl::InternalError("the base64 text body ended inside a 4-character group");
  }
  return decoder_.finish();
}

void CallStream::on_formatted_data(const Slice& chunk) {
  MessageFormatState& state = *format_state_;
  const std::string_view bytes(reinterpret_cast<const char*>(chunk.data()), chunk.size());
  if (format_.unframed) {
    // The body is the message: kept until the body ends, within the receive limit. Its window
    // goes back as it arrives, the limit bounding what one call holds.
    if (state.body.size() + bytes.size() > limits_.max_receive_message_size) {
      acknowledge(unacked_ - held_);
      on_receive_error(
          absl::ResourceExhaustedError(absl::StrCat("received a message larger than the limit (",
                                                    limits_.max_receive_message_size, " bytes)")));
      return;
    }
    // By reference while the reads' blocks are well used; a body trickled a few bytes per read
    // is copied into the call's own blocks as it goes (detail::LooseTail).
    if (state.body.empty()) state.body_loose.reset();
    if (!chunk.empty()) {
      state.body_loose.note(chunk);
      state.body.append(chunk);
      state.body_loose.compact(state.body);
    }
    acknowledge(unacked_ - held_);
    return;
  }
  // base64 text: decoded into pooled blocks, then deframed as usual. The window is counted in
  // the text's bytes, a third more than the messages', so a queued message holds less window
  // than it took; the rest goes back once the reader has caught up.
  if (!state.base64.decode(bytes, decoder_)) {
    acknowledge(unacked_ - held_);
    on_receive_error(absl::InternalError("malformed base64 in a gRPC-Web text body"));
    return;
  }
  decode_ready();
}

void CallStream::queue_unframed_body() {
  MessageFormatState& state = *format_state_;
  DecodedMessage message;
  message.compressed =
      recv_compression_ != Compression::kIdentity || !unsupported_encoding_.empty();
  message.payload = std::move(state.body);
  message_bytes_received_ += message.payload.size();
  ++messages_received_;
  ready_.push_back(Ready{std::move(message), 0});  // its window went back as it arrived
}

absl::StatusOr<std::string> CallStream::take_unframed_body() {
  if (format_state_ == nullptr) return std::string();
  SliceChain body = std::move(format_state_->body);
  format_state_->body.clear();
  if (recv_compression_ == Compression::kIdentity && unsupported_encoding_.empty()) {
    return body.to_string();
  }
  SliceChain plain;
  if (absl::Status s = inflate(body, plain); !s.ok()) return s;
  return plain.to_string();
}

void CallStream::on_remote_end() {
  if (format_.unframed && abort_.ok() && !remote_ended_) queue_unframed_body();
  remote_ended_ = true;
  read_event_.notify();
  on_inbound_progress();
}

void CallStream::on_outbound_taken() {
  if (outbound.size() < kWriteHighWater) write_event_.notify();
}

bool CallStream::pop_ready(DecodedMessage& out) {
  if (ready_head_ == ready_.size()) return false;
  Ready& next = ready_[ready_head_];
  out = std::move(next.message);
  const std::size_t held = next.held;
  ++ready_head_;
  held_ -= held;
  acknowledge(held);
  if (ready_head_ == ready_.size()) {
    ready_.clear();
    ready_head_ = 0;
    packed_upto_ = 0;
    acknowledge(unacked_ - held_);  // caught up: the message still arriving may go on
  }
  return true;
}

int CallStream::take_message(google::protobuf::MessageLite& msg) {
  if (!abort_.ok()) return -1;
  DecodedMessage message;
  if (!pop_ready(message)) return 0;
  last_compressed_ = message.compressed;
  absl::Status parsed;
  if (!message.compressed) {
    if (tracer_ != nullptr) [[unlikely]]
      tracer_->on_inbound_message(message.payload.size(), 0);
    parsed = format_.json ? parse_json_message(message.payload, msg)
                          : parse_message(message.payload, msg);
  } else {
    SliceChain& plain = inflate_scratch();
    parsed = inflate(message.payload, plain);
    if (!parsed.ok()) {
      plain.consume(plain.size());
      on_receive_error(std::move(parsed));
      return -1;
    }
    if (tracer_ != nullptr) [[unlikely]]
      tracer_->on_inbound_message(plain.size(), message.payload.size());
    parsed = format_.json ? parse_json_message(plain, msg) : parse_message(plain, msg);
    plain.consume(plain.size());
  }
  if (!parsed.ok()) {
    on_parse_error(std::move(parsed));
    return -1;
  }
  on_message_taken(message.compressed);
  return 1;
}

int CallStream::take_message(SliceChain& out) {
  if (!abort_.ok()) return -1;
  DecodedMessage message;
  if (!pop_ready(message)) return 0;
  last_compressed_ = message.compressed;
  if (format_.json) [[unlikely]] {
    on_receive_error(absl::InternalError(
        "a message in JSON cannot be read raw (the JSON codec needs the message's type)"));
    return -1;
  }
  if (!message.compressed) {
    if (tracer_ != nullptr) [[unlikely]]
      tracer_->on_inbound_message(message.payload.size(), 0);
    out = std::move(message.payload);
    on_message_taken(false);
    return 1;
  }
  out.clear();
  if (absl::Status inflated = inflate(message.payload, out); !inflated.ok()) {
    on_receive_error(std::move(inflated));
    return -1;
  }
  if (tracer_ != nullptr) [[unlikely]]
    tracer_->on_inbound_message(out.size(), message.payload.size());
  on_message_taken(true);
  return 1;
}

// One coroutine frame per read (not one per layer): frames are the bulk of a call's allocations
// once asio's small per-thread recycling cache is exhausted by many calls in flight.
template <class Message>
asio::awaitable<bool> CallStream::read_any(Message& out) {
  Ref<CallStream> keep(this);  // the call outlives the wait even if every other holder lets go
  std::optional<bool> got;
  while (!(got = next_message(out))) co_await inbound_progress();
  co_return *got;
}

asio::awaitable<bool> CallStream::read_message(google::protobuf::MessageLite& msg) {
  return read_any(msg);
}

asio::awaitable<bool> CallStream::read_message(SliceChain& out) { return read_any(out); }

absl::Status CallStream::enqueue_message(const google::protobuf::MessageLite& msg,
                                         WriteOptions options) {
  if (!format_.plain()) [[unlikely]]
    return enqueue_formatted(msg, options);
  SliceChain& scratch = encode_scratch();
  absl::Status s = send_compression_ == Compression::kIdentity || options.no_compression
                       ? encode_message(msg, scratch, limits_.max_send_message_size)
                       : encode_compressed_message(msg, send_compression_, scratch,
                                                   limits_.max_send_message_size);
  if (!s.ok()) return s;
  const std::size_t wire = scratch.size() - kFramePrefixSize;
  message_bytes_sent_ += wire;
  outbound.append(scratch.split_front(scratch.size()));
  ++messages_sent_;
  if (tracer_ != nullptr) [[unlikely]] {
    // Compressed: the serialized size is the one ByteSizeLong cached while encoding.
    const bool compressed = send_compression_ != Compression::kIdentity && !options.no_compression;
    if (compressed) {
      tracer_->on_outbound_message(static_cast<std::size_t>(msg.GetCachedSize()), wire);
    } else {
      tracer_->on_outbound_message(wire, 0);
    }
  }
  return absl::OkStatus();
}

absl::Status CallStream::enqueue_message(const SliceChain& raw, WriteOptions) {
  if (!format_.plain()) [[unlikely]] {
    if (format_.json) {
      return absl::InternalError(
          "a raw message cannot be sent in JSON (the JSON codec needs the message's type)");
    }
    SliceChain framed;
    if (absl::Status s = encode_chain(raw, false, framed, limits_.max_send_message_size); !s.ok()) {
      return s;
    }
    append_formatted(std::move(framed));
  } else if (absl::Status s = encode_chain(raw, false, outbound, limits_.max_send_message_size);
             !s.ok()) {
    return s;
  }
  ++messages_sent_;
  message_bytes_sent_ += raw.size();
  if (tracer_ != nullptr) [[unlikely]]
    tracer_->on_outbound_message(raw.size(), 0);
  return absl::OkStatus();
}

absl::Status CallStream::enqueue_formatted(const google::protobuf::MessageLite& msg,
                                           WriteOptions options) {
  SliceChain& scratch = encode_scratch();
  const bool compress = send_compression_ != Compression::kIdentity && !options.no_compression;
  const std::size_t limit = limits_.max_send_message_size;
  absl::Status s;
  if (!format_.json) {
    s = compress ? encode_compressed_message(msg, send_compression_, scratch, limit)
                 : encode_message(msg, scratch, limit);
  } else {
    std::string& json = format_state_->json;
    s = print_json_message(msg, json);
    if (s.ok() && json.size() > limit) {
      s = absl::ResourceExhaustedError(absl::StrCat(
          "message of ", json.size(), " bytes exceeds the send limit (", limit, " bytes)"));
    }
    if (s.ok() && compress) {
      SliceChain plain;
      plain.append_copy(json.data(), json.size());
      SliceChain deflated;
      s = gzip_compress(plain, deflated);
      if (s.ok()) s = encode_chain(std::move(deflated), true, scratch);
    } else if (s.ok()) {
      s = encode_bytes(json, false, scratch);
    }
  }
  if (!s.ok()) return s;
  const std::size_t wire = scratch.size() - kFramePrefixSize;
  message_bytes_sent_ += wire;
  append_formatted(scratch.split_front(scratch.size()));
  ++messages_sent_;
  if (tracer_ != nullptr) [[unlikely]] {
    if (compress) {
      tracer_->on_outbound_message(
          format_.json ? format_state_->json.size() : static_cast<std::size_t>(msg.GetCachedSize()),
          wire);
    } else {
      tracer_->on_outbound_message(wire, 0);
    }
  }
  return absl::OkStatus();
}

void CallStream::append_formatted(SliceChain&& framed) {
  if (format_.unframed) framed.consume(kFramePrefixSize);  // Connect unary: the bare message
  if (format_.base64) {
    append_base64(framed, outbound);
  } else {
    outbound.append(std::move(framed));
  }
}

void CallStream::enqueue_frame(std::uint8_t flags, std::string_view payload) {
  SliceChain framed;
  std::uint8_t* p = framed.reserve(kFramePrefixSize);
  p[0] = flags;
  const auto n = static_cast<std::uint32_t>(payload.size());
  p[1] = static_cast<std::uint8_t>(n >> 24);
  p[2] = static_cast<std::uint8_t>(n >> 16);
  p[3] = static_cast<std::uint8_t>(n >> 8);
  p[4] = static_cast<std::uint8_t>(n);
  framed.commit(kFramePrefixSize);
  framed.append_copy(payload.data(), payload.size());
  if (format_.base64) {
    append_base64(framed, outbound);
  } else {
    outbound.append(std::move(framed));
  }
}

template <class Message>
absl::Status CallStream::queue_any(const Message& message, bool last, WriteOptions options) {
  if (!abort_.ok()) return abort_;
  if (!can_write() || connection_ == nullptr) {
    return absl::FailedPreconditionError("write after the call ended");
  }
  if (absl::Status s = enqueue_message(message, options); !s.ok()) return s;
  if (last) outbound_end = true;
  connection_->resume(this);
  return absl::OkStatus();
}

absl::Status CallStream::queue_message(const google::protobuf::MessageLite& msg, bool last,
                                       WriteOptions options) {
  return queue_any(msg, last, options);
}

absl::Status CallStream::queue_message(const SliceChain& raw, bool last, WriteOptions options) {
  return queue_any(raw, last, options);
}

bool CallStream::must_wait_for_send_room() const {
  return !outbound.empty() || connection_->peer_window_closed();
}

template <class Message>
asio::awaitable<absl::Status> CallStream::write_any(const Message& message, bool last,
                                                    WriteOptions options) {
  // The connection's bound on queued bytes (ConnectionLimits::max_queued_send_bytes): over it, a
  // stream that still has bytes queued waits until they are taken before queuing more. One whose
  // queue is empty (its peer reads it) goes on, so streams the peer does not read cannot starve
  // those it does; unless the peer reads nothing at all (its connection window is used up), when
  // every writer waits.
  // The call outlives the waits even if every other holder lets go meanwhile.
  Ref<CallStream> keep;
  if (connection_ != nullptr && connection_->send_queue_full() && must_wait_for_send_room()) {
    keep = Ref<CallStream>(this);
    while (abort_.ok() && connection_ != nullptr && connection_->send_queue_full() &&
           must_wait_for_send_room()) {
      connection_->wait_for_send_room();
      co_await write_event_.wait();
    }
  }
  if (absl::Status s = queue_any(message, last, options); !s.ok()) co_return s;
  if (abort_.ok() && connection_ != nullptr && outbound.size() >= kWriteHighWater) {
    if (!keep) keep = Ref<CallStream>(this);
    while (abort_.ok() && connection_ != nullptr && outbound.size() >= kWriteHighWater) {
      co_await write_event_.wait();
    }
  }
  co_return abort_;
}

asio::awaitable<absl::Status> CallStream::write_message(const google::protobuf::MessageLite& msg,
                                                        bool last, WriteOptions options) {
  return write_any(msg, last, options);
}

asio::awaitable<absl::Status> CallStream::write_message(const SliceChain& raw, bool last) {
  return write_any(raw, last, WriteOptions{});
}

}  // namespace ferry::detail

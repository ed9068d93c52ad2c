// ferry/client_stream.h: a client call's message streams (client layer, public). ClientStream is
// the type-erased call that Channel::open returns; ClientReader, ClientWriter and
// ClientReaderWriter are typed views over it (ferry/typed_stream.h).
//
// Threading: the operations run on the channel's executor; awaited from a coroutine on another
// executor, each one hops there and back (one co_spawn). Each takes a completion token
// (ferry/completion.h), asio::use_awaitable by default. Destroying a stream that has not
// finished cancels the call (RST_STREAM). A stream may outlive its Channel: the channel's
// close ended the call, and its operations then complete at once on the caller's thread.
#pragma once

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/completion.h"
#include "ferry/compression.h"
#include "ferry/typed_stream.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

class SliceChain;

namespace detail {
class ChannelLoop;
class StreamCall;
}  // namespace detail

class ClientStream {
 public:
  ClientStream() = default;
  ClientStream(ClientStream&& other) noexcept
      : call_(std::exchange(other.call_, nullptr)), loop_(std::move(other.loop_)) {}
  ClientStream& operator=(ClientStream&& other) noexcept;
  ~ClientStream();

  // Each operation below is an asio initiating function (ferry/completion.h); the stream and
  // the messages must outlive it. One operation of a kind at a time (one read, one write).
  //
  // Per-Operation Cancellation: terminal and partial cancellation through the completion
  // handler's cancellation slot (`||` with a timer, bind_cancellation_slot) cancel the CALL:
  // RST_STREAM(CANCEL) goes to the server, the operation completes as the call ended (a write
  // or finish with CANCELLED, a read with false), and later operations fail likewise.

  // Sends a request message, compressed when the ClientContext asked for it and options do not
  // opt out; suspends while the server's window is full (backpressure). Fails when the call is
  // over (its status) or the message is over the send limit (checked on the uncompressed size).
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const google::protobuf::MessageLite& msg, WriteOptions options = {},
             Token&& token = asio::use_awaitable) {
    return operation<absl::Status>(std::forward<Token>(token), [t = target(), &msg, options] {
      return write_op(t, msg, /*last=*/false, options);
    });
  }
  template <class Token>
    requires(!std::is_convertible_v<Token, WriteOptions>)
  auto write(const google::protobuf::MessageLite& msg, Token&& token) {
    return write(msg, WriteOptions{}, std::forward<Token>(token));
  }
  // Sends msg and ends the client's side in the same frame (the usual last write).
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_last(const google::protobuf::MessageLite& msg, WriteOptions options = {},
                  Token&& token = asio::use_awaitable) {
    return operation<absl::Status>(std::forward<Token>(token), [t = target(), &msg, options] {
      return write_op(t, msg, /*last=*/true, options);
    });
  }
  template <class Token>
    requires(!std::is_convertible_v<Token, WriteOptions>)
  auto write_last(const google::protobuf::MessageLite& msg, Token&& token) {
    return write_last(msg, WriteOptions{}, std::forward<Token>(token));
  }
  // Ends the client's side (half-close): the server's reads see the end of the stream.
  // Completion signature: void().
  template <class Token = const asio::use_awaitable_t<>&>
  auto writes_done(Token&& token = asio::use_awaitable) {
    return operation<void>(std::forward<Token>(token),
                           [t = target()] { return writes_done_op(t); });
  }
  // Waits for the next response; false at the end of the server's stream or if the call failed
  // (finish() says why). Completion signature: void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(google::protobuf::MessageLite& msg, Token&& token = asio::use_awaitable) {
    return operation<bool>(std::forward<Token>(token),
                           [t = target(), &msg] { return read_op(t, msg); });
  }
  // Raw messages, by reference, as ServerContext::read_raw / write_raw say (ferry/bytes_field.h
  // for a large `bytes` field): write_raw shares message's slices with the connection until
  // they are written (never copied, never compressed); read_raw replaces message's bytes with
  // the next response's, as slices of the blocks it arrived in. Not on a call retried by its
  // method's retry policy until it commits (raw messages are not kept for replay): write_raw
  // then fails with UNIMPLEMENTED, and read_raw ends the call with that status and returns false.
  // Completion signatures: void(absl::Status) and void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return operation<absl::Status>(std::forward<Token>(token),
                                   [t = target(), &message] { return write_raw_op(t, message); });
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return operation<bool>(std::forward<Token>(token),
                           [t = target(), &message] { return read_raw_op(t, message); });
  }
  // Whether the response most recently returned by read() arrived compressed (flag 1). Read it
  // after that read() returned, from the coroutine that awaited it.
  bool last_message_compressed() const;
  // Waits for the call's status (and the trailers, stored in the ClientContext).
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish(Token&& token = asio::use_awaitable) {
    return operation<absl::Status>(std::forward<Token>(token),
                                   [t = target()] { return finish_op(t); });
  }
  // A client-streaming call's end: half-closes, reads the single response into response and
  // waits for the status, which is UNIMPLEMENTED when the server sent OK but no response.
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish_with_response(google::protobuf::MessageLite& response,
                            Token&& token = asio::use_awaitable) {
    return operation<absl::Status>(std::forward<Token>(token), [t = target(), &response] {
      return finish_with_response_op(t, response);
    });
  }
  // Cancels the call: RST_STREAM(CANCEL); pending and later operations fail with CANCELLED.
  // From any thread (it runs on the call's).
  void cancel();
  // The server may send one response only (a client-streaming call): a second one fails the
  // call with UNIMPLEMENTED, gRPC's cardinality rule. ClientWriter sets it.
  void expect_single_response();

 private:
  friend class Channel;  // opens calls

  // What an operation works on, copied when it starts (so that moving the stream meanwhile does
  // not matter): the call (null once the stream was moved from) and the channel's own loop
  // (null when the channel runs on the caller's io_context).
  struct Target {
    detail::StreamCall* call;
    detail::ChannelLoop* loop;
  };

  // Adopts a reference to call; loop: the channel's own loop, if it has one.
  ClientStream(detail::StreamCall* call, std::shared_ptr<detail::ChannelLoop> loop)
      : call_(call), loop_(std::move(loop)) {}

  Target target() const { return Target{call_, loop_.get()}; }
  // ferry/completion.h's async_operation, with the executor a non-awaitable token runs on.
  template <class T, class Token, class Make>
  auto operation(Token&& token, Make make) {
    return detail::async_operation<T>(
        std::forward<Token>(token), [this] { return executor_for_ops(); }, std::move(make));
  }
  // The call's executor; the system executor when the stream has no call or runs on its
  // channel's own loop (the operation then starts on the caller's thread and hops to the loop,
  // or runs there once the loop has ended: nothing else touches the call then).
  asio::any_io_executor executor_for_ops() const;

  // The operations, as awaitables that hop from the awaiting coroutine's executor to the
  // call's and back (or run on the caller's once the channel's own loop has ended).
  static asio::awaitable<absl::Status> write_op(Target t, const google::protobuf::MessageLite& msg,
                                                bool last, WriteOptions options);
  static asio::awaitable<void> writes_done_op(Target t);
  static asio::awaitable<bool> read_op(Target t, google::protobuf::MessageLite& msg);
  static asio::awaitable<absl::Status> write_raw_op(Target t, const SliceChain& message);
  static asio::awaitable<bool> read_raw_op(Target t, SliceChain& message);
  static asio::awaitable<absl::Status> finish_op(Target t);
  static asio::awaitable<absl::Status> finish_with_response_op(
      Target t, google::protobuf::MessageLite& response);

  // One reference: a plain call, or (a method with a retry policy) the retrying call over its
  // attempts (client/stream_call.h).
  detail::StreamCall* call_ = nullptr;
  // Channel(target)'s loop: kept, so that the stream may outlive its channel; null otherwise.
  std::shared_ptr<detail::ChannelLoop> loop_;
};

// The typed views (ferry/typed_stream.h): read and write take the method's message types, the
// rest forwards to ClientStream. A ClientWriter's call has one response: finish(response).
template <class Response>
using ClientReader = TypedStream<ClientStream, void, Response>;
template <class Request>
using ClientWriter = TypedStream<ClientStream, Request, void>;
template <class Request, class Response>
using ClientReaderWriter = TypedStream<ClientStream, Request, Response>;

}  // namespace ferry

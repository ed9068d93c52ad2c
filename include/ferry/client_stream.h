// ferry/client_stream.h: a client call's message streams (client layer, public). ClientStream is
// the type-erased call that Channel::open returns; ClientReader, ClientWriter and
// ClientReaderWriter are thin typed views over it.
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

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

class SliceChain;

namespace detail {
class ChannelLoop;
class ClientCall;
class RetryingStream;
}

class ClientStream {
 public:
  ClientStream() = default;
  ClientStream(ClientStream&& other) noexcept
      : call_(std::exchange(other.call_, nullptr)),
        retrying_(std::exchange(other.retrying_, nullptr)),
        loop_(std::move(other.loop_)) {}
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
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return write_awaitable(msg, false, options);
    } else {
      return detail::initiate_on<absl::Status>(
          executor_for_ops(),
          [call = call_, retrying = retrying_, &msg, options] {
            return write_on(call, retrying, msg, false, options);
          },
          std::forward<Token>(token));
    }
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
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return write_awaitable(msg, true, options);
    } else {
      return detail::initiate_on<absl::Status>(
          executor_for_ops(),
          [call = call_, retrying = retrying_, &msg, options] {
            return write_on(call, retrying, msg, true, options);
          },
          std::forward<Token>(token));
    }
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
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return writes_done_awaitable();
    } else {
      return detail::initiate_on<void>(
          executor_for_ops(),
          [call = call_, retrying = retrying_] { return writes_done_on(call, retrying); },
          std::forward<Token>(token));
    }
  }
  // Waits for the next response; false at the end of the server's stream or if the call failed
  // (finish() says why). Completion signature: void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(google::protobuf::MessageLite& msg, Token&& token = asio::use_awaitable) {
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return read_awaitable(msg);
    } else {
      return detail::initiate_on<bool>(
          executor_for_ops(),
          [call = call_, retrying = retrying_, &msg] { return read_on(call, retrying, msg); },
          std::forward<Token>(token));
    }
  }
  // Raw messages, by reference, as ServerContext::read_raw / write_raw say (ferry/bytes_field.h
  // for a large `bytes` field): write_raw shares message's slices with the connection until
  // they are written (never copied, never compressed); read_raw replaces message's bytes with
  // the next response's, as slices of the blocks it arrived in. Not on a call retried by its
  // method's retry policy (raw messages are not kept for replay): write_raw then fails with
  // UNIMPLEMENTED, and read_raw ends the call with that status and returns false.
  // Completion signatures: void(absl::Status) and void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return write_raw_awaitable(message);
    } else {
      return detail::initiate_on<absl::Status>(
          executor_for_ops(), [call = call_, r = retrying_, &message] { return write_raw_on(call, r, message); },
          std::forward<Token>(token));
    }
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return read_raw_awaitable(message);
    } else {
      return detail::initiate_on<bool>(
          executor_for_ops(), [call = call_, r = retrying_, &message] { return read_raw_on(call, r, message); },
          std::forward<Token>(token));
    }
  }
  // Whether the response most recently returned by read() arrived compressed (flag 1). Read it
  // after that read() returned, from the coroutine that awaited it.
  bool last_message_compressed() const;
  // Waits for the call's status (and the trailers, stored in the ClientContext).
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish(Token&& token = asio::use_awaitable) {
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return finish_awaitable();
    } else {
      return detail::initiate_on<absl::Status>(
          executor_for_ops(),
          [call = call_, retrying = retrying_] { return finish_on(call, retrying); },
          std::forward<Token>(token));
    }
  }
  // A client-streaming call's end: half-closes, reads the single response into response and
  // waits for the status, which is UNIMPLEMENTED when the server sent OK but no response.
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish_with_response(google::protobuf::MessageLite& response,
                            Token&& token = asio::use_awaitable) {
    if constexpr (detail::is_use_awaitable_v<Token>) {
      return finish_with_response_awaitable(response);
    } else {
      return detail::initiate_on<absl::Status>(
          executor_for_ops(),
          [call = call_, retrying = retrying_, &response] {
            return finish_with_response_on(call, retrying, response);
          },
          std::forward<Token>(token));
    }
  }
  // Cancels the call: RST_STREAM(CANCEL); pending and later operations fail with CANCELLED.
  void cancel();
  // The server may send one response only (a client-streaming call): a second one fails the
  // call with UNIMPLEMENTED, gRPC's cardinality rule. ClientWriter sets it.
  void expect_single_response();

 private:
  friend class Channel;  // opens calls
  // Adopts a reference to call; loop: the channel's own loop, if it has one.
  ClientStream(detail::ClientCall* call, std::shared_ptr<detail::ChannelLoop> loop)
      : call_(call), loop_(std::move(loop)) {}
  // A call retried by its method's policy (client/retrying_stream.h); adopts a reference.
  ClientStream(detail::RetryingStream* retrying, std::shared_ptr<detail::ChannelLoop> loop)
      : retrying_(retrying), loop_(std::move(loop)) {}
  // Runs fn on the call's thread: posted there, or here once the channel's own loop has ended.
  template <class Fn>
  void on_call_thread(Fn fn) const;
  // The same without deferring when already on that thread (asio::dispatch).
  template <class Fn>
  void dispatch_on_call_thread(const asio::any_io_executor& executor, Fn fn) const;
  // Whether the channel's own loop has ended (its Channel is gone): the operations then run on
  // the caller's thread, since nothing else touches the call.
  bool loop_ended() const;

  // The operations for asio::use_awaitable: from any executor, hopping to the call's.
  asio::awaitable<absl::Status> write_awaitable(const google::protobuf::MessageLite& msg,
                                                bool last, WriteOptions options);
  asio::awaitable<void> writes_done_awaitable();
  asio::awaitable<absl::Status> write_raw_awaitable(const SliceChain& message);
  asio::awaitable<bool> read_raw_awaitable(SliceChain& message);
  asio::awaitable<bool> read_awaitable(google::protobuf::MessageLite& msg);
  asio::awaitable<absl::Status> finish_awaitable();
  asio::awaitable<absl::Status> finish_with_response_awaitable(
      google::protobuf::MessageLite& response);
  // The operations for other tokens: to run on executor_for_ops() (the call's executor).
  asio::any_io_executor executor_for_ops() const;
  // Each with the stream's call or retrying call (one of them is set; both null once moved).
  static asio::awaitable<absl::Status> write_on(detail::ClientCall* call,
                                                detail::RetryingStream* retrying,
                                                const google::protobuf::MessageLite& msg,
                                                bool last, WriteOptions options);
  static asio::awaitable<void> writes_done_on(detail::ClientCall* call,
                                              detail::RetryingStream* retrying);
  static asio::awaitable<absl::Status> write_raw_on(detail::ClientCall* call,
                                                    detail::RetryingStream* retrying,
                                                    const SliceChain& message);
  static asio::awaitable<bool> read_raw_on(detail::ClientCall* call,
                                           detail::RetryingStream* retrying, SliceChain& message);
  static asio::awaitable<bool> read_on(detail::ClientCall* call, detail::RetryingStream* retrying,
                                       google::protobuf::MessageLite& msg);
  static asio::awaitable<absl::Status> finish_on(detail::ClientCall* call,
                                                 detail::RetryingStream* retrying);
  static asio::awaitable<absl::Status> finish_with_response_on(
      detail::ClientCall* call, detail::RetryingStream* retrying,
      google::protobuf::MessageLite& response);

  // One of the two: the call, or (a method with a retry policy) the retrying call over its
  // attempts.
  detail::ClientCall* call_ = nullptr;
  detail::RetryingStream* retrying_ = nullptr;
  // Channel(target)'s loop: kept, so that the stream may outlive its channel; null otherwise.
  std::shared_ptr<detail::ChannelLoop> loop_;
};

template <class Response>
class ClientReader {
 public:
  explicit ClientReader(ClientStream stream) : stream_(std::move(stream)) {}
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(Response& msg, Token&& token = asio::use_awaitable) {
    return stream_.read(msg, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return stream_.read_raw(message, std::forward<Token>(token));
  }
  bool last_message_compressed() const { return stream_.last_message_compressed(); }
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish(Token&& token = asio::use_awaitable) {
    return stream_.finish(std::forward<Token>(token));
  }
  void cancel() { stream_.cancel(); }

 private:
  ClientStream stream_;
};

template <class Request>
class ClientWriter {
 public:
  explicit ClientWriter(ClientStream stream) : stream_(std::move(stream)) {
    stream_.expect_single_response();
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const Request& msg, WriteOptions options = {}, Token&& token = asio::use_awaitable) {
    return stream_.write(msg, options, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return stream_.write_raw(message, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto writes_done(Token&& token = asio::use_awaitable) {
    return stream_.writes_done(std::forward<Token>(token));
  }
  // Half-closes, waits for the single response and the status (ClientStream::
  // finish_with_response).
  template <class Response, class Token = const asio::use_awaitable_t<>&>
  auto finish(Response& response, Token&& token = asio::use_awaitable) {
    return stream_.finish_with_response(response, std::forward<Token>(token));
  }
  void cancel() { stream_.cancel(); }

 private:
  ClientStream stream_;
};

template <class Request, class Response>
class ClientReaderWriter {
 public:
  explicit ClientReaderWriter(ClientStream stream) : stream_(std::move(stream)) {}
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const Request& msg, WriteOptions options = {}, Token&& token = asio::use_awaitable) {
    return stream_.write(msg, options, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return stream_.write_raw(message, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto writes_done(Token&& token = asio::use_awaitable) {
    return stream_.writes_done(std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(Response& msg, Token&& token = asio::use_awaitable) {
    return stream_.read(msg, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return stream_.read_raw(message, std::forward<Token>(token));
  }
  bool last_message_compressed() const { return stream_.last_message_compressed(); }
  template <class Token = const asio::use_awaitable_t<>&>
  auto finish(Token&& token = asio::use_awaitable) {
    return stream_.finish(std::forward<Token>(token));
  }
  void cancel() { stream_.cancel(); }

 private:
  ClientStream stream_;
};

}  // namespace ferry

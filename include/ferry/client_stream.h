// ferry/client_stream.h: a client call's message streams (client layer, public). ClientStream is
// the type-erased call that Channel::open returns; ClientReader, ClientWriter and
// ClientReaderWriter are thin typed views over it.
//
// Threading: the operations run on the channel's executor; awaited from a coroutine on another
// executor, each one hops there and back (one co_spawn). Destroying a stream that has not
// finished cancels the call (RST_STREAM).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/compression.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

namespace detail {
class ClientCall;
}

class ClientStream {
 public:
  ClientStream() = default;
  explicit ClientStream(detail::ClientCall* call) : call_(call) {}  // adopts a reference
  ClientStream(ClientStream&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  ClientStream& operator=(ClientStream&& other) noexcept;
  ~ClientStream();

  // Sends a request message, compressed when the ClientContext asked for it and options do not
  // opt out; suspends while the server's window is full (backpressure). Fails when the call is
  // over (its status) or the message is over the send limit (checked on the uncompressed size).
  asio::awaitable<absl::Status> write(const google::protobuf::MessageLite& msg,
                                      WriteOptions options = {});
  // Sends msg and ends the client's side in the same frame (the usual last write).
  asio::awaitable<absl::Status> write_last(const google::protobuf::MessageLite& msg,
                                           WriteOptions options = {});
  // Ends the client's side (half-close): the server's reads see the end of the stream.
  asio::awaitable<void> writes_done();
  // Waits for the next response; false at the end of the server's stream or if the call failed
  // (finish() says why).
  asio::awaitable<bool> read(google::protobuf::MessageLite& msg);
  // Whether the response most recently returned by read() arrived compressed (flag 1). Read it
  // after that read() returned, from the coroutine that awaited it.
  bool last_message_compressed() const;
  // Waits for the call's status (and the trailers, stored in the ClientContext).
  asio::awaitable<absl::Status> finish();
  // Cancels the call: RST_STREAM(CANCEL); pending and later operations fail with CANCELLED.
  void cancel();
  // The server may send one response only (a client-streaming call): a second one fails the
  // call with INTERNAL, gRPC's cardinality rule. ClientWriter sets it.
  void expect_single_response();

 private:
  detail::ClientCall* call_ = nullptr;
};

template <class Response>
class ClientReader {
 public:
  explicit ClientReader(ClientStream stream) : stream_(std::move(stream)) {}
  asio::awaitable<bool> read(Response& msg) { return stream_.read(msg); }
  bool last_message_compressed() const { return stream_.last_message_compressed(); }
  asio::awaitable<absl::Status> finish() { return stream_.finish(); }
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
  asio::awaitable<absl::Status> write(const Request& msg, WriteOptions options = {}) {
    return stream_.write(msg, options);
  }
  asio::awaitable<void> writes_done() { return stream_.writes_done(); }
  // Half-closes, waits for the single response and the status.
  template <class Response>
  asio::awaitable<absl::Status> finish(Response& response) {
    co_await stream_.writes_done();
    const bool got = co_await stream_.read(response);
    absl::Status status = co_await stream_.finish();
    if (status.ok() && !got) status = absl::InternalError("server sent no response message");
    co_return status;
  }
  void cancel() { stream_.cancel(); }

 private:
  ClientStream stream_;
};

template <class Request, class Response>
class ClientReaderWriter {
 public:
  explicit ClientReaderWriter(ClientStream stream) : stream_(std::move(stream)) {}
  asio::awaitable<absl::Status> write(const Request& msg, WriteOptions options = {}) {
    return stream_.write(msg, options);
  }
  asio::awaitable<void> writes_done() { return stream_.writes_done(); }
  asio::awaitable<bool> read(Response& msg) { return stream_.read(msg); }
  bool last_message_compressed() const { return stream_.last_message_compressed(); }
  asio::awaitable<absl::Status> finish() { return stream_.finish(); }
  void cancel() { stream_.cancel(); }

 private:
  ClientStream stream_;
};

}  // namespace ferry

// ferry/blocking_stream.h: a client call's message streams, blocking (client layer, public). For
// simple programs and threads that are not coroutines: each operation runs on the channel's
// executor and the calling thread waits for it (the asynchronous operation, completed through
// asio::use_future). Channel::open_blocking returns the type-erased
// BlockingClientStream; BlockingClientReader, BlockingClientWriter and
// BlockingClientReaderWriter are thin typed views over it.
//
// Threading: use a stream from one thread at a time, never from the channel's own thread (that
// would deadlock: operations there fail with FAILED_PRECONDITION). The channel must outlive the
// stream. Destroying a stream that has not finished cancels the call (RST_STREAM).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "asio/io_context.hpp"
#include "ferry/client_stream.h"
#include "ferry/compression.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

class BlockingClientStream {
 public:
  BlockingClientStream(asio::io_context::executor_type executor, ClientStream stream)
      : executor_(std::move(executor)), stream_(std::move(stream)) {}
  BlockingClientStream(BlockingClientStream&&) noexcept = default;
  BlockingClientStream& operator=(BlockingClientStream&&) noexcept = default;

  // As ClientStream's operations (client_stream.h), waiting for each to complete.
  absl::Status write(const google::protobuf::MessageLite& msg, WriteOptions options = {});
  absl::Status write_last(const google::protobuf::MessageLite& msg, WriteOptions options = {});
  void writes_done();
  bool read(google::protobuf::MessageLite& msg);
  absl::Status finish();
  // As ClientStream::finish_with_response: half-closes, reads the single response, waits for
  // the status (UNIMPLEMENTED when the server said OK without a response).
  absl::Status finish_with_response(google::protobuf::MessageLite& response);
  // Does not wait: the call ends with CANCELLED.
  void cancel() { stream_.cancel(); }
  // See ClientStream::expect_single_response.
  void expect_single_response() { stream_.expect_single_response(); }
  // Whether the response read last arrived compressed.
  bool last_message_compressed() const { return stream_.last_message_compressed(); }

 private:
  asio::io_context::executor_type executor_;
  ClientStream stream_;
};

template <class Response>
class BlockingClientReader {
 public:
  explicit BlockingClientReader(BlockingClientStream stream) : stream_(std::move(stream)) {}
  // The next response; false at the end of the server's stream or if the call failed.
  bool read(Response& msg) { return stream_.read(msg); }
  absl::Status finish() { return stream_.finish(); }
  void cancel() { stream_.cancel(); }

 private:
  BlockingClientStream stream_;
};

template <class Request>
class BlockingClientWriter {
 public:
  explicit BlockingClientWriter(BlockingClientStream stream) : stream_(std::move(stream)) {
    stream_.expect_single_response();
  }
  absl::Status write(const Request& msg, WriteOptions options = {}) {
    return stream_.write(msg, options);
  }
  void writes_done() { stream_.writes_done(); }
  // Half-closes, waits for the single response and the status.
  template <class Response>
  absl::Status finish(Response& response) {
    return stream_.finish_with_response(response);
  }
  void cancel() { stream_.cancel(); }

 private:
  BlockingClientStream stream_;
};

template <class Request, class Response>
class BlockingClientReaderWriter {
 public:
  explicit BlockingClientReaderWriter(BlockingClientStream stream) : stream_(std::move(stream)) {}
  absl::Status write(const Request& msg, WriteOptions options = {}) {
    return stream_.write(msg, options);
  }
  void writes_done() { stream_.writes_done(); }
  bool read(Response& msg) { return stream_.read(msg); }
  absl::Status finish() { return stream_.finish(); }
  void cancel() { stream_.cancel(); }

 private:
  BlockingClientStream stream_;
};

}  // namespace ferry

// ferry/blocking_stream.h: a client call's message streams, blocking (client layer, public). For
// simple programs and threads that are not coroutines: each operation runs on the channel's
// executor and the calling thread waits for it (the asynchronous operation, completed through
// asio::use_future). Channel::open_blocking returns the type-erased
// BlockingClientStream; BlockingClientReader, BlockingClientWriter and
// BlockingClientReaderWriter are typed views over it (ferry/typed_stream.h).
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
#include "ferry/typed_stream.h"

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

// The typed views (ferry/typed_stream.h), as ClientReader, ClientWriter and ClientReaderWriter
// but blocking.
template <class Response>
using BlockingClientReader = TypedStream<BlockingClientStream, void, Response>;
template <class Request>
using BlockingClientWriter = TypedStream<BlockingClientStream, Request, void>;
template <class Request, class Response>
using BlockingClientReaderWriter = TypedStream<BlockingClientStream, Request, Response>;

}  // namespace ferry

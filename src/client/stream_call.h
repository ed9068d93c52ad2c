// What a ClientStream drives (client layer, private): a plain call (ClientCall) or a call
// retried by its method's policy (RetryingStream), behind one interface, so that the stream
// holds one reference to one object and its operations have no branch on which it is.
#pragma once

#include "absl/status/status.h"
#include "asio/any_io_executor.hpp"
#include "asio/awaitable.hpp"
#include "ferry/compression.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {
class ClientContext;
class SliceChain;
}  // namespace ferry

namespace ferry::detail {

class StreamCall {
 public:
  // Reference counting, from any thread: the creator holds one reference, which ClientStream
  // adopts. unref() deletes on the call's executor; unref_inline() at once, for a caller with
  // nothing of the call's below it on the stack, on its thread (or once its loop has ended).
  virtual void ref() = 0;
  virtual void unref() = 0;
  virtual void unref_inline() = 0;
  // The thread every operation below runs on.
  virtual const asio::any_io_executor& executor() const = 0;

  // ClientStream's operations (their documentation is there).
  virtual asio::awaitable<absl::Status> write(const google::protobuf::MessageLite& msg, bool last,
                                              WriteOptions options) = 0;
  virtual asio::awaitable<absl::Status> write_raw(const SliceChain& message) = 0;
  virtual void writes_done() = 0;
  virtual asio::awaitable<bool> read(google::protobuf::MessageLite& msg) = 0;
  virtual asio::awaitable<bool> read_raw(SliceChain& message) = 0;
  virtual asio::awaitable<absl::Status> finish() = 0;
  virtual asio::awaitable<absl::Status> finish_with_response(
      google::protobuf::MessageLite& response) = 0;
  virtual void cancel(absl::Status why) = 0;
  virtual void expect_single_message() = 0;
  virtual bool last_message_compressed() const = 0;

  // The application is letting go of the stream, on its own thread, and its ClientContext may
  // go next: nothing that runs later (the interceptors' hooks) may touch it. Before drop().
  virtual void detach_context() = 0;
  // The application has let go of the stream, on the call's thread: an unfinished call is
  // cancelled, and its status is final whatever it left unread.
  virtual void drop() = 0;

 protected:
  ~StreamCall() = default;
};

}  // namespace ferry::detail

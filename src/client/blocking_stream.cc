// Implementation of ferry/blocking_stream.h: each operation is the ClientStream one with
// asio::use_future as its completion token, the calling thread waiting on the future.
#include "ferry/blocking_stream.h"

#include <future>
#include <utility>

#include "asio/use_future.hpp"

namespace ferry {
namespace {

absl::Status would_deadlock() {
  return absl::FailedPreconditionError(
      "a blocking stream operation on the channel's own thread would deadlock");
}

}  // namespace

absl::Status BlockingClientStream::write(const google::protobuf::MessageLite& msg,
                                         WriteOptions options) {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return stream_.write(msg, options, asio::use_future).get();
}

absl::Status BlockingClientStream::write_last(const google::protobuf::MessageLite& msg,
                                              WriteOptions options) {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return stream_.write_last(msg, options, asio::use_future).get();
}

void BlockingClientStream::writes_done() {
  if (executor_.running_in_this_thread()) return;
  stream_.writes_done(asio::use_future).get();
}

bool BlockingClientStream::read(google::protobuf::MessageLite& msg) {
  if (executor_.running_in_this_thread()) return false;
  return stream_.read(msg, asio::use_future).get();
}

absl::Status BlockingClientStream::finish() {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return stream_.finish(asio::use_future).get();
}

absl::Status BlockingClientStream::finish_with_response(google::protobuf::MessageLite& response) {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return stream_.finish_with_response(response, asio::use_future).get();
}

}  // namespace ferry

// Implementation of ferry/blocking_stream.h: each operation is the awaitable ClientStream one,
// spawned on the channel's executor, with the calling thread waiting on its future.
#include "ferry/blocking_stream.h"

#include <future>

#include "asio/co_spawn.hpp"
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
  return asio::co_spawn(executor_, stream_.write(msg, options), asio::use_future).get();
}

absl::Status BlockingClientStream::write_last(const google::protobuf::MessageLite& msg,
                                              WriteOptions options) {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return asio::co_spawn(executor_, stream_.write_last(msg, options), asio::use_future).get();
}

void BlockingClientStream::writes_done() {
  if (executor_.running_in_this_thread()) return;
  asio::co_spawn(executor_, stream_.writes_done(), asio::use_future).get();
}

bool BlockingClientStream::read(google::protobuf::MessageLite& msg) {
  if (executor_.running_in_this_thread()) return false;
  return asio::co_spawn(executor_, stream_.read(msg), asio::use_future).get();
}

absl::Status BlockingClientStream::finish() {
  if (executor_.running_in_this_thread()) return would_deadlock();
  return asio::co_spawn(executor_, stream_.finish(), asio::use_future).get();
}

}  // namespace ferry

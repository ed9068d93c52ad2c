// Implementation of ferry/blocking_stream.h: each operation is the awaitable ClientStream one,
// spawned on the channel's executor, with the calling thread waiting on its future.
#include "ferry/blocking_stream.h"

#include <future>
#include <utility>

#include "asio/co_spawn.hpp"
#include "asio/use_future.hpp"

namespace ferry {
namespace {

absl::Status would_deadlock() {
  return absl::FailedPreconditionError(
      "a blocking stream operation on the channel's own thread would deadlock");
}

// Runs op on executor and waits for its result. On the executor's own thread, where waiting
// would deadlock, returns on_own_thread() instead, without running op.
template <class T, class Fallback>
T wait(const asio::io_context::executor_type& executor, asio::awaitable<T> op,
       Fallback on_own_thread) {
  if (executor.running_in_this_thread()) return on_own_thread();
  return asio::co_spawn(executor, std::move(op), asio::use_future).get();
}

}  // namespace

absl::Status BlockingClientStream::write(const google::protobuf::MessageLite& msg,
                                         WriteOptions options) {
  return wait(executor_, stream_.write(msg, options), would_deadlock);
}

absl::Status BlockingClientStream::write_last(const google::protobuf::MessageLite& msg,
                                              WriteOptions options) {
  return wait(executor_, stream_.write_last(msg, options), would_deadlock);
}

void BlockingClientStream::writes_done() {
  if (executor_.running_in_this_thread()) return;
  asio::co_spawn(executor_, stream_.writes_done(), asio::use_future).get();
}

bool BlockingClientStream::read(google::protobuf::MessageLite& msg) {
  return wait(executor_, stream_.read(msg), [] { return false; });
}

absl::Status BlockingClientStream::finish() {
  return wait(executor_, stream_.finish(), would_deadlock);
}

}  // namespace ferry

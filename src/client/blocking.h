// The blocking API's one adapter over the asynchronous one (client layer, private): every blocking
// operation (Channel::call_blocking, open_blocking, BlockingClientStream's) is its asynchronous
// operation completed through asio::use_future, the calling thread waiting for the result.
#pragma once

#include <future>

#include "asio/io_context.hpp"
#include "asio/use_future.hpp"

namespace ferry::detail {

// Runs op(asio::use_future) and waits for its result. On the channel's own thread that wait
// would never end (the operation needs the thread it blocks), so there it returns
// on_own_thread() instead, without starting the operation.
template <class Op, class OnOwnThread>
auto wait_blocking(const asio::io_context::executor_type& channel_executor, Op op,
                   OnOwnThread on_own_thread) {
  if (channel_executor.running_in_this_thread()) return on_own_thread();
  return op(asio::use_future).get();
}

}  // namespace ferry::detail

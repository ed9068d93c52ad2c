// Running a coroutine step on a call's or channel's executor (client layer, private): the
// connection and its calls belong to one single-threaded io_context, and API calls awaited from
// another executor hop there (one co_spawn) and back.
#pragma once

#include "asio/awaitable.hpp"
#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry::detail {

// Awaits make() (which returns an awaitable) on ex: directly when already on ex's thread, else
// through co_spawn, resuming the caller on its own executor. Pass make as a named object, not a
// temporary lambda: GCC 12 destroys such a temporary twice when it is an argument of a coroutine
// inside co_await.
template <class Make>
auto on_executor(asio::any_io_executor ex, Make make) -> decltype(make()) {
  const auto* io = ex.target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) co_return co_await make();
  co_return co_await asio::co_spawn(ex, make(), asio::use_awaitable);
}

}  // namespace ferry::detail

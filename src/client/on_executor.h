// Running a coroutine step on a call's or channel's executor (client layer, private): the
// connection and its calls belong to one single-threaded io_context, and API calls awaited from
// another executor hop there (one co_spawn) and back.
#pragma once

#include <memory>
#include <type_traits>

#include "asio/awaitable.hpp"
#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/completion.h"

namespace ferry::detail {

// Awaits make() (which returns an awaitable) on ex: directly when already on ex's thread, else
// through co_spawn, resuming the caller on its own executor. Pass make as a named object, not a
// temporary lambda: GCC 12 destroys such a temporary twice when it is an argument of a coroutine
// inside co_await.
//
// A cancellation of the awaiting coroutine (its cancellation state's slot, e.g. the losing side
// of `||`) reaches the operation on ex's thread: asio 1.22's co_spawn would run it on the
// emitting thread, racing with the call.
template <class Make>
auto on_executor(asio::any_io_executor ex, Make make) -> decltype(make()) {
  const auto* io = ex.target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) co_return co_await make();
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  asio::cancellation_slot slot = state.slot();
  if (!slot.is_connected()) co_return co_await asio::co_spawn(ex, make(), asio::use_awaitable);
  auto relay = std::make_shared<asio::cancellation_signal>();
  slot.template emplace<CancellationRelay>(ex, relay);
  auto op =
      asio::co_spawn(ex, make(), asio::bind_cancellation_slot(relay->slot(), asio::use_awaitable));
  if constexpr (std::is_void_v<typename decltype(make())::value_type>) {
    co_await std::move(op);
    slot.clear();
  } else {
    auto result = co_await std::move(op);
    slot.clear();
    co_return result;
  }
}

}  // namespace ferry::detail

// Running a coroutine step on a call's or channel's executor (client layer, private): the
// connection and its calls belong to one single-threaded io_context, and API calls awaited from
// another executor hop there (one co_spawn) and back.
#pragma once

#include <exception>
#include <memory>
#include <type_traits>

#include "asio/awaitable.hpp"
#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "asio/system_executor.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "client/channel_loop.h"
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

// co_spawn's completion signature for an awaitable<T>.
template <class T>
struct SpawnSignature {
  using type = void(std::exception_ptr, T);
};
template <>
struct SpawnSignature<void> {
  using type = void(std::exception_ptr);
};

// on_executor for the operations of a stream whose channel runs its own loop (ChannelLoop),
// which may end at any moment: checking ended() and then posting left a window in which the post
// came after the loop's final poll, and the operation never completed. Here the hop is posted
// under the loop's lock (ChannelLoop::unless_ended), so the loop runs it; or the loop has ended
// and make() runs here, inline (the close ended the call, and nothing else touches it any more).
template <class Make>
auto on_loop(ChannelLoop& loop, asio::any_io_executor ex, Make make) -> decltype(make()) {
  const auto* io = ex.target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) co_return co_await make();
  if (loop.ended()) co_return co_await make();
  using T = typename decltype(make())::value_type;
  using Signature = typename SpawnSignature<T>::type;
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  asio::cancellation_slot slot = state.slot();
  std::shared_ptr<asio::cancellation_signal> relay;
  if (slot.is_connected()) {
    relay = std::make_shared<asio::cancellation_signal>();
    slot.template emplace<CancellationRelay>(ex, relay);
  }
  auto initiate = [&loop, &ex, &make, &relay](auto handler) {
    // co_spawn posts the coroutine's start to its executor before it returns.
    auto spawn = [&make, &relay, &handler](const asio::any_io_executor& on) {
      if (relay != nullptr) {
        asio::co_spawn(on, make(), asio::bind_cancellation_slot(relay->slot(), std::move(handler)));
      } else {
        asio::co_spawn(on, make(), std::move(handler));
      }
    };
    if (!loop.unless_ended([&] { spawn(ex); })) spawn(asio::system_executor());
  };
  if constexpr (std::is_void_v<T>) {
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, Signature>(initiate,
                                                                             asio::use_awaitable);
    if (relay != nullptr) slot.clear();
  } else {
    T result = co_await asio::async_initiate<const asio::use_awaitable_t<>&, Signature>(
        initiate, asio::use_awaitable);
    if (relay != nullptr) slot.clear();
    co_return result;
  }
}

}  // namespace ferry::detail

// ferry/detail/async_operation.h: the machinery behind ferry/completion.h (client and server
// layers; internal, not part of ferry's API): detail::async_operation, the one helper that turns
// an operation into an asio initiating function, and what it needs to run an operation for any
// completion token other than asio::use_awaitable.
#pragma once

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "asio/associated_allocator.hpp"
#include "asio/associated_cancellation_slot.hpp"
#include "asio/associated_executor.hpp"
#include "asio/associator.hpp"
#include "asio/async_result.hpp"
#include "asio/awaitable.hpp"
#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/co_spawn.hpp"
#include "asio/dispatch.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry::detail {

// Whether Token is the default asio::use_awaitable (the direct awaitable path).
template <class Token>
inline constexpr bool is_use_awaitable_v =
    std::is_same_v<std::decay_t<Token>, asio::use_awaitable_t<>>;

// Installed in a caller's cancellation slot: forwards the cancellation to the operation's own
// signal on executor, the call's thread (a slot's handler runs on whichever thread emits, and
// a call's state belongs to its thread).
struct CancellationRelay {
  CancellationRelay(asio::any_io_executor executor, std::shared_ptr<asio::cancellation_signal> s)
      : executor(std::move(executor)), signal(std::move(s)) {}
  void operator()(asio::cancellation_type_t type) {
    asio::dispatch(executor, [signal = signal, type] { signal->emit(type); });
  }
  asio::any_io_executor executor;
  std::shared_ptr<asio::cancellation_signal> signal;  // outlives the operation it cancels
};

// co_spawn's completion handler for an operation of signature void(T) (or void() for T void):
// drops the exception_ptr (ferry's operations report errors as values; an exception there is
// a bug and is rethrown), clears the relay from the caller's slot, and calls handler.
template <class Handler, class T>
class SpawnCompletion {
 public:
  SpawnCompletion(Handler handler, std::shared_ptr<asio::cancellation_signal> relay)
      : handler_(std::move(handler)), relay_(std::move(relay)) {}

  template <class... V>
  void operator()(std::exception_ptr e, V&&... v) {
    if (relay_ != nullptr) asio::get_associated_cancellation_slot(handler_).clear();
    if (e) std::rethrow_exception(e);
    std::move(handler_)(std::forward<V>(v)...);
  }

  // For the associator below: the executor and allocator are the handler's.
  const Handler& handler() const noexcept { return handler_; }

 private:
  Handler handler_;
  std::shared_ptr<asio::cancellation_signal> relay_;
};

// The initiation behind every non-awaitable token: runs make() (which returns asio::awaitable
// of T, to run on executor) as a coroutine on executor.
template <class T>
struct InitiateOn {
  template <class Handler, class Make>
  void operator()(Handler handler, asio::any_io_executor executor, Make make) const {
    using Completion = SpawnCompletion<std::decay_t<Handler>, T>;
    asio::cancellation_slot slot = asio::get_associated_cancellation_slot(handler);
    if (!slot.is_connected()) {
      asio::co_spawn(executor, std::move(make), Completion(std::move(handler), nullptr));
      return;
    }
    auto relay = std::make_shared<asio::cancellation_signal>();
    slot.template emplace<CancellationRelay>(executor, relay);
    asio::cancellation_slot inner = relay->slot();
    asio::co_spawn(executor, std::move(make),
                   asio::bind_cancellation_slot(inner, Completion(std::move(handler), relay)));
  }
};

template <class T>
struct SignatureOf {
  using type = void(T);
};
template <>
struct SignatureOf<void> {
  using type = void();
};

// Starts the operation make() describes on executor, completing through token with signature
// void(T). Not the hot path: one coroutine frame and one co_spawn per operation.
template <class T, class Token, class Make>
auto initiate_on(asio::any_io_executor executor, Make make, Token&& token) {
  return asio::async_initiate<Token, typename SignatureOf<T>::type>(
      InitiateOn<T>{}, token, std::move(executor), std::move(make));
}

// Turns an operation into an asio initiating function, the one place that does so. make()
// returns the operation as an awaitable that may be awaited from any executor (it hops to its
// own). With asio::use_awaitable that awaitable is the result: no frame beyond the operation's
// own. With any other token it runs as a coroutine on executor (an executor, or a callable that
// returns one, so that the awaitable path does not compute it) and completes through the token,
// honouring the handler's executor, allocator and cancellation slot (see InitiateOn).
template <class T, class Token, class Executor, class Make>
auto async_operation(Token&& token, Executor&& executor, Make make) {
  if constexpr (is_use_awaitable_v<Token>) {
    return make();
  } else if constexpr (std::is_invocable_v<Executor>) {
    return initiate_on<T>(executor(), std::move(make), std::forward<Token>(token));
  } else {
    return initiate_on<T>(asio::any_io_executor(executor), std::move(make),
                          std::forward<Token>(token));
  }
}

}  // namespace ferry::detail

// The handler's associated executor, allocator (and, unless the relay is bound over it,
// cancellation slot) are the completion's: a callback without an executor completes on the
// call's executor, as asio's own operations complete on their I/O object's.
template <template <class, class> class Associator, class Handler, class T, class Default>
struct asio::associator<Associator, ferry::detail::SpawnCompletion<Handler, T>, Default> {
  using type = typename Associator<Handler, Default>::type;
  static type get(const ferry::detail::SpawnCompletion<Handler, T>& c,
                  const Default& d = Default()) noexcept {
    return Associator<Handler, Default>::get(c.handler(), d);
  }
};

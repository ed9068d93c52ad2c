// Coroutine frames recycled per thread (calls layer, private): a coroutine returning
// asio::awaitable whose first parameter is RecycledFrame takes its frame from a per-thread pool
// of size classes instead of asio's two-slot cache. For the few coroutines a feature adds to a
// call (the interceptor chains), which would otherwise push the call's own frames out of asio's
// cache and cost allocations per call once many calls are in flight.
#pragma once

#include <coroutine>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "asio/awaitable.hpp"

namespace ferry::detail {

// The tag: pass RecycledFrame{} first.
struct RecycledFrame {};

// A frame of size bytes from this thread's pool (operator new beyond the largest class); give it
// back with release_frame, from any thread (it joins that thread's pool, up to a bound).
void* acquire_frame(std::size_t size);
void release_frame(void* frame, std::size_t size) noexcept;

template <class A>
inline constexpr bool is_asio_awaitable = false;
template <class U, class Executor>
inline constexpr bool is_asio_awaitable<asio::awaitable<U, Executor>> = true;

// asio's promise with the pool's operator new and delete: no data member of its own, so asio's
// coroutine handles to the base (from_promise) find the same frame. asio's awaitable accepts
// only handles to its own promise type when awaited: await_transform hands it one.
template <class T, class Executor>
class RecycledAwaitableFrame : public asio::detail::awaitable_frame<T, Executor> {
  using Base = asio::detail::awaitable_frame<T, Executor>;

  template <class U>
  struct Awaiting {
    asio::awaitable<U, Executor> inner;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<RecycledAwaitableFrame> h) {
      inner.await_suspend(std::coroutine_handle<Base>::from_promise(h.promise()));
    }
    U await_resume() { return inner.await_resume(); }
  };

 public:
  static void* operator new(std::size_t size) { return acquire_frame(size); }
  static void operator delete(void* frame, std::size_t size) noexcept {
    release_frame(frame, size);
  }

  template <class U>
  auto await_transform(asio::awaitable<U, Executor> a) {
    return Awaiting<U>{Base::await_transform(std::move(a))};
  }
  template <class A>
    requires(!is_asio_awaitable<std::remove_cvref_t<A>>)
  decltype(auto) await_transform(A&& a) { return Base::await_transform(std::forward<A>(a)); }
};

}  // namespace ferry::detail

template <class T, class Executor, class... Args>
struct std::coroutine_traits<asio::awaitable<T, Executor>, ferry::detail::RecycledFrame, Args...> {
  using promise_type = ferry::detail::RecycledAwaitableFrame<T, Executor>;
  static_assert(sizeof(promise_type) == sizeof(asio::detail::awaitable_frame<T, Executor>) &&
                alignof(promise_type) == alignof(asio::detail::awaitable_frame<T, Executor>));
};

// ferry/offload.h: running blocking or CPU-heavy work off the I/O thread (public). A handler runs
// on its connection's I/O thread, beside every other call of that thread: a handler that blocks
// (a synchronous database client, a sleep, a long computation) stalls them all. offload() runs
// the work on a pool the application owns and resumes the handler on its own thread with the
// result, so the I/O thread serves other calls meanwhile.
//
//   asio::thread_pool pool(4);  // the application's; outlives the server
//   service.add_unary<Req, Resp>("Lookup", [&pool](ferry::ServerContext&, const Req& req, Resp&
//   resp)
//       -> asio::awaitable<absl::Status> {
//     resp.set_row(co_await ferry::offload(pool, [&] { return blocking_db_lookup(req.key()); }));
//     co_return absl::OkStatus();
//   });
#pragma once

#include <atomic>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "asio/associated_executor.hpp"
#include "asio/async_result.hpp"
#include "asio/awaitable.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/post.hpp"
#include "asio/thread_pool.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry {

// Runs fn() on pool and returns its result (or rethrows its exception) to the awaiting coroutine,
// resumed on its own executor. fn and what it references must stay valid until then, and must
// not touch the call (ServerContext, readers, writers) while on the pool: those belong to the
// I/O thread. Not cancellable while fn runs (the call's cancellation is seen once it returns).
// From a server's handler, Server::shutdown waits for fn to return before it stops the handler's
// I/O thread (the pool hands the result back to that thread's io_context).
// Cost: one coroutine frame and two hops between threads; for work of ~10 µs and more.
// With GCC 12, pass fn as a named object when it captures by value (`auto work = [s] {...};
// co_await offload(pool, work)`): GCC 12 moves a temporary argument of a coroutine inside
// co_await into the caller's frame bitwise, and a captured std::string then frees a bad pointer.
template <class Fn>
asio::awaitable<std::invoke_result_t<Fn&>> offload(asio::thread_pool& pool, Fn fn);

namespace detail {

// The count of offloads in flight from this thread, when it is a server's I/O thread (the server
// sets it, and waits for it to fall to zero before stopping the thread); null elsewhere.
std::atomic<int>* offloads_of_this_thread() noexcept;
void set_offloads_of_this_thread(std::atomic<int>* count) noexcept;

// The pool's side of one offload: runs fn, then hands the awaiting coroutine's completion to its
// executor. It holds work on that executor until then, and counts as in flight (count) until it
// is done with it, whether it ran or was destroyed unrun (a pool stopped first): a server waits
// for the count, so its io_context outlives every touch from here.
template <class Handler, class Work, class Run>
struct OffloadedWork {
  Handler handler;
  Work work;
  Run* run;
  std::atomic<int>* count;

  OffloadedWork(Handler h, Work w, Run* r, std::atomic<int>* c)
      : handler(std::move(h)), work(std::move(w)), run(r), count(c) {
    if (count != nullptr) count->fetch_add(1, std::memory_order_relaxed);
  }
  OffloadedWork(OffloadedWork&& other) noexcept
      : handler(std::move(other.handler)),
        work(std::move(other.work)),
        run(other.run),
        count(std::exchange(other.count, nullptr)) {}
  OffloadedWork& operator=(OffloadedWork&&) = delete;
  ~OffloadedWork() {
    if (count == nullptr) return;
    {
      Handler gone = std::move(handler);  // unrun: its coroutine goes before the work and count
      work.reset();
    }
    count->fetch_sub(1, std::memory_order_release);
  }

  void operator()() {
    (*run)();
    auto executor = asio::get_associated_executor(handler);
    asio::post(executor, std::move(handler));  // queued work of its own from here
    work.reset();
    if (count != nullptr) std::exchange(count, nullptr)->fetch_sub(1, std::memory_order_release);
  }
};

}  // namespace detail

template <class Fn>
asio::awaitable<std::invoke_result_t<Fn&>> offload(asio::thread_pool& pool, Fn fn) {
  using Result = std::invoke_result_t<Fn&>;
  // fn, its result and its exception stay in this frame, which waits until the pool is done.
  using Stored = std::conditional_t<std::is_void_v<Result>, bool, Result>;
  std::optional<Stored> result;
  std::exception_ptr error;
  auto run = [&fn, &result, &error] {
    try {
      if constexpr (std::is_void_v<Result>) {
        fn();
        result.emplace(true);
      } else {
        result.emplace(fn());
      }
    } catch (...) {
      error = std::current_exception();
    }
  };
  std::atomic<int>* const count = detail::offloads_of_this_thread();
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [&pool, &run, count](auto handler) {
        auto work = asio::make_work_guard(asio::get_associated_executor(handler));
        asio::post(pool, detail::OffloadedWork<decltype(handler), decltype(work), decltype(run)>(
                             std::move(handler), std::move(work), &run, count));
      },
      asio::use_awaitable);
  if (error) std::rethrow_exception(error);
  if constexpr (std::is_void_v<Result>) {
    co_return;
  } else {
    co_return std::move(*result);
  }
}

}  // namespace ferry

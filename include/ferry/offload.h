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

#include <type_traits>
#include <utility>

#include "asio/awaitable.hpp"
#include "asio/co_spawn.hpp"
#include "asio/thread_pool.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry {

// Runs fn() on pool and returns its result (or rethrows its exception) to the awaiting coroutine,
// resumed on its own executor. fn and what it references must stay valid until then, and must
// not touch the call (ServerContext, readers, writers) while on the pool: those belong to the
// I/O thread. Not cancellable while fn runs (the call's cancellation is seen once it returns).
// Cost: one coroutine frame and two hops between threads; for work of ~10 µs and more.
namespace detail {

// The work as a coroutine of its own, fn a parameter (so in its frame). Not a capturing
// coroutine lambda given to co_spawn: asio 1.22 (Debian's) then destroys the captures once more
// than it copies them when co_spawn completes to use_awaitable, and what fn held (a shared_ptr's
// count) came out one short: a use after free.
template <class Result, class Fn>
asio::awaitable<Result> run_offloaded(Fn fn) {
  if constexpr (std::is_void_v<Result>) {
    fn();
    co_return;
  } else {
    co_return fn();
  }
}

}  // namespace detail

template <class Fn>
asio::awaitable<std::invoke_result_t<Fn&>> offload(asio::thread_pool& pool, Fn fn) {
  using Result = std::invoke_result_t<Fn&>;
  co_return co_await asio::co_spawn(
      pool.get_executor(), detail::run_offloaded<Result>(std::move(fn)), asio::use_awaitable);
}

}  // namespace ferry

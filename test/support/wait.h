// Waiting on a condition instead of sleeping a fixed time (test support): a test that waits for
// what it needs goes on as soon as it holds, and a slow machine only makes it wait longer, up to
// a limit far beyond any healthy run. Fixed sleeps stay only where the passing time is what the
// test checks (a deadline, a rate, something that must not happen meanwhile); they say so.
#pragma once

#include <chrono>
#include <thread>

#include "asio/awaitable.hpp"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry::testing {

// Polls done() from the calling thread every millisecond until it holds or limit passes;
// returns done(). For state that other threads change (the server's, the channel's).
template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// The same inside a coroutine: polls every millisecond on the coroutine's executor, which keeps
// running its other work meanwhile.
template <class Pred>
asio::awaitable<bool> until(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return done();
}

}  // namespace ferry::testing

// A wake-up signal for one coroutine on a single-threaded executor (calls layer, private).
// It is a timer that never expires: wait() suspends on it, notify() cancels the wait. Waking is
// edge-triggered and may be spurious, so waiters re-check their condition in a loop; with the
// state and the waiter on one thread, no wake-up is lost between the check and the wait.
#pragma once

#include "asio/awaitable.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"

namespace ferry::detail {

class Event {
 public:
  explicit Event(const asio::any_io_executor& executor)
      : timer_(executor, asio::steady_timer::time_point::max()) {}

  void notify() { timer_.cancel(); }

  asio::awaitable<void> wait() {
    asio::error_code ignored;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

 private:
  asio::steady_timer timer_;
};

}  // namespace ferry::detail

// The buffer pool's idle trim on a server I/O thread (server layer, private): once every
// BufferPoolOptions::idle_period it calls BufferPool::trim_idle, so that the pool gives a burst's
// blocks back even when no call touches it any more. One timer per I/O thread; stop() on
// shutdown, so that the thread's loop can end.
#pragma once

#include <chrono>

#include "asio/any_io_executor.hpp"
#include "asio/steady_timer.hpp"
#include "ferry/buffer_pool.h"

namespace ferry::detail {

class PoolTrimTimer {
 public:
  // Arms the timer on ex; construct before the executor's thread runs, or on it.
  explicit PoolTrimTimer(const asio::any_io_executor& ex) : timer_(ex) { arm(); }

  // On the executor's thread: cancels the timer for good.
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void arm() {
    // A period of zero (idle trim off) is looked at again later, in case it is configured on.
    auto period = BufferPool::instance().options().idle_period;
    if (period.count() <= 0) period = std::chrono::seconds(10);
    timer_.expires_after(period);
    timer_.async_wait([this](const asio::error_code& ec) {
      if (ec || stopped_) return;
      BufferPool::instance().trim_idle();
      arm();
    });
  }

  asio::steady_timer timer_;
  bool stopped_ = false;
};

}  // namespace ferry::detail

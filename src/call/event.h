// Wake-up signals for coroutines on a single-threaded executor (calls layer, private). Waking
// is edge-triggered and may be spurious, so waiters re-check their condition in a loop; with the
// state and the waiters on one thread, no wake-up is lost between the check and the wait.
//
// Event serves one waiter at a time (a call's reader, writer or finisher): it keeps the waiting
// coroutine's completion handler in place and posts it on notify(), with no timer, no lock and
// no allocation (asio recycles the posted operation). Signal serves any number of waiters (calls
// waiting for a connection): a timer that never expires, cancelled to wake them all.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "asio/associated_executor.hpp"
#include "asio/io_context.hpp"
#include "asio/async_result.hpp"
#include "asio/awaitable.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "common/wakeups.h"

namespace ferry::detail {

class Event {
 public:
  explicit Event(const asio::any_io_executor&) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (waiter_ != nullptr) waiter_->destroy();
  }

  // Resumes the waiting coroutine, if there is one: later, from the executor's queue, or (while
  // a connection on this thread parses a read) once the parse is done (common/wakeups.h).
  void notify() {
    if (waiter_ == nullptr) return;
    Waiter* w = std::exchange(waiter_, nullptr);
    if (WakeupQueue* q = WakeupQueue::current()) {
      q->push(w);
    } else {
      w->post();
    }
  }

  // Suspends until notify(). One waiter at a time.
  asio::awaitable<void> wait() {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](auto handler) { store(std::move(handler)); }, asio::use_awaitable);
  }

 private:
  struct Waiter : Wakeup {
    virtual void post() = 0;
    virtual void destroy() = 0;

   protected:
    ~Waiter() = default;
  };

  template <class Handler>
  struct WaiterOf final : Waiter {
    explicit WaiterOf(Handler&& h) : handler(std::move(h)) {}
    void post() override {
      Handler h = std::move(handler);
      this->~WaiterOf();
      auto executor = asio::get_associated_executor(h);
      asio::post(executor, std::move(h));
    }
    // From a WakeupQueue: resumes the coroutine inline when it belongs to this thread's
    // io_context (it always does in ferry: calls wait on their connection's executor).
    void run() override {
      auto executor = asio::get_associated_executor(handler);
      const auto* io = executor.template target<asio::io_context::executor_type>();
      if (io == nullptr || !io->running_in_this_thread()) {
        post();
        return;
      }
      Handler h = std::move(handler);
      this->~WaiterOf();
      std::move(h)();
    }
    void destroy() override { this->~WaiterOf(); }
    Handler handler;
  };

  template <class Handler>
  void store(Handler&& handler) {
    using W = WaiterOf<std::decay_t<Handler>>;
    static_assert(sizeof(W) <= sizeof(storage_) && alignof(W) <= alignof(std::max_align_t));
    if (waiter_ != nullptr) waiter_->post();  // never two waiters: wake the old one to re-check
    waiter_ = new (storage_) W(std::move(handler));
  }

  alignas(std::max_align_t) unsigned char storage_[64];
  Waiter* waiter_ = nullptr;
};

class Signal {
 public:
  explicit Signal(const asio::any_io_executor& executor)
      : timer_(executor, asio::steady_timer::time_point::max()) {}

  void notify_all() { timer_.cancel(); }

  asio::awaitable<void> wait() {
    asio::error_code ignored;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

 private:
  asio::steady_timer timer_;
};

}  // namespace ferry::detail

// Wake-up signals for coroutines on a single-threaded executor (calls layer, private). Waking
// is edge-triggered and may be spurious, so waiters re-check their condition in a loop; with the
// state and the waiters on one thread, no wake-up is lost between the check and the wait.
//
// Event serves one waiter at a time (a call's reader, writer or finisher; a second one aborts): it
// keeps the waiting coroutine's completion handler in place and posts it on notify(), with no
// timer, no lock and no allocation (asio recycles the posted operation). Signal serves any number
// of waiters (calls waiting for a connection): a timer that never expires, cancelled to wake them
// all.
//
// Per-operation cancellation: an Event given an on_cancel hook installs a handler in the waiting
// operation's cancellation slot (asio's associated_cancellation_slot of its handler) for as long
// as it waits; a terminal or partial cancellation calls the hook, whose owner ends what the
// waiter waits for and so wakes it. The slot handler lives in asio's per-thread recycled memory.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#include "asio/associated_cancellation_slot.hpp"
#include "asio/associated_executor.hpp"
#include "asio/async_result.hpp"
#include "asio/awaitable.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/cancellation_type.hpp"
#include "asio/io_context.hpp"
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
    release_slot();
    if (waiter_ != nullptr) waiter_->destroy();
  }

  // What a cancellation of the waiting operation calls (with owner): it must end what the
  // waiter waits for and notify(). Unset (the default), waits ignore cancellation slots.
  using CancelHook = void (*)(void* owner);
  void on_cancel(CancelHook hook, void* owner) {
    cancel_hook_ = hook;
    cancel_owner_ = owner;
  }

  // Resumes the waiting coroutine, if there is one: later, from the executor's queue, or (while
  // a connection on this thread parses a read) once the parse is done (common/wakeups.h).
  void notify() {
    if (waiter_ == nullptr) return;
    release_slot();  // the operation completes: asio's rule, its slot is free again
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
    // Two waiters would wake each other for ever (each re-checks and waits again): a second
    // operation of a kind on one call (two reads at once, say) is a bug in the caller, which
    // ferry's streams document; fail loudly rather than spin.
    if (waiter_ != nullptr) second_waiter();
    auto* w = new (storage_) W(std::move(handler));
    waiter_ = w;
    if (cancel_hook_ != nullptr) {
      asio::cancellation_slot slot = asio::get_associated_cancellation_slot(w->handler);
      if (slot.is_connected()) {
        slot_ = slot;
        hook_ = &slot.template emplace<SlotHandler>(this);
      }
    }
  }

  [[noreturn]] static void second_waiter() {
    std::fputs(
        "ferry: two operations of one kind wait on one call at once (e.g. two reads); "
        "the streams allow one at a time\n",
        stderr);
    std::abort();
  }

  // Installed in the waiting operation's cancellation slot.
  struct SlotHandler {
    explicit SlotHandler(Event* e) : event(e) {}
    void operator()(asio::cancellation_type_t type) {
      constexpr auto kHonoured =
          asio::cancellation_type::terminal | asio::cancellation_type::partial;
      if (event == nullptr || !(type & kHonoured)) return;  // total alone: cannot undo a call
      running = true;
      Event* e = event;
      e->cancel_hook_(e->cancel_owner_);  // wakes the waiter, which releases this handler
      running = false;
    }
    Event* event;
    bool running = false;
  };

  // Takes the slot handler out of the operation's slot. From inside that handler (the hook
  // woke the waiter) it cannot destroy itself: it is disarmed, and goes when the slot is next
  // used or its signal dies.
  void release_slot() {
    if (hook_ == nullptr) return;
    if (hook_->running) {
      hook_->event = nullptr;
    } else {
      slot_.clear();
    }
    hook_ = nullptr;
    slot_ = asio::cancellation_slot();
  }

  alignas(std::max_align_t) unsigned char storage_[64];
  Waiter* waiter_ = nullptr;
  CancelHook cancel_hook_ = nullptr;
  void* cancel_owner_ = nullptr;
  asio::cancellation_slot slot_;
  SlotHandler* hook_ = nullptr;
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

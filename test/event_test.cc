// Event and WakeupQueue (src/call/event.h, src/common/wakeups.h): a waiter is resumed from the
// executor's queue, or, while a queue collects this thread's wake-ups (a connection parsing a
// read), inline when the queue runs and not before.
#include "call/event.h"

#include <chrono>
#include <string>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/post.hpp"
#include "gtest/gtest.h"

namespace ferry::detail::event_test {
namespace {

// A coroutine that records "woken" once the event wakes it.
asio::awaitable<void> wait_and_record(Event& event, std::vector<std::string>& log) {
  co_await event.wait();
  log.push_back("woken");
}

// A coroutine function, not a capturing lambda: the coroutine outlives the co_spawn expression.
asio::awaitable<void> wait_then_notify(Event& event, Event& next, std::vector<std::string>& log) {
  co_await event.wait();
  log.push_back("first");
  next.notify();
}

TEST(Event, NotifyPostsTheWaiter) {
  asio::io_context io(1);
  Event event(io.get_executor());
  std::vector<std::string> log;
  asio::co_spawn(io, wait_and_record(event, log), asio::detached);
  io.poll();  // the coroutine starts and suspends in wait()
  ASSERT_TRUE(log.empty());
  asio::post(io, [&] {
    event.notify();
    log.push_back("notified");  // the waiter resumes later, not inside notify()
  });
  io.poll();
  EXPECT_EQ(log, (std::vector<std::string>{"notified", "woken"}));
}

TEST(Event, CollectedWakeupRunsInlineWhenTheQueueRuns) {
  asio::io_context io(1);
  Event event(io.get_executor());
  WakeupQueue queue;
  std::vector<std::string> log;
  asio::co_spawn(io, wait_and_record(event, log), asio::detached);
  io.poll();
  asio::post(io, [&] {
    {
      CollectWakeups collect(queue);
      event.notify();
      log.push_back("notified");
    }
    EXPECT_EQ(WakeupQueue::current(), nullptr);  // restored when the scope ends
    log.push_back("parsed");
    queue.run_all();
    log.push_back("ran");  // the coroutine ran inside run_all, not from the loop
  });
  io.poll();
  EXPECT_EQ(log, (std::vector<std::string>{"notified", "parsed", "woken", "ran"}));
}

TEST(Event, WakeupRaisedWhileTheQueueRunsIsPosted) {
  asio::io_context io(1);
  Event first(io.get_executor());
  Event second(io.get_executor());
  WakeupQueue queue;
  std::vector<std::string> log;
  // The first waiter, once woken, wakes the second: that one must not run inside run_all.
  asio::co_spawn(io, wait_then_notify(first, second, log), asio::detached);
  asio::co_spawn(io, wait_and_record(second, log), asio::detached);
  io.poll();
  asio::post(io, [&] {
    {
      CollectWakeups collect(queue);
      first.notify();
    }
    queue.run_all();
    log.push_back("ran");
  });
  io.poll();
  EXPECT_EQ(log, (std::vector<std::string>{"first", "ran", "woken"}));
}

TEST(Event, WakeupForAnotherThreadIsPostedNotRunInline) {
  asio::io_context io(1);
  Event event(io.get_executor());
  std::vector<std::string> log;
  asio::co_spawn(io, wait_and_record(event, log), asio::detached);
  io.poll();
  // The queue runs on a thread that is not running the waiter's io_context.
  WakeupQueue queue;
  {
    CollectWakeups collect(queue);
    event.notify();
  }
  queue.run_all();
  EXPECT_TRUE(log.empty());
  io.poll();
  EXPECT_EQ(log, (std::vector<std::string>{"woken"}));
}

TEST(EventDeathTest, ASecondWaiterAbortsInsteadOfSpinning) {
  // Two waiters used to wake each other for ever; now the second one is a loud failure.
  EXPECT_DEATH(
      {
        asio::io_context io(1);
        Event event(io.get_executor());
        std::vector<std::string> log;
        asio::co_spawn(io, wait_and_record(event, log), asio::detached);
        asio::co_spawn(io, wait_and_record(event, log), asio::detached);
        io.run_for(std::chrono::seconds(2));
      },
      "two operations of one kind");
}

}  // namespace
}  // namespace ferry::detail::event_test

// DeadlineQueue: one timer for many deadlines. Expiry in deadline order whatever the order of
// arrival, nothing for a removed deadline, an earlier deadline re-arming the timer, a handler
// that removes others or destroys itself, stop(), and a queue destroyed after its timer fired
// but before the timer's handler ran.
#include "call/deadline_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "asio/io_context.hpp"

namespace ferry::detail::deadline_queue_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Timed : Deadline {
  Timed(int id, std::vector<int>* log) : id(id), log(log) {}
  void on_deadline() override {
    log->push_back(id);
    if (then) then();
  }
  int id;
  std::vector<int>* log;
  std::function<void()> then;
};

TEST(DeadlineQueue, ExpiresInDeadlineOrderAndSkipsRemovedOnes) {
  asio::io_context io;
  DeadlineQueue queue(io.get_executor());
  std::vector<int> log;
  std::vector<std::unique_ptr<Timed>> timed;
  const auto now = Clock::now();
  // Out of order, with ties; 3 and 6 leave before their time.
  const int offsets_ms[] = {40, 10, 30, 10, 50, 20, 60};
  for (int i = 0; i < 7; ++i) {
    timed.push_back(std::make_unique<Timed>(i, &log));
    queue.add(timed.back().get(), now + std::chrono::milliseconds(offsets_ms[i]));
  }
  queue.remove(timed[3].get());
  queue.remove(timed[6].get());
  queue.remove(timed[6].get());  // twice: nothing
  EXPECT_FALSE(timed[3]->queued());
  EXPECT_EQ(queue.size(), 5u);
  io.run_for(500ms);
  EXPECT_EQ(log, (std::vector<int>{1, 5, 2, 0, 4}));
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_GE(Clock::now() - now, 50ms);
}

TEST(DeadlineQueue, AnEarlierDeadlineRearmsTheTimer) {
  asio::io_context io;
  DeadlineQueue queue(io.get_executor());
  std::vector<int> log;
  Timed late(1, &log), early(2, &log);
  const auto start = Clock::now();
  queue.add(&late, start + 10s);
  queue.add(&early, start + 20ms);
  io.run_for(300ms);
  EXPECT_EQ(log, (std::vector<int>{2}));
  EXPECT_LT(Clock::now() - start, 5s);
  queue.remove(&late);
}

TEST(DeadlineQueue, AHandlerMayRemoveOthersAndDestroyItself) {
  asio::io_context io;
  DeadlineQueue queue(io.get_executor());
  std::vector<int> log;
  auto first = std::make_unique<Timed>(1, &log);
  Timed second(2, &log), third(3, &log);
  const auto when = Clock::now() + 10ms;
  queue.add(first.get(), when);
  queue.add(&second, when + 1ms);
  queue.add(&third, when + 2ms);
  first->then = [&] {
    queue.remove(&second);
    first.reset();  // the call a deadline finishes may go with it
  };
  io.run_for(200ms);
  EXPECT_EQ(log, (std::vector<int>{1, 3}));
  EXPECT_EQ(first, nullptr);
}

TEST(DeadlineQueue, StopLetsTheLoopRunOutOfWork) {
  asio::io_context io;
  DeadlineQueue queue(io.get_executor());
  std::vector<int> log;
  Timed t(1, &log);
  queue.add(&t, Clock::now() + 1h);
  queue.stop();
  const auto start = Clock::now();
  io.run();  // returns: no wait left
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(log.empty());
  queue.remove(&t);
}

// A client connection owns its queue, and goes with its last call. When the timer's wait
// completes in the same pass of the loop as the handler that destroys the connection, the wait's
// handler is already queued: destroying the timer cannot cancel it, and it runs after the queue
// is gone (the sanitizers saw it in a fault test: a keepalive-detected black hole failing the
// connection's calls as their deadline passed). Two queues here, each with a deadline already
// passed: whichever handler runs first destroys the other queue, whose handler must then do
// nothing (under ASan, a heap-use-after-free otherwise).
TEST(DeadlineQueue, AQueueDestroyedAfterItsTimerFiredIsNotTouched) {
  asio::io_context io;
  std::vector<int> log;
  auto a = std::make_unique<DeadlineQueue>(io.get_executor());
  auto b = std::make_unique<DeadlineQueue>(io.get_executor());
  Timed in_a(1, &log), in_b(2, &log);
  in_a.then = [&] { b.reset(); };
  in_b.then = [&] { a.reset(); };
  const auto passed = Clock::now() - 1ms;
  a->add(&in_a, passed);
  b->add(&in_b, passed);
  // Both waits complete in the loop's first look at its timers, before either handler runs.
  io.run_for(200ms);
  ASSERT_EQ(log.size(), 1u);  // the first handler's deadline only: the other queue went with it
  EXPECT_EQ(a == nullptr, log[0] == 2);
  EXPECT_EQ(b == nullptr, log[0] == 1);
}

}  // namespace
}  // namespace ferry::detail::deadline_queue_test

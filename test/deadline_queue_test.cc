// DeadlineQueue: one timer for many deadlines. Expiry in deadline order whatever the order of
// arrival, nothing for a removed deadline, an earlier deadline re-arming the timer, a handler
// that removes others or destroys itself, and stop().
#include "call/deadline_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "asio/io_context.hpp"

namespace ferry::detail {
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

}  // namespace
}  // namespace ferry::detail

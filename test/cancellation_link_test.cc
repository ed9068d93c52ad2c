// Tests for src/call/cancellation_link.h: callbacks run outside the link's lock, so user code
// (ServerContext::on_cancel) may call back into it, and remove() waits for a run under way.
#include "call/cancellation_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

namespace ferry::detail::cancellation_link_test {
namespace {

using namespace std::chrono_literals;

// Runs fn on a thread of its own and fails loudly (the process aborts) if it has not returned
// within 5 s: a deadlock must fail the test, not hang it.
template <class Fn>
void returns_in_time(Fn fn) {
  std::packaged_task<void()> task(std::move(fn));
  std::future<void> done = task.get_future();
  std::thread(std::move(task)).detach();
  if (done.wait_for(5s) != std::future_status::ready) {
    ADD_FAILURE() << "deadlocked";
    std::fflush(stdout);
    std::abort();
  }
  done.get();
}

TEST(CancellationLink, ACallbackMayCallBackIntoTheLink) {
  CancellationLink link;
  std::uint64_t self = 0;
  int later_runs = 0;
  self = link.add([&](const absl::Status& why) {
    EXPECT_EQ(why.code(), absl::StatusCode::kDeadlineExceeded);
    link.remove(self);  // a registration reset from its own callback
    link.add([&](const absl::Status&) { ++later_runs; });  // runs at once: cancelled already
    link.cancel(absl::CancelledError("again"));            // the first cancel wins: nothing
  });
  returns_in_time([&] { link.cancel(absl::DeadlineExceededError("deadline")); });
  EXPECT_EQ(later_runs, 1);
}

TEST(CancellationLink, RemoveFromAnotherThreadWaitsForARunningCallback) {
  CancellationLink link;
  std::promise<void> entered;
  std::promise<void> may_leave;
  std::atomic<bool> left{false};
  const std::uint64_t id = link.add([&](const absl::Status&) {
    entered.set_value();
    may_leave.get_future().wait();
    left = true;
  });
  std::thread canceller([&] { link.cancel(absl::CancelledError("cancelled")); });
  entered.get_future().wait();
  std::thread remover([&] {
    link.remove(id);
    EXPECT_TRUE(left) << "remove() returned while the callback was still running";
  });
  std::this_thread::sleep_for(50ms);  // remover is blocked in remove() meanwhile
  EXPECT_FALSE(left);
  may_leave.set_value();
  remover.join();
  canceller.join();
}

TEST(CancellationLink, ARemovedCallbackNeverRuns) {
  CancellationLink link;
  bool ran = false;
  const std::uint64_t id = link.add([&](const absl::Status&) { ran = true; });
  link.remove(id);
  link.cancel(absl::CancelledError("cancelled"));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ferry::detail::cancellation_link_test

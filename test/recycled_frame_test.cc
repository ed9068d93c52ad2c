// Tests for src/call/recycled_frame.h: the per-thread pools of coroutine frames. A frame may be
// released on another thread than the one that took it, and joins that thread's pool.
#include "call/recycled_frame.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <thread>

namespace ferry::detail::recycled_frame_test {
namespace {

// Taken by a thread whose pool is already gone (its thread_local Reaper has run: a frame taken
// from a later thread_local's destructor), released on another thread, then taken again there
// for a frame of the largest size of its class: the block must be that large. It used to be an
// exact-size allocation filed under the larger class (a heap overflow under ASan).
TEST(RecycledFrame, AFrameTakenAfterTheThreadsPoolIsGoneHasItsClassesSize) {
  constexpr std::size_t kAsked = 70;  // class of 65..128 bytes
  constexpr std::size_t kLargest = 128;
  static void* taken = nullptr;
  struct TakesAtExit {
    ~TakesAtExit() { taken = acquire_frame(kAsked); }
  };
  std::thread([] {
    // Constructed before the pool's Reaper (armed by the first acquire below), so destroyed
    // after it.
    static thread_local TakesAtExit at_exit;
    (void)&at_exit;
    release_frame(acquire_frame(kAsked), kAsked);
  }).join();
  ASSERT_NE(taken, nullptr);
  EXPECT_GE(malloc_usable_size(taken), kLargest);
  release_frame(taken, kAsked);  // filed under this thread's class of 65..128 bytes
  void* again = acquire_frame(kLargest);
  EXPECT_EQ(again, taken);
  EXPECT_GE(malloc_usable_size(again), kLargest);
  std::memset(again, 0xab, kLargest);  // the whole frame is ours (ASan checks it)
  release_frame(again, kLargest);
}

}  // namespace
}  // namespace ferry::detail::recycled_frame_test

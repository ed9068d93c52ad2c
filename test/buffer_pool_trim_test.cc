// Tests for the idle trim of ferry/buffer_pool.h (BufferPoolOptions, BufferPool::trim_idle,
// configure): a burst's blocks go back to the OS and the process's resident memory with them,
// while blocks in steady use stay. Each test sets the options it needs; periods are tens of
// milliseconds, waited for with margins.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "ferry/buffer_pool.h"

namespace ferry::buffer_pool_trim_test {
namespace {

using std::chrono::milliseconds;

BufferPool& pool() { return BufferPool::instance(); }

// Resident bytes of this process (/proc/self/statm, second field).
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f == nullptr || std::fscanf(f, "%lu %lu", &size, &resident) != 2) ADD_FAILURE() << "statm";
  if (f != nullptr) std::fclose(f);
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Acquires n blocks, writes every byte of each (so that all their pages are resident), and
// releases them all from this thread: its cache keeps a few, the shared list the rest.
void burst(std::size_t n) {
  std::vector<detail::Block*> blocks;
  for (std::size_t i = 0; i < n; ++i) {
    blocks.push_back(pool().acquire());
    std::memset(blocks.back()->data(), 0x5a, BufferPool::kBlockSize);
  }
  for (detail::Block* b : blocks) detail::block_unref(b);
}

// Sleeps through more than one idle period and runs the idle trim: the first call ends the
// period the burst happened in, the second the one the blocks sat idle through.
void wait_two_periods(milliseconds period) {
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(period + milliseconds(20));
    pool().trim_idle();
  }
}

class BufferPoolTrimTest : public ::testing::Test {
 protected:
  void TearDown() override {
    pool().configure(BufferPoolOptions{});
    pool().trim();
  }
};

TEST_F(BufferPoolTrimTest, ResidentMemoryFallsBackNearItsBaselineAfterABurst) {
  constexpr milliseconds kPeriod(50);
  pool().configure({.max_shared_idle_bytes = std::size_t{512} << 20, .idle_period = kPeriod});
  pool().trim();
  const std::size_t baseline = resident_bytes();
  burst(3200);  // 200 MiB
  const std::size_t peak = resident_bytes();
  EXPECT_GT(peak, baseline + (std::size_t{180} << 20)) << "the burst's blocks are cached";
  wait_two_periods(kPeriod);
  const std::size_t after = resident_bytes();
  // The calling thread's cache (at most kThreadCacheBlocks blocks) stays.
  EXPECT_LT(after, baseline + BufferPool::kThreadCacheBlocks * BufferPool::kBlockSize +
                       (std::size_t{4} << 20))
      << "baseline " << (baseline >> 20) << " MiB, peak " << (peak >> 20) << " MiB, after "
      << (after >> 20) << " MiB";
}

TEST_F(BufferPoolTrimTest, IdleBlocksStayUntilAWholePeriodPassedWithoutThem) {
  constexpr milliseconds kPeriod(200);
  pool().configure({.idle_period = kPeriod});
  pool().trim();
  pool().trim_idle();  // starts a period now, if the last ended
  burst(500);
  const BufferPoolStats cached = pool().stats();
  pool().trim_idle();  // inside the period the burst happened in: nothing goes
  EXPECT_EQ(pool().stats().blocks_freed_to_os, cached.blocks_freed_to_os);
  EXPECT_EQ(pool().stats().idle_trims, cached.idle_trims);
  wait_two_periods(kPeriod);
  const BufferPoolStats trimmed = pool().stats();
  EXPECT_GE(trimmed.blocks_freed_to_os - cached.blocks_freed_to_os,
            500 - BufferPool::kThreadCacheBlocks);
  EXPECT_LE(trimmed.blocks_idle(), BufferPool::kThreadCacheBlocks);
  EXPECT_EQ(trimmed.idle_trims, cached.idle_trims + 1) << "one idle trim gave the burst back";
}

TEST_F(BufferPoolTrimTest, SteadyTrafficThroughTheSharedListFreesNothing) {
  constexpr milliseconds kPeriod(30);
  pool().configure({.idle_period = kPeriod});
  pool().trim();
  burst(400);  // warm: the shared list now holds what each round below takes
  const std::uint64_t allocated = pool().stats().blocks_allocated;
  const std::uint64_t freed = pool().stats().blocks_freed_to_os;
  const std::uint64_t idle_trims = pool().stats().idle_trims;
  // Each round takes every idle block (its cache, then the shared list) and gives it back, over
  // several idle periods, with the idle trim also called in between.
  const auto until = std::chrono::steady_clock::now() + 5 * kPeriod;
  while (std::chrono::steady_clock::now() < until) {
    burst(400);
    pool().trim_idle();
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(pool().stats().blocks_freed_to_os, freed) << "steady traffic churned blocks";
  EXPECT_EQ(pool().stats().blocks_allocated, allocated);
  EXPECT_EQ(pool().stats().idle_trims, idle_trims) << "steady traffic looked like a burst's end";
}

TEST_F(BufferPoolTrimTest, TheSlowPathTrimsWithoutACallToTrimIdle) {
  constexpr milliseconds kPeriod(30);
  pool().configure({.idle_period = kPeriod});
  pool().trim();
  burst(300);
  const std::uint64_t freed = pool().stats().blocks_freed_to_os;
  // Two periods later, a thread that spills its cache into the shared list (it takes the lock
  // anyway) trims the blocks that sat there.
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(kPeriod + milliseconds(20));
    std::thread([] { burst(BufferPool::kThreadCacheBlocks + 8); }).join();
  }
  EXPECT_GT(pool().stats().blocks_freed_to_os, freed + 100);
}

TEST_F(BufferPoolTrimTest, ZeroIdlePeriodKeepsBlocksUpToTheBound) {
  pool().configure({.idle_period = milliseconds(0)});
  pool().trim();
  burst(300);
  const std::uint64_t freed = pool().stats().blocks_freed_to_os;
  std::this_thread::sleep_for(milliseconds(30));
  pool().trim_idle();
  pool().trim_idle();
  EXPECT_EQ(pool().stats().blocks_freed_to_os, freed);
}

TEST_F(BufferPoolTrimTest, ASmallerSharedBoundFreesTheSurplusAtOnce) {
  pool().configure({.idle_period = milliseconds(0)});
  pool().trim();
  burst(300);
  EXPECT_GT(pool().stats().blocks_idle(), 200u);
  pool().configure(
      {.max_shared_idle_bytes = 10 * BufferPool::kBlockSize, .idle_period = milliseconds(0)});
  EXPECT_LE(pool().stats().blocks_idle(), 10 + BufferPool::kThreadCacheBlocks);
  EXPECT_EQ(pool().options().max_shared_idle_bytes, 10 * BufferPool::kBlockSize);
  burst(300);  // the bound holds for later releases too
  EXPECT_LE(pool().stats().blocks_idle(), 10 + BufferPool::kThreadCacheBlocks);
}

}  // namespace
}  // namespace ferry::buffer_pool_trim_test

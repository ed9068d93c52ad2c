// Tests for ferry/buffer_pool.h: reuse, cross-thread release, thread exit, bounded idle memory.
#include "ferry/buffer_pool.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/frame_encoder.h"
#include "ferry/slice.h"
#include "ferry/testing/buffer.pb.h"

namespace ferry::buffer_pool_test {
namespace {

BufferPool& pool() { return BufferPool::instance(); }

TEST(BufferPool, AcquiredBlockIsFreshAndAligned) {
  detail::Block* b = pool().acquire();
  EXPECT_EQ(b->refs.load(), 1u);
  EXPECT_EQ(b->used, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 64, 0u);
  b->data()[BufferPool::kBlockSize - 1] = 0xAB;  // the whole block is writable
  detail::block_unref(b);
}

TEST(BufferPool, ReleasedBlockIsReusedByTheSameThread) {
  detail::Block* first = pool().acquire();
  detail::block_unref(first);
  detail::Block* second = pool().acquire();
  EXPECT_EQ(first, second);
  detail::block_unref(second);
}

TEST(BufferPool, InUseCountFollowsAcquireAndRelease) {
  const std::int64_t before = pool().stats().blocks_in_use;
  std::vector<detail::Block*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(pool().acquire());
  EXPECT_EQ(pool().stats().blocks_in_use, before + 10);
  for (detail::Block* b : blocks) detail::block_unref(b);
  EXPECT_EQ(pool().stats().blocks_in_use, before);
}

TEST(BufferPool, WarmEncodeCyclesAllocateNoNewBlocks) {
  testing::Buffer msg;
  msg.set_body(std::string(1000, 'x'));
  SliceChain out;
  for (int i = 0; i < 10; ++i) {  // warm-up
    ASSERT_TRUE(encode_message(msg, out).ok());
    out.clear();
  }
  const BufferPoolStats before = pool().stats();
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(encode_message(msg, out).ok());
    out.clear();
  }
  const BufferPoolStats after = pool().stats();
  EXPECT_EQ(after.blocks_allocated, before.blocks_allocated);
  EXPECT_EQ(after.blocks_in_use, before.blocks_in_use);
}

TEST(BufferPool, LargeMessageCyclesReuseBlocks) {
  testing::Buffer msg;
  msg.set_body(std::string(1 << 20, 'y'));  // 17 blocks a message
  SliceChain out;
  ASSERT_TRUE(encode_message(msg, out).ok());
  out.clear();
  const BufferPoolStats before = pool().stats();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(encode_message(msg, out).ok());
    out.clear();
  }
  EXPECT_EQ(pool().stats().blocks_allocated, before.blocks_allocated);
}

TEST(BufferPool, BlockReleasedOnAnotherThreadReturnsToThePool) {
  const std::int64_t before = pool().stats().blocks_in_use;
  std::vector<Slice> slices;
  for (int i = 0; i < 100; ++i) {
    const char byte = static_cast<char>(i);
    slices.push_back(Slice::copy_of(&byte, 1));
  }
  EXPECT_EQ(pool().stats().blocks_in_use, before + 100);
  std::thread other([moved = std::move(slices)]() mutable {
    for (int i = 0; i < 100; ++i) ASSERT_EQ(moved[i].data()[0], static_cast<std::uint8_t>(i));
    moved.clear();  // released here, on the other thread
  });
  other.join();
  EXPECT_EQ(pool().stats().blocks_in_use, before);
}

TEST(BufferPool, ExitingThreadHandsItsCacheToOtherThreads) {
  pool().trim();  // this thread's cache and the shared list are now empty
  std::thread worker([] {
    std::vector<detail::Block*> blocks;
    for (int i = 0; i < 20; ++i) blocks.push_back(pool().acquire());
    for (detail::Block* b : blocks) detail::block_unref(b);
  });
  worker.join();
  const std::uint64_t allocated = pool().stats().blocks_allocated;
  std::vector<detail::Block*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(pool().acquire());
  EXPECT_EQ(pool().stats().blocks_allocated, allocated) << "blocks of the exited thread were lost";
  for (detail::Block* b : blocks) detail::block_unref(b);
}

TEST(BufferPool, IdleMemoryStaysBoundedAfterAPeak) {
  const std::size_t peak = BufferPool::kThreadCacheBlocks + BufferPool::kSharedListBlocks + 500;
  std::vector<detail::Block*> blocks;
  for (std::size_t i = 0; i < peak; ++i) blocks.push_back(pool().acquire());
  for (detail::Block* b : blocks) detail::block_unref(b);
  const BufferPoolStats stats = pool().stats();
  EXPECT_LE(stats.blocks_idle(), BufferPool::kThreadCacheBlocks + BufferPool::kSharedListBlocks);
  EXPECT_GT(stats.blocks_freed_to_os, 0u);
}

TEST(BufferPool, ManyThreadsProduceAndConsumeConcurrently) {
  // Producers fill slices; consumers on other threads check and drop them (cross-thread release
  // under contention). Sanitizer builds catch races; the counts catch lost blocks.
  const std::int64_t before = pool().stats().blocks_in_use;
  std::mutex mu;
  std::deque<Slice> queue;
  constexpr int kPerProducer = 20000;
  constexpr int kProducers = 2;
  std::atomic<int> consumed{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        const std::uint8_t bytes[2] = {static_cast<std::uint8_t>(p), static_cast<std::uint8_t>(i)};
        Slice s = Slice::copy_of(bytes, 2);
        std::lock_guard lock(mu);
        queue.push_back(std::move(s));
      }
    });
  }
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&] {
      while (consumed.load() < kProducers * kPerProducer) {
        Slice s;
        {
          std::lock_guard lock(mu);
          if (queue.empty()) continue;
          s = std::move(queue.front());
          queue.pop_front();
        }
        ASSERT_EQ(s.size(), 2u);
        ASSERT_LT(s.data()[0], kProducers);
        consumed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(consumed.load(), kProducers * kPerProducer);
  EXPECT_EQ(pool().stats().blocks_in_use, before);
}

TEST(BufferPool, TrimGivesBackEveryIdleBlockIncludingTheSpare) {
  std::vector<detail::Block*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool().acquire());
  for (detail::Block* b : blocks) detail::block_unref(b);  // one to the spare slot, two listed
  EXPECT_GE(pool().stats().blocks_idle(), 3u);
  pool().trim();  // no other thread holds idle blocks here
  EXPECT_EQ(pool().stats().blocks_idle(), 0u);
}

// Constructed on a thread before its first block, so destroyed after the thread's cache closes.
struct HeldUntilThreadExit {
  std::vector<Slice> slices;
};

TEST(BufferPool, BlocksReleasedAfterTheThreadCacheClosesReturnToTheSharedList) {
  const std::int64_t before = pool().stats().blocks_in_use;
  std::thread worker([] {
    thread_local HeldUntilThreadExit held;  // before the pool's own thread_local: outlives it
    for (int i = 0; i < 5; ++i) {
      const char byte = static_cast<char>(i);
      held.slices.push_back(Slice::copy_of(&byte, 1));
    }
  });
  worker.join();
  EXPECT_EQ(pool().stats().blocks_in_use, before) << "blocks released after exit were lost";
}

}  // namespace
}  // namespace ferry::buffer_pool_test

// Tests for ferry/slice_chain.h: packing, splitting, consuming, sharing, gathering.
#include "ferry/slice_chain.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ferry::slice_chain_test {
namespace {

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7) % 26);
  return s;
}

TEST(SliceChain, ReserveCommitPacksWritesIntoOneSlice) {
  SliceChain chain;
  std::memcpy(chain.reserve(3), "abc", 3);
  chain.commit(3);
  std::memcpy(chain.reserve(100), "de", 2);
  chain.commit(2);  // less than reserved
  EXPECT_EQ(chain.size(), 5u);
  EXPECT_EQ(chain.slice_count(), 1u);
  EXPECT_EQ(chain.to_string(), "abcde");
  EXPECT_EQ(chain.tail_room(), BufferPool::kBlockSize - 5);
}

TEST(SliceChain, ReserveStartsANewBlockWhenTheTailIsTooSmall) {
  SliceChain chain;
  chain.append_copy(pattern(BufferPool::kBlockSize - 10).data(), BufferPool::kBlockSize - 10);
  const std::uint8_t* p = chain.reserve(20);
  std::memset(const_cast<std::uint8_t*>(p), 'z', 20);
  chain.commit(20);
  EXPECT_EQ(chain.slice_count(), 2u);
  EXPECT_EQ(chain.slice(1).data(), p);
  EXPECT_NE(chain.slice(0).block(), chain.slice(1).block());
  EXPECT_EQ(chain.size(), BufferPool::kBlockSize + 10);
}

TEST(SliceChain, AppendCopySpansBlocks) {
  const std::string data = pattern(3 * BufferPool::kBlockSize + 123);
  SliceChain chain;
  chain.append_copy(data.data(), data.size());
  EXPECT_EQ(chain.slice_count(), 4u);
  EXPECT_EQ(chain.to_string(), data);
}

TEST(SliceChain, SplitFrontSharesBlocksAndKeepsTheRest) {
  const std::string data = pattern(2 * BufferPool::kBlockSize);
  SliceChain chain;
  chain.append_copy(data.data(), data.size());
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{1}, BufferPool::kBlockSize, BufferPool::kBlockSize + 7}) {
    SliceChain copy = chain.share();
    SliceChain front = copy.split_front(cut);
    EXPECT_EQ(front.to_string(), data.substr(0, cut));
    EXPECT_EQ(copy.to_string(), data.substr(cut));
    if (cut > 0) {
      EXPECT_EQ(front.slice(0).data(), chain.slice(0).data()) << "split must not copy";
    }
  }
}

TEST(SliceChain, SplitOffWritesLeaveTheWriterPackingTheSameBlock) {
  SliceChain scratch;
  std::memcpy(scratch.reserve(4), "one!", 4);
  scratch.commit(4);
  SliceChain first = scratch.split_front(4);
  EXPECT_TRUE(scratch.empty());
  std::memcpy(scratch.reserve(4), "two!", 4);
  scratch.commit(4);
  EXPECT_EQ(first.to_string(), "one!");
  EXPECT_EQ(scratch.to_string(), "two!");
  EXPECT_EQ(first.slice(0).block(), scratch.slice(0).block());
  EXPECT_EQ(first.slice(0).data() + 4, scratch.slice(0).data());
}

TEST(SliceChain, ConsumeDropsFromTheFront) {
  const std::string data = pattern(BufferPool::kBlockSize + 50);
  SliceChain chain;
  chain.append_copy(data.data(), data.size());
  chain.consume(10);
  EXPECT_EQ(chain.to_string(), data.substr(10));
  chain.consume(BufferPool::kBlockSize);
  EXPECT_EQ(chain.to_string(), data.substr(10 + BufferPool::kBlockSize));
  chain.consume(chain.size());
  EXPECT_TRUE(chain.empty());
  EXPECT_EQ(chain.slice_count(), 0u);
}

TEST(SliceChain, CopyToReadsAcrossSlices) {
  SliceChain chain;
  chain.append(Slice::copy_of("hel", 3));
  chain.append(Slice::copy_of("lo w", 4));
  chain.append(Slice::copy_of("orld", 4));
  char out[6] = {};
  chain.copy_to(2, 5, out);
  EXPECT_STREQ(out, "llo w");
}

TEST(SliceChain, AppendChainMovesSlicesWithoutCopying) {
  SliceChain a;
  a.append(Slice::copy_of("abc", 3));
  SliceChain b;
  b.append(Slice::copy_of("def", 3));
  const std::uint8_t* where = b.slice(0).data();
  a.append(std::move(b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(a.to_string(), "abcdef");
  EXPECT_EQ(a.slice(1).data(), where);
}

TEST(SliceChain, AppendChainMergesAdjacentSlicesOfOneBlock) {
  // Messages encoded back to back into a writer's block, split off one by one and queued (a
  // stream's outbound queue): one slice for all of them, and every block reference accounted.
  const std::int64_t before = BufferPool::instance().stats().blocks_in_use;
  {
    SliceChain writer;
    SliceChain queue;
    for (const char* msg : {"abc", "defg", "hi"}) {
      const std::size_t n = std::strlen(msg);
      std::memcpy(writer.reserve(n), msg, n);
      writer.commit(n);
      queue.append(writer.split_front(n));
    }
    EXPECT_EQ(queue.slice_count(), 1u);
    EXPECT_EQ(queue.size(), 9u);
    EXPECT_EQ(queue.to_string(), "abcdefghi");
    // A slice of another block is not merged.
    SliceChain other;
    other.append(Slice::copy_of("jk", 2));
    queue.append(std::move(other));
    EXPECT_EQ(queue.slice_count(), 2u);
    EXPECT_EQ(queue.to_string(), "abcdefghijk");
    queue.consume(4);
    EXPECT_EQ(queue.to_string(), "efghijk");
    writer.clear();  // the queue alone keeps the writer's block now
    EXPECT_EQ(queue.to_string(), "efghijk");
  }
  EXPECT_EQ(BufferPool::instance().stats().blocks_in_use, before);
}

TEST(SliceChain, GathersAsioBuffers) {
  SliceChain chain;
  chain.append(Slice::copy_of("head", 4));
  chain.append(Slice::unowned("payload", 7));
  std::vector<asio::const_buffer> buffers;
  chain.append_buffers(buffers);
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(asio::buffer_size(buffers), 11u);
  EXPECT_EQ(std::string(static_cast<const char*>(buffers[1].data()), buffers[1].size()), "payload");
}

TEST(SliceChain, DestroyingEverythingReturnsEveryBlock) {
  const std::int64_t before = BufferPool::instance().stats().blocks_in_use;
  {
    SliceChain chain;
    const std::string data = pattern(5 * BufferPool::kBlockSize);
    chain.append_copy(data.data(), data.size());
    SliceChain shared = chain.share();
    SliceChain front = chain.split_front(100);
    EXPECT_GT(BufferPool::instance().stats().blocks_in_use, before);
  }
  EXPECT_EQ(BufferPool::instance().stats().blocks_in_use, before);
}

}  // namespace
}  // namespace ferry::slice_chain_test

namespace ferry::slice_chain_test {
namespace {

TEST(SliceChain, MoveFrontToReplacesDestinationAndKeepsTheRest) {
  const std::string data = pattern(BufferPool::kBlockSize + 100);
  SliceChain chain;
  chain.append_copy(data.data(), data.size());
  SliceChain dst;
  dst.append(Slice::copy_of("old", 3));
  chain.move_front_to(10, dst);
  EXPECT_EQ(dst.to_string(), data.substr(0, 10));
  chain.move_front_to(BufferPool::kBlockSize, dst);  // spans the block boundary
  EXPECT_EQ(dst.to_string(), data.substr(10, BufferPool::kBlockSize));
  EXPECT_EQ(chain.to_string(), data.substr(10 + BufferPool::kBlockSize));
  chain.move_front_to(chain.size(), dst);  // exactly the last slice: moved whole
  EXPECT_EQ(dst.to_string(), data.substr(10 + BufferPool::kBlockSize));
  EXPECT_TRUE(chain.empty());
}

TEST(SliceChain, TruncateDropsBytesFromTheEnd) {
  const std::string data = pattern(2 * BufferPool::kBlockSize + 10);
  SliceChain chain;
  chain.append_copy(data.data(), data.size());
  chain.truncate(BufferPool::kBlockSize + 5);
  EXPECT_EQ(chain.to_string(), data.substr(0, BufferPool::kBlockSize + 5));
  chain.truncate(3);
  EXPECT_EQ(chain.to_string(), data.substr(0, 3));
  EXPECT_EQ(chain.slice_count(), 1u);
  // Writing after a truncate appends after the kept bytes.
  std::memcpy(chain.reserve(2), "zz", 2);
  chain.commit(2);
  EXPECT_EQ(chain.to_string(), data.substr(0, 3) + "zz");
}

TEST(SliceChain, ManySlicesGrowPastTheInlineSlotsAndSurviveMoves) {
  SliceChain chain;
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    const std::string piece = "piece" + std::to_string(i) + ";";
    chain.append(Slice::copy_of(piece.data(), piece.size()));
    expected += piece;
  }
  EXPECT_EQ(chain.slice_count(), 100u);
  SliceChain moved(std::move(chain));
  EXPECT_EQ(moved.to_string(), expected);
  EXPECT_TRUE(chain.empty());
  SliceChain assigned;
  assigned = std::move(moved);
  SliceChain copy = assigned.share();
  assigned.consume(7 + 7);  // "piece0;piece1;"
  EXPECT_EQ(assigned.to_string(), expected.substr(14));
  EXPECT_EQ(copy.to_string(), expected);
}

TEST(SliceChain, ClearKeepsWorkingAfterSharingTheWriteBlock) {
  // A slice of the write block held elsewhere must keep the block alive through clear().
  SliceChain chain;
  std::memcpy(chain.reserve(5), "hello", 5);
  chain.commit(5);
  SliceChain other = chain.share();
  chain.clear();
  EXPECT_EQ(other.to_string(), "hello");
  const std::int64_t in_use = BufferPool::instance().stats().blocks_in_use;
  other.clear();
  EXPECT_EQ(BufferPool::instance().stats().blocks_in_use, in_use - 1);
}

TEST(SliceChain, ClearDoesNotRecycleAWriteBlockStillReferenced) {
  // clear() gives the write block back without an atomic decrement only when the chain holds
  // every reference; a slice kept elsewhere must keep the block out of the pool.
  SliceChain chain;
  std::memcpy(chain.reserve(5), "hello", 5);
  chain.commit(5);
  Slice kept = chain.slice(0);
  chain.clear();
  std::uint8_t* next = chain.reserve(5);
  EXPECT_NE(next, kept.data()) << "a block still referenced was handed out again";
  std::memcpy(next, "world", 5);
  chain.commit(5);
  EXPECT_EQ(kept.view(), "hello");
  EXPECT_EQ(kept.block()->refs.load(), 1u);
  EXPECT_EQ(chain.to_string(), "world");
}

TEST(SliceChain, ClearOfMixedSlicesReturnsEveryBlock) {
  const std::int64_t before = BufferPool::instance().stats().blocks_in_use;
  SliceChain chain;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {  // write-block slices interleaved with other blocks' slices
      std::memcpy(chain.reserve(2), "ab", 2);
      chain.commit(2);
      chain.append(Slice::copy_of("cd", 2));
    }
    EXPECT_EQ(chain.slice_count(), 8u);
    SliceChain shared = chain.share();
    chain.clear();
    EXPECT_EQ(shared.to_string(), "abcdabcdabcdabcd");
    shared.clear();
    EXPECT_EQ(BufferPool::instance().stats().blocks_in_use, before);
  }
}

TEST(SliceChain, MoveFrontToReplacesAOneSliceDestinationInPlace) {
  // A reader reusing dst (the decoder's steady state): dst's old slice gives its reference back
  // and the moved slice keeps its own, whichever blocks they are in.
  const Slice a = Slice::copy_of("first", 5);
  const Slice b = Slice::copy_of("second", 6);
  SliceChain chain;
  chain.append(a);
  chain.append(b);
  SliceChain dst;
  dst.append(Slice::copy_of("old", 3));
  chain.move_front_to(5, dst);
  EXPECT_EQ(dst.to_string(), "first");
  EXPECT_EQ(dst.size(), 5u);
  EXPECT_EQ(a.block()->refs.load(), 2u);
  chain.move_front_to(6, dst);
  EXPECT_EQ(dst.to_string(), "second");
  EXPECT_EQ(dst.slice_count(), 1u);
  EXPECT_TRUE(chain.empty());
  EXPECT_EQ(chain.slice_count(), 0u);
  EXPECT_EQ(a.block()->refs.load(), 1u) << "dst's previous slice kept its reference";
  EXPECT_EQ(b.block()->refs.load(), 2u);
  dst.clear();
  EXPECT_EQ(b.block()->refs.load(), 1u);
}

// A chain appended to one of its own slices while its storage is full: the slice is copied
// before growing frees (or moves) the storage it lives in.
TEST(SliceChain, AppendingItsOwnSliceWhileGrowingKeepsTheBytes) {
  SliceChain chain;
  chain.append(Slice::copy_of("ab", 2));
  chain.append(Slice::copy_of("cd", 2));  // the two inline slots are full
  chain.append(chain.slice(0));           // grows: the argument lives in the old storage
  EXPECT_EQ(chain.to_string(), "abcdab");
  for (int i = 0; i < 6; ++i) chain.append(chain.slice(chain.slice_count() - 1));  // heap too
  EXPECT_EQ(chain.to_string(),
            "abcdab"
            "abababababab");
  while (chain.slice_count() < 16) chain.append(Slice::copy_of("-", 1));  // full again
  const std::string expected = chain.to_string() + "cd";
  chain.append(Slice(chain.slice(1)));  // the rvalue overload, growing again
  EXPECT_EQ(chain.to_string(), expected);
}

// One const Slice copied by two threads at once, as a body held once and served on several I/O
// threads is: every copy must count, or the block goes back to the pool (or the external owner
// is freed) while the original still points into it. (The count used to be read, then stored as
// 2 when it read 1, so two threads copying at once lost a reference.)
TEST(SliceChain, ConcurrentCopiesOfOneSliceKeepEveryReference) {
  constexpr int kRounds = 2000;
  constexpr int kCopies = 8;
  for (int round = 0; round < kRounds; ++round) {
    auto owner = std::make_shared<std::string>("a body shared by reference");
    std::weak_ptr<std::string> watch = owner;
    const Slice pooled = Slice::copy_of("pooled", 6);
    const std::string_view bytes = *owner;
    const Slice external = Slice::external(bytes.data(), bytes.size(), std::move(owner));
    std::atomic<int> ready{0};
    auto copy_both = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
        std::this_thread::yield();  // the other thread may not have a core yet (tests run 2 a core)
      }
      std::vector<Slice> copies;
      copies.reserve(2 * kCopies);
      for (int i = 0; i < kCopies; ++i) {
        copies.push_back(pooled);
        copies.push_back(external);
      }
    };
    std::thread other(copy_both);
    copy_both();
    other.join();
    ASSERT_EQ(pooled.block()->refs.load(), 1u) << "round " << round;
    ASSERT_EQ(external.block()->refs.load(), 1u) << "round " << round;
    ASSERT_FALSE(watch.expired()) << "round " << round;
    EXPECT_EQ(pooled.view(), "pooled");
  }
}

}  // namespace
}  // namespace ferry::slice_chain_test

// Tests for ferry/detail/recycled_message.h: the typed handlers' messages come back cleared with
// their capacity, per thread, within the count and byte bounds.
#include "ferry/detail/recycled_message.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "ferry/testing/buffer.pb.h"

namespace ferry {
namespace {

using testing::Buffer;
using Cache = detail::RecycledMessages<Buffer>;

TEST(RecycledMessage, ComesBackClearedWithItsStringCapacity) {
  const Buffer* first;
  const char* body;
  {
    detail::RecycledMessage<Buffer> msg;
    (*msg).set_body(std::string(64 * 1024, 'x'));
    first = msg.get();
    body = (*msg).body().data();
  }
  detail::RecycledMessage<Buffer> again;
  EXPECT_EQ(again.get(), first);
  EXPECT_TRUE((*again).body().empty()) << "not cleared";
  (*again).mutable_body()->assign(32 * 1024, 'y');  // fits the kept capacity: no new buffer
  EXPECT_EQ((*again).body().data(), body);
}

TEST(RecycledMessage, AMessageOverTheByteBudgetIsDeletedNotKept) {
  const Buffer* big;
  {
    detail::RecycledMessage<Buffer> msg;
    (*msg).set_body(std::string(Cache::kMaxRetainedBytes + 1, 'z'));
    big = msg.get();
  }
  detail::RecycledMessage<Buffer> next;
  // Allocation may reuse the address; the kept one would still hold the bytes' capacity.
  EXPECT_TRUE(next.get() != big || (*next).body().capacity() < Cache::kMaxRetainedBytes);
}

TEST(RecycledMessage, ABurstKeepsAtMostTheBudgetInBytes) {
  // Two messages of 60% of the budget each: the second no longer fits and is deleted.
  const std::size_t size = Cache::kMaxRetainedBytes / 10 * 6;
  {
    detail::RecycledMessage<Buffer> a, b;
    (*a).set_body(std::string(size, 'a'));
    (*b).set_body(std::string(size, 'b'));
  }
  detail::RecycledMessage<Buffer> x, y;
  const std::size_t kept = (*x).body().capacity() + (*y).body().capacity();
  EXPECT_GE(kept, size);
  EXPECT_LT(kept, 2 * size);
}

TEST(RecycledMessage, EachThreadHasItsOwn) {
  const Buffer* mine;
  {
    detail::RecycledMessage<Buffer> msg;
    mine = msg.get();
  }
  const Buffer* theirs = nullptr;
  std::thread([&] {
    detail::RecycledMessage<Buffer> msg;
    theirs = msg.get();
  }).join();
  EXPECT_NE(theirs, mine);
  detail::RecycledMessage<Buffer> back;
  EXPECT_EQ(back.get(), mine);
}

}  // namespace
}  // namespace ferry

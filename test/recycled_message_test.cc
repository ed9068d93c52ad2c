// Tests for ferry/detail/recycled_message.h: the typed handlers' messages live on the call's arena
// while their type's messages are small; otherwise they come back cleared with their capacity,
// per thread, within the count and byte bounds.
#include "ferry/detail/recycled_message.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "ferry/testing/buffer.pb.h"

namespace ferry::recycled_message_test {
namespace {

using testing::Buffer;
using testing::Nested;
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

// Each case runs in a thread of its own: which home a type's messages get depends on what that
// thread has seen of the type.
template <class Body>
void in_a_fresh_thread(Body body) {
  std::thread(body).join();
}

TEST(RecycledMessage, SmallMessagesWhoseClearFreesPartsLiveOnTheCallsArena) {
  in_a_fresh_thread([] {
    google::protobuf::Arena arena;
    for (int i = 0; i < 3; ++i) {
      detail::RecycledMessage<Nested> msg(&arena);
      EXPECT_EQ(msg.get()->GetArena(), &arena) << "call " << i;
      (*msg).mutable_part()->set_body(std::string(100, 'x'));
      (*msg).set_text("oneof");
    }
  });
}

TEST(RecycledMessage, AMessageWhoseClearKeepsItsPartsIsRecycledEvenWhenSmall) {
  in_a_fresh_thread([] {
    google::protobuf::Arena arena;
    const char* body;
    {
      detail::RecycledMessage<Buffer> msg(&arena);
      EXPECT_EQ(msg.get()->GetArena(), nullptr);
      (*msg).set_body(std::string(32, 'x'));  // past std::string's inline capacity
      body = (*msg).body().data();
    }
    detail::RecycledMessage<Buffer> again(&arena);
    (*again).mutable_body()->assign(32, 'y');
    EXPECT_EQ((*again).body().data(), body) << "the kept capacity was not reused";
  });
}

TEST(RecycledMessage, ALargeMessageMovesItsTypeOffTheArenaUntilManySmallOnesFollow) {
  in_a_fresh_thread([] {
    google::protobuf::Arena arena;
    {
      detail::RecycledMessage<Nested> msg(&arena);
      ASSERT_EQ(msg.get()->GetArena(), &arena);
      (*msg).mutable_part()->set_body(std::string(64 * 1024, 'x'));
    }
    // Now recycled, so that the next large body reuses the kept capacity.
    int calls_off_the_arena = 0;
    for (; calls_off_the_arena < 1000; ++calls_off_the_arena) {
      detail::RecycledMessage<Nested> msg(&arena);
      if (msg.get()->GetArena() == &arena) break;
      EXPECT_EQ(msg.get()->GetArena(), nullptr);
      (*msg).mutable_part()->set_body(std::string(10, 'y'));
    }
    // 64 KiB decays by 1/64 per message to the 256-byte bound in about 350 messages.
    EXPECT_GT(calls_off_the_arena, 300);
    EXPECT_LT(calls_off_the_arena, 400);
  });
}

TEST(RecycledMessage, WithoutAnArenaItIsAlwaysRecycled) {
  in_a_fresh_thread([] {
    detail::RecycledMessage<Buffer> msg(nullptr);
    EXPECT_EQ(msg.get()->GetArena(), nullptr);
  });
}

}  // namespace
}  // namespace ferry::recycled_message_test

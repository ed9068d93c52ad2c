// ferry/detail/block_cache.h: the buffer pool's per-thread cache, the inline fast path of taking
// and returning blocks (buffer layer, internal: not part of ferry's API; ferry/buffer_pool.h
// includes it).
#pragma once

#include <atomic>
#include <cstdint>

#include "ferry/detail/block.h"

namespace ferry {
namespace detail {

// The calling thread's idle blocks: the pool's fast path, inline so that taking and returning a
// block costs a few instructions and no call. buffer_pool.cc owns it: on the thread's first slow
// path it registers the cache (for stats) and opens it by setting limit; when the thread exits it
// empties and closes it again (limit 0). Before and after that, acquire finds no head and release
// no room, so both take the slow paths there (first use, empty or full cache, thread exit).
struct ThreadBlockCache {
  // One idle block in front of the list: a writer that takes a block and gives it back for each
  // message (encode, send, clear) touches only this slot. Read by stats() like count.
  std::atomic<Block*> spare{nullptr};
  Block* head = nullptr;
  // Blocks in the list (the spare not included). Written only by the owning thread (plain load +
  // store, no locked instruction); stats() reads it from other threads to count idle blocks, so
  // the pool keeps no per-block counters.
  std::atomic<std::uint32_t> count{0};
  std::uint32_t limit = 0;  // the list's bound while the cache is open, else 0
};

extern constinit thread_local ThreadBlockCache t_block_cache;
Block* acquire_block_slow();
void release_block_slow(Block* b) noexcept;

inline Block* acquire_block() {
  ThreadBlockCache& c = t_block_cache;
  Block* b = c.spare.load(std::memory_order_relaxed);
  if (b != nullptr) [[likely]] {
    c.spare.store(nullptr, std::memory_order_relaxed);
  } else if (b = c.head; b != nullptr) {
    c.head = b->next_free;
    c.count.store(c.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  } else {
    return acquire_block_slow();
  }
  b->refs.store(1, std::memory_order_relaxed);
  b->used = 0;
  return b;
}

inline void release_block(Block* b) noexcept {
  ThreadBlockCache& c = t_block_cache;
  // limit is 0 while the cache is closed: the spare, like the list, then takes nothing.
  if (c.spare.load(std::memory_order_relaxed) == nullptr && c.limit != 0) [[likely]] {
    c.spare.store(b, std::memory_order_relaxed);
    return;
  }
  const std::uint32_t count = c.count.load(std::memory_order_relaxed);
  if (count < c.limit) [[likely]] {
    b->next_free = c.head;
    c.head = b;
    c.count.store(count + 1, std::memory_order_relaxed);
    return;
  }
  release_block_slow(b);
}

}  // namespace detail
}  // namespace ferry

// ferry/detail/block.h: a pooled block and its reference count (buffer layer, internal: not
// part of ferry's API, installed because the inline hot paths of slices and the pool use it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry {
namespace detail {

// A pooled block: this header, then BufferPool::kBlockSize bytes of data. Reference-counted by the
// Slices that point into it; returned to the pool when the count drops to zero.
//
// The same header also counts the references to memory ferry does not own (Slice::external):
// such a "block" has no data of its own and a non-null release, which frees it instead of the
// pool taking it back.
struct Block {
  static constexpr std::size_t kHeaderSize = 64;  // keeps data() cache-line aligned

  std::atomic<std::uint32_t> refs{1};
  // Bytes handed out to the block's single writer (a SliceChain); data past it is free.
  std::uint32_t used = 0;
  Block* next_free = nullptr;
  // Null for pooled blocks. For an external one: what frees it (and lets go of its owner).
  void (*release)(Block*) = nullptr;

  std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(this) + kHeaderSize; }
};

// Returns b to the pool of the calling thread. Call only when no reference is left, and only for
// a pooled block (one this code acquired itself); release_shared_block takes any block.
inline void release_block(Block* b) noexcept;
// BufferPool::instance().acquire() without the singleton's guard: the hot path's way in.
inline Block* acquire_block();

// Takes one more reference to b. Always an atomic increment: the caller's own reference may be
// a Slice that other threads copy at the same time (a const body served on several I/O threads),
// and a count read as 1 then stored as 2 by two threads at once would lose one reference.
inline void block_ref(Block* b) noexcept { b->refs.fetch_add(1, std::memory_order_relaxed); }

// block_ref for the block a SliceChain writes into (its write_block_), which the chain holds a
// reference to and mutates under its single owner: a count of one is then that reference alone,
// which no other thread can copy, so a plain store does (the common case of a writer slicing its
// fresh block). Never for a block reached through a Slice another thread may be copying.
inline void block_ref_writer(Block* b) noexcept {
  if (b->refs.load(std::memory_order_relaxed) == 1) {
    b->refs.store(2, std::memory_order_relaxed);
  } else {
    b->refs.fetch_add(1, std::memory_order_relaxed);
  }
}

// Frees b, whose last reference is gone: back to the pool, or through its own release when it
// counts references to external memory.
inline void release_shared_block(Block* b) noexcept {
  if (b->release != nullptr) [[unlikely]] {
    b->release(b);
    return;
  }
  release_block(b);
}

inline void block_unref(Block* b) noexcept {
  // A count of one is ours alone: nobody else can add a reference, so skip the atomic decrement.
  if (b->refs.load(std::memory_order_acquire) == 1 ||
      b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    release_shared_block(b);
  }
}

}  // namespace detail
}  // namespace ferry

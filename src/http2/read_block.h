// The block a connection reads into next (http2 layer, private; both HTTP engines): the last
// one again when no slice of its bytes is still held, else a fresh one from the pool (the old
// one lives on in the slices that hold it).
#pragma once

#include <atomic>

#include "ferry/buffer_pool.h"

namespace ferry::http2 {

inline detail::Block* next_read_block(detail::Block* last) {
  if (last != nullptr && last->refs.load(std::memory_order_acquire) != 1) {
    detail::block_unref(last);
    last = nullptr;
  }
  if (last == nullptr) last = BufferPool::instance().acquire();
  last->used = 0;
  return last;
}

}  // namespace ferry::http2

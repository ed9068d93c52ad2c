// Implementation of the out-of-line parts of ferry/slice.h.
#include "ferry/slice.h"

#include <cassert>
#include <cstring>

namespace ferry {

Slice Slice::copy_of(const void* data, std::size_t size) {
  assert(size <= BufferPool::kBlockSize);
  detail::Block* block = BufferPool::instance().acquire();
  if (size > 0) std::memcpy(block->data(), data, size);
  block->used = static_cast<std::uint32_t>(size);
  Slice s;
  s.block_ = block;  // adopts the acquired reference
  s.data_ = block->data();
  s.size_ = size;
  return s;
}

}  // namespace ferry

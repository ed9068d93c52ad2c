// Implementation of the out-of-line parts of ferry/slice.h.
#include "ferry/slice.h"

#include <cassert>
#include <cstring>

namespace ferry {

namespace {

// The reference count of an external slice's bytes: a Block header (what Slice and SliceChain
// count references with) that holds the owner instead of data.
struct ExternalBlock : detail::Block {
  std::shared_ptr<const void> owner;

  static void free(detail::Block* b) { delete static_cast<ExternalBlock*>(b); }
};

}  // namespace

Slice Slice::external(const void* data, std::size_t size, std::shared_ptr<const void> owner) {
  auto* block = new ExternalBlock;
  block->release = &ExternalBlock::free;
  block->owner = std::move(owner);
  Slice s;
  s.block_ = block;  // adopts the count of one the block starts with
  s.data_ = static_cast<const std::uint8_t*>(data);
  s.size_ = size;
  return s;
}

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

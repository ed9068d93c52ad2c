// Implementation of src/codec/chain_streams.h.
#include "codec/chain_streams.h"

#include <algorithm>
#include <cassert>

namespace ferry::detail {

bool ChainOutputStream::Next(void** data, int* size) {
  finish();
  std::size_t n = chain_.tail_room();
  if (n == 0) n = BufferPool::kBlockSize;
  *data = chain_.reserve(n);
  *size = static_cast<int>(n);
  pending_ = n;
  byte_count_ += static_cast<int64_t>(n);
  return true;
}

void ChainOutputStream::BackUp(int count) {
  assert(static_cast<std::size_t>(count) <= pending_);
  pending_ -= static_cast<std::size_t>(count);
  byte_count_ -= count;
}

void ChainOutputStream::finish() {
  chain_.commit(pending_);
  pending_ = 0;
}

bool ChainInputStream::Next(const void** data, int* size) {
  if (backed_ > 0) {
    const Slice& s = chain_.slice(index_ - 1);
    *data = s.data() + s.size() - backed_;
    *size = static_cast<int>(backed_);
    byte_count_ += static_cast<int64_t>(backed_);
    backed_ = 0;
    return true;
  }
  if (index_ == chain_.slice_count()) return false;
  const Slice& s = chain_.slice(index_++);
  *data = s.data();
  *size = static_cast<int>(s.size());
  byte_count_ += static_cast<int64_t>(s.size());
  return true;
}

void ChainInputStream::BackUp(int count) {
  backed_ += static_cast<std::size_t>(count);
  byte_count_ -= count;
}

bool ChainInputStream::Skip(int count) {
  const void* data;
  int size;
  while (count > 0) {
    if (!Next(&data, &size)) return false;
    if (size > count) {
      BackUp(size - count);
      return true;
    }
    count -= size;
  }
  return true;
}

}  // namespace ferry::detail

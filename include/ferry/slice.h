// ferry/slice.h: a reference-counted view of bytes in a pooled block (buffer layer). Copying a
// Slice shares the block (one atomic increment); the block returns to the pool when the last
// Slice over it is gone. This is how bytes move through ferry without being copied.
// Threading: one const Slice may be copied on several threads at once (a body held once and sent
// from several I/O threads); a Slice object is mutated (assigned, its prefix removed) by one
// thread at a time, and copies may be dropped on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "ferry/buffer_pool.h"

namespace ferry {

namespace detail {
class SliceVector;
}

class Slice {
 public:
  Slice() = default;

  // A view of [data, data + size) inside block, taking one reference to block.
  Slice(detail::Block* block, const std::uint8_t* data, std::size_t size) noexcept
      : block_(block), data_(data), size_(size) {
    if (block_ != nullptr) detail::block_ref(block_);
  }

  // A view of memory ferry does not own (static data, or a buffer the caller keeps alive for as
  // long as any copy of the Slice exists). No reference counting.
  static Slice unowned(const void* data, std::size_t size) noexcept {
    Slice s;
    s.data_ = static_cast<const std::uint8_t*>(data);
    s.size_ = size;
    return s;
  }

  // A view of memory ferry does not own, kept alive by owner (a shared_ptr to whatever holds
  // the bytes: a string, a vector, a file mapping) until the last Slice over them is gone:
  // copies of the Slice share one reference count, as for pooled blocks, and the owner is
  // released on the thread that drops the last one (for a sent message, the connection's I/O
  // thread once the bytes are written). This is how a large body is sent by reference
  // (ServerContext::write_raw, ClientStream::write_raw): any size, one allocation here and none
  // per copy, per send or per DATA frame (each frame takes up to 16 KiB of it by reference).
  // The bytes must not change while a Slice over them lives.
  static Slice external(const void* data, std::size_t size, std::shared_ptr<const void> owner);

  // Copies bytes into a new pooled block; size must be at most BufferPool::kBlockSize.
  static Slice copy_of(const void* data, std::size_t size);

  Slice(const Slice& other) noexcept
      : block_(other.block_), data_(other.data_), size_(other.size_) {
    if (block_ != nullptr) detail::block_ref(block_);
  }
  Slice(Slice&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  Slice& operator=(Slice other) noexcept {
    swap(other);
    return *this;
  }
  ~Slice() {
    if (block_ != nullptr) detail::block_unref(block_);
  }

  void swap(Slice& other) noexcept {
    std::swap(block_, other.block_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

  // The block this slice keeps alive; null for unowned slices.
  detail::Block* block() const { return block_; }

  // A view of [offset, offset + length) of this slice, sharing the block.
  Slice subslice(std::size_t offset, std::size_t length) const {
    return Slice(block_, data_ + offset, length);
  }
  void remove_prefix(std::size_t n) {
    data_ += n;
    size_ -= n;
  }
  void remove_suffix(std::size_t n) { size_ -= n; }

 private:
  friend class SliceChain;
  friend class detail::SliceVector;

  detail::Block* block_ = nullptr;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ferry

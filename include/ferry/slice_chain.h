// ferry/slice_chain.h: an ordered sequence of Slices, the unit in which ferry moves bytes (buffer
// layer). Writers reserve contiguous room at its tail and serialize straight into it; readers
// consume from the front or split the front off without copying; the socket layer gathers it
// into asio buffers for one writev.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "asio/buffer.hpp"
#include "ferry/slice.h"

namespace ferry {

// Not thread-safe: one owner at a time (it may move between threads). Move-only; share() makes a
// second chain over the same blocks.
class SliceChain {
 public:
  SliceChain() = default;
  SliceChain(SliceChain&& other) noexcept;
  SliceChain& operator=(SliceChain&& other) noexcept;
  SliceChain(const SliceChain&) = delete;
  SliceChain& operator=(const SliceChain&) = delete;
  ~SliceChain();

  // Total bytes across the slices.
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t slice_count() const { return slices_.size(); }
  const Slice& slice(std::size_t i) const { return slices_[i]; }
  auto begin() const { return slices_.begin(); }
  auto end() const { return slices_.end(); }

  // Appends bytes by reference.
  void append(Slice s);
  void append(SliceChain&& other);
  // Appends a copy of [data, data + size), packed into the tail block and further pooled blocks.
  void append_copy(const void* data, std::size_t size);

  // Returns n (1 <= n <= BufferPool::kBlockSize) contiguous writable bytes at the end of the
  // chain: the free tail of the block this chain writes into when it has room, else a new block
  // (the rest of the old one is abandoned). Nothing is part of the chain until commit(k), k <= n.
  // Consecutive small reserve/commit pairs pack many messages into one block.
  std::uint8_t* reserve(std::size_t n);
  void commit(std::size_t n);

  // Free bytes left in the block this chain writes into (0 when it has none).
  std::size_t tail_room() const;

  // Removes the first n bytes (n <= size()) and returns them as a chain sharing the blocks.
  SliceChain split_front(std::size_t n);
  // Drops the first n bytes (n <= size()).
  void consume(std::size_t n);
  // Drops everything, including the block this chain writes into.
  void clear();

  // A second chain over the same bytes (shares the blocks; only this one keeps writing).
  SliceChain share() const;

  // Copies n bytes starting at offset into dst (offset + n <= size()).
  void copy_to(std::size_t offset, std::size_t n, void* dst) const;
  // Copies the bytes out; meant for tests and diagnostics, not the data path.
  std::string to_string() const;

  // Appends one asio::const_buffer per slice to out, for a gathered write.
  void append_buffers(std::vector<asio::const_buffer>& out) const;

 private:
  absl::InlinedVector<Slice, 2> slices_;
  std::size_t size_ = 0;
  // The block reserve() writes into; this chain holds one reference to it.
  detail::Block* write_block_ = nullptr;
};

}  // namespace ferry

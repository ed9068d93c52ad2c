// ferry/slice_chain.h: an ordered sequence of Slices, the unit in which ferry moves bytes (buffer
// layer). Writers reserve contiguous room at its tail and serialize straight into it; readers
// consume from the front or split the front off without copying; the socket layer gathers it
// into asio buffers for one writev.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "asio/buffer.hpp"
#include "ferry/detail/slice_vector.h"
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

  // Appends bytes by reference (a copy of s shares its block: one reference more).
  void append(const Slice& s) {
    if (s.empty()) return;
    size_ += s.size();
    slices_.push_back(s);
  }
  void append(Slice&& s) {
    if (s.empty()) return;
    size_ += s.size();
    slices_.push_back(std::move(s));
  }
  void append(SliceChain&& other);
  // Appends a copy of [data, data + size), packed into the tail block and further pooled blocks.
  void append_copy(const void* data, std::size_t size);

  // Returns n (1 <= n <= BufferPool::kBlockSize) contiguous writable bytes at the end of the
  // chain: the free tail of the block this chain writes into when it has room, else a new block
  // (the rest of the old one is abandoned). Nothing is part of the chain until commit(k), k <= n.
  // Consecutive small reserve/commit pairs pack many messages into one block.
  std::uint8_t* reserve(std::size_t n) {
    detail::Block* b = write_block_;
    assert(n > 0 && n <= BufferPool::kBlockSize);
    if (b == nullptr) {  // a cleared or fresh chain: a block straight from the thread's cache
      b = write_block_ = detail::acquire_block();
      return b->data();
    }
    if (BufferPool::kBlockSize - b->used < n) return reserve_in_new_block(n);
    return b->data() + b->used;
  }
  void commit(std::size_t n) {
    if (n == 0) return;
    detail::Block* b = write_block_;
    std::uint8_t* start = b->data() + b->used;
    b->used += static_cast<std::uint32_t>(n);
    size_ += n;
    // Grow the last slice when it ends where this write starts; else begin a new one.
    if (slices_.empty()) {
      slices_.emplace_first(b, start, n);
      return;
    }
    Slice& last = slices_.back();
    if (last.block_ == b && last.data_ + last.size_ == start) {
      last.size_ += n;
      return;
    }
    slices_.emplace_back(b, start, n);
  }

  // Free bytes left in the block this chain writes into (0 when it has none).
  std::size_t tail_room() const {
    return write_block_ == nullptr ? 0 : BufferPool::kBlockSize - write_block_->used;
  }

  // Removes the first n bytes (n <= size()) and returns them as a chain sharing the blocks.
  SliceChain split_front(std::size_t n);
  // Moves the first n bytes (n <= size()) to dst, replacing what dst held; dst keeps its slice
  // storage, so a reused dst allocates nothing. Bytes inside the first slice move without
  // touching a reference count when they are all of it.
  void move_front_to(std::size_t n, SliceChain& dst) {
    if (!slices_.empty() && slices_[0].size() == n) {
      Slice& front = slices_[0];
      if (dst.write_block_ == nullptr && dst.slices_.size() == 1) {
        // The steady state of a reader reusing dst: its one slice is replaced in place.
        Slice& old = dst.slices_[0];
        detail::Block* const old_block = old.block_;
        old.block_ = std::exchange(front.block_, nullptr);
        old.data_ = front.data_;
        old.size_ = front.size_;
        if (old_block != nullptr) detail::block_unref(old_block);
      } else {
        dst.clear();
        dst.slices_.push_back(std::move(front));
      }
      if (slices_.size() == 1) {
        slices_.forget_all();  // its one slice was moved out: nothing left to destroy
      } else {
        slices_.erase_front(1);
      }
      dst.size_ = n;
      size_ -= n;
      return;
    }
    dst.clear();
    move_front_into(n, dst);
  }
  // Drops bytes from the end, leaving the first new_size (<= size()).
  void truncate(std::size_t new_size);
  // Copies the last n bytes (n <= size()) into the block this chain writes into (and further
  // pooled blocks), replacing the slices they were in: the blocks those slices kept alive are let
  // go. What a chain built by reference from a peer's small reads does to stop pinning a 64 KiB
  // block per read (detail::LooseTail decides when). Costs a copy of the n bytes.
  void repack_back(std::size_t n);
  // Copies all the bytes (at most BufferPool::kBlockSize) into one run of a block that the
  // calling thread's small chains share, replacing every slice and the block this chain writes
  // into: a chain of a few bytes then costs its bytes, not a block of its own (detail::LooseTail
  // decides when). Costs a copy of size() bytes.
  void repack_shared();
  // Drops the first n bytes (n <= size()).
  void consume(std::size_t n) {
    if (!slices_.empty() && slices_[0].size() > n) {
      slices_[0].remove_prefix(n);
      size_ -= n;
      return;
    }
    consume_slow(n);
  }
  // Drops everything, including the block this chain writes into. Keeps the slice storage.
  void clear() {
    detail::Block* const wb = write_block_;
    if (wb != nullptr && slices_.size() == 1 && slices_[0].block_ == wb &&
        wb->refs.load(std::memory_order_acquire) == 2) {
      // One message in a block nobody else references (a writer's usual state): the block goes
      // straight back to the pool, no atomic read-modify-write, no call.
      write_block_ = nullptr;
      slices_.forget_all();
      size_ = 0;
      detail::release_block(wb);
      return;
    }
    if (wb == nullptr && slices_.empty()) return;
    clear_slow();
  }

  // A second chain over the same bytes (shares the blocks; only this one keeps writing).
  SliceChain share() const;

  // Copies n bytes starting at offset into dst (offset + n <= size()).
  void copy_to(std::size_t offset, std::size_t n, void* dst) const;
  // Copies the bytes out; meant for tests and diagnostics, not the data path.
  std::string to_string() const;

  // Appends one asio::const_buffer per slice to out, for a gathered write.
  void append_buffers(std::vector<asio::const_buffer>& out) const;

 private:
  // Moves the first n bytes into out, which must be empty.
  void move_front_into(std::size_t n, SliceChain& out);
  std::uint8_t* reserve_in_new_block(std::size_t n);
  void clear_slow();
  void clear_slices();  // clear() of more than one slice
  void consume_slow(std::size_t n);

  detail::SliceVector slices_;
  std::size_t size_ = 0;
  // The block reserve() writes into; this chain holds one reference to it.
  detail::Block* write_block_ = nullptr;
};

namespace detail {

// The bytes a chain took by reference at its end (slices of blocks that others filled: a
// connection's reads) since it last copied, and how many blocks they keep alive. A chain that
// grows a few bytes per read (a peer trickling a message) would pin a whole 64 KiB block per read;
// compact() copies such bytes into the chain's own packed blocks once the blocks they pin
// outweigh them, so that what the chain holds stays within a few bytes per byte. A chain whose
// bytes arrive in full reads is never copied. Not thread-safe: the chain's owner's.
class LooseTail {
 public:
  // s was just appended by reference to the chain (not empty).
  void note(const Slice& s) {
    bytes_ += s.size();
    ++slices_;
    if (s.block() != last_block_) {
      ++blocks_;
      last_block_ = s.block();
    }
  }
  // The chain was emptied (or never took anything by reference).
  void reset() { *this = LooseTail(); }

  // Copies the loose bytes into chain's own blocks when the blocks they pin hold more than
  // kMaxPinnedPerByte times their bytes, and either two or more blocks would be let go or the
  // chain's own block has room for them (then the copy takes no new block). The front of chain
  // may have been consumed since the last call (its own bytes go first). Returns whether it
  // copied. Each byte is copied at most once: copied bytes are the chain's own.
  bool compact(SliceChain& chain) {
    clamp(chain);
    if (blocks_ == 0) return false;
    // A few bytes in all and no block of the chain's own (a stream's first piece of a message,
    // or one trickled so far): copied whole into a block the thread's small chains share, so
    // that a peer sending a few bytes on each of many streams does not pin a block per stream.
    // Whole, so that the chain stays one slice however many pieces it took.
    if (chain.size() <= kShareBelow && chain.tail_room() == 0) {
      chain.repack_shared();
      reset();
      return true;
    }
    if (blocks_ * BufferPool::kBlockSize <= kMaxPinnedPerByte * bytes_) return false;
    if (blocks_ < 2 && chain.tail_room() < bytes_) return false;
    chain.repack_back(bytes_);
    reset();
    return true;
  }
  // Copies the loose bytes into the chain's own blocks whatever they pin.
  void compact_all(SliceChain& chain) {
    clamp(chain);
    if (bytes_ > 0) chain.repack_back(bytes_);
    reset();
  }
  // What chain keeps alive, as far as this knows: the loose bytes' blocks in full, the chain's
  // own bytes, and the free rest of the block it writes into.
  std::size_t pinned_bytes(const SliceChain& chain) const {
    const std::size_t loose = std::min(bytes_, chain.size());
    return std::min(blocks_, slices_) * BufferPool::kBlockSize + (chain.size() - loose) +
           chain.tail_room();
  }

  // Blocks pinned per loose byte beyond which they are copied.
  static constexpr std::size_t kMaxPinnedPerByte = 2;
  // Chains up to this size share their thread's block (each copy of one costs at most this).
  static constexpr std::size_t kShareBelow = BufferPool::kBlockSize / 16;

 private:
  // What the chain still holds of the loose bytes: its front is consumed first, own bytes
  // before loose ones, so what went beyond the own bytes was loose.
  void clamp(const SliceChain& chain) {
    slices_ = std::min(slices_, chain.slice_count());
    bytes_ = std::min(bytes_, chain.size());
    blocks_ = std::min(blocks_, slices_);
    if (bytes_ == 0) reset();
  }

  const Block* last_block_ = nullptr;  // compared only, never dereferenced
  std::size_t blocks_ = 0;
  std::size_t slices_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace detail

}  // namespace ferry

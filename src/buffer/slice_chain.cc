// Implementation of ferry/slice_chain.h.
#include "ferry/slice_chain.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace ferry {

SliceChain::SliceChain(SliceChain&& other) noexcept
    : slices_(std::move(other.slices_)),
      size_(std::exchange(other.size_, 0)),
      write_block_(std::exchange(other.write_block_, nullptr)) {}

SliceChain& SliceChain::operator=(SliceChain&& other) noexcept {
  if (this != &other) {
    clear();
    slices_ = std::move(other.slices_);
    size_ = std::exchange(other.size_, 0);
    write_block_ = std::exchange(other.write_block_, nullptr);
  }
  return *this;
}

SliceChain::~SliceChain() {
  if (write_block_ != nullptr) detail::block_unref(write_block_);
}

void SliceChain::append(SliceChain&& other) {
  std::size_t first = 0;
  if (!slices_.empty() && !other.slices_.empty()) {
    // Messages encoded back to back into one block arrive as adjacent slices of it: the last
    // slice grows over the next one instead of adding a slice (fewer slices, fewer iovecs).
    Slice& last = slices_.back();
    const Slice& next = other.slices_[0];
    if (last.block_ == next.block_ && last.data_ + last.size_ == next.data_) {
      last.size_ += next.size_;
      first = 1;  // next's reference to the block goes with other's slices below
    }
  }
  slices_.reserve(slices_.size() + other.slices_.size() - first);
  for (std::size_t i = first; i < other.slices_.size(); ++i) {
    slices_.push_back(std::move(other.slices_[i]));
  }
  other.slices_.clear();
  size_ += std::exchange(other.size_, 0);
}

void SliceChain::append_copy(const void* data, std::size_t size) {
  const auto* src = static_cast<const std::uint8_t*>(data);
  while (size > 0) {
    std::size_t n = tail_room();
    if (n == 0) n = BufferPool::kBlockSize;
    n = std::min(n, size);
    std::memcpy(reserve(n), src, n);
    commit(n);
    src += n;
    size -= n;
  }
}

std::uint8_t* SliceChain::reserve_in_new_block(std::size_t n) {
  assert(n > 0 && n <= BufferPool::kBlockSize);
  (void)n;
  if (write_block_ != nullptr) detail::block_unref(write_block_);
  write_block_ = detail::acquire_block();
  return write_block_->data();
}

SliceChain SliceChain::split_front(std::size_t n) {
  SliceChain front;
  move_front_into(n, front);
  return front;
}

void SliceChain::move_front_into(std::size_t n, SliceChain& out) {
  assert(n <= size_ && out.empty());
  std::size_t whole = 0;  // slices that move over entirely
  std::size_t left = n;
  while (whole < slices_.size() && slices_[whole].size() <= left) {
    left -= slices_[whole].size();
    ++whole;
  }
  out.slices_.reserve(whole + 1);
  for (std::size_t i = 0; i < whole; ++i) out.slices_.push_back(std::move(slices_[i]));
  if (left > 0) {
    out.slices_.push_back(slices_[whole].subslice(0, left));
    slices_[whole].remove_prefix(left);
  }
  slices_.erase_front(whole);
  out.size_ = n;
  size_ -= n;
}

void SliceChain::truncate(std::size_t new_size) {
  assert(new_size <= size_);
  std::size_t drop = size_ - new_size;
  while (drop > 0) {
    Slice& last = slices_.back();
    if (last.size() <= drop) {
      drop -= last.size();
      slices_.pop_back();
    } else {
      last.remove_suffix(drop);
      drop = 0;
    }
  }
  size_ = new_size;
}

void SliceChain::repack_back(std::size_t n) {
  assert(n <= size_);
  if (n == 0) return;
  const std::size_t keep = size_ - n;
  std::size_t first = 0;  // the first slice holding any of the last n bytes
  std::size_t before = 0;
  while (before + slices_[first].size() <= keep) before += slices_[first++].size();
  // References to the bytes while the chain lets go of its own, so that the copy reads them.
  detail::SliceVector tail;
  tail.reserve(slices_.size() - first);
  for (std::size_t i = first; i < slices_.size(); ++i) tail.push_back(slices_[i]);
  truncate(keep);
  std::size_t skip = keep - before;
  for (const Slice& s : tail) {
    append_copy(s.data() + skip, s.size() - skip);
    skip = 0;
  }
}

namespace {

// The block the calling thread's small chains share (repack_shared): consumed as it is handed
// out, so it holds only its write block, which the next copies go on filling.
SliceChain& shared_pack() {
  thread_local SliceChain pack;
  return pack;
}

}  // namespace

void SliceChain::repack_shared() {
  if (size_ == 0) return;
  assert(size_ <= BufferPool::kBlockSize);
  SliceChain& pack = shared_pack();
  const std::size_t n = size_;
  copy_to(0, n, pack.reserve(n));
  pack.commit(n);
  *this = pack.split_front(n);
}

void SliceChain::consume_slow(std::size_t n) {
  assert(n <= size_);
  size_ -= n;
  std::size_t whole = 0;
  while (n > 0 && slices_[whole].size() <= n) {
    n -= slices_[whole].size();
    ++whole;
  }
  if (n > 0) slices_[whole].remove_prefix(n);
  slices_.erase_front(whole);
}

namespace {

// Drops n references to b, all held by the caller. When they are all b has, nobody else can see
// it: it goes back to the pool without an atomic decrement.
inline void drop_refs(detail::Block* b, std::uint32_t n) noexcept {
  if (b->refs.load(std::memory_order_acquire) == n ||
      b->refs.fetch_sub(n, std::memory_order_acq_rel) == n) {
    detail::release_shared_block(b);
  }
}

}  // namespace

void SliceChain::clear_slow() {
  if (slices_.size() > 1) return clear_slices();
  // The usual case, one message or none: its slice is either in the write block (an encoder's
  // chain) or in a block the chain does not write into (a decoded payload).
  detail::Block* const wb = std::exchange(write_block_, nullptr);
  detail::Block* const b = slices_.empty() ? nullptr : slices_[0].block_;
  slices_.forget_all();
  size_ = 0;
  if (b == wb) {
    if (wb != nullptr) drop_refs(wb, 2);
    return;
  }
  if (b != nullptr) detail::block_unref(b);
  if (wb != nullptr) drop_refs(wb, 1);
}

void SliceChain::clear_slices() {
  // One pass: slices of other blocks drop their reference as they go; those of the write block
  // are only counted, and dropped at once with the chain's own reference.
  detail::Block* const wb = std::exchange(write_block_, nullptr);
  std::uint32_t mine = 1;
  for (Slice& s : slices_) {
    if (s.block_ == wb) {
      ++mine;
    } else if (s.block_ != nullptr) {
      detail::block_unref(s.block_);
    }
  }
  slices_.forget_all();
  size_ = 0;
  if (wb != nullptr) drop_refs(wb, mine);
}

SliceChain SliceChain::share() const {
  SliceChain copy;
  copy.slices_ = detail::SliceVector(slices_);
  copy.size_ = size_;
  return copy;
}

void SliceChain::copy_to(std::size_t offset, std::size_t n, void* dst) const {
  assert(offset + n <= size_);
  auto* out = static_cast<std::uint8_t*>(dst);
  for (const Slice& s : slices_) {
    if (n == 0) break;
    if (offset >= s.size()) {
      offset -= s.size();
      continue;
    }
    std::size_t take = std::min(n, s.size() - offset);
    std::memcpy(out, s.data() + offset, take);
    out += take;
    n -= take;
    offset = 0;
  }
}

std::string SliceChain::to_string() const {
  std::string out(size_, '\0');
  copy_to(0, size_, out.data());
  return out;
}

void SliceChain::append_buffers(std::vector<asio::const_buffer>& out) const {
  for (const Slice& s : slices_) out.emplace_back(s.data(), s.size());
}

}  // namespace ferry

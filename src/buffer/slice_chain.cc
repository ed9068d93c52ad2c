// Implementation of ferry/slice_chain.h.
#include "ferry/slice_chain.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace ferry {

SliceChain::SliceChain(SliceChain&& other) noexcept
    : slices_(std::move(other.slices_)),
      size_(std::exchange(other.size_, 0)),
      write_block_(std::exchange(other.write_block_, nullptr)) {
  other.slices_.clear();
}

SliceChain& SliceChain::operator=(SliceChain&& other) noexcept {
  if (this != &other) {
    clear();
    slices_ = std::move(other.slices_);
    other.slices_.clear();
    size_ = std::exchange(other.size_, 0);
    write_block_ = std::exchange(other.write_block_, nullptr);
  }
  return *this;
}

SliceChain::~SliceChain() {
  if (write_block_ != nullptr) detail::block_unref(write_block_);
}

void SliceChain::append(Slice s) {
  if (s.empty()) return;
  size_ += s.size();
  slices_.push_back(std::move(s));
}

void SliceChain::append(SliceChain&& other) {
  if (slices_.empty()) {
    slices_ = std::move(other.slices_);
  } else {
    for (Slice& s : other.slices_) slices_.push_back(std::move(s));
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

std::size_t SliceChain::tail_room() const {
  return write_block_ == nullptr ? 0 : BufferPool::kBlockSize - write_block_->used;
}

std::uint8_t* SliceChain::reserve(std::size_t n) {
  assert(n > 0 && n <= BufferPool::kBlockSize);
  if (tail_room() < n) {
    if (write_block_ != nullptr) detail::block_unref(write_block_);
    write_block_ = BufferPool::instance().acquire();
  }
  return write_block_->data() + write_block_->used;
}

void SliceChain::commit(std::size_t n) {
  if (n == 0) return;
  assert(write_block_ != nullptr && n <= tail_room());
  std::uint8_t* start = write_block_->data() + write_block_->used;
  write_block_->used += static_cast<std::uint32_t>(n);
  size_ += n;
  // Grow the last slice when it ends where this write starts; else begin a new one.
  if (!slices_.empty()) {
    Slice& last = slices_.back();
    if (last.block_ == write_block_ && last.data_ + last.size_ == start) {
      last.size_ += n;
      return;
    }
  }
  slices_.push_back(Slice(write_block_, start, n));
}

SliceChain SliceChain::split_front(std::size_t n) {
  assert(n <= size_);
  SliceChain front;
  std::size_t whole = 0;  // slices that move over entirely
  std::size_t left = n;
  while (whole < slices_.size() && slices_[whole].size() <= left) {
    left -= slices_[whole].size();
    ++whole;
  }
  for (std::size_t i = 0; i < whole; ++i) front.slices_.push_back(std::move(slices_[i]));
  if (left > 0) {
    front.slices_.push_back(slices_[whole].subslice(0, left));
    slices_[whole].remove_prefix(left);
  }
  slices_.erase(slices_.begin(), slices_.begin() + static_cast<std::ptrdiff_t>(whole));
  front.size_ = n;
  size_ -= n;
  return front;
}

void SliceChain::consume(std::size_t n) {
  assert(n <= size_);
  size_ -= n;
  std::size_t whole = 0;
  while (n > 0 && slices_[whole].size() <= n) {
    n -= slices_[whole].size();
    ++whole;
  }
  if (n > 0) slices_[whole].remove_prefix(n);
  slices_.erase(slices_.begin(), slices_.begin() + static_cast<std::ptrdiff_t>(whole));
}

void SliceChain::clear() {
  slices_.clear();
  size_ = 0;
  if (write_block_ != nullptr) detail::block_unref(std::exchange(write_block_, nullptr));
}

SliceChain SliceChain::share() const {
  SliceChain copy;
  copy.slices_ = slices_;
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

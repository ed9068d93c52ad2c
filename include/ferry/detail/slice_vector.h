// ferry/detail/slice_vector.h: the slice storage of a SliceChain (buffer layer, internal): a
// vector of Slices with two inline slots, growing on the heap, that never gives its storage back
// while it lives and erases from the front cheaply. absl::InlinedVector's clear() frees the heap
// storage and its generic erase costs more than the rest of a small message's encode.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include "ferry/slice.h"

namespace ferry::detail {

class SliceVector {
 public:
  SliceVector() = default;
  SliceVector(const SliceVector& other) { append_copies(other); }
  SliceVector& operator=(const SliceVector&) = delete;
  SliceVector(SliceVector&& other) noexcept { take(other); }
  SliceVector& operator=(SliceVector&& other) noexcept {
    if (this != &other) {
      destroy_all();
      release_storage();
      take(other);
    }
    return *this;
  }
  ~SliceVector() {
    destroy_all();
    release_storage();
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Slice& operator[](std::size_t i) { return data_[i]; }
  const Slice& operator[](std::size_t i) const { return data_[i]; }
  Slice& back() { return data_[size_ - 1]; }
  const Slice* begin() const { return data_; }
  const Slice* end() const { return data_ + size_; }
  Slice* begin() { return data_; }
  Slice* end() { return data_ + size_; }

  // s may be one of this vector's own slices (chain.append(chain.slice(0))): it is taken
  // before growing frees the storage it lives in.
  void push_back(Slice&& s) {
    if (size_ == capacity_) {
      Slice taken(std::move(s));
      grow(capacity_ * 2);
      new (data_ + size_) Slice(std::move(taken));
    } else {
      new (data_ + size_) Slice(std::move(s));
    }
    ++size_;
  }
  void push_back(const Slice& s) {
    if (size_ == capacity_) {
      Slice copy(s);
      grow(capacity_ * 2);
      new (data_ + size_) Slice(std::move(copy));
    } else {
      new (data_ + size_) Slice(s);
    }
    ++size_;
  }
  // Appends a slice over [data, data + size) of block (not null), taking one reference to it: a
  // Slice constructed in place, without the temporary and its null checks. block is the one the
  // owning SliceChain writes into (detail::block_ref_writer's rule).
  void emplace_back(Block* block, const std::uint8_t* data, std::size_t size) {
    if (size_ == capacity_) grow(capacity_ * 2);
    block_ref_writer(block);  // after the only step that can throw
    Slice* s = new (data_ + size_) Slice;
    s->block_ = block;
    s->data_ = data;
    s->size_ = size;
    ++size_;
  }
  // emplace_back into an empty vector, which always has room.
  void emplace_first(Block* block, const std::uint8_t* data, std::size_t size) {
    block_ref_writer(block);
    Slice* s = new (data_) Slice;
    s->block_ = block;
    s->data_ = data;
    s->size_ = size;
    size_ = 1;
  }
  // Forgets every slice without destroying it: for an owner that has already dropped each one's
  // reference itself.
  void forget_all() { size_ = 0; }
  void pop_back() {
    --size_;
    data_[size_].~Slice();
  }
  // Room for n slices. Grows geometrically: a chain appended to one slice at a time (a stream's
  // outbound queue) reallocated on every append when this grew to exactly n.
  void reserve(std::size_t n) {
    if (n > capacity_) grow(n > capacity_ * 2 ? n : capacity_ * 2);
  }
  // Destroys every slice; keeps the storage.
  void clear() { destroy_all(); }
  // Destroys the first n slices and moves the rest to the front.
  void erase_front(std::size_t n) {
    if (n == 0) return;
    for (std::size_t i = 0; i < n; ++i) data_[i].~Slice();
    for (std::size_t i = n; i < size_; ++i) {
      new (data_ + i - n) Slice(std::move(data_[i]));
      data_[i].~Slice();
    }
    size_ -= n;
  }

 private:
  static constexpr std::size_t kInline = 2;

  void destroy_all() {
    for (std::size_t i = 0; i < size_; ++i) data_[i].~Slice();
    size_ = 0;
  }
  void release_storage() {
    if (data_ != inline_slots()) std::free(data_);
    data_ = inline_slots();
    capacity_ = kInline;
  }
  void grow(std::size_t capacity) {
    auto* bigger = static_cast<Slice*>(std::malloc(capacity * sizeof(Slice)));
    if (bigger == nullptr) throw std::bad_alloc();
    for (std::size_t i = 0; i < size_; ++i) {
      new (bigger + i) Slice(std::move(data_[i]));
      data_[i].~Slice();
    }
    if (data_ != inline_slots()) std::free(data_);
    data_ = bigger;
    capacity_ = capacity;
  }
  void take(SliceVector& other) {
    if (other.data_ == other.inline_slots()) {
      data_ = inline_slots();
      capacity_ = kInline;
      size_ = 0;
      for (std::size_t i = 0; i < other.size_; ++i) push_back(std::move(other.data_[i]));
      other.destroy_all();
    } else {
      data_ = std::exchange(other.data_, other.inline_slots());
      capacity_ = std::exchange(other.capacity_, kInline);
      size_ = std::exchange(other.size_, 0);
    }
  }
  void append_copies(const SliceVector& other) {
    reserve(size_ + other.size_);
    for (const Slice& s : other) push_back(Slice(s));
  }
  Slice* inline_slots() { return reinterpret_cast<Slice*>(inline_); }

  alignas(Slice) unsigned char inline_[kInline * sizeof(Slice)];
  Slice* data_ = inline_slots();
  std::size_t size_ = 0;
  std::size_t capacity_ = kInline;
};

}  // namespace ferry::detail

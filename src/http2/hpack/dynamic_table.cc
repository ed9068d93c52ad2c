// HPACK's dynamic table (http2 layer, private). See dynamic_table.h.
#include "http2/hpack/dynamic_table.h"

#include <algorithm>
#include <cstring>

namespace ferry::http2::hpack {

DynamicTable::DynamicTable(std::uint32_t max_size) : max_size_(max_size) {}

std::size_t DynamicTable::memory() const {
  return bytes_capacity_ + std::size_t{entries_capacity_} * sizeof(Entry);
}

void DynamicTable::set_max_size(std::uint32_t max_size) {
  max_size_ = max_size;
  while (size_ > max_size_) evict_oldest();
}

void DynamicTable::clear() {
  while (count_ > 0) evict_oldest();
}

void DynamicTable::evict_oldest() {
  const Entry& oldest = entries_[first_];
  const std::uint32_t data = oldest.name_size + oldest.value_size;
  size_ -= data + kEntryOverhead;
  bytes_used_ -= data;
  first_ = (first_ + 1) & (entries_capacity_ - 1);
  --count_;
}

void DynamicTable::insert(std::string_view name, std::string_view value, bool syntax_ok) {
  const std::uint64_t entry_size = std::uint64_t{name.size()} + value.size() + kEntryOverhead;
  if (entry_size > max_size_) {
    clear();
    return;
  }
  while (size_ + entry_size > max_size_) evict_oldest();
  const auto data = static_cast<std::uint32_t>(name.size() + value.size());
  // The bytes in use never exceed max_size_ - 32 per entry, so the ring needs at most that.
  reserve(bytes_used_ + data, count_ + 1);
  const std::uint32_t offset =
      count_ == 0 ? 0 : (entries_[first_].offset + bytes_used_) % bytes_capacity_;
  // Write name then value at offset, wrapping.
  std::uint32_t at = offset;
  for (const std::string_view part : {name, value}) {
    const std::uint32_t size = static_cast<std::uint32_t>(part.size());
    const std::uint32_t first_piece = std::min(size, bytes_capacity_ - at);
    if (first_piece > 0) std::memcpy(&bytes_[at], part.data(), first_piece);
    if (size > first_piece) std::memcpy(&bytes_[0], part.data() + first_piece, size - first_piece);
    at = (at + size) % bytes_capacity_;
  }
  entries_[(first_ + count_) & (entries_capacity_ - 1)] =
      Entry{offset, static_cast<std::uint32_t>(name.size()),
            static_cast<std::uint32_t>(value.size()), syntax_ok};
  ++count_;
  ++inserted_;
  bytes_used_ += data;
  size_ += static_cast<std::uint32_t>(entry_size);
}

void DynamicTable::reserve(std::uint32_t bytes, std::uint32_t entries) {
  if (bytes > bytes_capacity_ || bytes_capacity_ == 0) {
    // Doubling from 256 bytes, never beyond what the maximum size can need.
    std::uint32_t capacity = std::max<std::uint32_t>(bytes_capacity_ * 2, 256);
    capacity = std::max(std::min(capacity, max_size_), bytes);
    auto grown = std::make_unique<char[]>(capacity);
    // Oldest first from 0: the offsets are rewritten below.
    std::uint32_t at = 0;
    for (std::uint32_t k = 0; k < count_; ++k) {
      Entry& e = entries_[(first_ + k) & (entries_capacity_ - 1)];
      const std::uint32_t data = e.name_size + e.value_size;
      copy_out(e.offset, data, &grown[at]);
      e.offset = at;
      at += data;
    }
    bytes_ = std::move(grown);
    bytes_capacity_ = capacity;
  }
  if (entries > entries_capacity_) {
    std::uint32_t capacity = std::max<std::uint32_t>(entries_capacity_ * 2, 8);
    while (capacity < entries) capacity *= 2;
    auto grown = std::make_unique<Entry[]>(capacity);
    for (std::uint32_t k = 0; k < count_; ++k) {
      grown[k] = entries_[(first_ + k) & (entries_capacity_ - 1)];
    }
    entries_ = std::move(grown);
    entries_capacity_ = capacity;
    first_ = 0;
  }
}

void DynamicTable::copy_out(std::uint32_t offset, std::uint32_t size, char* out) const {
  if (size == 0) return;
  const std::uint32_t first_piece = std::min(size, bytes_capacity_ - offset);
  std::memcpy(out, &bytes_[offset], first_piece);
  if (size > first_piece) std::memcpy(out + first_piece, &bytes_[0], size - first_piece);
}

namespace {

// a[0, n) == b[0, n): up to 64 bytes by word loads (no call), longer by memcmp. Header names and
// gRPC's values are mostly short.
inline bool same_bytes(const char* a, const char* b, std::size_t n) {
  if (n >= 8) {
    if (n > 16) {
      if (n > 64) return std::memcmp(a, b, n) == 0;
      // Up to 64 bytes (a user agent, grpc-accept-encoding's value) 8 at a time, the last 8
      // overlapping.
      std::uint64_t diff = 0;
      for (std::size_t i = 0; i + 8 < n; i += 8) {
        std::uint64_t x, y;
        std::memcpy(&x, a + i, 8);
        std::memcpy(&y, b + i, 8);
        diff |= x ^ y;
      }
      std::uint64_t x, y;
      std::memcpy(&x, a + n - 8, 8);
      std::memcpy(&y, b + n - 8, 8);
      return (diff | (x ^ y)) == 0;
    }
    std::uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 8);
    std::memcpy(&b0, b, 8);
    std::memcpy(&a1, a + n - 8, 8);
    std::memcpy(&b1, b + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  if (n >= 4) {
    std::uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 4);
    std::memcpy(&b0, b, 4);
    std::memcpy(&a1, a + n - 4, 4);
    std::memcpy(&b1, b + n - 4, 4);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

bool DynamicTable::equals(std::uint32_t offset, std::uint32_t size, std::string_view text) const {
  if (text.size() != size) return false;
  if (size == 0) return true;
  const std::uint32_t first_piece = std::min(size, bytes_capacity_ - offset);
  return same_bytes(&bytes_[offset], text.data(), first_piece) &&
         same_bytes(&bytes_[0], text.data() + first_piece, size - first_piece);
}

DynamicTable::Match DynamicTable::find(std::string_view name, std::string_view value) const {
  Match match{count_, count_};
  for (std::uint32_t i = 0; i < count_; ++i) {
    const Entry& e = entry(i);
    if (e.name_size != name.size() || !equals(e.offset, e.name_size, name)) continue;
    if (match.name == count_) match.name = i;
    std::uint32_t at = e.offset + e.name_size;
    if (at >= bytes_capacity_) at -= bytes_capacity_;
    if (e.value_size == value.size() && equals(at, e.value_size, value)) {
      match.exact = i;
      break;
    }
  }
  return match;
}

void DynamicTable::copy_name(std::uint32_t i, char* out) const {
  const Entry& e = entry(i);
  copy_out(e.offset, e.name_size, out);
}

void DynamicTable::copy_value(std::uint32_t i, char* out) const {
  const Entry& e = entry(i);
  copy_out((e.offset + e.name_size) % std::max<std::uint32_t>(bytes_capacity_, 1), e.value_size,
           out);
}

bool DynamicTable::name_equals(std::uint32_t i, std::string_view name) const {
  const Entry& e = entry(i);
  return equals(e.offset, e.name_size, name);
}

bool DynamicTable::entry_equals(std::uint32_t i, std::string_view name,
                                std::string_view value) const {
  const Entry& e = entry(i);
  if (e.name_size != name.size() || e.value_size != value.size()) return false;
  const std::uint32_t size = e.name_size + e.value_size;
  if (e.offset + size <= bytes_capacity_) {
    // Not wrapped (nearly always): two comparisons in place.
    const char* at = &bytes_[e.offset];
    return same_bytes(at, name.data(), name.size()) &&
           same_bytes(at + name.size(), value.data(), value.size());
  }
  std::uint32_t value_at = e.offset + e.name_size;
  if (value_at >= bytes_capacity_) value_at -= bytes_capacity_;
  return equals(e.offset, e.name_size, name) && equals(value_at, e.value_size, value);
}

bool DynamicTable::value_equals(std::uint32_t i, std::string_view value) const {
  const Entry& e = entry(i);
  return equals((e.offset + e.name_size) % std::max<std::uint32_t>(bytes_capacity_, 1),
                e.value_size, value);
}

}  // namespace ferry::http2::hpack

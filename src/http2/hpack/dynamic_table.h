// HPACK's dynamic table (RFC 7541 §2.3.2, §4): a FIFO of header fields in a byte ring, shared by
// the decoder and the encoder (http2 layer, private). Storage grows on demand up to what the
// table's maximum size needs (so an idle connection holds little), and never per entry: in steady
// state inserting and evicting allocate nothing. One connection's, used by its thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

namespace ferry::http2::hpack {

// RFC 7541 §4.1: an entry's size is its name's and value's lengths plus 32.
inline constexpr std::uint32_t kEntryOverhead = 32;

class DynamicTable {
 public:
  // `max_size` is the table's initial maximum size (RFC 7541 §4.2).
  explicit DynamicTable(std::uint32_t max_size);

  std::uint32_t max_size() const { return max_size_; }
  // The sum of the entries' sizes (RFC 7541 §4.1).
  std::uint32_t size() const { return size_; }
  std::uint32_t count() const { return count_; }
  // Bytes of storage held (the ring of names and values, the entries' records).
  std::size_t memory() const;

  // A new maximum size: evicts the oldest entries until the table fits (RFC 7541 §4.3).
  void set_max_size(std::uint32_t max_size);

  // Evicts every entry (what inserting a field larger than the maximum size does).
  void clear();

  // Adds a field as the newest entry, evicting the oldest ones to make room; a field larger
  // than the maximum size empties the table and is not added (RFC 7541 §4.4). `name` and
  // `value` must not point into this table. `syntax_ok`: the field passed RFC 9113 §8.2.1's
  // character rules (hpack/field_syntax.h; the decoder's table says so, the encoder's never
  // asks).
  void insert(std::string_view name, std::string_view value, bool syntax_ok = false);

  // Entry `i`, 0 the newest (HPACK index 62 + i), i < count().
  std::uint32_t name_size(std::uint32_t i) const { return entry(i).name_size; }
  std::uint32_t value_size(std::uint32_t i) const { return entry(i).value_size; }
  bool syntax_ok(std::uint32_t i) const { return entry(i).syntax_ok; }
  // Copy the name or the value to `out` (room for name_size / value_size bytes).
  void copy_name(std::uint32_t i, char* out) const;
  void copy_value(std::uint32_t i, char* out) const;
  bool name_equals(std::uint32_t i, std::string_view name) const;
  bool value_equals(std::uint32_t i, std::string_view value) const;
  // Entry `i`'s name and value as views of the table's bytes, when they lie in one piece (all
  // but the entry the ring wraps under); false otherwise. The views hold until the next
  // insert() (which may overwrite or move the bytes) or the table's destruction.
  bool view(std::uint32_t i, std::string_view& name, std::string_view& value) const {
    const Entry& e = entry(i);
    if (e.offset + e.name_size + e.value_size > bytes_capacity_) return false;
    const char* at = bytes_.get() + e.offset;
    name = std::string_view(at, e.name_size);
    value = std::string_view(at + e.name_size, e.value_size);
    return true;
  }
  // Whether `p` points into the table's bytes (a view()'s name does).
  bool holds(const char* p) const {
    return p >= bytes_.get() && p < bytes_.get() + bytes_capacity_;
  }
  // Whether entry `i` holds this name and value (one comparison, no scan).
  bool entry_equals(std::uint32_t i, std::string_view name, std::string_view value) const;

  // Entries counted from the table's creation (wrapping at 2^32): entry `i` was the
  // (inserted() - 1 - i)th. The encoder names an entry by this number, which stays the entry's
  // while newer ones push its index up (position_of).
  std::uint32_t inserted() const { return inserted_; }
  // The index (0 the newest) of the entry numbered `number`, or count() when it has left the
  // table (or was never in it: a number from 2^32 insertions ago reads as a current one, which
  // is why the encoder compares the entry's bytes before it uses one).
  std::uint32_t position_of(std::uint32_t number) const {
    const std::uint32_t i = inserted_ - 1 - number;
    return i < count_ ? i : count_;
  }

  // The encoder's lookup, newest first: `exact` the position of an entry of this name and value,
  // `name` the newest of this name; count() when there is none. One pass, short strings
  // compared without a call.
  struct Match {
    std::uint32_t exact;
    std::uint32_t name;
  };
  Match find(std::string_view name, std::string_view value) const;

 private:
  struct Entry {
    std::uint32_t offset;  // of the name in bytes_; the value follows (both may wrap)
    std::uint32_t name_size;
    std::uint32_t value_size;
    bool syntax_ok;
  };

  const Entry& entry(std::uint32_t i) const {
    return entries_[(first_ + count_ - 1 - i) & (entries_capacity_ - 1)];
  }
  void evict_oldest();
  void copy_out(std::uint32_t offset, std::uint32_t size, char* out) const;
  bool equals(std::uint32_t offset, std::uint32_t size, std::string_view text) const;
  void reserve(std::uint32_t bytes, std::uint32_t entries);

  std::uint32_t max_size_;
  std::uint32_t size_ = 0;
  std::uint32_t count_ = 0;
  // Names and values, oldest first from entries_[first_].offset, wrapping at bytes_capacity_.
  std::unique_ptr<char[]> bytes_;
  std::uint32_t bytes_capacity_ = 0;
  std::uint32_t bytes_used_ = 0;
  // The entries' records, a ring of a power-of-two capacity, oldest at first_.
  std::unique_ptr<Entry[]> entries_;
  std::uint32_t entries_capacity_ = 0;
  std::uint32_t first_ = 0;
  std::uint32_t inserted_ = 0;
};

}  // namespace ferry::http2::hpack

// HPACK decoder (http2 layer, private). See decoder.h.
#include "http2/hpack/decoder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "http2/hpack/field_syntax.h"
#include "http2/hpack/huffman.h"
#include "http2/hpack/static_table.h"

namespace ferry::http2::hpack {
namespace {

absl::Status compression_error(const char* what) {
  return absl::InternalError(absl::StrCat("HPACK: ", what, " (COMPRESSION_ERROR)"));
}

// RFC 7541 §5.1: an integer with an N-bit prefix. Values beyond 2^32 - 1 are refused (no field
// of a block can use one: a block is far shorter), and so are more than 5 continuation bytes.
enum class IntegerResult { kOk, kTruncated, kOverflow };

inline IntegerResult read_integer(const std::uint8_t*& p, const std::uint8_t* end, int prefix_bits,
                                  std::uint32_t& value) {
  const std::uint32_t prefix_max = (1u << prefix_bits) - 1;
  std::uint32_t v = *p++ & prefix_max;
  if (v < prefix_max) {
    value = v;
    return IntegerResult::kOk;
  }
  std::uint64_t acc = v;
  for (int shift = 0; shift <= 28; shift += 7) {
    if (p == end) return IntegerResult::kTruncated;
    const std::uint8_t byte = *p++;
    acc += std::uint64_t{byte & 0x7fu} << shift;
    if (acc > UINT32_MAX) return IntegerResult::kOverflow;
    if (!(byte & 0x80)) {
      value = static_cast<std::uint32_t>(acc);
      return IntegerResult::kOk;
    }
  }
  return IntegerResult::kOverflow;
}

absl::Status integer_error(IntegerResult result) {
  return compression_error(result == IntegerResult::kTruncated
                               ? "the block ends inside an integer"
                               : "an integer beyond 2^32 - 1 (RFC 7541 §5.1)");
}

// A name or value as decoded: its bytes (none when only checked, not kept) and where.
struct Piece {
  const char* data = nullptr;
  std::uint32_t size = 0;
  bool in_sink = false;  // data is at sink offset `offset` (the sink may move while it grows)
  std::size_t offset = 0;
  bool checked_only = false;  // too large to keep or to enter the table: no bytes
};

}  // namespace

void DecodedHeaders::reserve(std::size_t bytes) {
  if (used_ + bytes <= capacity_) return;
  const std::size_t capacity = std::max({used_ + bytes, capacity_ * 2, std::size_t{512}});
  auto grown = std::make_unique<char[]>(capacity);
  const char* old_begin = bytes_.get();
  if (used_ > 0) std::memcpy(grown.get(), old_begin, used_);
  for (DecodedField& field : fields_) {
    for (std::string_view* view : {&field.name, &field.value}) {
      if (!view->empty() && view->data() >= old_begin && view->data() < old_begin + used_) {
        *view = std::string_view(grown.get() + (view->data() - old_begin), view->size());
      }
    }
  }
  bytes_ = std::move(grown);
  capacity_ = capacity;
}

Decoder::Decoder(DecoderLimits limits, std::uint32_t initial_table_size)
    : limits_(limits),
      table_(std::min(limits.max_table_size, initial_table_size)),
      expect_size_update_(limits.max_table_size < initial_table_size),
      update_bound_(limits.max_table_size) {}

const Decoder::MemoEntry* Decoder::memo_find(const std::uint8_t* encoded,
                                             std::uint32_t size) const {
  if (!memo_storage_) return nullptr;
  for (const MemoEntry& entry : memo_) {
    if (entry.encoded == size &&
        std::memcmp(memo_storage_.get() + entry.slot * kMemoSlotSize, encoded, size) == 0) {
      return &entry;
    }
  }
  return nullptr;
}

const char* Decoder::memo_decoded(const MemoEntry& entry) const {
  return memo_storage_.get() + entry.slot * kMemoSlotSize + kMemoMaxEncoded;
}

void Decoder::memo_insert(const std::uint8_t* encoded, std::uint32_t size, const char* decoded,
                          std::uint32_t decoded_size) {
  if (!memo_storage_) {
    memo_storage_ = std::make_unique<char[]>(kMemoSlots * kMemoSlotSize);
    for (std::uint32_t i = 0; i < kMemoSlots; ++i) memo_[i] = {0, 0, i};
  }
  MemoEntry& entry = memo_[memo_next_];
  memo_next_ = (memo_next_ + 1) % kMemoSlots;
  char* slot = memo_storage_.get() + entry.slot * kMemoSlotSize;
  std::memcpy(slot, encoded, size);
  std::memcpy(slot + kMemoMaxEncoded, decoded, decoded_size);
  entry.encoded = size;
  entry.decoded = decoded_size;
}

void Decoder::copy_table_views(DecodedHeaders& out) {
  if (!out.views_in_table_) return;
  out.views_in_table_ = false;
  // From the first view on only: a field is looked at once however many insertions follow it
  // (a block alternating references and insertions costs O(fields), not O(fields^2)).
  for (std::size_t k = out.first_view_; k < out.fields_.size(); ++k) {
    DecodedField& field = out.fields_[k];
    // A view's name and value are one entry's, side by side.
    if (!table_.holds(field.name.data())) continue;
    const std::size_t n = field.name.size();
    const std::size_t v = field.value.size();
    if (n + v == 0) {  // an empty name and value (the block's storage may not exist yet)
      field.name = field.value = std::string_view("", 0);
      continue;
    }
    out.reserve(n + v);
    char* at = out.tail();
    std::memcpy(at, field.name.data(), n + v);
    field.name = std::string_view(at, n);
    field.value = std::string_view(at + n, v);
    out.used_ += n + v;
  }
}

void Decoder::set_max_table_size(std::uint32_t max_table_size) {
  limits_.max_table_size = max_table_size;
  // RFC 7541 §4.2: the peer's encoder must acknowledge a smaller maximum with a size update,
  // of at most the smallest maximum set since its last block.
  const std::uint32_t bound = expect_size_update_ ? update_bound_ : table_.max_size();
  if (max_table_size < bound) {
    expect_size_update_ = true;
    update_bound_ = max_table_size;
  }
  scratch_.reset();  // sized for the old maximum
}

absl::Status Decoder::decode(std::span<const std::uint8_t> block, DecodedHeaders& out) {
  out.clear();
  if (out.fields_.capacity() == 0) {
    // Room for a gRPC call's fields at once, instead of growing 1, 2, 4, 8, 16.
    out.fields_.reserve(std::min<std::uint32_t>(limits_.max_header_count, 16));
  }
  const std::uint8_t* p = block.data();
  const std::uint8_t* const end = p + block.size();
  // Set once a limit is passed: from then on fields are decoded (for the table) but not kept.
  bool over_limit = false;
  bool at_start = true;

  if (expect_size_update_ && (p == end || (*p & 0xe0) != 0x20)) {
    return compression_error(
        "a smaller SETTINGS_HEADER_TABLE_SIZE was not acknowledged by a dynamic table size "
        "update at the start of the next block (RFC 7541 §4.2)");
  }

  // Reads a string literal (RFC 7541 §5.2) into the sink when `keep` (within `room`), else,
  // when `for_table` has room, into the scratch buffer at `scratch_at`, else only checks it.
  // `keep` turns false when the string does not fit the room.
  // Whether the field being read is a literal without indexing, whose Huffman strings the memo
  // may keep (never-indexed ones it must not).
  bool memoizable = false;
  auto read_string = [&](bool& keep, std::size_t& room, bool for_table, std::size_t scratch_at,
                         Piece& piece) -> absl::Status {
    if (p == end) return compression_error("the block ends before a string literal");
    const bool huffman = *p & 0x80;
    std::uint32_t length;
    if (const IntegerResult r = read_integer(p, end, 7, length); r != IntegerResult::kOk) {
      return integer_error(r);
    }
    if (length > static_cast<std::size_t>(end - p)) {
      return compression_error("a string literal longer than the rest of the block");
    }
    const std::uint8_t* data = p;
    p += length;
    if (!huffman) {
      if (keep && length <= room) {
        out.reserve(length);
        if (length > 0) std::memcpy(out.tail(), data, length);
        piece = {out.tail(), length, true, out.used_};
        out.used_ += length;
        room -= length;
        return absl::OkStatus();
      }
      keep = false;
      // The block outlives the decode: the table can copy from it.
      piece = {reinterpret_cast<const char*>(data), length, false, 0};
      return absl::OkStatus();
    }
    const bool memo = keep && memoizable && length >= kMemoMinEncoded && length <= kMemoMaxEncoded;
    if (memo) {
      if (const MemoEntry* hit = memo_find(data, length); hit != nullptr && hit->decoded <= room) {
        out.reserve(hit->decoded);
        std::memcpy(out.tail(), memo_decoded(*hit), hit->decoded);
        piece = {out.tail(), hit->decoded, true, out.used_};
        out.used_ += hit->decoded;
        room -= hit->decoded;
        return absl::OkStatus();
      }
    }
    if (keep) {
      // At most 8/5 of the encoded length: the shortest code is 5 bits. When the budget allows
      // that much, a byte more lets huffman_decode run without its per-symbol checks.
      const std::size_t longest = std::size_t{length} * 8 / 5;
      const std::size_t bound = room >= longest ? longest + 1 : room;
      out.reserve(bound);
      const HuffmanDecoded d = huffman_decode(data, length, out.tail(), bound);
      if (d.result == HuffmanResult::kOk) {
        piece = {out.tail(), static_cast<std::uint32_t>(d.size), true, out.used_};
        if (memo) memo_insert(data, length, out.tail(), static_cast<std::uint32_t>(d.size));
        out.used_ += d.size;
        room -= d.size;
        return absl::OkStatus();
      }
      if (d.result == HuffmanResult::kInvalid) {
        return compression_error("an invalid Huffman string (EOS or bad padding, RFC 7541 §5.2)");
      }
      keep = false;
    }
    const std::size_t scratch_room =
        for_table ? table_.max_size() - kEntryOverhead -
                        std::min<std::size_t>(scratch_at, table_.max_size() - kEntryOverhead)
                  : 0;
    if (for_table && table_.max_size() >= kEntryOverhead) {
      if (!scratch_) scratch_ = std::make_unique<char[]>(limits_.max_table_size);
      const HuffmanDecoded d =
          huffman_decode(data, length, scratch_.get() + scratch_at, scratch_room);
      if (d.result == HuffmanResult::kOk) {
        piece = {scratch_.get() + scratch_at, static_cast<std::uint32_t>(d.size), false, 0};
        return absl::OkStatus();
      }
      if (d.result == HuffmanResult::kInvalid) {
        return compression_error("an invalid Huffman string (EOS or bad padding, RFC 7541 §5.2)");
      }
    }
    // Only checked: too large to keep and too large for the table.
    const HuffmanDecoded d = huffman_validate(data, length);
    if (d.result != HuffmanResult::kOk) {
      return compression_error("an invalid Huffman string (EOS or bad padding, RFC 7541 §5.2)");
    }
    piece = {nullptr, static_cast<std::uint32_t>(d.size), false, 0, true};
    return absl::OkStatus();
  };

  while (p < end) {
    const std::uint8_t first = *p;

    if ((first & 0xe0) == 0x20) {
      // RFC 7541 §6.3: a dynamic table size update, only at the start of a block (§4.2).
      if (!at_start) {
        return compression_error(
            "a dynamic table size update after the first field (RFC 7541 §4.2)");
      }
      std::uint32_t size;
      if (const IntegerResult r = read_integer(p, end, 5, size); r != IntegerResult::kOk) {
        return integer_error(r);
      }
      if (size > limits_.max_table_size) {
        return compression_error(
            "a dynamic table size update above SETTINGS_HEADER_TABLE_SIZE (RFC 7541 §6.3)");
      }
      if (expect_size_update_ && size > update_bound_) {
        return compression_error(
            "the first size update after smaller settings is above the smallest of them (RFC "
            "7541 §4.2)");
      }
      table_.set_max_size(size);
      expect_size_update_ = false;
      continue;
    }
    at_start = false;

    // Whether a field of `size` name and value bytes may be kept: within the list's size (32
    // more for the field) and count.
    auto fits = [&](std::uint64_t size) {
      return !over_limit && out.fields_.size() < limits_.max_header_count &&
             out.list_size_ + kEntryOverhead + size <= limits_.max_header_list_size;
    };

    if (first & 0x80) {
      // RFC 7541 §6.1: an indexed field.
      std::uint32_t index;
      if (const IntegerResult r = read_integer(p, end, 7, index); r != IntegerResult::kOk) {
        return integer_error(r);
      }
      if (index == 0) return compression_error("index 0 (RFC 7541 §6.1)");
      if (index <= kStaticTableSize) {
        const StaticEntry& e = static_entry(index);
        if (fits(e.name.size() + e.value.size())) {
          out.fields_.push_back({e.name, e.value, false, /*syntax_checked=*/true});
          out.list_size_ += e.name.size() + e.value.size() + kEntryOverhead;
        } else {
          over_limit = true;
        }
        continue;
      }
      const std::uint32_t i = index - kStaticTableSize - 1;
      if (i >= table_.count()) {
        return compression_error("an index beyond the dynamic table (RFC 7541 §2.3.3)");
      }
      const std::uint32_t n = table_.name_size(i);
      const std::uint32_t v = table_.value_size(i);
      if (fits(std::uint64_t{n} + v)) {
        std::string_view name, value;
        if (table_.view(i, name, value)) {
          // In place: no copy (copy_table_views makes one before the table changes).
          if (!out.views_in_table_) {
            out.views_in_table_ = true;
            out.first_view_ = out.fields_.size();
          }
          out.fields_.push_back({name, value, false, table_.syntax_ok(i)});
          out.list_size_ += n + v + kEntryOverhead;
          continue;
        }
        out.reserve(std::size_t{n} + v);
        char* at = out.tail();
        table_.copy_name(i, at);
        table_.copy_value(i, at + n);
        out.used_ += std::size_t{n} + v;
        out.fields_.push_back(
            {std::string_view(at, n), std::string_view(at + n, v), false, table_.syntax_ok(i)});
        out.list_size_ += n + v + kEntryOverhead;
      } else {
        over_limit = true;  // nothing copied: O(1) for the rest of an HPACK bomb
      }
      continue;
    }

    // RFC 7541 §6.2: a literal field, with incremental indexing (01), without indexing (0000)
    // or never indexed (0001). How much of the list's budget is left for its name and value,
    // and whether it may be kept at all.
    bool keep = fits(0);
    std::size_t room = keep ? limits_.max_header_list_size - out.list_size_ - kEntryOverhead : 0;
    std::size_t used_before = out.used_;
    const bool index_it = first & 0x40;
    if (index_it) {
      // This field enters the table, which may overwrite or move the bytes the fields before it
      // view: they are copied out first, while nothing of this field is in `out` yet.
      copy_table_views(out);
      used_before = out.used_;
    }
    const bool never_indexed = !index_it && (first & 0x10);
    memoizable = !index_it && !never_indexed;
    std::uint32_t name_index;
    if (const IntegerResult r = read_integer(p, end, index_it ? 6 : 4, name_index);
        r != IntegerResult::kOk) {
      return integer_error(r);
    }
    Piece name;
    if (name_index == 0) {
      if (absl::Status s = read_string(keep, room, index_it, 0, name); !s.ok()) return s;
    } else if (name_index <= kStaticTableSize) {
      const std::string_view static_name = static_entry(name_index).name;
      name = {static_name.data(), static_cast<std::uint32_t>(static_name.size()), false, 0};
      if (keep && static_name.size() <= room) {
        room -= static_name.size();
      } else {
        keep = false;
      }
    } else {
      const std::uint32_t i = name_index - kStaticTableSize - 1;
      if (i >= table_.count()) {
        return compression_error("a name index beyond the dynamic table (RFC 7541 §2.3.3)");
      }
      const std::uint32_t n = table_.name_size(i);
      if (keep && n <= room) {
        out.reserve(n);
        table_.copy_name(i, out.tail());
        name = {out.tail(), n, true, out.used_};
        out.used_ += n;
        room -= n;
      } else {
        keep = false;
        if (index_it && std::size_t{n} + kEntryOverhead <= table_.max_size()) {
          // Copied out: inserting the new entry may evict the one it names (RFC 7541 §4.4).
          if (!scratch_) scratch_ = std::make_unique<char[]>(limits_.max_table_size);
          table_.copy_name(i, scratch_.get());
          name = {scratch_.get(), n, false, 0};
        } else {
          name = {nullptr, n, false, 0, true};
        }
      }
    }

    Piece value;
    // A name in the scratch buffer (from the table, past a limit) leaves the rest for the value.
    const bool name_in_scratch =
        !name.in_sink && !name.checked_only && scratch_ && name.data == scratch_.get();
    const std::size_t scratch_at = name_in_scratch ? name.size : 0;
    if (absl::Status s = read_string(keep, room, index_it && !name.checked_only, scratch_at, value);
        !s.ok()) {
      return s;
    }
    if (name.in_sink) name.data = out.bytes_.get() + name.offset;
    if (value.in_sink) value.data = out.bytes_.get() + value.offset;

    if (keep) {
      out.fields_.push_back({std::string_view(name.data, name.size),
                             std::string_view(value.data, value.size), never_indexed});
      out.list_size_ += name.size + value.size + kEntryOverhead;
    } else {
      over_limit = true;
      out.used_ = used_before;  // bytes of a field not kept are dropped (still readable below)
    }
    if (index_it) {
      if (std::uint64_t{name.size} + value.size + kEntryOverhead > table_.max_size() ||
          name.checked_only || value.checked_only) {
        table_.clear();  // RFC 7541 §4.4: an entry larger than the table empties it
      } else {
        const std::string_view entry_name(name.data, name.size);
        const std::string_view entry_value(value.data, value.size);
        table_.insert(entry_name, entry_value, valid_field_syntax(entry_name, entry_value));
      }
    }
  }

  if (over_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("header list beyond SETTINGS_MAX_HEADER_LIST_SIZE ",
                     limits_.max_header_list_size, " or ", limits_.max_header_count, " fields"));
  }
  return absl::OkStatus();
}

}  // namespace ferry::http2::hpack

// HPACK encoder (http2 layer, private). See encoder.h.
#include "http2/hpack/encoder.h"

#include <algorithm>
#include <cstring>

#include "http2/hpack/huffman.h"
#include "http2/hpack/static_table.h"

namespace ferry::http2::hpack {
namespace {

// RFC 7541 §5.1: `value` with an N-bit prefix, the representation's bits in `first`.
inline std::uint8_t* write_integer(std::uint32_t value, int prefix_bits, std::uint8_t first,
                                   std::uint8_t* out) {
  const std::uint32_t prefix_max = (1u << prefix_bits) - 1;
  if (value < prefix_max) {
    *out++ = static_cast<std::uint8_t>(first | value);
    return out;
  }
  *out++ = static_cast<std::uint8_t>(first | prefix_max);
  value -= prefix_max;
  while (value >= 0x80) {
    *out++ = static_cast<std::uint8_t>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<std::uint8_t>(value);
  return out;
}

// The most bytes an integer takes: the prefix byte and 5 more for 32 bits.
constexpr std::size_t kMaxIntegerSize = 6;

// RFC 7541 §7.1.3: credentials, short and guessable, must not be exposed to a compression
// oracle: never indexed.
bool is_credential(std::string_view name) {
  return name == "authorization" || name == "proxy-authorization" || name == "cookie" ||
         name == "set-cookie";
}

// Values that change from call to call: indexing them would only churn the table.
bool varies_per_call(std::string_view name) {
  return name == "grpc-timeout" || name == "grpc-message" || name == "content-length" ||
         name == "date" || name == "grpc-status-details-bin" || name == "grpc-trace-bin" ||
         name == "grpc-tags-bin" || name == "grpc-previous-rpc-attempts" ||
         name == "grpc-retry-pushback-ms";
}

}  // namespace

Encoder::Encoder(EncoderOptions options)
    : options_(options), table_(std::min(options.max_table_size, options.initial_table_size)) {
  if (options_.max_table_size < options_.initial_table_size) {
    update_pending_ = true;
    update_min_ = update_final_ = options_.max_table_size;
  }
}

void Encoder::set_peer_max_table_size(std::uint32_t settings_header_table_size) {
  const std::uint32_t size = std::min(settings_header_table_size, options_.max_table_size);
  if (!update_pending_) {
    if (size == table_.max_size()) return;
    update_pending_ = true;
    update_min_ = size;
  }
  update_min_ = std::min(update_min_, size);
  update_final_ = size;
}

std::size_t Encoder::max_encoded_size(std::span<const Field> fields) {
  std::size_t size = 2 * kMaxIntegerSize;  // size updates
  for (const Field& f : fields) size += f.name.size() + f.value.size() + 3 * kMaxIntegerSize;
  return size;
}

std::uint8_t* Encoder::write_string(std::string_view text, std::uint8_t* out, bool huffman) const {
  if (huffman && options_.huffman && !text.empty()) {
    const std::size_t encoded = huffman_encoded_size(text);
    if (encoded <= text.size()) {  // as RFC 7541's examples do ("307" in C.6.2)
      out = write_integer(static_cast<std::uint32_t>(encoded), 7, 0x80, out);
      return huffman_encode(text, out);
    }
  }
  out = write_integer(static_cast<std::uint32_t>(text.size()), 7, 0, out);
  if (!text.empty()) std::memcpy(out, text.data(), text.size());
  return out + text.size();
}

std::uint32_t Encoder::index_from_hint(const Field& f) {
  const std::uint32_t first = hint_slot(f);
  for (std::uint32_t way = 0; way < kHintWays; ++way) {
    Hint& hint = hints_[(first + way) & (kHintSlots - 1)];
    if (hint.name != f.name.data() || hint.value != f.value.data() ||
        hint.name_size != f.name.size() || hint.value_size != f.value.size()) {
      continue;
    }
    if (hint.dynamic) {
      const std::uint32_t i = table_.position_of(hint.where);
      if (i < table_.count() && (f.immutable || table_.entry_equals(i, f.name, f.value))) {
        return kStaticTableSize + 1 + i;
      }
    } else {
      const StaticEntry& e = static_entry(hint.where);
      if (f.immutable || (e.name == f.name && e.value == f.value)) return hint.where;
    }
    hint = Hint{};  // stale: the entry left the table, or the storage holds other text now
    return 0;
  }
  return 0;
}

void Encoder::remember(const Field& f, std::uint32_t where, bool dynamic) {
  const std::uint32_t first = hint_slot(f);
  std::uint32_t slot = (first + next_victim_) & (kHintSlots - 1);
  for (std::uint32_t way = 0; way < kHintWays; ++way) {
    const std::uint32_t s = (first + way) & (kHintSlots - 1);
    if (hints_[s].name == nullptr) {
      slot = s;
      break;
    }
  }
  next_victim_ = (next_victim_ + 1) & (kHintWays - 1);
  hints_[slot] = Hint{f.name.data(),
                      f.value.data(),
                      static_cast<std::uint32_t>(f.name.size()),
                      static_cast<std::uint32_t>(f.value.size()),
                      where,
                      dynamic};
}

std::uint8_t* Encoder::encode(std::span<const Field> fields, std::uint8_t* out) {
  if (update_pending_) {
    // RFC 7541 §4.2 and §6.3.
    if (update_min_ < update_final_) {
      out = write_integer(update_min_, 5, 0x20, out);
      table_.set_max_size(update_min_);
    }
    out = write_integer(update_final_, 5, 0x20, out);
    table_.set_max_size(update_final_);
    update_pending_ = false;
  }
  for (const Field& f : fields) {
    // A field sent before from the same storage: its index, at the cost of one comparison.
    // (Never-indexed fields have no hint; an automatic one that was indexed stays so.)
    if (f.indexing != Indexing::kNever && f.name.data() != nullptr) {
      if (const std::uint32_t index = index_from_hint(f); index != 0) {
        out = write_integer(index, 7, 0x80, out);  // RFC 7541 §6.1
        continue;
      }
    }
    Indexing indexing = f.indexing;
    const std::uint64_t entry_size = std::uint64_t{f.name.size()} + f.value.size() + kEntryOverhead;
    if (indexing == Indexing::kAuto) {
      if (is_credential(f.name)) {
        indexing = Indexing::kNever;
      } else if (varies_per_call(f.name) || entry_size > std::uint64_t{table_.max_size()} * 3 / 4) {
        indexing = Indexing::kWithout;
      } else {
        indexing = Indexing::kIncremental;
      }
    }
    // The dynamic table first, newest first: a repeated field (the common case of a gRPC
    // connection) is found without the static lookup. Its newest entry of the name, too.
    std::uint32_t dynamic_name = 0;
    if (indexing != Indexing::kNever) {
      const DynamicTable::Match found = table_.find(f.name, f.value);
      if (found.exact < table_.count()) {
        out = write_integer(kStaticTableSize + 1 + found.exact, 7, 0x80, out);  // RFC 7541 §6.1
        remember(f, table_.inserted() - 1 - found.exact, /*dynamic=*/true);
        continue;
      }
      if (found.name < table_.count()) dynamic_name = kStaticTableSize + 1 + found.name;
    }
    const StaticMatch in_static = find_static(f.name, f.value);
    if (indexing != Indexing::kNever && in_static.exact != 0) {
      out = write_integer(in_static.exact, 7, 0x80, out);
      remember(f, in_static.exact, /*dynamic=*/false);
      continue;
    }
    // A static name is preferred: its index is smaller and never evicted.
    const std::uint32_t name_index = in_static.name != 0 ? in_static.name : dynamic_name;
    if (indexing == Indexing::kIncremental && entry_size <= table_.max_size()) {
      out = write_integer(name_index, 6, 0x40, out);  // RFC 7541 §6.2.1
    } else {
      // §6.2.2 without indexing (0000), §6.2.3 never indexed (0001).
      out = write_integer(name_index, 4, indexing == Indexing::kNever ? 0x10 : 0x00, out);
      indexing = Indexing::kWithout;
    }
    if (name_index == 0) out = write_string(f.name, out, !f.raw);
    out = write_string(f.value, out, !f.raw);
    if (indexing == Indexing::kIncremental) {
      table_.insert(f.name, f.value);
      if (table_.count() > 0) remember(f, table_.inserted() - 1, /*dynamic=*/true);
    }
  }
  return out;
}

void Encoder::encode(std::span<const Field> fields, std::string& out) {
  const std::size_t before = out.size();
  out.resize(before + max_encoded_size(fields));
  auto* begin = reinterpret_cast<std::uint8_t*>(out.data());
  const std::uint8_t* end = encode(fields, begin + before);
  out.resize(static_cast<std::size_t>(end - begin));
}

}  // namespace ferry::http2::hpack

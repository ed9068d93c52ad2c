// HPACK decoder (RFC 7541): a complete header block (HEADERS + CONTINUATION, assembled by the
// caller) in one pass into a caller-owned list of fields (http2 layer, private). The peer's
// bytes are untrusted: every rule of RFC 7541 is checked, and the decoded list is bounded while
// it is decoded, so that a block of 1-byte references to a large table entry (an HPACK bomb)
// costs bounded work and memory. One per connection, used by its thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "http2/hpack/dynamic_table.h"

namespace ferry::http2::hpack {

// What a peer's header blocks may make the decoder hold, each an answer to an attack. The
// defaults are those ferry advertises.
struct DecoderLimits {
  // SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2) this endpoint advertises: the largest dynamic
  // table the peer's encoder may make this decoder keep (a size update above it is a
  // COMPRESSION_ERROR).
  std::uint32_t max_table_size = 4096;
  // SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded header list, each field counted as its
  // name's and value's lengths plus 32 (RFC 9113 §6.5.2), checked field by field WHILE decoding,
  // before a field's bytes are copied (HPACK bomb: 1-byte indexed references to a large entry).
  std::uint32_t max_header_list_size = 16u << 10;
  // The most fields in one block (the 2026 "HTTP/2 bomb": many 1-byte references to small
  // entries, cheap in list size but a field each to process upstream). Envoy's default.
  std::uint32_t max_header_count = 100;
};

// One decoded field: views into its DecodedHeaders (or into the static table).
struct DecodedField {
  std::string_view name;
  std::string_view value;
  // Sent as a literal never indexed (RFC 7541 §6.2.3): an intermediary must keep it so.
  bool never_indexed = false;
  // Sent whole by index (RFC 7541 §6.1) from the static table or from a dynamic entry that
  // passed RFC 9113 §8.2.1's character rules when it entered the table (hpack/field_syntax.h):
  // the session need not check its characters again. False for every literal.
  bool syntax_checked = false;
};

// The fields of one decoded block, in order, with the bytes of their literal names and values;
// a field sent by index is a view of the static table or of the decoder's dynamic table. Owned
// by the caller and reused block after block: it grows to what the limits allow while a
// connection warms up, then decoding allocates nothing. The views stay valid until the next
// decode (into it or by its decoder), or the destruction of it or its decoder.
class DecodedHeaders {
 public:
  DecodedHeaders() = default;
  DecodedHeaders(const DecodedHeaders&) = delete;
  DecodedHeaders& operator=(const DecodedHeaders&) = delete;

  std::span<const DecodedField> fields() const { return fields_; }
  // The list's size as RFC 9113 §6.5.2 counts it (the fields kept).
  std::uint32_t list_size() const { return list_size_; }
  // Bytes of storage held.
  std::size_t memory() const { return capacity_ + fields_.capacity() * sizeof(DecodedField); }

 private:
  friend class Decoder;

  void clear() {
    fields_.clear();
    used_ = 0;
    list_size_ = 0;
    views_in_table_ = false;
  }
  // Room for `bytes` more bytes, moving the kept views along when the storage moves.
  void reserve(std::size_t bytes);
  char* tail() { return bytes_.get() + used_; }

  std::unique_ptr<char[]> bytes_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::vector<DecodedField> fields_;
  std::uint32_t list_size_ = 0;
  bool views_in_table_ = false;  // some field is a view of the decoder's dynamic table
  std::size_t first_view_ = 0;   // then none before this one is
};

class Decoder {
 public:
  // `initial_table_size` is the table size the peer's encoder starts with: 4096 in HTTP/2 (RFC
  // 9113 §6.5.2); set otherwise only by tests. When limits.max_table_size is smaller, the peer's
  // first block must begin with a size update within it.
  explicit Decoder(DecoderLimits limits = {}, std::uint32_t initial_table_size = 4096);

  // Decodes one complete header block into `out` (cleared first). Returns:
  // - OK: `out` holds the block's fields;
  // - INTERNAL: the block breaks RFC 7541 (a COMPRESSION_ERROR, RFC 9113 §4.3: the connection
  //   must end, the table is no longer in step with the peer's);
  // - RESOURCE_EXHAUSTED: the list is beyond max_header_list_size or max_header_count. The rest
  //   of the block was still decoded into the dynamic table without keeping its fields (O(1)
  //   per byte for references), so the connection stays usable: RFC 9113 §10.5.1 lets the
  //   caller refuse the stream alone (431, or RST_STREAM). `out` holds the fields before the
  //   limit.
  // Cost: one pass over the block; no allocation once `out` and the table have grown.
  [[nodiscard]] absl::Status decode(std::span<const std::uint8_t> block, DecodedHeaders& out);

  // A new SETTINGS_HEADER_TABLE_SIZE this endpoint advertises, in force once the peer
  // acknowledged it. A size below the table's current maximum size requires the peer's next
  // block to begin with a dynamic table size update within it (RFC 7541 §4.2).
  void set_max_table_size(std::uint32_t max_table_size);

  const DynamicTable& table() const { return table_; }
  const DecoderLimits& limits() const { return limits_; }

 private:
  // Before an insertion into the table, which may overwrite or move its bytes: the fields of
  // `out` that are views of it are copied into `out`'s own bytes.
  void copy_table_views(DecodedHeaders& out);

  DecoderLimits limits_;
  DynamicTable table_;
  bool expect_size_update_ = false;
  // While expect_size_update_: the most the block's first size update may set.
  std::uint32_t update_bound_ = 0;
  // Where a field the caller will not get is decoded for the table (past a limit): at most
  // max_table_size bytes, allocated only when first needed.
  std::unique_ptr<char[]> scratch_;

  // The last few Huffman strings of literals without indexing, by their encoded bytes: nghttp2
  // clients send :path so, Huffman-coded, in every request, and a memcmp is far cheaper than
  // decoding it again. Never-indexed literals are not kept. 4 x 166 bytes, allocated at the
  // first such string.
  static constexpr std::uint32_t kMemoSlots = 4;
  static constexpr std::uint32_t kMemoMinEncoded = 8;
  static constexpr std::uint32_t kMemoMaxEncoded = 64;  // a :path of up to ~85 characters
  static constexpr std::uint32_t kMemoSlotSize = kMemoMaxEncoded + kMemoMaxEncoded * 8 / 5;
  struct MemoEntry {
    std::uint32_t encoded = 0;  // 0: empty
    std::uint32_t decoded = 0;
    std::uint32_t slot = 0;
  };
  const MemoEntry* memo_find(const std::uint8_t* encoded, std::uint32_t size) const;
  const char* memo_decoded(const MemoEntry& entry) const;
  void memo_insert(const std::uint8_t* encoded, std::uint32_t size, const char* decoded,
                   std::uint32_t decoded_size);
  MemoEntry memo_[kMemoSlots];
  std::uint32_t memo_next_ = 0;
  std::unique_ptr<char[]> memo_storage_;
};

}  // namespace ferry::http2::hpack

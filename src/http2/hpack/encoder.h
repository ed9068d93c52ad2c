// HPACK encoder (RFC 7541) made for gRPC (http2 layer, private): it keeps a dynamic table of
// what it sent, so that the fields a connection repeats call after call (content-type, te,
// user-agent, grpc-accept-encoding, :path, grpc-status 0 ...) cost one or two bytes after their
// first block. Credentials are never indexed (RFC 7541 §7.1.3); Huffman only where it is not
// longer.
// One per connection, used by its thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "http2/hpack/dynamic_table.h"

namespace ferry::http2::hpack {

// How a field may enter the dynamic tables (RFC 7541 §6.2).
enum class Indexing : std::uint8_t {
  // ferry's choice: never indexed for credentials (authorization, proxy-authorization, cookie,
  // set-cookie), without indexing for values that change per call (grpc-timeout, grpc-message,
  // content-length, date, the -bin trace and status details), indexed otherwise when the entry
  // is at most 3/4 of the table.
  kAuto,
  kIncremental,  // with incremental indexing, whenever the entry fits the table
  kWithout,      // without indexing
  kNever,        // never indexed (RFC 7541 §6.2.3): intermediaries must not index it either
};

struct Field {
  std::string_view name;
  std::string_view value;
  Indexing indexing = Indexing::kAuto;
  // The value, and the name when it is not indexed, go as raw octets even where Huffman coding
  // would be shorter: a field new in every call (a trace context, never indexed, so its name too
  // is a literal every time), whose roughly a fifth fewer bytes would cost its receiver a Huffman
  // decode every call (RFC 7541 §5.2 leaves the choice to the encoder).
  bool raw = false;
  // The name and the value lie in storage whose text never changes while the encoder lives
  // (string literals): a field sent again from the same addresses is known without comparing
  // its bytes (see Encoder's hints).
  bool immutable = false;
};

struct EncoderOptions {
  // The most this encoder lets its table hold, whatever larger SETTINGS_HEADER_TABLE_SIZE the
  // peer advertises (memory per connection).
  std::uint32_t max_table_size = 4096;
  // The table size the peer's decoder starts with: 4096 in HTTP/2 (RFC 9113 §6.5.2). When
  // max_table_size is smaller, the first block begins with a size update.
  std::uint32_t initial_table_size = 4096;
  // Huffman-code a string when that is not longer (RFC 7541 §5.2).
  bool huffman = true;
};

class Encoder {
 public:
  explicit Encoder(EncoderOptions options = {});

  // The peer's SETTINGS_HEADER_TABLE_SIZE changed: the table follows it (up to
  // max_table_size), signalled by size updates at the start of the next block (RFC 7541 §4.2:
  // the smallest size since the last block, then the final one).
  void set_peer_max_table_size(std::uint32_t settings_header_table_size);

  // The most bytes encode() writes for `fields`.
  static std::size_t max_encoded_size(std::span<const Field> fields);

  // Writes the header block of `fields` at `out` (room for max_encoded_size(fields)) and
  // returns the end of it. Allocates nothing once the table has grown to its working size.
  std::uint8_t* encode(std::span<const Field> fields, std::uint8_t* out);
  // The same, appended to `out`.
  void encode(std::span<const Field> fields, std::string& out);

  const DynamicTable& table() const { return table_; }

 private:
  std::uint8_t* write_string(std::string_view text, std::uint8_t* out, bool huffman) const;

  // Where this encoder last found or put a field it sent as an index, by the addresses of its
  // name and value: the fields a connection repeats come from the same storage call after call
  // (string literals, the channel's authority and user agent, a method's path), so that one
  // comparison with the entry a hint names replaces the search of both tables. A hint is used
  // only once that entry's bytes compare equal to the field's (not compared for an immutable
  // field): storage reused for other text, or an entry evicted since, only misses. Keyed by our
  // own fields, never the peer's bytes.
  struct Hint {
    const char* name = nullptr;
    const char* value = nullptr;
    // The sizes too: two views may start at one address and end apart (a literal and its
    // prefix), and an immutable field's bytes are not compared.
    std::uint32_t name_size = 0;
    std::uint32_t value_size = 0;
    std::uint32_t where = 0;  // the static index, or the dynamic entry's number (inserted())
    bool dynamic = false;
  };
  static constexpr std::uint32_t kHintSlots = 16;  // a power of two
  static constexpr std::uint32_t kHintWays = 4;    // slots probed from a field's first
  static std::uint32_t hint_slot(const Field& f) {
    const auto name = reinterpret_cast<std::uintptr_t>(f.name.data());
    const auto value = reinterpret_cast<std::uintptr_t>(f.value.data());
    // Fibonacci hashing of both addresses: the top bits pick the first slot.
    return static_cast<std::uint32_t>(((name ^ (value << 1)) * 0x9e3779b97f4a7c15ull) >> 60) &
           (kHintSlots - 1);
  }
  // The HPACK index of `f` from its hint, or 0 when there is none (or it no longer holds).
  std::uint32_t index_from_hint(const Field& f);
  void remember(const Field& f, std::uint32_t where, bool dynamic);

  EncoderOptions options_;
  DynamicTable table_;
  bool update_pending_ = false;
  std::uint32_t update_min_ = 0;    // the smallest size since the last block
  std::uint32_t update_final_ = 0;  // the size to end at
  Hint hints_[kHintSlots];
  std::uint32_t next_victim_ = 0;  // which way a new hint replaces when all are taken
};

}  // namespace ferry::http2::hpack

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

  EncoderOptions options_;
  DynamicTable table_;
  bool update_pending_ = false;
  std::uint32_t update_min_ = 0;    // the smallest size since the last block
  std::uint32_t update_final_ = 0;  // the size to end at
};

}  // namespace ferry::http2::hpack

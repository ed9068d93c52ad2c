// libFuzzer target: ferry's HPACK decoder (src/http2/hpack/decoder.h) over a connection's worth
// of header blocks and SETTINGS_HEADER_TABLE_SIZE changes, under limits the input picks. Checks:
// no crash or leak; a decoded list within max_header_list_size (name + value + 32 per field,
// summed as list_size() says) and max_header_count, also when RESOURCE_EXHAUSTED; the table
// within its maximum size and the setting; only INTERNAL or RESOURCE_EXHAUSTED as errors; after
// RESOURCE_EXHAUSTED the decoder stays usable. Every list decoded is encoded again by ferry's
// encoder and decoded by a second decoder to the same fields (never-indexed kept so).
// Input: byte 0 the limits, then records (fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"

namespace {

using ferry::http2::hpack::DecodedField;
using ferry::http2::hpack::DecodedHeaders;
using ferry::http2::hpack::Decoder;
using ferry::http2::hpack::DecoderLimits;
using ferry::http2::hpack::Encoder;
using ferry::http2::hpack::Field;
using ferry::http2::hpack::Indexing;
using ferry::http2::hpack::kEntryOverhead;

constexpr std::uint32_t kTableSizes[] = {0, 256, 4096, 65536};
constexpr std::uint32_t kListSizes[] = {64, 1000, 16384, 1u << 20};
constexpr std::uint32_t kCounts[] = {1, 10, 100, 100000};

void check_list(const DecodedHeaders& out, const DecoderLimits& limits) {
  std::uint64_t size = 0;
  for (const DecodedField& f : out.fields()) {
    size += f.name.size() + f.value.size() + kEntryOverhead;
    // Every byte readable (ASan checks the views).
    volatile char sink = 0;
    for (const char c : f.name) sink = sink + c;
    for (const char c : f.value) sink = sink + c;
  }
  FUZZ_CHECK(size == out.list_size());
  FUZZ_CHECK(out.list_size() <= limits.max_header_list_size);
  FUZZ_CHECK(out.fields().size() <= limits.max_header_count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  DecoderLimits limits{.max_table_size = kTableSizes[data[0] & 3],
                       .max_header_list_size = kListSizes[(data[0] >> 2) & 3],
                       .max_header_count = kCounts[(data[0] >> 4) & 3]};
  Decoder decoder(limits);
  DecodedHeaders out;
  // The round trip: ferry's encoder to a decoder that keeps everything.
  Encoder encoder;
  Decoder again(DecoderLimits{.max_header_list_size = 1u << 30, .max_header_count = 1u << 30});
  DecodedHeaders again_out;
  std::vector<Field> fields;
  std::string encoded;

  std::size_t at = 1;
  while (at + 3 <= size) {
    const std::uint8_t kind = data[at];
    const std::uint32_t value = std::uint32_t{data[at + 1]} << 8 | data[at + 2];
    at += 3;
    if (kind % 4 == 3) {  // a new SETTINGS_HEADER_TABLE_SIZE, acknowledged
      decoder.set_max_table_size(value);
      limits.max_table_size = value;
      continue;
    }
    const std::size_t length = std::min<std::size_t>(value, size - at);
    const std::span<const std::uint8_t> block(data + at, length);
    at += length;
    const absl::Status status = decoder.decode(block, out);
    FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInternal ||
               status.code() == absl::StatusCode::kResourceExhausted);
    FUZZ_CHECK(decoder.table().size() <= decoder.table().max_size());
    if (status.code() == absl::StatusCode::kInternal) return 0;  // COMPRESSION_ERROR: the end
    // A smaller SETTINGS_HEADER_TABLE_SIZE takes effect with the peer's size update at the start
    // of its next block; a block without one is a COMPRESSION_ERROR above (the table still at its
    // old size, and the connection ended), so only a decoded block's table is held to it.
    FUZZ_CHECK(decoder.table().max_size() <= std::max(limits.max_table_size, 4096u));
    check_list(out, limits);
    if (!status.ok()) continue;  // the stream refused, the connection goes on

    fields.clear();
    for (const DecodedField& f : out.fields()) {
      fields.push_back({f.name, f.value, f.never_indexed ? Indexing::kNever : Indexing::kAuto});
    }
    encoded.clear();
    encoder.encode(fields, encoded);
    const absl::Status again_status = again.decode(
        std::span(reinterpret_cast<const std::uint8_t*>(encoded.data()), encoded.size()),
        again_out);
    FUZZ_CHECK(again_status.ok());
    FUZZ_CHECK(again_out.fields().size() == out.fields().size());
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const DecodedField& f = again_out.fields()[i];
      FUZZ_CHECK(f.name == out.fields()[i].name && f.value == out.fields()[i].value);
      if (out.fields()[i].never_indexed) FUZZ_CHECK(f.never_indexed);
    }
  }
  return 0;
}

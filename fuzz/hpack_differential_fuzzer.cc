// libFuzzer target: the same header blocks and SETTINGS_HEADER_TABLE_SIZE changes fed to ferry's
// HPACK decoder (src/http2/hpack/decoder.h) and to nghttp2's inflater, block by block as one
// connection's: both must decode each block to the same fields (names, values, never-indexed) and
// end with the same dynamic table (size, entries, maximum), or both refuse it
// (COMPRESSION_ERROR), after which the connection is over. ferry's list limits are set beyond
// anything an input can reach, since nghttp2's inflater has none (its session applies them).
// Input: as hpack_decoder_fuzzer's, byte 0 ignored (fuzz/README.md).
#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/static_table.h"

namespace {

using ferry::http2::hpack::DecodedField;
using ferry::http2::hpack::DecodedHeaders;
using ferry::http2::hpack::Decoder;
using ferry::http2::hpack::DecoderLimits;

struct Nghttp2Field {
  std::string_view name, value;
  bool never_indexed;
};

// nghttp2's fields for `block`, or false when it refuses the block. The views stay valid until
// the inflater's next call; `copy` keeps them.
bool inflate(nghttp2_hd_inflater* inflater, std::span<const std::uint8_t> block,
             std::vector<std::string>& copy, std::vector<Nghttp2Field>& fields) {
  copy.clear();
  fields.clear();
  const std::uint8_t* in = block.data();
  std::size_t left = block.size();
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const auto rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, 1);
    if (rv < 0) return false;
    in += rv;
    left -= static_cast<std::size_t>(rv);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      copy.emplace_back(reinterpret_cast<const char*>(nv.name), nv.namelen);
      copy.emplace_back(reinterpret_cast<const char*>(nv.value), nv.valuelen);
      fields.push_back({{}, {}, (nv.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0});
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      for (std::size_t i = 0; i < fields.size(); ++i) {
        fields[i].name = copy[2 * i];
        fields[i].value = copy[2 * i + 1];
      }
      return true;
    }
    if (rv == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  Decoder decoder(DecoderLimits{
      .max_table_size = 4096, .max_header_list_size = 1u << 30, .max_header_count = 1u << 30});
  DecodedHeaders out;
  nghttp2_hd_inflater* inflater = nullptr;
  FUZZ_CHECK(nghttp2_hd_inflate_new(&inflater) == 0);
  std::vector<std::string> copy;
  std::vector<Nghttp2Field> expected;

  std::size_t at = 1;
  while (at + 3 <= size) {
    const std::uint8_t kind = data[at];
    const std::uint32_t value = std::uint32_t{data[at + 1]} << 8 | data[at + 2];
    at += 3;
    if (kind % 4 == 3) {  // a new SETTINGS_HEADER_TABLE_SIZE, acknowledged
      decoder.set_max_table_size(value);
      FUZZ_CHECK(nghttp2_hd_inflate_change_table_size(inflater, value) == 0);
      continue;
    }
    const std::size_t length = std::min<std::size_t>(value, size - at);
    const std::span<const std::uint8_t> block(data + at, length);
    at += length;
    const absl::Status status = decoder.decode(block, out);
    const bool nghttp2_ok = inflate(inflater, block, copy, expected);
    FUZZ_CHECK(status.code() != absl::StatusCode::kResourceExhausted);
    FUZZ_CHECK(status.ok() == nghttp2_ok);
    if (!nghttp2_ok) break;
    FUZZ_CHECK(out.fields().size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const DecodedField& f = out.fields()[i];
      FUZZ_CHECK(f.name == expected[i].name);
      FUZZ_CHECK(f.value == expected[i].value);
      FUZZ_CHECK(f.never_indexed == expected[i].never_indexed);
    }
    FUZZ_CHECK(decoder.table().size() == nghttp2_hd_inflate_get_dynamic_table_size(inflater));
    FUZZ_CHECK(decoder.table().count() == nghttp2_hd_inflate_get_num_table_entries(inflater) -
                                              ferry::http2::hpack::kStaticTableSize);
    FUZZ_CHECK(decoder.table().max_size() ==
               nghttp2_hd_inflate_get_max_dynamic_table_size(inflater));
  }
  nghttp2_hd_inflate_del(inflater);
  return 0;
}

// libFuzzer target: gzip inflate under the receive limit (src/codec/gzip.h), the input split into
// slices anywhere, against zlib driven plainly over the whole input as the reference: the same
// outcome (OK, RESOURCE_EXHAUSTED past the limit, INTERNAL for bad data), the same bytes, never
// more than the limit, and the output chain as it was on error. Also gzip_compress round trips.
// Input: 4 bytes of options, then the compressed bytes (see fuzz/README.md).
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "codec/gzip.h"
#include "ferry/frame.h"
#include "ferry/slice_chain.h"
#include "fuzz_check.h"

namespace {

constexpr std::size_t kMaxSizes[] = {0,
                                     1,
                                     10,
                                     100,
                                     1000,
                                     4095,
                                     4096,
                                     65535,
                                     65536,
                                     65537,
                                     131072,
                                     1 << 20,
                                     ferry::kDefaultMaxReceiveMessageSize,
                                     7,
                                     512,
                                     16384};

struct Outcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string bytes;  // when kOk
};

// zlib over the whole input at once: gzip members back to back (windowBits 15 + 16, as ferry),
// output counted against max_size as it comes.
Outcome reference_inflate(std::string_view in, std::size_t max_size) {
  Outcome out;
  if (in.empty()) return out;
  z_stream z{};
  FUZZ_CHECK(inflateInit2(&z, 15 + 16) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  static unsigned char buffer[1 << 16];
  const std::size_t cap = max_size + 1;  // one byte past the limit tells it is passed
  bool member_ended = false;
  while (true) {
    if (member_ended) {
      if (z.avail_in == 0) break;  // every member complete
      FUZZ_CHECK(inflateReset(&z) == Z_OK);
      member_ended = false;
    }
    const std::size_t room = std::min(sizeof buffer, cap - out.bytes.size());
    z.next_out = buffer;
    z.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.bytes.append(reinterpret_cast<char*>(buffer), room - z.avail_out);
    if (out.bytes.size() > max_size) {
      out.code = absl::StatusCode::kResourceExhausted;
      break;
    }
    if (rc == Z_STREAM_END) {
      member_ended = true;
    } else if ((rc != Z_OK && rc != Z_BUF_ERROR) || (z.avail_in == 0 && z.avail_out > 0)) {
      out.code = absl::StatusCode::kInternal;  // bad data, or input ended inside a member
      break;
    }
  }
  inflateEnd(&z);
  if (out.code != absl::StatusCode::kOk) out.bytes.clear();
  return out;
}

// data split into slices of the sizes chunk_sizes says (cycled; 0 = one slice for the rest),
// each by reference so that ASan sees a read past the input's exact end.
ferry::SliceChain split(std::string_view data, std::uint8_t chunk_size) {
  ferry::SliceChain chain;
  for (std::size_t at = 0; at < data.size();) {
    const std::size_t n =
        chunk_size == 0 ? data.size() - at : std::min<std::size_t>(chunk_size, data.size() - at);
    chain.append(ferry::Slice::unowned(data.data() + at, n));
    at += n;
  }
  return chain;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t max_size = data[0] < 128 ? kMaxSizes[data[0] % std::size(kMaxSizes)]
                                             : ((std::size_t{data[0]} & 0x7F) << 8 | data[1]) * 41;
  const std::uint8_t chunk_size = data[2];
  const std::size_t already = data[3] % 40;  // bytes out holds before the call
  const std::string_view in(reinterpret_cast<const char*>(data + 4), size - 4);

  ferry::SliceChain out;
  const std::string before(already, 'x');
  out.append_copy(before.data(), before.size());
  const absl::Status status = ferry::detail::gzip_decompress(split(in, chunk_size), max_size, out);
  const Outcome want = reference_inflate(in, max_size);
  if (status.code() != want.code) {
    std::fprintf(stderr, "ferry: %s; zlib: %d\n", status.ToString().c_str(),
                 static_cast<int>(want.code));
  }
  FUZZ_CHECK(status.code() == want.code);
  FUZZ_CHECK(out.size() - already <= max_size);
  FUZZ_CHECK(out.to_string() == before + want.bytes);

  // Compress what came in (as plain bytes) and inflate it back under a limit it fits exactly.
  if (data[3] >= 240) {
    ferry::SliceChain compressed;
    FUZZ_CHECK(ferry::detail::gzip_compress(split(in, chunk_size), compressed).ok());
    ferry::SliceChain back;
    FUZZ_CHECK(ferry::detail::gzip_decompress(compressed, in.size(), back).ok());
    FUZZ_CHECK(back.to_string() == in);
    if (!in.empty()) {
      ferry::SliceChain short_of_it;
      FUZZ_CHECK(ferry::detail::gzip_decompress(compressed, in.size() - 1, short_of_it).code() ==
                 absl::StatusCode::kResourceExhausted);
      FUZZ_CHECK(short_of_it.empty());
    }
  }
  return 0;
}

// Private to the codec layer: gzip (RFC 1952, zlib's deflate with the gzip wrapper) between
// SliceChains of pooled blocks. Each thread keeps one deflate and one inflate stream and resets
// them per message, so a warm thread allocates nothing per message here.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "ferry/slice_chain.h"

namespace ferry::detail {

// Appends the gzip encoding of plain (one gzip member) to out, written straight into out's tail
// block and fresh pooled blocks. INTERNAL only if zlib fails (out of memory); out is then left
// as it was.
[[nodiscard]] absl::Status gzip_compress(const SliceChain& plain, SliceChain& out);

// Appends what compressed inflates to (one or more gzip members back to back; empty input gives
// nothing) to out. Inflates in steps of at most a block and stops as soon as the output would
// pass max_size, so a decompression bomb costs at most max_size + one block of memory:
//   RESOURCE_EXHAUSTED  more than max_size bytes would come out;
//   INTERNAL            not gzip, corrupt (bad CRC, bad codes) or truncated.
// On error out is left as it was.
[[nodiscard]] absl::Status gzip_decompress(const SliceChain& compressed, std::size_t max_size,
                                           SliceChain& out);

}  // namespace ferry::detail

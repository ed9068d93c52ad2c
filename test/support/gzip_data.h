// gzip test data made with zlib itself, the reference implementation (test support): a one-shot
// gzip of a string, and a gzip of many zeros (a decompression bomb) made in steps, without a
// buffer of the inflated size. Tests that include this link ZLIB::ZLIB.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ferry::testing {

// The gzip member (windowBits 15 + 16) of plain at the given level.
inline std::string zlib_gzip(const std::string& plain, int level = 1) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::string out(deflateBound(&z, plain.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

// The gzip of `zeros` zero bytes at level 9: ~1/1000 of that size (deflate's limit is ~1032:1).
inline std::string gzip_of_zeros(std::size_t zeros) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  const std::string block(64 * 1024, '\0');
  std::string out;
  char buf[16 * 1024];
  std::size_t left = zeros;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    const std::size_t n = std::min(left, block.size());
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(block.data()));
    z.avail_in = static_cast<uInt>(n);
    left -= n;
    const int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      rc = deflate(&z, flush);
      out.append(buf, sizeof(buf) - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

}  // namespace ferry::testing

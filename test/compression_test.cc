// Tests of gzip per-message compression in the codec layer: names, round trips at every size
// class, gzip produced by another implementation (Python's gzip module), corrupt and truncated
// input, and decompression bombs against the receive limit.
#include "ferry/compression.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "codec/gzip.h"
#include "ferry/buffer_pool.h"
#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"
#include "ferry/testing/buffer.pb.h"
#include "support/gzip_data.h"

namespace ferry::compression_test {
namespace {

using testing::Buffer;
using testing::gzip_of_zeros;
using testing::zlib_gzip;

// gzip.compress(b"hello ferry, hello gzip", mtime=0) from Python's gzip module.
constexpr std::uint8_t kPythonGzipText[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd,
    0xc9, 0xc9, 0x57, 0x48, 0x4b, 0x2d, 0x2a, 0xaa, 0xd4, 0x51, 0xc8, 0x00, 0x73,
    0xd2, 0xab, 0x32, 0x0b, 0x00, 0x31, 0xe9, 0xa7, 0x09, 0x17, 0x00, 0x00, 0x00};
// gzip.compress(Buffer(body=b"hello ferry, hello gzip").SerializeToString(), compresslevel=9,
// mtime=0): a gRPC payload as another implementation compresses it.
constexpr std::uint8_t kPythonGzipBuffer[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xe3, 0x12, 0xcf, 0x48,
    0xcd, 0xc9, 0xc9, 0x57, 0x48, 0x4b, 0x2d, 0x2a, 0xaa, 0xd4, 0x51, 0x80, 0x70, 0xd2,
    0xab, 0x32, 0x0b, 0x00, 0x5a, 0x3e, 0xd6, 0x60, 0x19, 0x00, 0x00, 0x00};

SliceChain chain_of(const void* data, std::size_t size) {
  SliceChain chain;
  chain.append_copy(data, size);
  return chain;
}

SliceChain chain_of(const std::string& s) { return chain_of(s.data(), s.size()); }

// Bytes that compress somewhat but not trivially: a short-period pattern with noise.
std::string mixed_bytes(std::size_t n) {
  std::string s(n, '\0');
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = (i % 7 == 0) ? static_cast<char>(x >> 24) : static_cast<char>('a' + i % 13);
  }
  return s;
}

TEST(Compression, NamesRoundTrip) {
  EXPECT_EQ(compression_name(Compression::kIdentity), "identity");
  EXPECT_EQ(compression_name(Compression::kGzip), "gzip");
  EXPECT_EQ(parse_compression("gzip"), Compression::kGzip);
  EXPECT_EQ(parse_compression(" gzip "), Compression::kGzip);
  EXPECT_EQ(parse_compression("identity"), Compression::kIdentity);
  EXPECT_EQ(parse_compression("snappy"), std::nullopt);
  EXPECT_EQ(parse_compression("deflate"), std::nullopt);
  EXPECT_EQ(parse_compression(""), std::nullopt);
}

class GzipSizes : public ::testing::TestWithParam<std::size_t> {};

// Encode with ferry, frame-decode, decompress, parse: the message survives, the frame says
// compressed, and zlib's own inflate agrees on the bytes.
TEST_P(GzipSizes, MessageRoundTrips) {
  Buffer msg;
  msg.set_body(mixed_bytes(GetParam()));
  SliceChain wire;
  ASSERT_TRUE(encode_compressed_message(msg, Compression::kGzip, wire).ok());
  ASSERT_GE(wire.size(), kFramePrefixSize + 18);  // a gzip member is at least 18 bytes

  FrameDecoder decoder(FrameDecoderOptions{64 << 20, /*compression_negotiated=*/true});
  decoder.push(Slice());  // nothing: the decoder copes with empty pushes
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage decoded;
  absl::StatusOr<bool> got = decoder.next(decoded);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(*got);
  EXPECT_TRUE(decoded.compressed);
  EXPECT_EQ(decoder.buffered_bytes(), 0u);

  SliceChain plain;
  ASSERT_TRUE(decompress_payload(decoded.payload, Compression::kGzip, 64 << 20, plain).ok());
  EXPECT_EQ(plain.size(), msg.ByteSizeLong());
  Buffer parsed;
  ASSERT_TRUE(parse_message(plain, parsed).ok());
  EXPECT_EQ(parsed.body(), msg.body());

  // The payload is standard gzip: zlib's one-shot inflate reads it too.
  const std::string gz = decoded.payload.to_string();
  EXPECT_EQ(static_cast<std::uint8_t>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<std::uint8_t>(gz[1]), 0x8b);
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(msg.ByteSizeLong() + 1, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  EXPECT_EQ(z.total_out, msg.ByteSizeLong());
  inflateEnd(&z);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GzipSizes,
                         ::testing::Values(0, 1, 1024, 64 * 1024 + 1, 1 << 20, (4 << 20) + 3));

TEST(Gzip, PackedMessagesShareTheChain) {
  // Several compressed messages back to back in one chain, each framed on its own.
  SliceChain wire;
  for (int i = 0; i < 20; ++i) {
    Buffer msg;
    msg.set_body(std::string(static_cast<std::size_t>(i * 100), static_cast<char>('a' + i)));
    ASSERT_TRUE(encode_compressed_message(msg, Compression::kGzip, wire).ok());
  }
  FrameDecoder decoder(FrameDecoderOptions{1 << 20, true});
  for (const Slice& s : wire) decoder.push(s);
  for (int i = 0; i < 20; ++i) {
    DecodedMessage decoded;
    ASSERT_TRUE(*decoder.next(decoded));
    SliceChain plain;
    ASSERT_TRUE(decompress_payload(decoded.payload, Compression::kGzip, 1 << 20, plain).ok());
    Buffer parsed;
    ASSERT_TRUE(parse_message(plain, parsed).ok());
    EXPECT_EQ(parsed.body(),
              std::string(static_cast<std::size_t>(i * 100), static_cast<char>('a' + i)));
  }
}

TEST(Gzip, IdentityEncodingIsThePlainEncoder) {
  Buffer msg;
  msg.set_body("abc");
  SliceChain a, b;
  ASSERT_TRUE(encode_compressed_message(msg, Compression::kIdentity, a).ok());
  ASSERT_TRUE(encode_message(msg, b).ok());
  EXPECT_EQ(a.to_string(), b.to_string());
}

TEST(Gzip, SendLimitAppliesToTheSerializedSize) {
  Buffer msg;
  msg.set_body(std::string(1000, 'z'));  // compresses to a few dozen bytes
  SliceChain wire;
  absl::Status s = encode_compressed_message(msg, Compression::kGzip, wire, 500);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(wire.empty());
}

TEST(Gzip, DecodesPythonGzip) {
  SliceChain out;
  ASSERT_TRUE(
      detail::gzip_decompress(chain_of(kPythonGzipText, sizeof(kPythonGzipText)), 1024, out).ok());
  EXPECT_EQ(out.to_string(), "hello ferry, hello gzip");

  // The same as a whole gRPC message: prefix with flag 1, then Python's gzip of a Buffer.
  SliceChain wire;
  ASSERT_TRUE(encode_bytes(std::string_view(reinterpret_cast<const char*>(kPythonGzipBuffer),
                                            sizeof(kPythonGzipBuffer)),
                           /*compressed=*/true, wire)
                  .ok());
  FrameDecoder decoder(FrameDecoderOptions{1024, true});
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage decoded;
  ASSERT_TRUE(*decoder.next(decoded));
  ASSERT_TRUE(decoded.compressed);
  SliceChain plain;
  ASSERT_TRUE(decompress_payload(decoded.payload, Compression::kGzip, 1024, plain).ok());
  Buffer parsed;
  ASSERT_TRUE(parse_message(plain, parsed).ok());
  EXPECT_EQ(parsed.body(), "hello ferry, hello gzip");
}

TEST(Gzip, DecodesInputSplitAnywhere) {
  // Every split point of Python's blob into two slices, and one slice per byte.
  for (std::size_t cut = 0; cut <= sizeof(kPythonGzipText); ++cut) {
    SliceChain in;
    in.append(Slice::copy_of(kPythonGzipText, cut));
    in.append(Slice::copy_of(kPythonGzipText + cut, sizeof(kPythonGzipText) - cut));
    SliceChain out;
    ASSERT_TRUE(detail::gzip_decompress(in, 1024, out).ok()) << "cut at " << cut;
    EXPECT_EQ(out.to_string(), "hello ferry, hello gzip");
  }
  SliceChain bytes;
  for (std::uint8_t b : kPythonGzipText) bytes.append(Slice::copy_of(&b, 1));
  SliceChain out;
  ASSERT_TRUE(detail::gzip_decompress(bytes, 1024, out).ok());
  EXPECT_EQ(out.to_string(), "hello ferry, hello gzip");
}

TEST(Gzip, LargeOutputFromSmallInputCrossesBlocks) {
  const std::string plain = mixed_bytes(3 * BufferPool::kBlockSize + 17);
  SliceChain out;
  ASSERT_TRUE(detail::gzip_decompress(chain_of(zlib_gzip(plain)), plain.size(), out).ok());
  EXPECT_EQ(out.to_string(), plain);
}

TEST(Gzip, ConcatenatedMembersDecodeAsOne) {
  // RFC 1952: a gzip stream may hold several members; they decode to the concatenation.
  const std::string both = zlib_gzip("first half, ") + zlib_gzip("second half");
  SliceChain out;
  ASSERT_TRUE(detail::gzip_decompress(chain_of(both), 1024, out).ok());
  EXPECT_EQ(out.to_string(), "first half, second half");
}

TEST(Gzip, EmptyPayloadIsAnEmptyMessage) {
  SliceChain out;
  EXPECT_TRUE(detail::gzip_decompress(SliceChain(), 1024, out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(Gzip, CorruptDataIsInternal) {
  const std::string good = zlib_gzip(mixed_bytes(5000));
  struct Case {
    const char* what;
    std::string bytes;
  };
  std::vector<Case> cases;
  cases.push_back({"not gzip at all", "this is plain text, not gzip"});
  cases.push_back({"zlib wrapper, not gzip", [] {
                     std::string z(64, '\0');
                     uLongf n = z.size();
                     compress(reinterpret_cast<Bytef*>(z.data()), &n,
                              reinterpret_cast<const Bytef*>("abc"), 3);
                     z.resize(n);
                     return z;
                   }()});
  std::string flipped = good;
  flipped[good.size() / 2] = static_cast<char>(flipped[good.size() / 2] ^ 0x55);
  cases.push_back({"a flipped byte in the body", flipped});
  std::string bad_crc = good;
  bad_crc[good.size() - 6] = static_cast<char>(bad_crc[good.size() - 6] ^ 1);
  cases.push_back({"a wrong CRC", bad_crc});
  cases.push_back({"truncated", good.substr(0, good.size() - 4)});
  cases.push_back({"only the header", good.substr(0, 10)});
  cases.push_back({"garbage after the member", good + "garbage!"});
  for (const Case& c : cases) {
    SliceChain out;
    out.append_copy("kept", 4);
    absl::Status s = detail::gzip_decompress(chain_of(c.bytes), 1 << 20, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << c.what << ": " << s;
    EXPECT_EQ(out.to_string(), "kept") << c.what << ": out must be left as it was";
  }
}

TEST(Gzip, CompressedFlagWithoutEncodingIsInternal) {
  SliceChain out;
  absl::Status s = decompress_payload(chain_of(zlib_gzip("x")), Compression::kIdentity, 1024, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST(Gzip, ExactlyTheLimitPassesOneMoreByteFails) {
  const std::string plain = mixed_bytes(100000);
  const SliceChain gz = chain_of(zlib_gzip(plain));
  SliceChain out;
  EXPECT_TRUE(detail::gzip_decompress(gz, plain.size(), out).ok());
  SliceChain out2;
  absl::Status s = detail::gzip_decompress(gz, plain.size() - 1, out2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(out2.empty());
}

TEST(Gzip, DecompressionBombIsResourceExhaustedWithBoundedMemory) {
  // ~100 KiB of gzip that would inflate to 100 MiB, against the default 4 MiB limit.
  const std::string bomb = gzip_of_zeros(100u << 20);
  ASSERT_LT(bomb.size(), 128u << 10);
  const SliceChain in = chain_of(bomb);
  BufferPool::instance().trim();
  const BufferPoolStats before = BufferPool::instance().stats();
  SliceChain out;
  absl::Status s = detail::gzip_decompress(in, kDefaultMaxReceiveMessageSize, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(out.empty());
  // Never more than the limit plus a block was inflated: at most 4 MiB / 64 KiB + 2 blocks taken.
  const BufferPoolStats after = BufferPool::instance().stats();
  EXPECT_LE(after.blocks_allocated - before.blocks_allocated,
            kDefaultMaxReceiveMessageSize / BufferPool::kBlockSize + 2);
}

TEST(Gzip, BombAsAFramedMessageFailsTheSameWay) {
  // 1 KiB of gzip inflating to ~1 MiB (deflate's ratio is at most ~1032:1), against 64 KiB.
  const std::string bomb = gzip_of_zeros(1u << 20);
  ASSERT_LT(bomb.size(), 2048u);
  SliceChain wire;
  ASSERT_TRUE(encode_bytes(bomb, true, wire).ok());
  FrameDecoder decoder(FrameDecoderOptions{64 << 10, true});
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage decoded;
  ASSERT_TRUE(*decoder.next(decoded));  // the compressed size is within the limit
  SliceChain plain;
  absl::Status s = decompress_payload(decoded.payload, Compression::kGzip, 64 << 10, plain);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

}  // namespace
}  // namespace ferry::compression_test

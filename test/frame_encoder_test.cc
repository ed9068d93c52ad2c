// Tests for ferry/frame_encoder.h: byte-exact prefixes, in-place packing, limits.
#include "ferry/frame_encoder.h"

#include <gtest/gtest.h>

#include <string>

#include "ferry/testing/buffer.pb.h"

namespace ferry::frame_encoder_test {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

testing::Buffer buffer_of(std::size_t n, char fill = 'x') {
  testing::Buffer msg;
  msg.set_body(std::string(n, fill));
  return msg;
}

TEST(FrameEncoder, EmptyMessageIsAZeroLengthFrame) {
  SliceChain out;
  ASSERT_TRUE(encode_message(testing::Buffer(), out).ok());
  EXPECT_EQ(out.to_string(), bytes({0, 0, 0, 0, 0}));
}

TEST(FrameEncoder, SmallMessageGoldenBytes) {
  testing::Buffer msg;
  msg.set_body("hi");
  SliceChain out;
  ASSERT_TRUE(encode_message(msg, out).ok());
  // flag 0, length 4, then field 1 (tag 0x0a), length 2, "hi".
  EXPECT_EQ(out.to_string(), bytes({0x00, 0x00, 0x00, 0x00, 0x04, 0x0a, 0x02, 'h', 'i'}));
}

TEST(FrameEncoder, MultiByteLengthGoldenPrefix) {
  SliceChain out;
  ASSERT_TRUE(encode_message(buffer_of(300), out).ok());
  // 300 = varint ac 02; payload 1 + 2 + 300 = 303 = 0x12f.
  EXPECT_EQ(out.to_string().substr(0, 8), bytes({0x00, 0x00, 0x00, 0x01, 0x2f, 0x0a, 0xac, 0x02}));
  EXPECT_EQ(out.size(), 5u + 303u);
}

TEST(FrameEncoder, MessageLargerThanABlockStreamsAcrossBlocks) {
  SliceChain out;
  ASSERT_TRUE(encode_message(buffer_of(70000, 'q'), out).ok());
  // 70000 = varint f0 a2 04; payload 1 + 3 + 70000 = 70004 = 0x011174.
  const std::string wire = out.to_string();
  EXPECT_EQ(wire.substr(0, 9), bytes({0x00, 0x00, 0x01, 0x11, 0x74, 0x0a, 0xf0, 0xa2, 0x04}));
  EXPECT_EQ(wire.size(), 5u + 70004u);
  EXPECT_EQ(wire.substr(9), std::string(70000, 'q'));
  EXPECT_GE(out.slice_count(), 2u);
}

TEST(FrameEncoder, ConsecutiveSmallMessagesArePackedContiguously) {
  SliceChain out;
  ASSERT_TRUE(encode_message(buffer_of(10), out).ok());
  ASSERT_TRUE(encode_message(buffer_of(20), out).ok());
  ASSERT_TRUE(encode_message(testing::Buffer(), out).ok());
  EXPECT_EQ(out.slice_count(), 1u) << "three messages should share one block, back to back";
  EXPECT_EQ(out.size(), (5u + 12u) + (5u + 22u) + 5u);
}

TEST(FrameEncoder, MessageOverTheLimitIsRefusedAndOutIsUntouched) {
  SliceChain out;
  ASSERT_TRUE(encode_message(buffer_of(3), out).ok());
  const std::string before = out.to_string();
  absl::Status s = encode_message(buffer_of(100), out, /*max_size=*/50);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("102"), std::string::npos) << s;
  EXPECT_EQ(out.to_string(), before);

  s = encode_message(buffer_of(200000), out, /*max_size=*/100000);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(out.to_string(), before);
}

TEST(FrameEncoder, EncodeBytesWritesFlagAndCopiesPayload) {
  SliceChain out;
  ASSERT_TRUE(encode_bytes("abc", /*compressed=*/true, out).ok());
  EXPECT_EQ(out.to_string(), bytes({0x01, 0, 0, 0, 3, 'a', 'b', 'c'}));

  const std::string big(100000, 'b');
  SliceChain big_out;
  ASSERT_TRUE(encode_bytes(big, false, big_out).ok());
  EXPECT_EQ(big_out.to_string(), bytes({0, 0, 0x01, 0x86, 0xa0}) + big);

  EXPECT_EQ(encode_bytes(big, false, big_out, 1000).code(), absl::StatusCode::kResourceExhausted);
}

TEST(FrameEncoder, EncodeChainAppendsThePayloadByReference) {
  SliceChain payload;
  payload.append(Slice::copy_of("zero-copy", 9));
  const std::uint8_t* where = payload.slice(0).data();
  SliceChain out;
  ASSERT_TRUE(encode_chain(std::move(payload), false, out).ok());
  EXPECT_EQ(out.to_string(), bytes({0, 0, 0, 0, 9}) + "zero-copy");
  ASSERT_EQ(out.slice_count(), 2u);
  EXPECT_EQ(out.slice(1).data(), where);
}

}  // namespace
}  // namespace ferry::frame_encoder_test

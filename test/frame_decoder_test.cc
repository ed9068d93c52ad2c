// Tests for ferry/frame_decoder.h: round trips at every size, every split point, zero-copy
// delivery, and every kind of bad input.
#include "ferry/frame_decoder.h"

#include <google/protobuf/arena.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ferry/frame_encoder.h"
#include "ferry/testing/buffer.pb.h"

namespace ferry::frame_decoder_test {
namespace {

using testing::Buffer;

std::string body_of(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131) ^ (i >> 8));
  return s;
}

Buffer buffer_of(std::size_t n) {
  Buffer msg;
  msg.set_body(body_of(n));
  return msg;
}

std::string wire_of(const std::vector<std::size_t>& sizes) {
  SliceChain out;
  for (std::size_t n : sizes) EXPECT_TRUE(encode_message(buffer_of(n), out).ok());
  return out.to_string();
}

// Pushes wire to a decoder cut at the given offsets; returns the bodies decoded.
std::vector<std::string> decode_split(const std::string& wire, const std::vector<std::size_t>& cuts,
                                      FrameDecoderOptions options = {}) {
  FrameDecoder decoder(options);
  std::vector<std::string> bodies;
  std::size_t start = 0;
  auto drain = [&] {
    DecodedMessage m;
    while (true) {
      absl::StatusOr<bool> got = decoder.next(m);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok() || !*got) return;
      Buffer msg;
      EXPECT_TRUE(parse_message(m.payload, msg).ok());
      bodies.push_back(msg.body());
    }
  };
  for (std::size_t cut : cuts) {
    decoder.push_copy(wire.data() + start, cut - start);
    drain();
    start = cut;
  }
  decoder.push_copy(wire.data() + start, wire.size() - start);
  drain();
  EXPECT_TRUE(decoder.finish().ok());
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
  return bodies;
}

class RoundTrip : public ::testing::TestWithParam<std::size_t> {};

TEST_P(RoundTrip, EncodeThenDecodeGivesTheSameMessage) {
  const std::size_t n = GetParam();
  const Buffer original = buffer_of(n);
  SliceChain wire;
  ASSERT_TRUE(encode_message(original, wire).ok());

  FrameDecoderOptions options;
  options.max_message_size = 64 << 20;
  FrameDecoder decoder(options);
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage m;
  absl::StatusOr<bool> got = decoder.next(m);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(*got);
  EXPECT_FALSE(m.compressed);
  Buffer decoded;
  ASSERT_TRUE(parse_message(m.payload, decoded).ok());
  EXPECT_TRUE(decoded.body() == original.body()) << "body of " << n << " bytes differs";
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
  EXPECT_TRUE(decoder.finish().ok());
}

INSTANTIATE_TEST_SUITE_P(Sizes, RoundTrip,
                         ::testing::Values(0, 1, 1024, 8 * 1024, 64 * 1024, 512 * 1024, 1 << 20,
                                           16 << 20));

TEST(FrameDecoder, SixteenMiBNeedsARaisedLimit) {
  SliceChain wire;
  ASSERT_TRUE(encode_message(buffer_of(16 << 20), wire).ok());
  FrameDecoder decoder;  // default 4 MiB
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage m;
  EXPECT_EQ(decoder.next(m).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(FrameDecoder, EverySplitPointOfSmallMessages) {
  const std::vector<std::size_t> sizes = {0, 1, 5, 100, 0};
  const std::string wire = wire_of(sizes);
  std::vector<std::string> expected;
  for (std::size_t n : sizes) expected.push_back(body_of(n));
  for (std::size_t i = 0; i <= wire.size(); ++i) {
    for (std::size_t j = i; j <= wire.size(); ++j) {
      ASSERT_EQ(decode_split(wire, {i, j}), expected) << "cuts at " << i << " and " << j;
    }
  }
}

TEST(FrameDecoder, OneByteAtATime) {
  const std::vector<std::size_t> sizes = {3, 0, 300, 70000};
  const std::string wire = wire_of(sizes);
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < wire.size(); ++i) cuts.push_back(i);
  std::vector<std::string> expected;
  for (std::size_t n : sizes) expected.push_back(body_of(n));
  EXPECT_EQ(decode_split(wire, cuts), expected);
}

TEST(FrameDecoder, RandomSplitsOfLargeMessages) {
  const std::vector<std::size_t> sizes = {1 << 20, 7, 512 * 1024 + 3, 64 * 1024, 0, 100000};
  const std::string wire = wire_of(sizes);
  std::vector<std::string> expected;
  for (std::size_t n : sizes) expected.push_back(body_of(n));
  std::mt19937 rng(20261122);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::size_t> cuts;
    std::uniform_int_distribution<std::size_t> step(1, round % 2 == 0 ? 70000 : 5000);
    for (std::size_t at = step(rng); at < wire.size(); at += step(rng)) cuts.push_back(at);
    ASSERT_EQ(decode_split(wire, cuts), expected) << "round " << round;
  }
}

TEST(FrameDecoder, MessageInsideOneChunkIsDeliveredWithoutCopying) {
  SliceChain wire;
  ASSERT_TRUE(encode_message(buffer_of(1000), wire).ok());
  ASSERT_TRUE(encode_message(buffer_of(2000), wire).ok());
  ASSERT_EQ(wire.slice_count(), 1u);
  const Slice chunk = wire.slice(0);

  FrameDecoder decoder;
  decoder.push(chunk);
  DecodedMessage first, second;
  ASSERT_TRUE(*decoder.next(first));
  ASSERT_TRUE(*decoder.next(second));
  ASSERT_EQ(first.payload.slice_count(), 1u);
  EXPECT_EQ(first.payload.slice(0).data(), chunk.data() + kFramePrefixSize);
  EXPECT_EQ(second.payload.slice(0).data(), chunk.data() + 2 * kFramePrefixSize + 1003);
  EXPECT_EQ(first.payload.slice(0).block(), chunk.block());
}

// Pushes wire by reference in pieces of the sizes step() gives, each piece a block of its own (as
// each read of a trickling peer is), dropping the pieces once pushed; returns the bodies decoded
// and, in max_blocks, the most blocks in use meanwhile beyond those at the start.
template <class Step>
std::vector<std::string> decode_by_reference(const std::string& wire, Step step,
                                             std::int64_t& max_blocks) {
  const std::int64_t start = BufferPool::instance().stats().blocks_in_use;
  max_blocks = 0;
  FrameDecoder decoder;
  std::vector<std::string> bodies;
  for (std::size_t at = 0; at < wire.size();) {
    const std::size_t n = std::min(step(), wire.size() - at);
    decoder.push(Slice::copy_of(wire.data() + at, n));
    at += n;
    DecodedMessage m;
    while (true) {
      absl::StatusOr<bool> got = decoder.next(m);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok() || !*got) break;
      Buffer msg;
      EXPECT_TRUE(parse_message(m.payload, msg).ok());
      bodies.push_back(msg.body());
    }
    max_blocks = std::max(max_blocks, BufferPool::instance().stats().blocks_in_use - start);
  }
  EXPECT_TRUE(decoder.finish().ok());
  return bodies;
}

// A peer that trickles a message one byte per read used to make the decoder keep one 64 KiB
// block per byte (5,000 blocks here); the bytes are copied into the decoder's own blocks once
// the reads' blocks far outweigh them, so a few blocks are in use at any time.
TEST(FrameDecoder, BytesTrickledByReferenceKeepAFewBlocksNotOnePerRead) {
  const std::vector<std::size_t> sizes = {3, 300, 5000, 0, 7};
  const std::string wire = wire_of(sizes);
  std::vector<std::string> expected;
  for (std::size_t n : sizes) expected.push_back(body_of(n));
  std::int64_t max_blocks = 0;
  EXPECT_EQ(decode_by_reference(
                wire, [] { return std::size_t{1}; }, max_blocks),
            expected);
  EXPECT_LE(max_blocks, 3) << "blocks in use while the message trickled in";
}

// The same with pieces of random sizes (1 to 200 bytes), which split prefixes and messages at
// every place relative to the copies: the bytes come out as they went in.
TEST(FrameDecoder, RandomSmallPiecesByReferenceDecodeIntactInAFewBlocks) {
  const std::vector<std::size_t> sizes = {70000, 1, 300, 20000, 0, 5};
  const std::string wire = wire_of(sizes);
  std::vector<std::string> expected;
  for (std::size_t n : sizes) expected.push_back(body_of(n));
  std::mt19937 rng(20261128);
  std::uniform_int_distribution<std::size_t> piece(1, 200);
  std::int64_t max_blocks = 0;
  EXPECT_EQ(decode_by_reference(
                wire, [&] { return piece(rng); }, max_blocks),
            expected);
  EXPECT_LE(max_blocks, 4);
}

// The zero-copy path stays for bytes that use their blocks well: a message arriving in nearly
// full 64 KiB reads is delivered as slices of those blocks, never copied.
TEST(FrameDecoder, MessageInFullReadsIsNotCopied) {
  const std::string wire = wire_of({200000});
  FrameDecoder decoder;
  std::vector<Slice> reads;
  constexpr std::size_t kRead = 60000;
  DecodedMessage m;
  for (std::size_t at = 0; at < wire.size(); at += kRead) {
    reads.push_back(Slice::copy_of(wire.data() + at, std::min(kRead, wire.size() - at)));
    decoder.push(reads.back());
  }
  ASSERT_TRUE(*decoder.next(m));
  ASSERT_EQ(m.payload.slice_count(), reads.size());
  for (std::size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(m.payload.slice(i).block(), reads[i].block()) << "slice " << i << " was copied";
  }
}

TEST(FrameDecoder, ParsesOntoAnArena) {
  SliceChain wire;
  ASSERT_TRUE(encode_message(buffer_of(100000), wire).ok());
  FrameDecoder decoder;
  for (const Slice& s : wire) decoder.push(s);
  DecodedMessage m;
  ASSERT_TRUE(*decoder.next(m));
  google::protobuf::Arena arena;
  Buffer* msg = google::protobuf::Arena::CreateMessage<Buffer>(&arena);
  ASSERT_TRUE(parse_message(m.payload, *msg).ok());
  EXPECT_EQ(msg->body(), body_of(100000));
  EXPECT_EQ(msg->GetArena(), &arena);
}

TEST(FrameDecoder, CompressedFlagWithoutNegotiationIsInternal) {
  FrameDecoder decoder;
  decoder.push_copy("\x01\x00\x00\x00\x01z", 6);
  DecodedMessage m;
  absl::StatusOr<bool> got = decoder.next(m);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(got.status().message().find("compressed"), std::string::npos);
}

TEST(FrameDecoder, CompressedFlagWithNegotiationIsReported) {
  FrameDecoderOptions options;
  options.compression_negotiated = true;
  FrameDecoder decoder(options);
  decoder.push_copy("\x01\x00\x00\x00\x01z", 6);
  DecodedMessage m;
  ASSERT_TRUE(*decoder.next(m));
  EXPECT_TRUE(m.compressed);
  EXPECT_EQ(m.payload.to_string(), "z");
}

TEST(FrameDecoder, FlagOtherThanZeroOrOneIsInternalAndSticky) {
  FrameDecoderOptions options;
  options.compression_negotiated = true;
  FrameDecoder decoder(options);
  decoder.push_copy("\x02\x00\x00\x00\x00", 5);
  DecodedMessage m;
  EXPECT_EQ(decoder.next(m).status().code(), absl::StatusCode::kInternal);
  decoder.push_copy("\x00\x00\x00\x00\x00", 5);  // a valid frame after the error changes nothing
  EXPECT_EQ(decoder.next(m).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(decoder.finish().code(), absl::StatusCode::kInternal);
}

TEST(FrameDecoder, OversizedLengthIsRefusedAsSoonAsThePrefixArrives) {
  FrameDecoderOptions options;
  options.max_message_size = 1000;
  FrameDecoder decoder(options);
  decoder.push_copy("\x00\xff\xff", 3);
  DecodedMessage m;
  EXPECT_FALSE(*decoder.next(m));  // the prefix is not complete yet
  decoder.push_copy("\xff\xff", 2);
  absl::StatusOr<bool> got = decoder.next(m);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(got.status().message().find("4294967295"), std::string::npos) << got.status();
  EXPECT_EQ(decoder.buffered_bytes(), 0u) << "nothing of the oversized message may be kept";
}

TEST(FrameDecoder, LengthExactlyAtTheLimitIsAccepted) {
  FrameDecoderOptions options;
  options.max_message_size = 4;
  FrameDecoder decoder(options);
  decoder.push_copy("\x00\x00\x00\x00\x04\x0a\x02hi", 9);
  DecodedMessage m;
  ASSERT_TRUE(*decoder.next(m));
  Buffer msg;
  ASSERT_TRUE(parse_message(m.payload, msg).ok());
  EXPECT_EQ(msg.body(), "hi");
}

TEST(FrameDecoder, PayloadThatIsNotTheMessageIsInternal) {
  // Field 1 declares 5 bytes, only 2 follow.
  SliceChain one;
  one.append(
      Slice::copy_of("\x0a\x05"
                     "ab",
                     4));
  Buffer msg;
  absl::Status s = parse_message(one, msg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("ferry.testing.Buffer"), std::string::npos) << s;

  // The same across several slices (the zero-copy stream path).
  SliceChain many;
  many.append(Slice::copy_of("\x0a", 1));
  many.append(Slice::copy_of("\x05", 1));
  many.append(Slice::copy_of("ab", 2));
  EXPECT_EQ(parse_message(many, msg).code(), absl::StatusCode::kInternal);

  // A wire-type the message cannot hold (tag 0 is never valid).
  SliceChain zero_tag;
  zero_tag.append(Slice::copy_of("\x00\x01", 2));
  EXPECT_EQ(parse_message(zero_tag, msg).code(), absl::StatusCode::kInternal);
}

TEST(FrameDecoder, StreamEndingInsideAMessageIsInternal) {
  FrameDecoder decoder;
  decoder.push_copy("\x00\x00\x00\x00\x04\x0a\x02", 7);
  DecodedMessage m;
  EXPECT_FALSE(*decoder.next(m));
  absl::Status s = decoder.finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  FrameDecoder half_prefix;
  half_prefix.push_copy("\x00\x00", 2);
  EXPECT_EQ(half_prefix.finish().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(FrameDecoder().finish().ok());
}

TEST(FrameDecoder, GarbageStreamsNeverCrash) {
  // Random bytes: every outcome must be a clean error or a message, and memory stays bounded by
  // the limit (nothing is buffered beyond what was pushed).
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    FrameDecoderOptions options;
    options.max_message_size = 256;
    options.compression_negotiated = round % 2 == 0;
    FrameDecoder decoder(options);
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() % 4 == 0 ? rng() % 3 : rng());
    decoder.push_copy(junk.data(), junk.size());
    DecodedMessage m;
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<bool> got = decoder.next(m);
      if (!got.ok() || !*got) break;
      Buffer msg;
      (void)parse_message(m.payload, msg);
    }
    EXPECT_LE(decoder.buffered_bytes(), junk.size());
  }
}

}  // namespace
}  // namespace ferry::frame_decoder_test

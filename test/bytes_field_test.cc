// Bodies by reference at the codec level: external slices (Slice::external) and their owner's
// lifetime, framing a shared chain (encode_chain), and a message's bytes field written and cut
// out by reference (ferry/bytes_field.h), checked against protobuf's own parser and serializer.
#include "ferry/bytes_field.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"
#include "ferry/slice_chain.h"
#include "ferry/testing/echo.pb.h"

namespace ferry::bytes_field_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;

// A body of n bytes held by a shared string, as one external slice.
SliceChain external_body(std::size_t n, std::shared_ptr<std::string>* owner_out = nullptr) {
  auto owner = std::make_shared<std::string>(n, '\0');
  for (std::size_t i = 0; i < n; ++i) (*owner)[i] = static_cast<char>('a' + i % 23);
  if (owner_out != nullptr) *owner_out = owner;
  SliceChain body;
  body.append(Slice::external(owner->data(), owner->size(), owner));
  return body;
}

TEST(ExternalSlice, OwnerLivesUntilTheLastSliceGoes) {
  auto owner = std::make_shared<std::string>("by reference");
  std::weak_ptr<std::string> watch = owner;
  Slice s = Slice::external(owner->data(), owner->size(), owner);
  owner.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(s.view(), "by reference");
  {
    SliceChain chain;
    chain.append(s);
    chain.append(s.subslice(3, 4));
    SliceChain shared = chain.share();
    s = Slice();
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(shared.to_string(), "by referencerefe");
    chain.clear();
    EXPECT_FALSE(watch.expired());  // shared still holds it
  }
  EXPECT_TRUE(watch.expired());
}

TEST(ExternalSlice, SlicesLargerThanABlockFrameAndDecode) {
  std::shared_ptr<std::string> owner;
  SliceChain body = external_body(3 << 20, &owner);  // 3 MiB in one slice
  SliceChain framed;
  ASSERT_TRUE(encode_chain(body, false, framed).ok());
  EXPECT_EQ(framed.size(), (3u << 20) + kFramePrefixSize);
  // Shared, not copied: the framed chain points at the owner's bytes.
  bool points_at_owner = false;
  for (const Slice& s : framed) {
    if (s.data() == reinterpret_cast<const std::uint8_t*>(owner->data())) points_at_owner = true;
  }
  EXPECT_TRUE(points_at_owner);
  FrameDecoder decoder(FrameDecoderOptions{.max_message_size = 4 << 20});
  for (const Slice& s : framed) decoder.push(s);
  DecodedMessage message;
  absl::StatusOr<bool> got = decoder.next(message);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_EQ(message.payload.to_string(), *owner);
}

TEST(EncodeChain, SharedChainKeepsTheCallersBytesAndHonoursTheLimit) {
  SliceChain body;
  body.append_copy("0123456789", 10);
  SliceChain out;
  ASSERT_TRUE(encode_chain(body, false, out).ok());
  EXPECT_EQ(body.to_string(), "0123456789");  // still the caller's
  EXPECT_EQ(out.to_string().substr(kFramePrefixSize), "0123456789");
  SliceChain refused;
  absl::Status s = encode_chain(body, false, refused, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(refused.empty());
}

TEST(BytesField, BuiltMessageParsesAsProtobufDoes) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{127}, std::size_t{128},
                        std::size_t{70000}, std::size_t{1} << 20}) {
    SliceChain body = external_body(n);
    EchoResponse rest;
    rest.set_index(7);
    rest.set_received_bytes(-3);
    SliceChain message;
    ASSERT_TRUE(append_with_bytes_field(rest, 1, body, message).ok());
    EchoResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(message.to_string())) << n;
    EXPECT_EQ(parsed.index(), 7);
    EXPECT_EQ(parsed.received_bytes(), -3);
    EXPECT_EQ(parsed.payload(), body.to_string()) << n;
    // As many bytes as protobuf writes for the whole message, fields in number order aside,
    // and an empty body written explicitly (2 bytes) where proto3 leaves it out.
    EXPECT_EQ(message.size(), parsed.ByteSizeLong() + (n == 0 ? 2 : 0)) << n;
  }
}

TEST(BytesField, LargeRestStreamsAcrossBlocks) {
  EchoRequest rest;
  rest.set_status_message(std::string(200000, 'm'));  // a rest over a block
  rest.set_response_count(3);
  SliceChain body = external_body(5000);
  SliceChain message;
  ASSERT_TRUE(append_with_bytes_field(rest, 1, body, message).ok());
  EchoRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(message.to_string()));
  EXPECT_EQ(parsed.status_message(), rest.status_message());
  EXPECT_EQ(parsed.response_count(), 3);
  EXPECT_EQ(parsed.payload(), body.to_string());
}

TEST(BytesField, TakeCutsTheFieldOutByReference) {
  // Built by protobuf, with the body between other fields and split over small slices (as
  // received across reads).
  EchoRequest sent;
  sent.set_response_size(99);
  sent.set_payload(std::string(100000, 'p'));
  sent.set_status_message("after");
  const std::string wire = sent.SerializeAsString();
  SliceChain message;
  for (std::size_t i = 0; i < wire.size(); i += 777) {
    message.append(Slice::copy_of(wire.data() + i, std::min<std::size_t>(777, wire.size() - i)));
  }
  const std::uint8_t* body_byte = nullptr;  // where some byte of the body lies in the chain
  {
    std::size_t offset = 0;
    for (const Slice& s : message) {
      if (offset <= 50000 && 50000 < offset + s.size()) body_byte = s.data() + (50000 - offset);
      offset += s.size();
    }
  }
  SliceChain body;
  ASSERT_TRUE(take_bytes_field(message, 1, body).ok());
  EXPECT_EQ(body.to_string(), sent.payload());
  EchoRequest rest;
  ASSERT_TRUE(parse_message(message, rest).ok());
  EXPECT_EQ(rest.response_size(), 99);
  EXPECT_EQ(rest.status_message(), "after");
  EXPECT_TRUE(rest.payload().empty());
  // No copy: the body's slices are the received ones.
  bool shared = false;
  for (const Slice& s : body) {
    if (s.data() <= body_byte && body_byte < s.data() + s.size()) shared = true;
  }
  EXPECT_TRUE(shared);
}

TEST(BytesField, LastOccurrenceWinsAndAbsentFieldIsEmpty) {
  SliceChain message;
  EchoRequest first;
  first.set_payload("old");
  EchoRequest second;
  second.set_payload("new");
  second.set_delay_ms(5);
  const std::string wire = first.SerializeAsString() + second.SerializeAsString();
  message.append_copy(wire.data(), wire.size());
  SliceChain body;
  ASSERT_TRUE(take_bytes_field(message, 1, body).ok());
  EXPECT_EQ(body.to_string(), "new");
  EchoRequest rest;
  ASSERT_TRUE(parse_message(message, rest).ok());
  EXPECT_TRUE(rest.payload().empty());
  EXPECT_EQ(rest.delay_ms(), 5);

  SliceChain none;
  none.append_copy(wire.data(), wire.size());
  body.append_copy("stale", 5);
  ASSERT_TRUE(take_bytes_field(none, 9, body).ok());
  EXPECT_TRUE(body.empty());
  EXPECT_EQ(none.size(), wire.size());
}

TEST(BytesField, MalformedMessagesAreRefusedAndLeftAlone) {
  const std::string cases[] = {
      std::string("\x0a\x05"
                  "abc",
                  5),              // length past the end
      std::string("\x10", 1),      // varint field without its value
      std::string("\x0b\x0c", 2),  // a group
      std::string("\x00\x01", 2),  // field number 0
      std::string("\x08\x01", 2),  // field 1 as a varint: not length-delimited
      std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),  // 11-byte varint
  };
  for (const std::string& wire : cases) {
    SliceChain message;
    message.append_copy(wire.data(), wire.size());
    SliceChain body;
    absl::Status s = take_bytes_field(message, 1, body);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << ::testing::PrintToString(wire);
    EXPECT_EQ(message.to_string(), wire);
  }
  SliceChain out;
  EXPECT_EQ(append_with_bytes_field(EchoRequest(), 0, SliceChain(), out).code(),
            absl::StatusCode::kInvalidArgument);
}

// Varints protobuf refuses however small their value: a tag or a length longer than 5 bytes
// (zero-padded), and a length of 2 GiB or more. The cut refuses them too (found by
// frame_decoder_fuzzer: a 6-byte tag was accepted).
TEST(BytesField, OverlongTagsAndLengthsAreRefusedAsProtobufRefusesThem) {
  const std::string cases[] = {
      std::string("\xed\xf5\xf5\xf5\x87\x00"
                  "abcd",
                  10),                                  // 6-byte tag, then a fixed32
      std::string("\x8a\x80\x80\x80\x80\x00\x01x", 8),  // field 1's tag in 6 bytes
      std::string("\x0a\x81\x80\x80\x80\x80\x00x", 8),  // a length of 1 in 6 bytes
      std::string("\x0a\x80\x80\x80\x80\x08", 6),       // a length of 2 GiB
  };
  for (const std::string& wire : cases) {
    EXPECT_FALSE(EchoRequest().ParseFromString(wire)) << ::testing::PrintToString(wire);
    SliceChain message;
    message.append_copy(wire.data(), wire.size());
    SliceChain body;
    EXPECT_EQ(take_bytes_field(message, 1, body).code(), absl::StatusCode::kInternal)
        << ::testing::PrintToString(wire);
    EXPECT_EQ(message.to_string(), wire);
  }
}

}  // namespace
}  // namespace ferry::bytes_field_test

// libFuzzer target: ferry::FrameDecoder (codec layer) fed arbitrary bytes in arbitrary chunks,
// checked message by message against a plain reference parse of the whole stream: the same
// messages and payloads, each as soon as its last byte is in, the same error as soon as the bad
// prefix is in, and the receive limit enforced; each message's bytes field cut out by reference
// (take_bytes_field, field 1-4 by the mode's top bits) is checked against protobuf's parse. Input:
// 1 byte of options, 8 bytes of chunk sizes, then the stream (see fuzz/README.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "ferry/bytes_field.h"
#include "ferry/frame.h"
#include "ferry/frame_decoder.h"
#include "fuzz_check.h"
#include "google/protobuf/empty.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/unknown_field_set.h"

namespace {

// The reference: each message the stream holds, then possibly the error that ends it.
struct RefMessage {
  std::size_t start;  // offset of its 5-byte prefix
  bool compressed;
  std::size_t length;
  std::size_t end() const { return start + ferry::kFramePrefixSize + length; }
};
struct RefStream {
  std::vector<RefMessage> messages;  // the last one may be incomplete
  bool has_error = false;
  std::size_t error_at = 0;  // offset where the bad prefix ends
  absl::StatusCode error_code = absl::StatusCode::kOk;
};

RefStream parse_reference(std::string_view stream, const ferry::FrameDecoderOptions& options) {
  RefStream ref;
  std::size_t at = 0;
  while (stream.size() - at >= ferry::kFramePrefixSize) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(stream.data() + at);
    const std::size_t length =
        (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) | (std::size_t{p[3]} << 8) | p[4];
    absl::StatusCode error = absl::StatusCode::kOk;
    if (p[0] > 1 || (p[0] == 1 && !options.compression_negotiated)) {
      error = absl::StatusCode::kInternal;
    } else if (length > options.max_message_size) {
      error = absl::StatusCode::kResourceExhausted;
    }
    if (error != absl::StatusCode::kOk) {
      ref.has_error = true;
      ref.error_at = at + ferry::kFramePrefixSize;
      ref.error_code = error;
      return ref;
    }
    ref.messages.push_back({at, p[0] == 1, length});
    if (ref.messages.back().end() > stream.size()) break;
    at = ref.messages.back().end();
  }
  return ref;
}

// The receive limit, by the mode byte's low 3 bits: small ones make the limit bite often.
constexpr std::size_t kMaxSizes[] = {0,   1,    4,     16,
                                     100, 1000, 65536, ferry::kDefaultMaxReceiveMessageSize};

// read_raw's cut (ferry/bytes_field.h) against protobuf's own parse into unknown fields: it may
// refuse more (groups) but never accept what protobuf refuses; when it accepts, the body is the
// field's last length-delimited value and the rest holds every other field, in order.
void check_take_bytes_field(const ferry::SliceChain& payload, std::uint32_t field) {
  const std::string original = payload.to_string();
  ferry::SliceChain message = payload.share();
  ferry::SliceChain body;
  const absl::Status cut = ferry::take_bytes_field(message, field, body);
  google::protobuf::Empty reference;
  const bool parses = reference.ParseFromString(original);
  if (!cut.ok()) {
    FUZZ_CHECK(cut.code() == absl::StatusCode::kInternal);
    FUZZ_CHECK(message.to_string() == original && body.empty());
    return;
  }
  FUZZ_CHECK(parses);
  const google::protobuf::UnknownFieldSet& fields =
      reference.GetReflection()->GetUnknownFields(reference);
  std::string last;
  google::protobuf::UnknownFieldSet others;
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& f = fields.field(i);
    if (f.number() == static_cast<int>(field)) {
      FUZZ_CHECK(f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED);
      last = f.length_delimited();
    } else {
      others.AddField(f);
    }
  }
  FUZZ_CHECK(body.to_string() == last);
  google::protobuf::Empty rest;
  FUZZ_CHECK(rest.ParseFromString(message.to_string()));
  std::string rest_fields, other_fields;
  rest.GetReflection()->GetUnknownFields(rest).SerializeToString(&rest_fields);
  others.SerializeToString(&other_fields);
  FUZZ_CHECK(rest_fields == other_fields);
}

}  // namespace

// protobuf logs a line to stderr for every string field with invalid UTF-8 it parses (most
// inputs): silence it.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const std::uint8_t mode = data[0];
  const std::uint8_t* chunk_sizes = data + 1;  // 8 of them, cycled; 255 = all that is left
  const std::string_view stream(reinterpret_cast<const char*>(data + 9), size - 9);

  ferry::FrameDecoderOptions options;
  options.max_message_size = kMaxSizes[mode & 7];
  options.compression_negotiated = (mode & 8) != 0;
  const RefStream ref = parse_reference(stream, options);

  ferry::FrameDecoder decoder(options);
  std::size_t pushed = 0;
  std::size_t consumed = 0;  // bytes the decoder has returned as messages (prefixes included)
  std::size_t next_message = 0;
  for (std::size_t chunk = 0; pushed < stream.size(); ++chunk) {
    const std::uint8_t c = chunk_sizes[chunk % 8];
    const std::size_t n =
        c == 255 ? stream.size() - pushed : std::min<std::size_t>(c + 1, stream.size() - pushed);
    // By reference (the input outlives the decoder, and ASan sees reads past its exact end) or
    // copied into pooled blocks, as the mode's bits 4-5 say.
    const int how = (mode >> 4) & 3;
    if (how == 0 || (how == 2 && chunk % 2 == 0)) {
      decoder.push(ferry::Slice::unowned(stream.data() + pushed, n));
    } else {
      decoder.push_copy(stream.data() + pushed, n);
    }
    pushed += n;

    while (true) {
      ferry::DecodedMessage message;
      const absl::StatusOr<bool> got = decoder.next(message);
      if (!got.ok()) {
        FUZZ_CHECK(ref.has_error && ref.error_at <= pushed);
        FUZZ_CHECK(next_message == ref.messages.size());
        FUZZ_CHECK(got.status().code() == ref.error_code);
        ferry::DecodedMessage again;
        const absl::StatusOr<bool> repeated = decoder.next(again);
        FUZZ_CHECK(!repeated.ok() && repeated.status() == got.status());
        FUZZ_CHECK(decoder.finish() == got.status());
        return 0;
      }
      if (!*got) break;
      FUZZ_CHECK(next_message < ref.messages.size());
      const RefMessage& expected = ref.messages[next_message++];
      FUZZ_CHECK(expected.end() <= pushed);
      FUZZ_CHECK(message.compressed == expected.compressed);
      FUZZ_CHECK(message.payload.size() == expected.length);
      FUZZ_CHECK(message.payload.size() <= options.max_message_size);
      FUZZ_CHECK(message.payload.to_string() ==
                 stream.substr(expected.start + ferry::kFramePrefixSize, expected.length));
      consumed = expected.end();
      // What the call layer does next: inflate (within the limit) and parse. The parse through
      // ferry's zero-copy stream over the slices must agree with protobuf's over flat bytes.
      if (message.compressed) {
        ferry::SliceChain inflated;
        const absl::Status s = ferry::decompress_payload(message.payload, ferry::Compression::kGzip,
                                                         options.max_message_size, inflated);
        FUZZ_CHECK(s.ok() ? inflated.size() <= options.max_message_size : inflated.empty());
      } else {
        google::protobuf::Value chained;
        google::protobuf::Value flat;
        const bool chained_ok = ferry::parse_message(message.payload, chained).ok();
        FUZZ_CHECK(chained_ok == flat.ParseFromString(message.payload.to_string()));
        check_take_bytes_field(message.payload, 1 + (mode >> 6));
      }
    }
    // Nothing due is held back: every message complete by now was returned, no error is due.
    FUZZ_CHECK(!(ref.has_error && ref.error_at <= pushed));
    FUZZ_CHECK(next_message == ref.messages.size() || ref.messages[next_message].end() > pushed);
    FUZZ_CHECK(decoder.buffered_bytes() == pushed - consumed);
  }
  FUZZ_CHECK(!ref.has_error);  // it was due once its prefix was in
  FUZZ_CHECK(decoder.finish().ok() == (consumed == stream.size()));
  return 0;
}

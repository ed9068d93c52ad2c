// Implementation of src/call/wire_format.h.
#include "call/wire_format.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace ferry::detail {

std::string format_grpc_timeout(std::chrono::nanoseconds timeout) {
  std::int64_t ns = std::max<std::int64_t>(timeout.count(), 1);
  constexpr std::int64_t kMax = 99'999'999;
  struct Unit {
    std::int64_t ns;
    char name;
  };
  static constexpr Unit kUnits[] = {{1, 'n'},
                                    {1'000, 'u'},
                                    {1'000'000, 'm'},
                                    {1'000'000'000, 'S'},
                                    {60'000'000'000, 'M'},
                                    {3'600'000'000'000, 'H'}};
  for (const Unit& unit : kUnits) {
    // Round up, without the overflow of (ns + unit - 1) near nanoseconds::max().
    const std::int64_t value = ns / unit.ns + (ns % unit.ns != 0 ? 1 : 0);
    if (value <= kMax) return absl::StrCat(value, std::string(1, unit.name));
  }
  return absl::StrCat(kMax, "H");
}

std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view value) {
  // The spec's grammar: TimeoutValue TimeoutUnit, the value 1 to 8 ASCII digits.
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  std::int64_t amount = 0;
  for (char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    amount = amount * 10 + (c - '0');
  }
  std::int64_t unit_ns;
  switch (value.back()) {
    case 'H':
      unit_ns = 3'600'000'000'000;
      break;
    case 'M':
      unit_ns = 60'000'000'000;
      break;
    case 'S':
      unit_ns = 1'000'000'000;
      break;
    case 'm':
      unit_ns = 1'000'000;
      break;
    case 'u':
      unit_ns = 1'000;
      break;
    case 'n':
      unit_ns = 1;
      break;
    default:
      return std::nullopt;
  }
  // 99999999H is ~11,400 years, past what int64 nanoseconds hold (~292 years): saturate rather
  // than overflow.
  constexpr std::int64_t kMaxNs = std::numeric_limits<std::int64_t>::max();
  if (amount > kMaxNs / unit_ns) return std::chrono::nanoseconds(kMaxNs);
  return std::chrono::nanoseconds(amount * unit_ns);
}

std::string percent_encode(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7E && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string percent_decode(std::string_view encoded) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(encoded.size());
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size()) {
      const int hi = hex(encoded[i + 1]);
      const int lo = hex(encoded[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(encoded[i]);
  }
  return out;
}

std::string encode_binary_header(std::string_view raw) {
  std::string out = absl::Base64Escape(to_absl(raw));
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

std::optional<std::string> decode_binary_header(std::string_view encoded) {
  // Values may arrive comma-joined from a proxy; each element is base64 of its own.
  std::string out;
  std::size_t start = 0;
  while (start <= encoded.size()) {
    std::size_t comma = encoded.find(',', start);
    if (comma == std::string_view::npos) comma = encoded.size();
    std::string_view part = encoded.substr(start, comma - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    std::string decoded;
    if (!absl::Base64Unescape(to_absl(part), &decoded)) return std::nullopt;
    if (start > 0) out.push_back(',');
    out += decoded;
    start = comma + 1;
  }
  return out;
}

std::optional<std::size_t> decode_binary_header_into(std::string_view encoded, char* out,
                                                     std::size_t capacity) {
  while (!encoded.empty() && encoded.back() == '=') encoded.remove_suffix(1);
  if (encoded.size() % 4 == 1) return std::nullopt;  // no whole byte in the last group
  const std::size_t size =
      encoded.size() / 4 * 3 + (encoded.size() % 4 == 0 ? 0 : encoded.size() % 4 - 1);
  if (size > capacity) return std::nullopt;
  std::uint32_t bits = 0;
  int held = 0;
  std::size_t at = 0;
  for (char c : encoded) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else {
      return std::nullopt;
    }
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out[at++] = static_cast<char>((bits >> held) & 0xff);
    }
  }
  return at;
}

absl::Status malformed_binary_header(std::string_view name) {
  return absl::InternalError(
      absl::StrCat("malformed binary metadata: the value of '", to_absl(name), "' is not base64"));
}

bool accepts_encoding(std::string_view accept_encoding, Compression encoding) {
  while (!accept_encoding.empty()) {
    const std::size_t comma = accept_encoding.find(',');
    const std::string_view token = accept_encoding.substr(0, comma);
    if (parse_compression(token) == encoding) return true;
    if (comma == std::string_view::npos) break;
    accept_encoding.remove_prefix(comma + 1);
  }
  return false;
}

absl::StatusCode status_code_from_http(int http_status) {
  switch (http_status) {
    case 400:
      return absl::StatusCode::kInternal;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::Status status_from_rst_stream(http2::ErrorCode h2_error, std::string_view peer, bool by_us) {
  using http2::ErrorCode;
  const absl::string_view code = to_absl(http2::error_code_name(h2_error));
  if (by_us) {
    // Our RST_STREAM: the peer's frames broke a rule of HTTP/2's (PROTOCOL_ERROR,
    // FLOW_CONTROL_ERROR, ...), or a callback refused them (INTERNAL_ERROR).
    const absl::StatusCode status = h2_error == ErrorCode::kEnhanceYourCalm
                                        ? absl::StatusCode::kResourceExhausted
                                        : absl::StatusCode::kInternal;
    return absl::Status(status, absl::StrCat("ferry reset the stream with ", code, ": ",
                                             to_absl(peer), "'s frames broke HTTP/2's rules"));
  }
  switch (h2_error) {
    case ErrorCode::kNoError:
      return absl::InternalError(
          absl::StrCat(to_absl(peer), " closed the stream before the call ended (NO_ERROR)"));
    case ErrorCode::kRefusedStream:
      return absl::UnavailableError(
          absl::StrCat(to_absl(peer), " refused the stream (REFUSED_STREAM)"));
    case ErrorCode::kCancel:
      return absl::CancelledError(absl::StrCat(to_absl(peer), " reset the stream with CANCEL"));
    case ErrorCode::kEnhanceYourCalm:
      return absl::ResourceExhaustedError(
          absl::StrCat(to_absl(peer), " reset the stream with ENHANCE_YOUR_CALM"));
    case ErrorCode::kInadequateSecurity:
      return absl::PermissionDeniedError(
          absl::StrCat(to_absl(peer), " reset the stream with INADEQUATE_SECURITY"));
    default:
      return absl::InternalError(absl::StrCat(to_absl(peer), " reset the stream with ", code));
  }
}

absl::StatusCode parse_grpc_status(std::string_view value) {
  int code;
  if (!absl::SimpleAtoi(to_absl(value), &code) || code < 0 || code > 16)
    return absl::StatusCode::kUnknown;
  return static_cast<absl::StatusCode>(code);
}

}  // namespace ferry::detail

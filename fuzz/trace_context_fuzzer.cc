// libFuzzer target: ferry::tracing's trace-context parsers (src/tracing/propagation.cc) and the
// server's in-place base64 decode of grpc-trace-bin (src/call/wire_format.h), fed arbitrary
// values: W3C traceparent (accepted only as the spec's grammar allows, and write -> parse round
// trips), tracestate (an accepted list holds only what the spec allows), grpc-trace-bin (round
// trips), the base64 decode (decode(encode(x)) == x, anything else decoded safely), and a whole
// metadata of them through extract_trace_context. Input: 1 byte choosing the parser, then its
// value (for the metadata: entries "key:value" separated by newlines).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "call/wire_format.h"
#include "ferry/metadata.h"
#include "ferry/tracing.h"
#include "fuzz_check.h"

namespace {

using ferry::TraceContext;

bool lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

void check_traceparent(std::string_view value) {
  TraceContext c;
  if (!ferry::parse_traceparent(value, c)) return;
  FUZZ_CHECK(c.valid());
  FUZZ_CHECK((c.flags & ~TraceContext::kSampled) == 0);
  // What was accepted is the grammar: trimmed, 55 characters or more, lowercase hex fields.
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  FUZZ_CHECK(value.size() >= ferry::kTraceparentSize);
  for (std::size_t i = 0; i < ferry::kTraceparentSize; ++i) {
    if (i == 2 || i == 35 || i == 52) {
      FUZZ_CHECK(value[i] == '-');
    } else {
      FUZZ_CHECK(lower_hex(value[i]));
    }
  }
  FUZZ_CHECK(value.substr(0, 2) != "ff");
  std::array<char, ferry::kTraceparentSize> out;
  ferry::write_traceparent(c, out);
  TraceContext back;
  FUZZ_CHECK(ferry::parse_traceparent(std::string_view(out.data(), out.size()), back));
  FUZZ_CHECK(back.trace_id == c.trace_id && back.span_id == c.span_id && back.flags == c.flags);
}

void check_tracestate(std::string_view value) {
  if (!ferry::valid_tracestate(value)) return;
  std::size_t members = 0;
  bool in_member = false;
  for (char c : value) {
    FUZZ_CHECK(c == '\t' || (c >= 0x20 && c <= 0x7e));
    if (c == ',') {
      in_member = false;
    } else if (c != ' ' && c != '\t' && !in_member) {
      in_member = true;
      ++members;
    }
  }
  FUZZ_CHECK(members <= 32);
}

void check_trace_bin(std::string_view bytes) {
  TraceContext c;
  if (!ferry::parse_grpc_trace_bin(bytes, c)) return;
  FUZZ_CHECK(c.valid());
  FUZZ_CHECK(bytes.size() >= 27 && bytes[0] == 0);
  std::array<std::uint8_t, ferry::kGrpcTraceBinSize> out;
  ferry::write_grpc_trace_bin(c, out);
  TraceContext back;
  FUZZ_CHECK(ferry::parse_grpc_trace_bin(
      std::string_view(reinterpret_cast<const char*>(out.data()), out.size()), back));
  FUZZ_CHECK(back.trace_id == c.trace_id && back.span_id == c.span_id && back.flags == c.flags);
}

void check_base64(std::string_view bytes) {
  char raw[64];
  // Anything: decoded within the buffer, or refused.
  if (auto n = ferry::detail::decode_binary_header_into(bytes, raw, sizeof raw)) {
    FUZZ_CHECK(*n <= sizeof raw);
  }
  // The encoding of bytes that fit decodes back to them.
  if (bytes.size() > sizeof raw) bytes = bytes.substr(0, sizeof raw);
  const std::string encoded = ferry::detail::encode_binary_header(bytes);
  const auto n = ferry::detail::decode_binary_header_into(encoded, raw, sizeof raw);
  FUZZ_CHECK(n.has_value() && *n == bytes.size());
  FUZZ_CHECK(std::string_view(raw, *n) == bytes);
}

void check_metadata(std::string_view text) {
  ferry::Metadata metadata;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    if (end == std::string_view::npos) end = text.size();
    const std::string_view entry = text.substr(0, end);
    text.remove_prefix(end == text.size() ? end : end + 1);
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos) continue;
    metadata.add(entry.substr(0, colon), entry.substr(colon + 1));
  }
  for (auto p : {ferry::TracePropagation::kW3C, ferry::TracePropagation::kGrpcTraceBin,
                 ferry::TracePropagation::kBoth}) {
    const TraceContext c = ferry::extract_trace_context(metadata, p);
    if (!c.valid()) {
      FUZZ_CHECK(c.tracestate.empty());
      continue;
    }
    FUZZ_CHECK(c.tracestate.size() <= ferry::kMaxTracestateSize);
    FUZZ_CHECK(c.tracestate.empty() || ferry::valid_tracestate(c.tracestate));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view value(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0:
      check_traceparent(value);
      break;
    case 1:
      check_tracestate(value);
      break;
    case 2:
      check_trace_bin(value);
      break;
    case 3:
      check_base64(value);
      break;
    case 4:
      check_metadata(value);
      break;
  }
  return 0;
}

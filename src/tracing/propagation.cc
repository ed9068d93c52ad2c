// ferry::tracing's propagation formats (ferry/tracing.h): W3C Trace Context level 1 traceparent
// and tracestate, and gRPC's grpc-trace-bin (OpenCensus' BinaryEncoding). Every parser takes
// untrusted bytes (fuzz/trace_context_fuzzer.cc) and allocates nothing but a joined tracestate.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/tracing.h"

namespace ferry {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// W3C §3.2.2: HEXDIGLC, lowercase only. A table, 0xff for anything else: every traced request's
// traceparent is read on the server's hot path.
constexpr std::array<std::uint8_t, 256> kHexValue = [] {
  std::array<std::uint8_t, 256> table{};
  for (auto& v : table) v = 0xff;
  for (int c = '0'; c <= '9'; ++c) table[c] = static_cast<std::uint8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c) table[c] = static_cast<std::uint8_t>(c - 'a' + 10);
  return table;
}();

int hex_value(char c) {
  const std::uint8_t v = kHexValue[static_cast<unsigned char>(c)];
  return v == 0xff ? -1 : v;
}

template <std::size_t N>
bool parse_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  std::uint8_t bad = 0;
  for (std::size_t i = 0; i < N; ++i) {
    const std::uint8_t hi = kHexValue[static_cast<unsigned char>(text[2 * i])];
    const std::uint8_t lo = kHexValue[static_cast<unsigned char>(text[2 * i + 1])];
    bad |= (hi | lo) & 0xf0;  // only 0xff has high bits
    out[i] = static_cast<std::uint8_t>(hi << 4 | (lo & 0x0f));
  }
  return bad == 0;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& bytes) {
  for (std::uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

// RFC 9110 §5.5: optional whitespace around a field value (and a list member) is not part of it.
std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool lcalpha(char c) { return c >= 'a' && c <= 'z'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool key_char(char c) {
  return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// W3C §3.3.1.3.1: simple-key = lcalpha 0*255(keychar); multi-tenant key = tenant-id "@"
// system-id, tenant-id = (lcalpha / DIGIT) 0*240(keychar), system-id = lcalpha 0*13(keychar).
bool valid_tracestate_key(std::string_view key) {
  const std::size_t at = key.find('@');
  if (at == std::string_view::npos) {
    if (key.empty() || key.size() > 256 || !lcalpha(key[0])) return false;
    for (char c : key) {
      if (!key_char(c)) return false;
    }
    return true;
  }
  const std::string_view tenant = key.substr(0, at);
  const std::string_view system = key.substr(at + 1);
  if (tenant.empty() || tenant.size() > 241 || !(lcalpha(tenant[0]) || digit(tenant[0]))) {
    return false;
  }
  if (system.empty() || system.size() > 14 || !lcalpha(system[0])) return false;
  for (char c : tenant) {
    if (!key_char(c)) return false;
  }
  for (char c : system) {
    if (!key_char(c)) return false;
  }
  return true;
}

// W3C §3.3.1.3.2: value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B /
// %x2D-3C / %x3E-7E (printable ASCII but ',' and '='; a space only before the end).
bool valid_tracestate_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  }
  return true;
}

// W3C §3.3.1.1: at most 32 list-members.
constexpr std::size_t kMaxTracestateMembers = 32;

// W3C §3.3.1.5: a tracestate longer than what is propagated loses whole list-members, never part
// of one: first those over 128 characters, then from the end, until it fits.
std::string truncated_tracestate(std::string_view value) {
  std::array<std::string_view, kMaxTracestateMembers> members;
  std::size_t count = 0;
  std::size_t start = 0;
  while (start <= value.size() && count < members.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view member = trim_ows(value.substr(start, comma - start));
    start = comma + 1;
    if (!member.empty()) members[count++] = member;
  }
  auto joined_size = [&](std::size_t upto, bool skip_long) {
    std::size_t size = 0;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < upto; ++i) {
      if (skip_long && members[i].size() > 128) continue;
      size += (kept++ > 0 ? 1 : 0) + members[i].size();
    }
    return size;
  };
  std::size_t upto = count;
  const bool skip_long = joined_size(count, false) > kMaxTracestateSize;
  while (upto > 0 && joined_size(upto, skip_long) > kMaxTracestateSize) --upto;
  std::string out;
  for (std::size_t i = 0; i < upto; ++i) {
    if (skip_long && members[i].size() > 128) continue;
    if (!out.empty()) out += ',';
    out.append(members[i].data(), members[i].size());
  }
  return out;
}

}  // namespace

bool parse_traceparent(std::string_view value, TraceContext& out) {
  value = trim_ows(value);
  // §3.2.2.1: version = 2HEXDIGLC, and ff is invalid.
  if (value.size() < kTraceparentSize) return false;
  const int v_hi = hex_value(value[0]);
  const int v_lo = hex_value(value[1]);
  if (v_hi < 0 || v_lo < 0 || (v_hi == 0xf && v_lo == 0xf)) return false;
  const bool version_00 = v_hi == 0 && v_lo == 0;
  // §3.2.4: version 00 is exactly 55 characters; a later version may append fields after a '-'
  // (parsed as 00's fields, the rest ignored).
  if (version_00 ? value.size() != kTraceparentSize
                 : value.size() > kTraceparentSize && value[kTraceparentSize] != '-') {
    return false;
  }
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return false;
  // Parsed aside (parse_hex writes even when it fails): out is untouched unless all is valid.
  std::array<std::uint8_t, 16> trace_id;
  std::array<std::uint8_t, 8> span_id;
  std::array<std::uint8_t, 1> flags;
  if (!parse_hex(value.substr(3, 32), trace_id) || !parse_hex(value.substr(36, 16), span_id) ||
      !parse_hex(value.substr(53, 2), flags)) {
    return false;
  }
  // §3.2.2.3, §3.2.2.4: an all-zero trace-id or parent-id is invalid.
  if (all_zero(trace_id) || all_zero(span_id)) return false;
  out.trace_id = trace_id;
  out.span_id = span_id;
  // §3.2.2.5: only the sampled flag is defined; the others are not propagated.
  out.flags = flags[0] & TraceContext::kSampled;
  return true;
}

void write_traceparent(const TraceContext& context, std::array<char, kTraceparentSize>& out) {
  std::size_t at = 0;
  auto put = [&](std::uint8_t b) {
    out[at++] = kHex[b >> 4];
    out[at++] = kHex[b & 0xf];
  };
  put(0);
  out[at++] = '-';
  for (std::uint8_t b : context.trace_id) put(b);
  out[at++] = '-';
  for (std::uint8_t b : context.span_id) put(b);
  out[at++] = '-';
  put(context.flags & TraceContext::kSampled);
}

bool valid_tracestate(std::string_view value) {
  std::size_t members = 0;
  std::array<std::string_view, kMaxTracestateMembers> keys;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view member = trim_ows(value.substr(start, comma - start));
    start = comma + 1;
    if (member.empty()) continue;  // §3.3.1.1: empty list-members are allowed
    const std::size_t eq = member.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = member.substr(0, eq);
    if (!valid_tracestate_key(key) || !valid_tracestate_value(member.substr(eq + 1))) return false;
    if (members == kMaxTracestateMembers) return false;
    // §3.3.1.3: a key appears once.
    for (std::size_t i = 0; i < members; ++i) {
      if (keys[i] == key) return false;
    }
    keys[members++] = key;
  }
  return true;
}

bool parse_grpc_trace_bin(std::string_view bytes, TraceContext& out) {
  // OpenCensus BinaryEncoding: version_id 0; then fields, each a field id and its bytes, in
  // ascending order, each optional; parsing stops at the first unknown field (a later
  // revision's), whose bytes are ignored.
  if (bytes.empty() || bytes[0] != 0) return false;
  TraceContext parsed;
  bool have_trace = false;
  bool have_span = false;
  std::size_t at = 1;
  auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(bytes[i]); };
  if (at < bytes.size() && byte(at) == 0) {
    if (bytes.size() - at < 17) return false;
    for (std::size_t i = 0; i < 16; ++i) parsed.trace_id[i] = byte(at + 1 + i);
    at += 17;
    have_trace = true;
  }
  if (at < bytes.size() && byte(at) == 1) {
    if (bytes.size() - at < 9) return false;
    for (std::size_t i = 0; i < 8; ++i) parsed.span_id[i] = byte(at + 1 + i);
    at += 9;
    have_span = true;
  }
  if (at < bytes.size() && byte(at) == 2) {
    if (bytes.size() - at < 2) return false;
    parsed.flags = byte(at + 1) & TraceContext::kSampled;
    at += 2;
  }
  if (!have_trace || !have_span || all_zero(parsed.trace_id) || all_zero(parsed.span_id)) {
    return false;
  }
  out.trace_id = parsed.trace_id;
  out.span_id = parsed.span_id;
  out.flags = parsed.flags;
  return true;
}

void write_grpc_trace_bin(const TraceContext& context,
                          std::array<std::uint8_t, kGrpcTraceBinSize>& out) {
  out[0] = 0;  // version
  out[1] = 0;  // field 0: trace id
  for (std::size_t i = 0; i < 16; ++i) out[2 + i] = context.trace_id[i];
  out[18] = 1;  // field 1: span id
  for (std::size_t i = 0; i < 8; ++i) out[19 + i] = context.span_id[i];
  out[27] = 2;  // field 2: trace options
  out[28] = context.flags & TraceContext::kSampled;
}

TraceContext extract_trace_context(const Metadata& metadata, TracePropagation propagation) {
  const bool w3c = (static_cast<int>(propagation) & static_cast<int>(TracePropagation::kW3C)) != 0;
  const bool bin =
      (static_cast<int>(propagation) & static_cast<int>(TracePropagation::kGrpcTraceBin)) != 0;
  std::string_view traceparent;
  int traceparents = 0;
  std::string_view tracestate;
  int tracestates = 0;
  std::string_view trace_bin;
  int trace_bins = 0;
  for (const auto& [key, value] : metadata) {
    if (w3c && key == "traceparent") {
      traceparent = value;
      ++traceparents;
    } else if (w3c && key == "tracestate") {
      if (tracestates++ == 0) tracestate = value;
    } else if (bin && key == "grpc-trace-bin") {
      trace_bin = value;
      ++trace_bins;
    }
  }
  TraceContext context;
  if (traceparents == 1 && parse_traceparent(traceparent, context)) {
    // §3.3.1: several tracestate headers are one list, joined by commas (RFC 9110 §5.3).
    std::string joined;
    if (tracestates > 1) {
      for (const auto& [key, value] : metadata) {
        if (key != "tracestate") continue;
        if (!joined.empty()) joined += ',';
        joined.append(value.data(), value.size());
      }
      tracestate = joined;
    }
    tracestate = trim_ows(tracestate);
    // §3.3.1.1: an invalid list is dropped whole (the traceparent stands).
    if (!tracestate.empty() && valid_tracestate(tracestate)) {
      if (tracestate.size() <= kMaxTracestateSize) {
        context.tracestate.assign(tracestate.data(), tracestate.size());
      } else {
        context.tracestate = truncated_tracestate(tracestate);
      }
    }
    return context;
  }
  if (trace_bins == 1 && parse_grpc_trace_bin(trace_bin, context)) return context;
  return TraceContext{};
}

}  // namespace ferry

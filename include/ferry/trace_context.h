// ferry/trace_context.h: a call's distributed-tracing context and the per-call hooks a tracing
// library installs (calls layer, public). The core only carries these: ferry::tracing
// (ferry/tracing.h) reads and writes the propagation headers (W3C traceparent/tracestate,
// grpc-trace-bin), samples, and records spans; an application's own tracer reads the context on
// ServerContext and sets its parent on ClientContext.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry {

// One span's identity as W3C Trace Context (and OpenTelemetry's SpanContext) defines it.
struct TraceContext {
  static constexpr std::uint8_t kSampled = 0x01;  // W3C trace-flags: the caller may record

  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> span_id{};
  std::uint8_t flags = 0;  // W3C trace-flags
  // W3C tracestate as received (validated: list-members, at most 32), or empty. An allocation
  // when longer than the library's small-string buffer (15 bytes).
  std::string tracestate;

  // W3C: a context whose trace id or span id is all zeros is invalid (no context).
  bool valid() const {
    bool trace = false;
    bool span = false;
    for (std::uint8_t b : trace_id) trace = trace || b != 0;
    for (std::uint8_t b : span_id) span = span || b != 0;
    return trace && span;
  }
  bool sampled() const { return (flags & kSampled) != 0; }
};

// Request headers a tracer adds to one attempt of a client call, ready for the wire (a -bin
// value already in base64): held in place, so that writing them allocates nothing.
struct TraceHeaders {
  static constexpr std::size_t kMaxFields = 3;  // traceparent, tracestate, grpc-trace-bin
  static constexpr std::size_t kStorage = 128;  // traceparent (55) + grpc-trace-bin (40)

  std::array<std::string_view, kMaxFields> keys{};
  std::array<std::string_view, kMaxFields> values{};  // views of storage, or of the tracer's own
  std::size_t size = 0;
  std::array<char, kStorage> storage{};
  std::size_t used = 0;  // of storage

  // Appends a field whose value is copied into storage; false (nothing added) when full.
  bool add_copy(std::string_view key, std::string_view value) {
    if (size == kMaxFields || value.size() > kStorage - used) return false;
    char* at = storage.data() + used;
    for (std::size_t i = 0; i < value.size(); ++i) at[i] = value[i];
    used += value.size();
    keys[size] = key;
    values[size++] = std::string_view(at, value.size());
    return true;
  }
  // Appends a field whose value lives at least until the headers are sent.
  bool add_view(std::string_view key, std::string_view value) {
    if (size == kMaxFields) return false;
    keys[size] = key;
    values[size++] = value;
    return true;
  }
};

// What a tracing library installs on a call (ServerContext::set_call_tracer,
// ClientContext::set_call_tracer) to hear of its messages and, on the client, to write each
// attempt's propagation headers. Runs on the call's thread; must not block. A call without one
// pays a null check per message.
class CallTracer {
 public:
  virtual ~CallTracer() = default;

  // Whether the message hooks below want calls (a span that records does; one that only
  // propagates does not, and costs nothing per message).
  virtual bool records_messages() const { return false; }

  // A message sent on the call (the client's attempt): its size serialized, and the size that
  // crossed the wire after compression (0 when it went uncompressed). Neither counts the 5-byte
  // gRPC prefix.
  virtual void on_outbound_message(std::size_t size, std::size_t compressed_size) {
    (void)size;
    (void)compressed_size;
  }
  // A message the application took from the call (read, or a unary request taken): its size
  // after decompression, and the wire size when it arrived compressed (else 0).
  virtual void on_inbound_message(std::size_t size, std::size_t compressed_size) {
    (void)size;
    (void)compressed_size;
  }

  // Client only: as an attempt's request headers are built (every attempt, transparent retries
  // included), the headers that carry its trace context; call is the call's own span's context
  // (ClientContext::trace_context()). Default: none.
  virtual void add_attempt_headers(const TraceContext& call, TraceHeaders& out) {
    (void)call;
    (void)out;
  }
};

}  // namespace ferry

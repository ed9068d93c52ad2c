// ferry/tracing.h: distributed tracing as gRFC A72 defines it (library ferry::tracing, above the
// core), as a server and a client interceptor (ferry/interceptor.h): spans
// Sent.<service>.<method> per client call, Attempt.<service>.<method> per attempt (its child),
// Recv.<service>.<method> per server call (a child of the client's), with message events and the
// call's status; the trace context read from and written to W3C traceparent/tracestate and/or
// gRPC's binary grpc-trace-bin; parent-based sampling with a ratio for new traces; ended spans
// queued to a batching processor whose own thread hands them to a SpanExporter.
//
//   auto exporter = std::make_shared<ferry::InMemorySpanExporter>();   // or an OTLP exporter
//   auto processor = std::make_shared<ferry::BatchSpanProcessor>(exporter);
//   ferry::TracingOptions tracing{.processor = processor, .sample_ratio = 0.01};
//   server_options.interceptors.push_back(ferry::make_server_tracing(tracing));
//   channel_options.interceptors.push_back(ferry::make_client_tracing(tracing));
//
// The current span's context is ServerContext::trace_context(); a handler's calls made with
// ClientContext::from_server_context are its children; an application's own tracer joins with
// ClientContext::set_trace_parent. docs/observability.md has the names, attributes and costs.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "ferry/metadata.h"
#include "ferry/trace_context.h"

namespace ferry {

class ServerInterceptor;
class ClientInterceptor;
class BatchSpanProcessor;

namespace detail {
struct SpanRecords;  // the tracing interceptors' access to a processor's spare span records
}  // namespace detail

// ---- propagation formats -----------------------------------------------------------------------

// Which headers carry the trace context: read from either (traceparent first when both came)
// and written in each chosen.
enum class TracePropagation : std::uint8_t {
  kW3C = 1,           // traceparent + tracestate (W3C Trace Context level 1)
  kGrpcTraceBin = 2,  // grpc-trace-bin (OpenCensus' binary format, as grpc-go and grpc-java)
  kBoth = 3,
};

// W3C traceparent, "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>": fills out's ids
// and flags (not its tracestate) and returns true when value is valid per W3C Trace Context
// level 1 §3.2: lowercase hex, version ff invalid, all-zero ids invalid, version 00 exactly 55
// characters, a later version at least 55 with a '-' after the flags (its extra fields
// ignored). False (out unchanged) otherwise: the caller then starts a new trace.
bool parse_traceparent(std::string_view value, TraceContext& out);
constexpr std::size_t kTraceparentSize = 55;
// Version 00 of context, into out.
void write_traceparent(const TraceContext& context, std::array<char, kTraceparentSize>& out);

// Whether value is a valid W3C tracestate (§3.3): comma-separated list-members key=value
// (simple or tenant@system keys, values of printable ASCII without ',' or '=' that do not end
// in a space), empty members allowed, at most 32 members. An invalid one is dropped whole.
bool valid_tracestate(std::string_view value);
// W3C §3.3.1.5: the length a tracestate is propagated up to; a longer one loses whole
// list-members (first those over 128 characters, then from the end) until it fits.
constexpr std::size_t kMaxTracestateSize = 512;

// grpc-trace-bin, version 0: 0x00, then field 0 (0x00 + 16-byte trace id), field 1 (0x01 +
// 8-byte span id), field 2 (0x02 + 1-byte options; bit 0 sampled), 29 bytes. Parsed as
// OpenCensus' BinaryEncoding says: version 0 only, the fields in order, a missing options field
// reads as 0, bytes after the known fields ignored (a later minor revision's). False (out
// unchanged) when malformed or when the ids are missing or zero.
bool parse_grpc_trace_bin(std::string_view bytes, TraceContext& out);
constexpr std::size_t kGrpcTraceBinSize = 29;
void write_grpc_trace_bin(const TraceContext& context,
                          std::array<std::uint8_t, kGrpcTraceBinSize>& out);

// The remote parent a call's metadata carries in the chosen formats (W3C first), with its
// tracestate (W3C only, kept when valid, truncated to kMaxTracestateSize); invalid when none
// parses. Two traceparent headers are malformed (W3C §3.2: the value is then unknown).
TraceContext extract_trace_context(const Metadata& metadata, TracePropagation propagation);

// ---- spans ------------------------------------------------------------------------------------

// OpenTelemetry's (and OTLP's) span kinds and status codes, by their numbers.
enum class SpanKind : std::uint8_t { kInternal = 1, kServer = 2, kClient = 3 };
enum class SpanStatusCode : std::uint8_t { kUnset = 0, kOk = 1, kError = 2 };

struct SpanAttribute {
  std::string key;
  std::variant<std::int64_t, bool, std::string> value;
};

struct SpanEvent {
  std::string name;
  std::int64_t time_unix_ns = 0;
  std::vector<SpanAttribute> attributes;
};

// An ended span, everything an exporter (OTLP's Span) needs, as plain values.
struct SpanData {
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> span_id{};
  std::array<std::uint8_t, 8> parent_span_id{};  // all zero for a root
  bool parent_is_remote = false;
  std::uint8_t flags = 0;  // W3C trace-flags
  std::string tracestate;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  std::int64_t start_unix_ns = 0;  // system clock
  std::int64_t end_unix_ns = 0;
  std::vector<SpanAttribute> attributes;
  std::vector<SpanEvent> events;
  SpanStatusCode status = SpanStatusCode::kUnset;
  std::string status_message;  // A72: "<CODE>, <message>" for an error
};

// Where ended spans go, in batches, from the processor's thread (never a call's).
class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  // Exports batch (the exporter may move from it); may block its caller, the processor's
  // thread, but nothing else.
  virtual void export_spans(std::vector<SpanData>& batch) = 0;
  // Once, when the processor's shutdown begins, before it exports what is left: an exporter
  // that waits on a network should bound those last exports (OtlpSpanExporter: by its
  // shutdown_timeout). Any thread. Default: nothing.
  virtual void shutdown_started() {}
  // Once, after the last export_spans. Default: nothing.
  virtual void shutdown() {}
};

// Keeps every span it is given, for tests. Thread-safe.
class InMemorySpanExporter final : public SpanExporter {
 public:
  void export_spans(std::vector<SpanData>& batch) override;
  std::vector<SpanData> spans() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::vector<SpanData> spans_;
};

struct BatchSpanProcessorOptions {
  // Spans waiting for export at most; one more is dropped (and counted), never waited for:
  // a slow or stuck exporter costs the calls nothing, and memory stays bounded.
  std::size_t max_queue_size = 2048;
  // Spans per export_spans at most.
  std::size_t max_export_batch_size = 512;
  // The longest a span waits before its batch is exported (sooner once a batch is full).
  std::chrono::milliseconds schedule_delay{1000};
};

// A bounded queue of ended spans and a thread that exports them (OpenTelemetry's
// BatchSpanProcessor). on_end never blocks on the exporter: its lock guards only the queue.
// The records of exported spans (their strings' and vectors' storage) are kept, a bounded
// number, for the tracing interceptors to record new spans into: a sampled call's spans then
// cost no heap allocation on the call's thread once warm.
class BatchSpanProcessor {
 public:
  explicit BatchSpanProcessor(std::shared_ptr<SpanExporter> exporter,
                              BatchSpanProcessorOptions options = {});
  // shutdown().
  ~BatchSpanProcessor();
  BatchSpanProcessor(const BatchSpanProcessor&) = delete;
  BatchSpanProcessor& operator=(const BatchSpanProcessor&) = delete;

  // Queues span for export; false (dropped, counted) when the queue is full or shut down.
  // Any thread.
  bool on_end(SpanData&& span);
  // Exports every span queued before it, then returns. Any thread but the exporter's.
  void force_flush();
  // Exports what is queued, stops the thread and shuts the exporter down; later spans are
  // dropped. Idempotent.
  void shutdown();
  // Spans dropped because the queue was full (or after shutdown).
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  friend struct detail::SpanRecords;

  void run();
  // A record the exporter is done with (contents stale, storage kept), one of a span of the same
  // kind when there is one (so its events and attributes fit), or a new one. Any thread.
  SpanData take_spare(SpanKind kind);
  // Keeps batch's records (those small enough) as spares, up to the bound; with mutex_ held.
  void keep_spares_locked(std::vector<SpanData>& batch);

  std::shared_ptr<SpanExporter> exporter_;
  BatchSpanProcessorOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;      // the thread: a full batch, a flush, shutdown
  std::condition_variable exported_;  // force_flush: its spans are out
  // Ended spans waiting; the thread takes them all at once (its vector's storage swapped in,
  // so queueing allocates nothing once warm), then hands them to the exporter a batch at a
  // time: backlog_ counts those taken and not yet handed over, which count against
  // max_queue_size as the queued ones do.
  std::vector<SpanData> queue_;
  std::size_t backlog_ = 0;
  // Exported spans' records, for take_spare, by SpanKind (Attempt, Recv and Sent spans record
  // different events and attributes); spare_count_ in all.
  std::array<std::vector<SpanData>, 3> spares_;
  std::size_t spare_count_ = 0;
  std::uint64_t queued_total_ = 0;    // spans ever queued
  std::uint64_t exported_total_ = 0;  // of those, handed to the exporter (or dropped at the end)
  std::uint64_t flush_upto_ = 0;      // force_flush wants spans up to this one out
  bool stopping_ = false;
  bool stopped_ = false;  // the thread has exported everything and ended
  std::atomic<std::uint64_t> dropped_{0};
  std::once_flag shut_;
  std::thread thread_;
};

// ---- the interceptors -------------------------------------------------------------------------

struct TracingOptions {
  // Where sampled spans go when they end; null: nothing is recorded, the context is only
  // propagated (with its sampled flag as decided below).
  std::shared_ptr<BatchSpanProcessor> processor;
  // The headers read and written.
  TracePropagation propagation = TracePropagation::kW3C;
  // Parent-based sampling: a call with a (remote or local) parent is sampled when its parent
  // is; a new trace is sampled with this probability, decided from its trace id as
  // OpenTelemetry's TraceIdRatioBased does (so every service with the same ratio agrees).
  // 0 records nothing: a call then costs a random span id and the headers, no allocation.
  double sample_ratio = 1.0;
  // false: every call is sampled by sample_ratio from its trace id, whatever its parent says
  // (OpenTelemetry's always_on, always_off and traceidratio samplers, without "parentbased_").
  bool parent_based = true;
};

// Sets TracingOptions::sample_ratio and parent_based as OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG give them (the OpenTelemetry SDK environment variables; values read
// case-insensitively):
//   parentbased_always_on                  parent_based, ratio 1 (TracingOptions' default)
//   parentbased_always_off                 parent_based, ratio 0
//   parentbased_traceidratio               parent_based, ratio OTEL_TRACES_SAMPLER_ARG
//   always_on / always_off                 not parent-based, ratio 1 / 0
//   traceidratio                           not parent-based, ratio OTEL_TRACES_SAMPLER_ARG
// Unset (or empty), options are left as they are. As the specification asks, a bad value is
// ignored with a warning, never an error: an unknown sampler (jaeger_remote, xray, a typo)
// leaves options as they are, as if unset, and an OTEL_TRACES_SAMPLER_ARG that is not a number
// in [0, 1] reads as unset (ratio 1). The warning, empty if none, is written to *warning (for
// the application's log). Reads the environment: call it before threads that may setenv.
void tracing_sampler_from_environment(TracingOptions& options, std::string* warning = nullptr);

// The server's: reads the client's trace context, opens the Recv span (ServerContext::
// trace_context() gives its context to the handler) and ends it with the call's status. The
// options' processor must outlive the calls. Thread-safe: one instance serves every I/O thread.
std::shared_ptr<ServerInterceptor> make_server_tracing(TracingOptions options);

// The client's: opens the Sent span (a child of ClientContext::trace_parent(), else a new
// trace), an Attempt span per attempt, and writes the attempt's context into its headers.
std::shared_ptr<ClientInterceptor> make_client_tracing(TracingOptions options);

// Whether a new trace with this trace id is sampled at ratio (OpenTelemetry's
// TraceIdRatioBased: the id's last 8 bytes, big-endian, shifted right once, below
// ratio x 2^63).
bool trace_id_ratio_sampled(const std::array<std::uint8_t, 16>& trace_id, double ratio);

}  // namespace ferry

// The trace-context formats of ferry::tracing (ferry/tracing.h) in one process: W3C
// traceparent/tracestate (Trace Context level 1, with its test suite's edge cases) and gRPC's
// grpc-trace-bin (grpc-go's layout), round trips, malformed values ignored, the sampler's
// ratio, and the batching processor's bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "ferry/tracing.h"

namespace ferry::tracing_propagation_test {
namespace {

constexpr std::string_view kValid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TraceContext sample_context() {
  TraceContext c;
  for (std::size_t i = 0; i < 16; ++i) c.trace_id[i] = static_cast<std::uint8_t>(0x10 + i);
  for (std::size_t i = 0; i < 8; ++i) c.span_id[i] = static_cast<std::uint8_t>(0xa0 + i);
  c.flags = TraceContext::kSampled;
  return c;
}

TEST(Traceparent, ParsesTheSpecsExample) {
  TraceContext c;
  ASSERT_TRUE(parse_traceparent(kValid, c));
  EXPECT_EQ(c.trace_id[0], 0x0a);
  EXPECT_EQ(c.trace_id[15], 0x9c);
  EXPECT_EQ(c.span_id[0], 0xb7);
  EXPECT_EQ(c.span_id[7], 0x31);
  EXPECT_TRUE(c.sampled());
  EXPECT_TRUE(c.valid());
}

TEST(Traceparent, RoundTrips) {
  for (std::uint8_t flags : {std::uint8_t{0}, TraceContext::kSampled}) {
    TraceContext c = sample_context();
    c.flags = flags;
    std::array<char, kTraceparentSize> text;
    write_traceparent(c, text);
    const std::string_view written(text.data(), text.size());
    EXPECT_EQ(written.substr(0, 3), "00-");
    TraceContext back;
    ASSERT_TRUE(parse_traceparent(written, back)) << written;
    EXPECT_EQ(back.trace_id, c.trace_id);
    EXPECT_EQ(back.span_id, c.span_id);
    EXPECT_EQ(back.flags, flags);
  }
}

// W3C Trace Context level 1 §3.2, and the cases of its test suite (w3c/trace-context's
// test/test.py: version ff, uppercase, all-zero ids, wrong lengths, future versions).
TEST(Traceparent, RejectsWhatTheSpecRejects) {
  const std::string_view bad[] = {
      "",
      "00",
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // version ff
      "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // not hex
      "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",   // uppercase trace id
      "00-0af7651916cd43dd8448eb211c80319c-B7AD6B7169203331-01",   // uppercase parent id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0A",   // uppercase flags
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",   // all-zero trace id
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",   // all-zero parent id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",  // 00 longer than 55
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
      "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",     // short trace id
      "00-0af7651916cd43dd8448eb211c80319c00-b7ad6b71692033-01",   // shifted dashes
      "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // wrong separator
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",    // one-digit flags
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",  // later version, no '-'
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
      "-0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
  };
  for (std::string_view value : bad) {
    TraceContext c = sample_context();
    const TraceContext before = c;
    EXPECT_FALSE(parse_traceparent(value, c)) << value;
    EXPECT_EQ(c.trace_id, before.trace_id) << value;  // untouched
  }
}

TEST(Traceparent, ParsesLaterVersionsAsFarAsItKnows) {
  TraceContext c;
  // §3.2.4: a higher version's first four fields are read as 00's; the rest ignored.
  EXPECT_TRUE(parse_traceparent(
      "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future", c));
  EXPECT_TRUE(c.sampled());
  EXPECT_TRUE(parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", c));
  EXPECT_FALSE(c.sampled());
  // Only the sampled flag is kept: other bits are not defined by level 1.
  EXPECT_TRUE(parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff", c));
  EXPECT_EQ(c.flags, TraceContext::kSampled);
  // Optional whitespace around the field value is not part of it.
  EXPECT_TRUE(parse_traceparent(" \t00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ", c));
}

TEST(Tracestate, ValidatesListMembers) {
  EXPECT_TRUE(valid_tracestate("congo=t61rcWkgMzE"));
  EXPECT_TRUE(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_TRUE(valid_tracestate("rojo=1, ,congo=2,"));  // empty members and OWS allowed
  EXPECT_TRUE(valid_tracestate("tenant1@vendor=x"));
  EXPECT_TRUE(valid_tracestate("0tenant@vendor=x"));  // a tenant id may start with a digit
  EXPECT_TRUE(valid_tracestate("a_-*/=value with spaces inside"));
  EXPECT_FALSE(valid_tracestate("Rojo=1"));               // uppercase key
  EXPECT_FALSE(valid_tracestate("0rojo=1"));              // a simple key starts with a letter
  EXPECT_FALSE(valid_tracestate("rojo"));                 // no '='
  EXPECT_FALSE(valid_tracestate("rojo="));                // empty value
  EXPECT_TRUE(valid_tracestate("rojo=a \t"));             // trailing OWS is not the value
  EXPECT_FALSE(valid_tracestate("rojo=a=b"));             // '=' in a value
  EXPECT_FALSE(valid_tracestate("rojo=1,rojo=2"));        // duplicate key
  EXPECT_FALSE(valid_tracestate("t@=1"));                 // empty system id
  EXPECT_FALSE(valid_tracestate("t@Vendor=1"));           // uppercase system id
  EXPECT_FALSE(valid_tracestate("t@abcdefghijklmno=1"));  // system id over 14
  EXPECT_FALSE(valid_tracestate(std::string("rojo=\x01", 6)));
  EXPECT_FALSE(valid_tracestate(std::string("k=") + std::string(257, 'v')));
  std::string members;
  for (int i = 0; i < 32; ++i) members += "k" + std::to_string(i) + "=v,";
  EXPECT_TRUE(valid_tracestate(members));
  members += "k32=v";
  EXPECT_FALSE(valid_tracestate(members));  // 33 members
}

TEST(GrpcTraceBin, RoundTripsInGrpcGosLayout) {
  const TraceContext c = sample_context();
  std::array<std::uint8_t, kGrpcTraceBinSize> bin;
  write_grpc_trace_bin(c, bin);
  // grpc-go's toBinary: [0]=version 0, [1]=field 0, trace id, [18]=field 1, span id,
  // [27]=field 2, options.
  EXPECT_EQ(bin[0], 0);
  EXPECT_EQ(bin[1], 0);
  EXPECT_EQ(bin[2], 0x10);
  EXPECT_EQ(bin[18], 1);
  EXPECT_EQ(bin[19], 0xa0);
  EXPECT_EQ(bin[27], 2);
  EXPECT_EQ(bin[28], 1);
  TraceContext back;
  ASSERT_TRUE(parse_grpc_trace_bin(
      std::string_view(reinterpret_cast<const char*>(bin.data()), bin.size()), back));
  EXPECT_EQ(back.trace_id, c.trace_id);
  EXPECT_EQ(back.span_id, c.span_id);
  EXPECT_TRUE(back.sampled());
}

TEST(GrpcTraceBin, IgnoresMalformedValues) {
  const TraceContext c = sample_context();
  std::array<std::uint8_t, kGrpcTraceBinSize> bin;
  write_grpc_trace_bin(c, bin);
  const std::string good(reinterpret_cast<const char*>(bin.data()), bin.size());
  TraceContext out;
  for (std::size_t n = 0; n < good.size(); ++n) {
    // Cut before the span id's end: no span id, or a truncated field.
    if (n < 27) {
      EXPECT_FALSE(parse_grpc_trace_bin(good.substr(0, n), out)) << n;
    }
  }
  // Without the options field (OpenCensus: optional): not sampled.
  ASSERT_TRUE(parse_grpc_trace_bin(good.substr(0, 27), out));
  EXPECT_FALSE(out.sampled());
  // Options field truncated.
  EXPECT_FALSE(parse_grpc_trace_bin(good.substr(0, 28), out));
  std::string v1 = good;
  v1[0] = 1;  // an unknown version
  EXPECT_FALSE(parse_grpc_trace_bin(v1, out));
  std::string wrong_field = good;
  wrong_field[18] = 3;  // the span id's field id replaced: no span id
  EXPECT_FALSE(parse_grpc_trace_bin(wrong_field, out));
  std::string zero_trace = good;
  for (int i = 2; i < 18; ++i) zero_trace[i] = 0;
  EXPECT_FALSE(parse_grpc_trace_bin(zero_trace, out));
  // A later revision's extra field after the known ones is ignored.
  EXPECT_TRUE(parse_grpc_trace_bin(good + std::string("\x03\x01\x02", 3), out));
}

TEST(ExtractTraceContext, ReadsTheChosenFormats) {
  const TraceContext c = sample_context();
  std::array<std::uint8_t, kGrpcTraceBinSize> bin;
  write_grpc_trace_bin(c, bin);
  const std::string bin_value(reinterpret_cast<const char*>(bin.data()), bin.size());

  Metadata both;
  both.add("traceparent", kValid);
  both.add("tracestate", "rojo=1");
  both.add("tracestate", "congo=2");
  both.add("grpc-trace-bin", bin_value);
  TraceContext w3c = extract_trace_context(both, TracePropagation::kBoth);
  EXPECT_EQ(w3c.span_id[0], 0xb7);  // traceparent first
  EXPECT_EQ(w3c.tracestate, "rojo=1,congo=2");
  TraceContext from_bin = extract_trace_context(both, TracePropagation::kGrpcTraceBin);
  EXPECT_EQ(from_bin.span_id, c.span_id);
  EXPECT_TRUE(from_bin.tracestate.empty());

  // A malformed traceparent falls back to grpc-trace-bin when both are read...
  Metadata bad_w3c;
  bad_w3c.add("traceparent", "00-xyz");
  bad_w3c.add("tracestate", "rojo=1");
  bad_w3c.add("grpc-trace-bin", bin_value);
  EXPECT_EQ(extract_trace_context(bad_w3c, TracePropagation::kBoth).span_id, c.span_id);
  // ... and is no context alone (a new root), its tracestate not kept.
  TraceContext none = extract_trace_context(bad_w3c, TracePropagation::kW3C);
  EXPECT_FALSE(none.valid());
  EXPECT_TRUE(none.tracestate.empty());

  // Two traceparent headers: the value is ambiguous, so ignored.
  Metadata twice;
  twice.add("traceparent", kValid);
  twice.add("traceparent", kValid);
  EXPECT_FALSE(extract_trace_context(twice, TracePropagation::kW3C).valid());

  // An invalid tracestate is dropped, the traceparent kept.
  Metadata bad_state;
  bad_state.add("traceparent", kValid);
  bad_state.add("tracestate", "Bad Key=1");
  TraceContext kept = extract_trace_context(bad_state, TracePropagation::kW3C);
  EXPECT_TRUE(kept.valid());
  EXPECT_TRUE(kept.tracestate.empty());
}

// W3C §3.3.1.5: over 512 characters, whole list-members go (those over 128 first, then from
// the end) rather than the whole list or part of a member.
TEST(ExtractTraceContext, TruncatesALongTracestateByWholeMembers) {
  const std::string long_member = "big=" + std::string(200, 'x');  // over 128
  std::string state = "a=1," + long_member;
  for (int i = 0; i < 25; ++i) state += ",k" + std::to_string(i) + "=" + std::string(20, 'v');
  ASSERT_TRUE(valid_tracestate(state));
  ASSERT_GT(state.size(), kMaxTracestateSize);
  Metadata metadata;
  metadata.add("traceparent", kValid);
  metadata.add("tracestate", state);
  const TraceContext c = extract_trace_context(metadata, TracePropagation::kW3C);
  ASSERT_TRUE(c.valid());
  EXPECT_LE(c.tracestate.size(), kMaxTracestateSize);
  EXPECT_TRUE(valid_tracestate(c.tracestate)) << c.tracestate;
  EXPECT_EQ(c.tracestate.find("big="), std::string::npos);          // the long member went first
  EXPECT_EQ(c.tracestate.rfind("a=1,k0=", 0), 0u) << c.tracestate;  // the front is kept
  EXPECT_NE(c.tracestate.find("k18="), std::string::npos);          // 20 of 25 fit: the end went
  EXPECT_EQ(c.tracestate.find("k24="), std::string::npos);
  // Members fit whole: each kept one is as it came.
  EXPECT_NE(c.tracestate.find("k18=" + std::string(20, 'v')), std::string::npos);
}

TEST(Sampler, TraceIdRatioBased) {
  std::array<std::uint8_t, 16> id{};
  id[0] = 1;
  EXPECT_FALSE(trace_id_ratio_sampled(id, 0.0));
  EXPECT_TRUE(trace_id_ratio_sampled(id, 1.0));  // low 8 bytes 0: below any positive bound
  for (std::size_t i = 8; i < 16; ++i) id[i] = 0xff;
  EXPECT_FALSE(trace_id_ratio_sampled(id, 0.999));
  EXPECT_TRUE(trace_id_ratio_sampled(id, 1.0));
  // 0x40..: (x >> 1) = 0x20.. = 2^61 = 0.25 x 2^63: sampled above a quarter, not at it.
  id[8] = 0x40;
  for (std::size_t i = 9; i < 16; ++i) id[i] = 0;
  EXPECT_FALSE(trace_id_ratio_sampled(id, 0.25));
  EXPECT_TRUE(trace_id_ratio_sampled(id, 0.26));
}

// An exporter that blocks until released, counting what it got.
class StuckExporter final : public SpanExporter {
 public:
  void export_spans(std::vector<SpanData>& batch) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    entered_cv_.notify_all();
    release_cv_.wait(lock, [&] { return released_; });
    exported_ += batch.size();
  }
  void wait_entered() {
    std::unique_lock lock(mutex_);
    entered_cv_.wait(lock, [&] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    release_cv_.notify_all();
  }
  std::size_t exported() {
    std::lock_guard lock(mutex_);
    return exported_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable entered_cv_;
  std::condition_variable release_cv_;
  bool entered_ = false;
  bool released_ = false;
  std::size_t exported_ = 0;
};

// A stuck exporter: the queue fills to its bound, further spans are dropped and counted at
// once (on_end never waits), and shutdown exports what was queued.
TEST(BatchSpanProcessor, DropsAndCountsWhenTheQueueIsFull) {
  auto exporter = std::make_shared<StuckExporter>();
  BatchSpanProcessor processor(exporter, {.max_queue_size = 4,
                                          .max_export_batch_size = 1,
                                          .schedule_delay = std::chrono::milliseconds(1)});
  EXPECT_TRUE(processor.on_end(SpanData{}));  // taken by the thread, which then blocks
  exporter->wait_entered();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(processor.on_end(SpanData{})) << i;
  const auto before = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(processor.on_end(SpanData{}));
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(1));
  EXPECT_EQ(processor.dropped(), 10u);
  exporter->release();
  processor.shutdown();
  EXPECT_EQ(exporter->exported(), 5u);
  EXPECT_FALSE(processor.on_end(SpanData{}));  // after shutdown: dropped
  EXPECT_EQ(processor.dropped(), 11u);
}

TEST(BatchSpanProcessor, ForceFlushExportsWhatWasQueued) {
  auto exporter = std::make_shared<InMemorySpanExporter>();
  BatchSpanProcessor processor(exporter, {.schedule_delay = std::chrono::seconds(60)});
  SpanData span;
  span.name = "one";
  processor.on_end(std::move(span));
  processor.force_flush();
  ASSERT_EQ(exporter->spans().size(), 1u);
  EXPECT_EQ(exporter->spans()[0].name, "one");
}

// OTEL_TRACES_SAMPLER(_ARG) as the OpenTelemetry specification gives them; bad values are
// ignored with a warning, never an error.
TEST(SamplerFromEnvironment, EachSamplerAndItsArgument) {
  struct Case {
    const char* sampler;
    const char* arg;
    double ratio;
    bool parent_based;
    bool warns;
  };
  const Case cases[] = {
      {nullptr, nullptr, 0.25, false, false},  // unset: the code's options stand
      {"", nullptr, 0.25, false, false},
      {"always_on", nullptr, 1.0, false, false},
      {"always_off", nullptr, 0.0, false, false},
      {"traceidratio", "0.5", 0.5, false, false},
      {"traceidratio", nullptr, 1.0, false, false},
      {"parentbased_always_on", nullptr, 1.0, true, false},
      {"parentbased_always_off", nullptr, 0.0, true, false},
      {"parentbased_traceidratio", "0.125", 0.125, true, false},
      {"ParentBased_TraceIdRatio", "0", 0.0, true, false},   // case-insensitive
      {"parentbased_traceidratio", "1.5", 1.0, true, true},  // out of [0, 1]: 1
      {"traceidratio", "-0.1", 1.0, false, true},
      {"traceidratio", "nan", 1.0, false, true},
      {"traceidratio", "0.5x", 1.0, false, true},
      {"jaeger_remote", "0.5", 0.25, false, true},  // unknown: ignored
      {"always_onn", nullptr, 0.25, false, true},
  };
  for (const Case& c : cases) {
    if (c.sampler != nullptr) {
      setenv("OTEL_TRACES_SAMPLER", c.sampler, 1);
    } else {
      unsetenv("OTEL_TRACES_SAMPLER");
    }
    if (c.arg != nullptr) {
      setenv("OTEL_TRACES_SAMPLER_ARG", c.arg, 1);
    } else {
      unsetenv("OTEL_TRACES_SAMPLER_ARG");
    }
    TracingOptions options;
    options.sample_ratio = 0.25;
    options.parent_based = false;
    std::string warning = "stale";
    tracing_sampler_from_environment(options, &warning);
    const std::string label =
        std::string(c.sampler ? c.sampler : "(unset)") + " " + (c.arg ? c.arg : "(unset)");
    EXPECT_EQ(options.sample_ratio, c.ratio) << label;
    EXPECT_EQ(options.parent_based, c.parent_based) << label;
    EXPECT_EQ(!warning.empty(), c.warns) << label << ": " << warning;
  }
  unsetenv("OTEL_TRACES_SAMPLER");
  unsetenv("OTEL_TRACES_SAMPLER_ARG");
}

}  // namespace
}  // namespace ferry::tracing_propagation_test

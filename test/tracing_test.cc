// ferry::tracing (ferry/tracing.h) over loopback: gRFC A72's spans on both ends share one trace
// with the right parents, in each propagation format; retries give an Attempt span each; a
// handler's outgoing call is a child of its Recv span; an application's tracer joins; sampling
// 0 records nothing yet propagates (a sampled parent still records, an unsampled call's context
// is worked out when asked); malformed contexts start a new trace; statuses map as A72
// says; message events carry sizes.
#include "ferry/tracing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "asio/read.hpp"
#include "asio/write.hpp"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/retry.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "nghttp2/nghttp2.h"
#include "support/h2_frame.h"
#include "support/loopback.h"

namespace ferry::tracing_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

struct Tracing {
  explicit Tracing(TracePropagation propagation = TracePropagation::kW3C, double ratio = 1.0)
      : exporter(std::make_shared<InMemorySpanExporter>()),
        processor(std::make_shared<BatchSpanProcessor>(exporter)) {
    options.processor = processor;
    options.propagation = propagation;
    options.sample_ratio = ratio;
    server_options.interceptors.push_back(make_server_tracing(options));
    channel_options.interceptors.push_back(make_client_tracing(options));
  }
  std::vector<SpanData> spans() {
    processor->force_flush();
    return exporter->spans();
  }

  std::shared_ptr<InMemorySpanExporter> exporter;
  std::shared_ptr<BatchSpanProcessor> processor;
  TracingOptions options;
  ServerOptions server_options;
  ChannelOptions channel_options;
};

std::vector<const SpanData*> named(const std::vector<SpanData>& spans, std::string_view name) {
  std::vector<const SpanData*> out;
  for (const SpanData& s : spans) {
    if (s.name == name) out.push_back(&s);
  }
  return out;
}

std::optional<std::int64_t> int_attribute(const std::vector<SpanAttribute>& attributes,
                                          std::string_view key) {
  for (const SpanAttribute& a : attributes) {
    if (a.key == key) return std::get<std::int64_t>(a.value);
  }
  return std::nullopt;
}

std::optional<bool> bool_attribute(const std::vector<SpanAttribute>& attributes,
                                   std::string_view key) {
  for (const SpanAttribute& a : attributes) {
    if (a.key == key) return std::get<bool>(a.value);
  }
  return std::nullopt;
}

const std::array<std::uint8_t, 8> kNoParent{};

// Sees what the server received, after the tracing interceptor.
class HeaderProbe final : public ServerInterceptor {
 public:
  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo&) override {
    std::lock_guard lock(mutex);
    traceparent = std::string(ctx.client_metadata().get("traceparent").value_or(""));
    trace_bin = std::string(ctx.client_metadata().get("grpc-trace-bin").value_or(""));
    context = ctx.trace_context();
    return ready_status();
  }
  std::mutex mutex;
  std::string traceparent;
  std::string trace_bin;
  TraceContext context;
};

class Propagation : public ::testing::TestWithParam<TracePropagation> {};

// One unary call: Sent (client, a root) > Attempt > Recv (server, its parent remote), one trace
// id, each span OK with its message events.
TEST_P(Propagation, ClientAndServerSpansShareATrace) {
  Tracing tracing(GetParam());
  Loopback loop(tracing.server_options, tracing.channel_options);
  EchoRequest request;
  request.set_payload(std::string(100, 'x'));
  EchoResponse response;
  ClientContext ctx;
  const absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 3; }));
  const auto spans = tracing.spans();
  const auto sent = named(spans, "Sent.ferry.testing.Echo.Echo");
  const auto attempt = named(spans, "Attempt.ferry.testing.Echo.Echo");
  const auto recv = named(spans, "Recv.ferry.testing.Echo.Echo");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(attempt.size(), 1u);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(sent[0]->kind, SpanKind::kClient);
  EXPECT_EQ(recv[0]->kind, SpanKind::kServer);
  EXPECT_EQ(sent[0]->parent_span_id, kNoParent);
  EXPECT_EQ(attempt[0]->trace_id, sent[0]->trace_id);
  EXPECT_EQ(recv[0]->trace_id, sent[0]->trace_id);
  EXPECT_EQ(attempt[0]->parent_span_id, sent[0]->span_id);
  EXPECT_EQ(recv[0]->parent_span_id, attempt[0]->span_id);
  EXPECT_TRUE(recv[0]->parent_is_remote);
  EXPECT_EQ(ctx.trace_context().span_id, sent[0]->span_id);  // the call's span, for the app
  for (const SpanData* span : {sent[0], attempt[0], recv[0]}) {
    EXPECT_EQ(span->status, SpanStatusCode::kOk) << span->name;
    EXPECT_TRUE(span->flags & TraceContext::kSampled);
    EXPECT_LE(span->start_unix_ns, span->end_unix_ns);
  }
  EXPECT_EQ(int_attribute(attempt[0]->attributes, "previous-rpc-attempts"), 0);
  EXPECT_EQ(bool_attribute(attempt[0]->attributes, "transparent-retry"), false);
  // A72's message events: the attempt sent one and received one, the server the reverse.
  ASSERT_EQ(attempt[0]->events.size(), 2u);
  EXPECT_EQ(attempt[0]->events[0].name, "Outbound message");
  EXPECT_EQ(int_attribute(attempt[0]->events[0].attributes, "sequence-number"), 0);
  EXPECT_EQ(int_attribute(attempt[0]->events[0].attributes, "message-size"),
            static_cast<std::int64_t>(request.ByteSizeLong()));
  EXPECT_EQ(int_attribute(attempt[0]->events[0].attributes, "message-size-compressed"),
            std::nullopt);
  EXPECT_EQ(attempt[0]->events[1].name, "Inbound message");
  EXPECT_EQ(int_attribute(attempt[0]->events[1].attributes, "message-size"),
            static_cast<std::int64_t>(response.ByteSizeLong()));
  ASSERT_EQ(recv[0]->events.size(), 2u);
  EXPECT_EQ(recv[0]->events[0].name, "Inbound message");
  EXPECT_EQ(recv[0]->events[1].name, "Outbound message");
  EXPECT_TRUE(sent[0]->events.empty());
}

INSTANTIATE_TEST_SUITE_P(Formats, Propagation,
                         ::testing::Values(TracePropagation::kW3C, TracePropagation::kGrpcTraceBin,
                                           TracePropagation::kBoth));

// The headers on the wire are the attempt's: traceparent and grpc-trace-bin as configured.
TEST(Tracing, WritesTheChosenHeaders) {
  for (TracePropagation p :
       {TracePropagation::kW3C, TracePropagation::kGrpcTraceBin, TracePropagation::kBoth}) {
    Tracing tracing(p);
    auto probe = std::make_shared<HeaderProbe>();
    tracing.server_options.interceptors.push_back(probe);
    Loopback loop(tracing.server_options, tracing.channel_options);
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                      co_return co_await loop.stub().Echo(ctx, request, response);
                    })
                    .ok());
    std::lock_guard lock(probe->mutex);
    EXPECT_EQ(!probe->traceparent.empty(), p != TracePropagation::kGrpcTraceBin);
    EXPECT_EQ(probe->trace_bin.size(), p != TracePropagation::kW3C ? kGrpcTraceBinSize : 0u);
    TraceContext parsed;
    if (!probe->traceparent.empty()) {
      ASSERT_TRUE(parse_traceparent(probe->traceparent, parsed));
      EXPECT_EQ(parsed.trace_id, ctx.trace_context().trace_id);
      EXPECT_NE(parsed.span_id, ctx.trace_context().span_id);  // the attempt's, not Sent's
    }
    if (!probe->trace_bin.empty()) {
      ASSERT_TRUE(parse_grpc_trace_bin(probe->trace_bin, parsed));
      EXPECT_EQ(parsed.trace_id, ctx.trace_context().trace_id);
    }
    EXPECT_EQ(probe->context.trace_id, ctx.trace_context().trace_id);
  }
}

// A call its method's policy retries twice: three Attempt spans under one Sent span, with
// previous-rpc-attempts 0, 1, 2, each the parent of its own Recv span; A72's status mapping.
TEST(Tracing, RetriesHaveAnAttemptSpanEach) {
  Tracing tracing;
  RetryPolicy& policy =
      tracing.channel_options.method_configs["/ferry.testing.Echo/"].retry_policy.emplace();
  policy.max_attempts = 3;
  policy.initial_backoff = std::chrono::milliseconds(1);
  policy.max_backoff = std::chrono::milliseconds(1);
  policy.retryable_status_codes = {absl::StatusCode::kNotFound};
  Loopback loop(tracing.server_options, tracing.channel_options);
  EchoRequest request;
  request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
  request.set_status_message("no such thing");
  EchoResponse response;
  ClientContext ctx;
  EXPECT_EQ(loop.run([&]() -> asio::awaitable<absl::Status> {
                  co_return co_await loop.stub().Echo(ctx, request, response);
                })
                .code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 7; }));
  const auto spans = tracing.spans();
  const auto sent = named(spans, "Sent.ferry.testing.Echo.Echo");
  auto attempts = named(spans, "Attempt.ferry.testing.Echo.Echo");
  const auto recvs = named(spans, "Recv.ferry.testing.Echo.Echo");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(attempts.size(), 3u);
  ASSERT_EQ(recvs.size(), 3u);
  std::sort(attempts.begin(), attempts.end(), [](const SpanData* a, const SpanData* b) {
    return a->start_unix_ns < b->start_unix_ns;
  });
  for (int i = 0; i < 3; ++i) {
    const SpanData& a = *attempts[i];
    EXPECT_EQ(a.parent_span_id, sent[0]->span_id);
    EXPECT_EQ(int_attribute(a.attributes, "previous-rpc-attempts"), i);
    EXPECT_EQ(bool_attribute(a.attributes, "transparent-retry"), false);
    EXPECT_EQ(a.status, SpanStatusCode::kError);
    EXPECT_EQ(a.status_message, "NOT_FOUND, no such thing");
    EXPECT_EQ(std::count_if(recvs.begin(), recvs.end(),
                            [&](const SpanData* r) { return r->parent_span_id == a.span_id; }),
              1)
        << i;
  }
  EXPECT_EQ(sent[0]->status, SpanStatusCode::kError);
  EXPECT_EQ(sent[0]->status_message, "NOT_FOUND, no such thing");
  for (const SpanData* r : recvs) EXPECT_EQ(r->status_message, "NOT_FOUND, no such thing");
}

constexpr std::string_view kForward = "/ferry.testing.Relay/Forward";

// Forward calls Echo on the downstream channel with a context made from its own.
class RelayService : public Service {
 public:
  explicit RelayService(std::unique_ptr<Channel>* downstream) : Service("ferry.testing.Relay") {
    add_unary<EchoRequest, EchoResponse>(
        "Forward",
        [downstream](ServerContext& ctx, const EchoRequest& request,
                     EchoResponse& response) -> asio::awaitable<absl::Status> {
          ClientContext outgoing = ClientContext::from_server_context(ctx);
          co_return co_await (*downstream)
              ->call(testing::Echo::kEchoPath, outgoing, request, response);
        });
  }
};

// The handler's outgoing call is a child of its Recv span: one trace over two hops.
TEST(Tracing, AHandlersCallIsAChildOfItsRecvSpan) {
  Tracing tracing;
  std::unique_ptr<Channel> downstream;
  RelayService relay(&downstream);
  Loopback loop(tracing.server_options, tracing.channel_options, &relay);
  downstream = std::make_unique<Channel>(loop.target(), tracing.channel_options);
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    co_return co_await loop.channel().call(kForward, ctx, request, response);
                  })
                  .ok());
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 6; }));
  const auto spans = tracing.spans();
  const auto forward = named(spans, "Recv.ferry.testing.Relay.Forward");
  const auto echo_sent = named(spans, "Sent.ferry.testing.Echo.Echo");
  const auto echo_recv = named(spans, "Recv.ferry.testing.Echo.Echo");
  ASSERT_EQ(forward.size(), 1u);
  ASSERT_EQ(echo_sent.size(), 1u);
  ASSERT_EQ(echo_recv.size(), 1u);
  EXPECT_EQ(echo_sent[0]->parent_span_id, forward[0]->span_id);
  EXPECT_FALSE(echo_sent[0]->parent_is_remote);
  for (const SpanData& s : spans) EXPECT_EQ(s.trace_id, forward[0]->trace_id) << s.name;
}

// An application's own tracer joins: the parent it sets is the Sent span's, its trace the
// call's, and its tracestate travels.
TEST(Tracing, AnApplicationsParentIsTheSentSpansParent) {
  Tracing tracing;
  auto probe = std::make_shared<HeaderProbe>();
  tracing.server_options.interceptors.push_back(probe);
  Loopback loop(tracing.server_options, tracing.channel_options);
  TraceContext app;
  ASSERT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", app));
  app.tracestate = "rojo=00f067aa0ba902b7";
  ClientContext ctx;
  ctx.set_trace_parent(app);
  EchoRequest request;
  EchoResponse response;
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    co_return co_await loop.stub().Echo(ctx, request, response);
                  })
                  .ok());
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 3; }));
  const auto spans = tracing.spans();
  const auto sent = named(spans, "Sent.ferry.testing.Echo.Echo");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]->trace_id, app.trace_id);
  EXPECT_EQ(sent[0]->parent_span_id, app.span_id);
  std::lock_guard lock(probe->mutex);
  EXPECT_EQ(probe->context.trace_id, app.trace_id);
  EXPECT_EQ(probe->context.tracestate, "rojo=00f067aa0ba902b7");
}

// Sampling 0: nothing recorded on either side, yet the context goes on (W3C): the server's
// trace context continues the client's trace, marked not sampled; and a parent that is not
// sampled keeps a server at ratio 1 from recording (parent-based).
TEST(Tracing, SamplingZeroRecordsNothingButPropagates) {
  Tracing client(TracePropagation::kW3C, 0.0);
  Tracing server(TracePropagation::kW3C, 1.0);  // ratio 1 for roots: but the parent says no
  auto probe = std::make_shared<HeaderProbe>();
  server.server_options.interceptors.push_back(probe);
  Loopback loop(server.server_options, client.channel_options);
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    co_return co_await loop.stub().Echo(ctx, request, response);
                  })
                  .ok());
  EXPECT_TRUE(client.spans().empty());
  EXPECT_TRUE(server.spans().empty());
  EXPECT_TRUE(ctx.trace_context().valid());
  EXPECT_FALSE(ctx.trace_context().sampled());
  std::lock_guard lock(probe->mutex);
  TraceContext sent;
  ASSERT_TRUE(parse_traceparent(probe->traceparent, sent)) << probe->traceparent;
  EXPECT_EQ(sent.trace_id, ctx.trace_context().trace_id);
  EXPECT_FALSE(sent.sampled());
  EXPECT_EQ(probe->context.trace_id, ctx.trace_context().trace_id);
  EXPECT_FALSE(probe->context.sampled());
}

// Not parent-based (always_on, always_off): the sampler decides whatever the parent says. A
// client always_off under a sampled parent records nothing (and tells the server so); a server
// always_on under that unsampled parent records its span all the same, in the parent's trace.
TEST(Tracing, SamplersThatAreNotParentBasedIgnoreTheParent) {
  Tracing client(TracePropagation::kW3C, 0.0);
  Tracing server(TracePropagation::kW3C, 1.0);
  client.options.parent_based = false;
  server.options.parent_based = false;
  client.channel_options.interceptors = {make_client_tracing(client.options)};
  server.server_options.interceptors = {make_server_tracing(server.options)};
  Loopback loop(server.server_options, client.channel_options);
  TraceContext app;
  ASSERT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", app));
  ClientContext ctx;
  ctx.set_trace_parent(app);
  EchoRequest request;
  EchoResponse response;
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    co_return co_await loop.stub().Echo(ctx, request, response);
                  })
                  .ok());
  EXPECT_TRUE(client.spans().empty());
  EXPECT_FALSE(ctx.trace_context().sampled());
  ASSERT_TRUE(loop.wait_until([&] { return server.spans().size() == 1; }));
  const auto spans = server.spans();
  EXPECT_EQ(spans[0].name, "Recv.ferry.testing.Echo.Echo");
  EXPECT_EQ(spans[0].trace_id, app.trace_id);
}

// A server-streaming call (no retry policy): its request is the attempt's first Outbound
// message event, as a unary call's is, and each response an Inbound one, numbered from 0.
TEST(Tracing, AServerStreamingCallsRequestIsAnOutboundEvent) {
  Tracing tracing;
  Loopback loop(tracing.server_options, tracing.channel_options);
  EchoRequest request;
  request.set_response_count(3);
  request.set_response_size(10);
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    ClientContext ctx;
                    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(ctx, request);
                    EchoResponse response;
                    while (co_await reader.read(response)) {
                    }
                    co_return co_await reader.finish();
                  })
                  .ok());
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 3; }));
  const auto spans = tracing.spans();
  const auto attempt = named(spans, "Attempt.ferry.testing.Echo.Expand");
  ASSERT_EQ(attempt.size(), 1u);
  std::vector<std::pair<std::string, std::int64_t>> events;
  for (const SpanEvent& event : attempt[0]->events) {
    events.emplace_back(event.name, *int_attribute(event.attributes, "sequence-number"));
  }
  EXPECT_EQ(events, (std::vector<std::pair<std::string, std::int64_t>>{{"Outbound message", 0},
                                                                       {"Inbound message", 0},
                                                                       {"Inbound message", 1},
                                                                       {"Inbound message", 2}}));
}

// Sampling 0 on the server alone: no Recv span, and none for an unsampled root either.
TEST(Tracing, SamplingZeroOnTheServerRecordsNothing) {
  Tracing tracing(TracePropagation::kW3C, 0.0);
  Loopback loop(tracing.server_options, {});
  EchoRequest request;
  EchoResponse response;
  for (int i = 0; i < 20; ++i) {
    ClientContext ctx;
    ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                      co_return co_await loop.stub().Echo(ctx, request, response);
                    })
                    .ok());
  }
  EXPECT_TRUE(tracing.spans().empty());
}

// grpc-trace-bin version 0 with every field: trace id 0x11..., span id 0x22..., options flags.
std::string trace_bin(std::uint8_t flags) {
  std::string bin(1, '\0');
  bin += '\0';
  bin.append(16, '\x11');
  bin += '\x01';
  bin.append(8, '\x22');
  bin += '\x02';
  bin += static_cast<char>(flags);
  return bin;
}

// Sends the trace headers it is given, as they are: the client refuses grpc-trace-bin as
// metadata (a reserved key), a tracer may write it.
class FixedTraceHeaders final : public CallTracer {
 public:
  FixedTraceHeaders(std::string traceparent, std::string bin)
      : traceparent_(std::move(traceparent)), bin_(absl::Base64Escape(bin)) {
    while (!bin_.empty() && bin_.back() == '=') bin_.pop_back();  // gRPC's -bin: unpadded
  }
  void add_attempt_headers(const TraceContext&, TraceHeaders& out) override {
    if (!traceparent_.empty()) out.add_view("traceparent", traceparent_);
    if (!bin_.empty()) out.add_view("grpc-trace-bin", bin_);
  }

 private:
  const std::string traceparent_;
  std::string bin_;  // base64
};

// A server sampling no new trace (ratio 0, parent-based) leaves an unsampled call's context to
// the handler, worked out only if asked for, and still records the call of every sampled parent,
// whichever header brought it: a sampled flag in a traceparent with whitespace around it or other
// flags beside it, and a grpc-trace-bin read because the traceparent beside it is malformed. A
// traceparent that says "not sampled" wins over a sampled grpc-trace-bin, as before.
TEST(Tracing, SamplingZeroRecordsEverySampledParentAndOnlyThose) {
  Tracing server(TracePropagation::kBoth, 0.0);
  auto probe = std::make_shared<HeaderProbe>();
  server.server_options.interceptors.push_back(probe);
  Loopback loop(server.server_options, {});
  const std::string w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-";
  const std::string malformed = "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-00";
  struct Case {
    std::string traceparent;  // empty: none sent
    std::string bin;          // empty: none sent
    bool recorded;
  };
  const Case cases[] = {
      {w3c + "01", "", true},
      {" " + w3c + "01 ", "", true},
      {w3c + "03", "", true},
      {w3c + "00", "", false},
      {w3c + "02", "", false},
      {w3c + "00", trace_bin(1), false},  // the valid traceparent is read, not the bin
      {malformed, trace_bin(1), true},    // the bin is read
      {malformed, trace_bin(0), false},
      {"", trace_bin(1), true},
      {"", trace_bin(0), false},
      {"", trace_bin(1).substr(0, 27), false},  // no options field: flags 0
      {"", "", false},
  };
  for (const Case& c : cases) {
    const std::string name = c.traceparent + " / bin " + std::to_string(c.bin.size());
    server.exporter->clear();
    ClientContext ctx;
    ctx.set_call_tracer(std::make_shared<FixedTraceHeaders>(c.traceparent, c.bin));
    ctx.add_metadata("tracestate", "rojo=00f067aa0ba902b7");
    EchoRequest request;
    EchoResponse response;
    const absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
      co_return co_await loop.stub().Echo(ctx, request, response);
    });
    ASSERT_TRUE(s.ok()) << name << ": " << s;
    if (c.recorded) {
      ASSERT_TRUE(loop.wait_until([&] { return server.spans().size() == 1; })) << name;
    } else {
      EXPECT_TRUE(server.spans().empty()) << name;
    }
    // What the handler (here the probe after the tracing interceptor) reads.
    std::lock_guard lock(probe->mutex);
    EXPECT_TRUE(probe->context.valid()) << name;
    EXPECT_EQ(probe->context.sampled(), c.recorded) << name;
  }
}

// The context a handler reads at sampling 0 is worked out when it asks (once: it reads the same
// one again), a child of the client's: its trace id and tracestate, a span id of its own, not
// sampled; a call without a parent gets a new trace of its own.
TEST(Tracing, SamplingZeroWorksTheContextOutWhenTheHandlerAsks) {
  Tracing server(TracePropagation::kW3C, 0.0);
  std::mutex mutex;  // read is written on the server's thread
  std::vector<std::pair<TraceContext, TraceContext>> read;  // the first and second reading
  Service service("ferry.test.TraceRead");
  service.add_unary<EchoRequest, EchoResponse>(
      "Read",
      [&](ServerContext& ctx, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
        const TraceContext first = ctx.trace_context();
        std::lock_guard lock(mutex);
        read.emplace_back(first, ctx.trace_context());
        co_return absl::OkStatus();
      });
  Loopback loop(server.server_options, {}, &service);
  TraceContext parent;
  ASSERT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", parent));
  for (bool with_parent : {true, false, false}) {
    ClientContext ctx;
    if (with_parent) {
      ctx.add_metadata("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
      ctx.add_metadata("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    }
    EchoRequest request;
    EchoResponse response;
    ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                      co_return co_await loop.channel().call("/ferry.test.TraceRead/Read", ctx,
                                                             request, response);
                    })
                    .ok());
  }
  std::lock_guard lock(mutex);
  ASSERT_EQ(read.size(), 3u);
  for (const auto& [first, second] : read) {
    EXPECT_TRUE(first.valid());
    EXPECT_FALSE(first.sampled());
    EXPECT_EQ(second.trace_id, first.trace_id);
    EXPECT_EQ(second.span_id, first.span_id);
  }
  EXPECT_EQ(read[0].first.trace_id, parent.trace_id);
  EXPECT_NE(read[0].first.span_id, parent.span_id);
  EXPECT_EQ(read[0].first.tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  EXPECT_NE(read[1].first.trace_id, parent.trace_id);
  EXPECT_NE(read[1].first.trace_id, read[2].first.trace_id);
  EXPECT_TRUE(read[1].first.tracestate.empty());
  EXPECT_TRUE(server.spans().empty());
}

// A client without tracing sends a malformed traceparent: the call succeeds, and the server's
// span is the root of a new trace (W3C: ignored, never an error).
TEST(Tracing, AMalformedTraceparentStartsANewTrace) {
  Tracing tracing;
  Loopback loop(tracing.server_options, {});
  for (std::string_view bad : {"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "garbage",
                               "", "00-00000000000000000000000000000000-b7ad6b7169203331-01"}) {
    tracing.exporter->clear();
    ClientContext ctx;
    ctx.add_metadata("traceparent", bad);
    ctx.add_metadata("tracestate", "rojo=1");
    EchoRequest request;
    EchoResponse response;
    const absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
      co_return co_await loop.stub().Echo(ctx, request, response);
    });
    ASSERT_TRUE(s.ok()) << bad << ": " << s;
    ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 1; })) << bad;
    const SpanData recv = tracing.spans()[0];
    EXPECT_EQ(recv.parent_span_id, kNoParent) << bad;
    EXPECT_TRUE(recv.tracestate.empty()) << bad;
    TraceContext own;
    own.trace_id = recv.trace_id;
    own.span_id = recv.span_id;
    EXPECT_TRUE(own.valid());
  }
}

// A72: OK is OK; another code is ERROR described "<CODE>, <message>" (or the code alone).
TEST(Tracing, StatusIsMappedAsA72Says) {
  Tracing tracing;
  Loopback loop(tracing.server_options, tracing.channel_options);
  EchoRequest request;
  request.set_status_code(static_cast<int>(absl::StatusCode::kPermissionDenied));
  request.set_status_message("go away");
  EchoResponse response;
  ClientContext ctx;
  EXPECT_EQ(loop.run([&]() -> asio::awaitable<absl::Status> {
                  co_return co_await loop.stub().Echo(ctx, request, response);
                })
                .code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 3; }));
  for (const SpanData& s : tracing.spans()) {
    EXPECT_EQ(s.status, SpanStatusCode::kError) << s.name;
    EXPECT_EQ(s.status_message, "PERMISSION_DENIED, go away") << s.name;
  }
}

// A compressed request: the attempt's Outbound message event carries both sizes.
TEST(Tracing, CompressedMessagesHaveBothSizes) {
  Tracing tracing;
  Loopback loop(tracing.server_options, tracing.channel_options);
  EchoRequest request;
  request.set_payload(std::string(10000, 'a'));
  EchoResponse response;
  ClientContext ctx;
  ctx.set_compression(Compression::kGzip);
  ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                    co_return co_await loop.stub().Echo(ctx, request, response);
                  })
                  .ok());
  ASSERT_TRUE(loop.wait_until([&] { return tracing.spans().size() == 3; }));
  const auto spans = tracing.spans();
  const auto attempt = named(spans, "Attempt.ferry.testing.Echo.Echo");
  const auto recv = named(spans, "Recv.ferry.testing.Echo.Echo");
  ASSERT_EQ(attempt.size(), 1u);
  ASSERT_EQ(recv.size(), 1u);
  const auto& out = attempt[0]->events.at(0);
  EXPECT_EQ(out.name, "Outbound message");
  EXPECT_EQ(int_attribute(out.attributes, "message-size"),
            static_cast<std::int64_t>(request.ByteSizeLong()));
  const auto compressed = int_attribute(out.attributes, "message-size-compressed");
  ASSERT_TRUE(compressed.has_value());
  EXPECT_LT(*compressed, 1000);
  const auto& in = recv[0]->events.at(0);
  EXPECT_EQ(in.name, "Inbound message");
  EXPECT_EQ(int_attribute(in.attributes, "message-size"),
            static_cast<std::int64_t>(request.ByteSizeLong()));
  EXPECT_EQ(int_attribute(in.attributes, "message-size-compressed"), compressed);
}

// A stuck exporter costs the calls nothing: its queue fills, later spans are dropped and
// counted, and every call completes.
TEST(Tracing, AFullQueueDropsSpansNotCalls) {
  class Stuck final : public SpanExporter {
   public:
    void export_spans(std::vector<SpanData>&) override {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return released; });
    }
    std::mutex mutex;
    std::condition_variable cv;
    bool released = false;
  };
  auto stuck = std::make_shared<Stuck>();
  auto processor = std::make_shared<BatchSpanProcessor>(
      stuck, BatchSpanProcessorOptions{.max_queue_size = 8, .max_export_batch_size = 1});
  TracingOptions options{.processor = processor};
  ServerOptions server_options;
  server_options.interceptors.push_back(make_server_tracing(options));
  ChannelOptions channel_options;
  channel_options.interceptors.push_back(make_client_tracing(options));
  {
    Loopback loop(server_options, channel_options);
    for (int i = 0; i < 20; ++i) {
      EchoRequest request;
      EchoResponse response;
      ClientContext ctx;
      ASSERT_TRUE(loop.run([&]() -> asio::awaitable<absl::Status> {
                        co_return co_await loop.stub().Echo(ctx, request, response);
                      })
                      .ok());
    }
  }
  // 60 spans: at most 8 queued and 1 in the exporter's hands; the rest dropped.
  EXPECT_GE(processor->dropped(), 60u - 9u);
  {
    std::lock_guard lock(stuck->mutex);
    stuck->released = true;
  }
  stuck->cv.notify_all();
  processor->shutdown();
}

// A server of one connection that records each request's header block and answers it
// Trailers-Only (UNIMPLEMENTED): enough HTTP/2 to see what a client's HPACK encoder sent.
class HeaderBlockServer {
 public:
  // refuse: the first requests answered RST_STREAM(REFUSED_STREAM) instead, which the client
  // retries transparently (the server never processed them).
  explicit HeaderBlockServer(int refuse = 0)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), refuse_(refuse) {
    thread_ = std::thread([this] { serve(); });
  }
  ~HeaderBlockServer() {
    asio::error_code ignored;
    {
      std::lock_guard lock(mutex_);
      if (socket_ != nullptr) socket_->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    }
    {
      // Wakes an accept still waiting (no client came): it then reads nothing and ends.
      asio::io_context io;
      asio::ip::tcp::socket wake(io);
      wake.connect(acceptor_.local_endpoint(), ignored);
    }
    thread_.join();
  }
  std::string target() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::vector<std::string> blocks() {
    std::lock_guard lock(mutex_);
    return blocks_;
  }

 private:
  void serve() {
    asio::ip::tcp::socket socket(io_);
    asio::error_code ec;
    acceptor_.accept(socket, ec);
    if (ec) return;
    {
      std::lock_guard lock(mutex_);
      socket_ = &socket;
    }
    std::string preface(24, '\0');
    asio::read(socket, asio::buffer(preface), ec);
    asio::write(socket, asio::buffer(testing::h2_frame(0x4, 0, 0, "")), ec);  // SETTINGS
    while (!ec) {
      unsigned char head[9];
      asio::read(socket, asio::buffer(head), ec);
      if (ec) break;
      const std::size_t length = (std::size_t{head[0]} << 16) | (head[1] << 8) | head[2];
      const std::uint32_t stream =
          ((head[5] & 0x7fu) << 24) | (head[6] << 16) | (head[7] << 8) | head[8];
      std::string payload(length, '\0');
      asio::read(socket, asio::buffer(payload), ec);
      if (ec) break;
      if (head[3] == 0x4 && (head[4] & 0x1) == 0) {
        asio::write(socket, asio::buffer(testing::h2_frame(0x4, 0x1, 0, "")), ec);
      } else if (head[3] == 0x1) {  // HEADERS, END_HEADERS (ferry's requests fit one frame)
        std::size_t at = 0;
        std::size_t pad = 0;
        if (head[4] & 0x8) pad = static_cast<unsigned char>(payload[at++]);  // PADDED
        if (head[4] & 0x20) at += 5;                                         // PRIORITY
        {
          std::lock_guard lock(mutex_);
          blocks_.push_back(payload.substr(at, payload.size() - at - pad));
        }
        if (refuse_ > 0) {
          --refuse_;
          const std::string refused("\0\0\0\x07", 4);  // REFUSED_STREAM
          asio::write(socket, asio::buffer(testing::h2_frame(0x3, 0, stream, refused)), ec);
          continue;
        }
        // Trailers-Only, literals without indexing: :status 200, content-type, grpc-status 12.
        std::string block;
        for (auto [name, value] : {std::pair<std::string, std::string>{":status", "200"},
                                   {"content-type", "application/grpc"},
                                   {"grpc-status", "12"}}) {
          block.push_back('\0');
          block.push_back(static_cast<char>(name.size()));
          block += name;
          block.push_back(static_cast<char>(value.size()));
          block += value;
        }
        asio::write(socket, asio::buffer(testing::h2_frame(0x1, 0x4 | 0x1, stream, block)), ec);
      }
    }
    std::lock_guard lock(mutex_);
    socket_ = nullptr;
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mutex_;
  asio::ip::tcp::socket* socket_ = nullptr;
  std::vector<std::string> blocks_;
  int refuse_;
};

// The header blocks of one connection's requests, decoded in order by nghttp2's HPACK decoder:
// each field's value and flags (NGHTTP2_NV_FLAG_NO_INDEX for a never-indexed one), by name.
std::vector<std::map<std::string, std::pair<std::string, std::uint8_t>>> decode_header_blocks(
    const std::vector<std::string>& blocks) {
  std::vector<std::map<std::string, std::pair<std::string, std::uint8_t>>> out;
  nghttp2_hd_inflater* inflater = nullptr;
  if (nghttp2_hd_inflate_new(&inflater) != 0) return out;
  for (const std::string& block : blocks) {
    auto& fields = out.emplace_back();
    auto* in = reinterpret_cast<const std::uint8_t*>(block.data());
    std::size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int out_flags = 0;
      const ssize_t used = nghttp2_hd_inflate_hd2(inflater, &nv, &out_flags, in, left, 1);
      if (used < 0) {
        ADD_FAILURE() << "HPACK: " << used;
        break;
      }
      in += used;
      left -= static_cast<std::size_t>(used);
      if (out_flags & NGHTTP2_HD_INFLATE_EMIT) {
        fields[std::string(reinterpret_cast<const char*>(nv.name), nv.namelen)] = {
            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen), nv.flags};
      }
      if (out_flags & NGHTTP2_HD_INFLATE_FINAL) break;
      if (used == 0 && left == 0) break;
    }
    nghttp2_hd_inflate_end_headers(inflater);
  }
  nghttp2_hd_inflate_del(inflater);
  return out;
}

// A stream the server refused is sent again at once (a transparent retry): its Attempt span
// says transparent-retry true, and previous-rpc-attempts still 0 (transparent retries are not
// counted); each attempt's headers carry its own span id.
TEST(Tracing, ATransparentRetryIsMarked) {
  HeaderBlockServer server(/*refuse=*/1);
  Tracing tracing;
  {
    Channel channel(server.target(), tracing.channel_options);
    ClientContext ctx;
    EchoRequest request;
    EchoResponse response;
    EXPECT_EQ(channel.call_blocking(testing::Echo::kEchoPath, ctx, request, response).code(),
              absl::StatusCode::kUnimplemented);
  }
  const auto spans = tracing.spans();
  auto attempts = named(spans, "Attempt.ferry.testing.Echo.Echo");
  ASSERT_EQ(attempts.size(), 2u);
  std::sort(attempts.begin(), attempts.end(), [](const SpanData* a, const SpanData* b) {
    return a->start_unix_ns < b->start_unix_ns;
  });
  EXPECT_EQ(bool_attribute(attempts[0]->attributes, "transparent-retry"), false);
  EXPECT_EQ(bool_attribute(attempts[1]->attributes, "transparent-retry"), true);
  EXPECT_EQ(int_attribute(attempts[0]->attributes, "previous-rpc-attempts"), 0);
  EXPECT_EQ(int_attribute(attempts[1]->attributes, "previous-rpc-attempts"), 0);
  EXPECT_EQ(attempts[0]->status, SpanStatusCode::kError);
  EXPECT_EQ(attempts[1]->status_message, "UNIMPLEMENTED");
  EXPECT_NE(attempts[0]->span_id, attempts[1]->span_id);
  EXPECT_EQ(named(spans, "Sent.ferry.testing.Echo.Echo").size(), 1u);
  const auto requests = decode_header_blocks(server.blocks());
  ASSERT_EQ(requests.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    TraceContext sent;
    ASSERT_TRUE(parse_traceparent(requests[i].at("traceparent").first, sent)) << i;
    EXPECT_EQ(sent.span_id, attempts[i]->span_id) << i;
    EXPECT_EQ(sent.trace_id, attempts[i]->trace_id) << i;
  }
}

// The trace headers go HPACK "never indexed" (RFC 7541 §6.2.3), as gRPC core sends
// grpc-trace-bin: a value new in every request would otherwise enter the dynamic table each
// time and evict the entries that repeat. Read back with nghttp2's decoder, request by request.
TEST(Tracing, TraceHeadersAreNeverIndexed) {
  HeaderBlockServer server;
  TracingOptions options{.propagation = TracePropagation::kBoth, .sample_ratio = 0.0};
  ChannelOptions channel_options;
  channel_options.interceptors.push_back(make_client_tracing(options));
  {
    Channel channel(server.target(), channel_options);
    for (int i = 0; i < 3; ++i) {
      ClientContext ctx;
      TraceContext parent;
      ASSERT_TRUE(
          parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", parent));
      parent.tracestate = "rojo=1";
      ctx.set_trace_parent(parent);
      EchoRequest request;
      EchoResponse response;
      EXPECT_EQ(channel.call_blocking(testing::Echo::kEchoPath, ctx, request, response).code(),
                absl::StatusCode::kUnimplemented);
    }
  }
  const std::vector<std::string> blocks = server.blocks();
  ASSERT_EQ(blocks.size(), 3u);
  for (const auto& fields : decode_header_blocks(blocks)) {
    for (const char* name : {"traceparent", "tracestate", "grpc-trace-bin"}) {
      ASSERT_TRUE(fields.count(name)) << name;
      EXPECT_TRUE(fields.at(name).second & NGHTTP2_NV_FLAG_NO_INDEX) << name;
    }
    // The others are indexed as before.
    EXPECT_FALSE(fields.at(":path").second & NGHTTP2_NV_FLAG_NO_INDEX);
  }
}

}  // namespace
}  // namespace ferry::tracing_test

// A warm server makes no heap allocation per call: calls, streams, the HTTP/2 session,
// outgoing frames and handler coroutines all reuse storage. Counted on the server's I/O thread by
// the benchmarks' malloc interposer (bench/alloc_counter.cc), read there by a handler. Payloads
// stay within std::string's inline capacity: protobuf 3.21 puts a longer string field's bytes on
// the heap even when the message lives on an arena, and that is protobuf's allocation, not ours.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/authz.h"
#include "ferry/client_stream.h"
#include "ferry/interceptor.h"
#include "ferry/tracing.h"
#ifdef FERRY_TEST_METRICS
#include "ferry/metrics.h"
#include "prometheus/registry.h"
#endif
#include "support/loopback.h"
#ifdef FERRY_TEST_XDS
#include "client/call_router.h"
#include "xds/resources.h"
#endif

namespace ferry::allocation_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

constexpr std::string_view kCount = "/ferry.test.Allocations/Count";

// Answers with the number of allocations its thread (a server I/O thread) has made.
Service make_counting_service() {
  Service service("ferry.test.Allocations");
  service.add_unary<EchoRequest, EchoResponse>(
      "Count",
      [](ServerContext&, const EchoRequest&,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        response.set_received_bytes(static_cast<std::int64_t>(bench::thread_allocation_count()));
        co_return absl::OkStatus();
      });
  return service;
}

// Requests carry what real clients send: grpcio's user-agent (longer than std::string's inline
// buffer, as grpc++'s and grpc-java's are), a custom entry and a deadline (grpc-timeout).
ChannelOptions like_a_real_client() {
  ChannelOptions options;
  options.user_agent = "grpc-python/1.85.1 grpc-c/51.0.0 (linux; chttp2)";
  return options;
}

ServerOptions one_thread() {
  ServerOptions options;
  options.num_threads = 1;  // every call on the thread the counter reads
  return options;
}

class Allocations : public ::testing::Test {
 protected:
  Allocations() : Allocations(one_thread(), like_a_real_client()) {}
  Allocations(ServerOptions server_options, ChannelOptions channel_options)
      : service_(make_counting_service()),
        loop_(std::move(server_options), std::move(channel_options), &service_) {}

  std::int64_t server_allocations() {
    return loop_.run([this]() -> asio::awaitable<std::int64_t> {
      EchoRequest request;
      EchoResponse response;
      ClientContext ctx;
      absl::Status s = co_await loop_.channel().call(kCount, ctx, request, response);
      EXPECT_TRUE(s.ok()) << s;
      co_return response.received_bytes();
    });
  }

  // n unary Echo calls, `in_flight` at a time on the one connection. The loop turns until they
  // are done without a timer or a future of its own, which would allocate as it goes.
  void unary_calls(int n, int in_flight) {
    int running = in_flight;
    for (int i = 0; i < in_flight; ++i) {
      asio::co_spawn(loop_.io(), calls(n / in_flight, running), asio::detached);
    }
    ASSERT_TRUE(loop_.wait_until([&] { return running == 0; }, std::chrono::seconds(60)));
  }

  asio::awaitable<void> calls(int n, int& running) {
    EchoRequest request;
    request.set_payload("small");
    EchoResponse response;
    for (int i = 0; i < n; ++i) {
      ClientContext ctx;
      ctx.add_metadata("x-request-id", "4bf92f3577b34da6a3ce929d0e0e4736");
      if (trace_parent_.valid()) ctx.set_trace_parent(trace_parent_);
      ctx.set_timeout(std::chrono::seconds(20));
      absl::Status s = co_await loop_.stub().Echo(ctx, request, response);
      EXPECT_TRUE(s.ok()) << s;
    }
    --running;
  }

  template <class Count>
  // margin: allocations allowed beyond the calls' own (a pool's new high-water mark).
  void expect_none_per_call(Count count, std::int64_t margin = 32) {
    auto run = [&](int n) {
      const std::int64_t before = count();
      unary_calls(n, 64);
      unary_calls(n / 8, 1);
      return count() - before;
    };
    run(2000);  // warm-up: pools, recycled calls, coroutine frames
    constexpr int kCalls = 6400;
    // A loaded machine adds allocations that a quiet one does not make (a pool growing to a new
    // high-water mark when reads pile up), never fewer: the least of three margins is the one the
    // calls themselves cost. A per-call allocation would add 7200 to every one of them.
    std::int64_t least = INT64_MAX;
    std::string seen;
    for (int attempt = 0; attempt < 3 && least > margin; ++attempt) {
      const std::int64_t once = run(kCalls);
      const std::int64_t twice = run(2 * kCalls);
      least = std::min(least, twice - once);
      seen += " " + std::to_string(once) + " then " + std::to_string(twice) + ";";
    }
    EXPECT_LE(least, margin) << "allocations for " << kCalls * 9 / 8
                             << " then twice as many calls:" << seen;
  }

  Service service_;
  Loopback loop_;
  TraceContext trace_parent_;  // each call's, when valid (ClientContext::set_trace_parent)
};

// Server and client alike: the calls' allocations, as count() reads them, at the margin: a
// run of twice as many calls against a first run, so that what a run costs once (spawning its
// callers) cancels out. A loaded machine adds a few (up to 34 seen in CI, with the test
// suite running beside it), so the least of three margins is checked; one allocation in a
// hundred calls would already be 72 more in each.
TEST_F(Allocations, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

// The client's calls run on this test's thread: coroutine frames beyond asio's per-thread cache
// of two, a timer per deadline or a string per header would show here.
TEST_F(Allocations, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); });
}

// One interceptor that does nothing on the server and one on the channel: the chains' coroutine
// frames (and the default on_start's) come from a per-thread pool, so the calls' own frames
// keep asio's cache and a warm call still allocates nothing, on either side.
class NoOpServerInterceptor final : public ServerInterceptor {};
class NoOpClientInterceptor final : public ClientInterceptor {};

ServerOptions one_thread_intercepted() {
  ServerOptions options = one_thread();
  options.interceptors.push_back(std::make_shared<NoOpServerInterceptor>());
  return options;
}

ChannelOptions like_a_real_client_intercepted() {
  ChannelOptions options = like_a_real_client();
  options.interceptors.push_back(std::make_shared<NoOpClientInterceptor>());
  return options;
}

class AllocationsWithInterceptors : public Allocations {
 protected:
  AllocationsWithInterceptors()
      : Allocations(one_thread_intercepted(), like_a_real_client_intercepted()) {}
};

TEST_F(AllocationsWithInterceptors, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

TEST_F(AllocationsWithInterceptors, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); });
}

// A 50-rule authorization policy (ferry/authz.h) in front of the handler: deny rules on
// principals and headers that the call misses, allow rules on other paths, and the call allowed
// by the last rule, on its path and its user-agent. Evaluating it, and keeping the policy alive for
// the call, allocates nothing.
std::string fifty_rule_policy() {
  std::string json = R"({"name":"alloc","deny_rules":[)";
  for (int i = 0; i < 10; ++i) {
    json += (i ? "," : "") + std::string(R"({"name":"deny)") + std::to_string(i) +
            R"(","source":{"principals":["spiffe://bad/)" + std::to_string(i) +
            R"(*"]},"request":{"headers":[{"key":"x-block","values":["*"]}]}})";
  }
  json += R"(],"allow_rules":[)";
  for (int i = 0; i < 39; ++i) {
    json += (i ? "," : "") + std::string(R"({"name":"allow)") + std::to_string(i) +
            R"(","request":{"paths":["/ferry.test.Other)" + std::to_string(i) +
            R"(/*"],"headers":[{"key":"x-request-id","values":["*"]}]}})";
  }
  json +=
      R"(,{"name":"count","request":{"paths":["/ferry.test.Allocations/Count","/ferry.testing.Echo/Echo"],
      "headers":[{"key":"user-agent","values":["grpc-java/*","grpc-python/*"]}]}}]})";
  return json;
}

ServerOptions one_thread_authorized() {
  ServerOptions options = one_thread();
  auto authz = AuthorizationInterceptor::from_policy(fifty_rule_policy());
  EXPECT_TRUE(authz.ok()) << authz.status();
  options.interceptors.push_back(*authz);
  return options;
}

class AllocationsWithAuthorization : public Allocations {
 protected:
  AllocationsWithAuthorization() : Allocations(one_thread_authorized(), like_a_real_client()) {}
};

TEST_F(AllocationsWithAuthorization, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

#ifdef FERRY_TEST_METRICS
// ferry::metrics on both sides (ferry/metrics.h), recording every instrument of every call: a
// warm call finds its series without building a label set, so it allocates nothing either.
// The registry, a base of its own so that it is built before Allocations' loop needs it.
struct MetricsRegistry {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
};

class AllocationsWithMetrics : private MetricsRegistry, public Allocations {
 protected:
  AllocationsWithMetrics() : Allocations(server_options(), channel_options()) {}

  ServerOptions server_options() {
    ServerOptions options = one_thread();
    options.interceptors.push_back(make_server_metrics(*registry));
    return options;
  }
  ChannelOptions channel_options() {
    ChannelOptions options = like_a_real_client();
    options.interceptors.push_back(make_client_metrics(*registry));
    return options;
  }
};

TEST_F(AllocationsWithMetrics, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

TEST_F(AllocationsWithMetrics, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); });
}
#endif

// ferry::tracing on both sides (ferry/tracing.h) sampling nothing: each call still reads and
// writes its traceparent, takes new span ids and keeps its trace context in its contexts, and
// none of that allocates (a recording span would; a sampled-out call must cost nothing).
ServerOptions one_thread_traced() {
  ServerOptions options = one_thread();
  options.interceptors.push_back(make_server_tracing({.sample_ratio = 0.0}));
  return options;
}

ChannelOptions like_a_real_client_traced() {
  ChannelOptions options = like_a_real_client();
  options.interceptors.push_back(make_client_tracing({.sample_ratio = 0.0}));
  return options;
}

class AllocationsWithTracing : public Allocations {
 protected:
  AllocationsWithTracing() : Allocations(one_thread_traced(), like_a_real_client_traced()) {}
};

TEST_F(AllocationsWithTracing, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

TEST_F(AllocationsWithTracing, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); });
}

// The same with a parent that is not sampled and a tracestate too long for std::string's inline
// buffer, which the server's context would copy: a handler that never reads the context
// (ServerContext::trace_context) costs the server no copy of it.
class AllocationsWithTracestate : public Allocations {
 protected:
  AllocationsWithTracestate() : Allocations(one_thread_traced(), like_a_real_client_traced()) {
    EXPECT_TRUE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                                  trace_parent_));
    trace_parent_.tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
  }
};

TEST_F(AllocationsWithTracestate, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); });
}

// ferry::tracing on both sides sampling every call, its spans handed to an exporter that
// drops them: each call records three spans (Sent, Attempt, Recv) with their message events, in
// records the processor had exported and kept (and tracers from a per-thread pool), so a warm
// call allocates nothing for them on the server's thread or the client's (9.5 allocations per
// call on the server's before). The records in circulation grow to what the exporter's thread
// lags behind at most, which a loaded machine keeps raising now and then: up to one allocation
// per 10 calls is allowed for that, where a per-call allocation would make 7200.
class DroppingExporter final : public SpanExporter {
 public:
  void export_spans(std::vector<SpanData>&) override {}
};

struct SampledProcessor {
  std::shared_ptr<BatchSpanProcessor> processor = std::make_shared<BatchSpanProcessor>(
      std::make_shared<DroppingExporter>(),
      // A queue that a loaded machine's late exporter thread does not fill (a dropped span's
      // record is freed, and a new one made in its place).
      BatchSpanProcessorOptions{.max_queue_size = 1 << 16,
                                .schedule_delay = std::chrono::milliseconds(5)});
};

class AllocationsWithSampledTracing : private SampledProcessor, public Allocations {
 protected:
  AllocationsWithSampledTracing() : Allocations(server_options(), channel_options()) {}
  ~AllocationsWithSampledTracing() override { EXPECT_EQ(processor->dropped(), 0u); }

  ServerOptions server_options() {
    ServerOptions options = one_thread();
    options.interceptors.push_back(make_server_tracing({.processor = processor}));
    return options;
  }
  ChannelOptions channel_options() {
    ChannelOptions options = like_a_real_client();
    options.interceptors.push_back(make_client_tracing({.processor = processor}));
    return options;
  }
};

constexpr std::int64_t kSampledMargin = 720;

TEST_F(AllocationsWithSampledTracing, NonePerUnaryCallOnceWarm) {
  expect_none_per_call([this] { return server_allocations(); }, kSampledMargin);
}

TEST_F(AllocationsWithSampledTracing, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); },
                       kSampledMargin);
}

#ifdef FERRY_TEST_XDS
// A channel whose resolver routes each call (client/call_router.h), as an xds:/// channel's does:
// gRFC A28's matching (xds/resources.h: a path prefix, a header matcher, a weighted split) picks
// one of two clusters per call, each a connection set of its own to the loopback server. The
// routed pick allocates nothing either.
class SplitRouter final : public detail::CallRouter {
 public:
  SplitRouter() {
    xds::detail::Route split;
    split.pattern = "/ferry.testing.Echo/";
    xds::detail::HeaderMatcher header;
    header.name = "x-request-id";
    header.kind = xds::detail::HeaderMatcher::Kind::kPrefix;
    header.value = "4bf9";
    split.headers.push_back(header);
    // Nearly all to b: the calls measured share one connection (calls spread over two
    // connections of one thread allocate on the client, routed or round_robin alike: see
    // docs/xds.md), while each still draws its cluster by weight.
    split.weighted_clusters = {{"a", 1}, {"b", 99999}};
    split.total_weight = 100000;
    host_.routes.push_back(split);
    xds::detail::Route rest;
    rest.pattern = "/";
    rest.cluster = "a";
    host_.routes.push_back(rest);
    // The route's settings (gRFC A31's timeout, A44's retry policy) apply per call as well.
    config_.timeout = std::chrono::seconds(30);
    config_.retry_policy.emplace();
    config_.retry_policy->max_attempts = 3;
  }
  detail::RouteChoice route(std::string_view method, const ClientContext& context,
                            absl::Status& error) const override {
    const int r = xds::detail::match_route(host_, method, context.metadata(), random_);
    if (r < 0) {
      error = absl::UnavailableError("no route");
      return {};
    }
    const xds::detail::Route& route = host_.routes[r];
    const int cluster = route.weighted_clusters.empty()
                            ? 0
                            : static_cast<int>(xds::detail::pick_weighted(route, random_));
    ++picks_[cluster];
    return {cluster, &config_};
  }
  std::int64_t picks(int cluster) const { return picks_[cluster]; }

 private:
  xds::detail::VirtualHost host_;
  detail::RouteCallConfig config_;
  mutable xds::detail::RouteRandom random_{7};
  mutable std::int64_t picks_[2] = {0, 0};  // on the channel's thread only
};

class SplitResolver final : public Resolver, public detail::RoutingResolver {
 public:
  explicit SplitResolver(std::shared_ptr<int> port) : port_(std::move(port)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    co_return absl::UnimplementedError("a routing resolver");
  }
  asio::awaitable<absl::StatusOr<detail::RoutingConfig>> resolve_routes(
      asio::any_io_executor) override {
    Address address;
    address.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                          static_cast<unsigned short>(*port_));
    detail::RoutingConfig config;
    config.clusters = {{"a", std::vector<Address>{address}}, {"b", std::vector<Address>{address}}};
    // The calls' cluster counts them in flight (gRFC A32, always) and, with outlier detection
    // (A50), their outcomes for their endpoint: both on the measured path.
    config.clusters[1].policy.outlier_detection.emplace();
    config.router = router_;
    co_return config;
  }
  const std::shared_ptr<SplitRouter>& router() const { return router_; }

 private:
  std::shared_ptr<int> port_;
  std::shared_ptr<SplitRouter> router_ = std::make_shared<SplitRouter>();
};

ChannelOptions routed(const std::shared_ptr<SplitResolver>& resolver) {
  ChannelOptions options = like_a_real_client();
  options.resolver = resolver;
  return options;
}

class AllocationsWithXdsRouting : public Allocations {
 protected:
  AllocationsWithXdsRouting() : AllocationsWithXdsRouting(std::make_shared<int>(0)) {}
  explicit AllocationsWithXdsRouting(std::shared_ptr<int> port)
      : AllocationsWithXdsRouting(port, std::make_shared<SplitResolver>(port)) {}
  AllocationsWithXdsRouting(std::shared_ptr<int> port, std::shared_ptr<SplitResolver> resolver)
      : Allocations(one_thread(), routed(resolver)), resolver_(std::move(resolver)) {
    *port = loop_.port();  // before the first call resolves
  }
  std::shared_ptr<SplitResolver> resolver_;
};

TEST_F(AllocationsWithXdsRouting, NonePerUnaryCallOnTheClientOnceWarm) {
  expect_none_per_call([] { return static_cast<std::int64_t>(bench::thread_allocation_count()); });
  // The calls went through the header route's weighted split to b.
  EXPECT_GT(resolver_->router()->picks(1), 20000);
  EXPECT_LT(resolver_->router()->picks(0), 10);
}
#endif

TEST_F(Allocations, NonePerStreamedMessageOnceWarm) {
  auto stream = [this](int messages) {
    loop_.run([&]() -> asio::awaitable<void> {
      EchoRequest request;
      request.set_response_size(8);
      request.set_response_count(messages);
      ClientContext ctx;
      ClientReader<EchoResponse> reader = co_await loop_.stub().Expand(ctx, request);
      EchoResponse response;
      int got = 0;
      while (co_await reader.read(response)) ++got;
      absl::Status s = co_await reader.finish();
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_EQ(got, messages);
    });
  };
  constexpr int kMessages = 20000;
  stream(kMessages);  // warm-up: the pool grows to what a stream this long keeps queued
  const std::int64_t before = server_allocations();
  stream(kMessages);
  const std::int64_t made = server_allocations() - before;
  // The call itself allocates a little (11 measured: its handler's coroutine frames, which asio
  // recycles only for the simplest shapes); a message may not.
  EXPECT_LE(made, 40) << made << " allocations for " << kMessages << " streamed messages";
}

}  // namespace
}  // namespace ferry::allocation_test

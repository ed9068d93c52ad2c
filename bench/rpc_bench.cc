// bench/rpc_bench.cc: end-to-end loopback RPCs through ferry's server and channel, beside a raw
// TCP echo over the same loopback (the floor any RPC stack sits on), in one process and one run.
// Measures unary latency with one call in flight (p50/p99), unary calls/s with 64 in flight on
// one connection, the server's CPU time and heap allocations per call (read on the server's own
// I/O thread), unary throughput with 1 MiB messages (2 in flight) and server-streaming throughput
// with 64 KiB and 1 MiB messages (and 1 MiB by reference: write_raw / read_raw); then the
// small-call and 64 KiB figures over TLS (test/certs, TLS 1.3 with AES-GCM; and each end's CPU per
// streamed byte) beside cleartext ("tls" as the fifth argument: only these); the small-call figures
// with one no-op interceptor on the server and the channel (ferry/interceptor.h) beside none, and
// with a 50-rule authorization policy on the server (ferry/authz.h) beside none, and with
// tracing on both ends (ferry/tracing.h) sampling nothing and sampling every call ("telemetry" as
// the fifth argument: only the small-call figures without telemetry, with ferry::metrics, with
// tracing sampling 0 and sampling every call, and, with FERRY_BENCH_OTLP=http://host:port, every
// call's spans exported over OTLP to that Collector, interleaved; FERRY_BENCH_ROWS=none,metrics
// keeps the rows whose names begin with those words, e.g. to profile one under callgrind); then
// a channel with round_robin over two servers beside one connection (client calls/s and CPU per
// call, 64 in flight) and the picker's own cost ("xds" as the fifth argument: only an xds:///
// channel beside a round_robin one to the same two servers, alternating, the control plane an
// in-process ADS server made with ferry itself; FERRY_BENCH_ROWS=round_robin or xds runs one,
// e.g. under callgrind). Prints tables of medians. Servers run on core 0 and the client on core 1
// (ServerCores below).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "alloc_counter.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "asio/write.hpp"
#include "client/load_balancer.h"
#include "ferry/authz.h"
#include "ferry/bytes_field.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/otlp_tracing.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "ferry/tls.h"
#include "ferry/tracing.h"
#include "support/echo_service.h"
#ifdef FERRY_BENCH_METRICS
#include "ferry/metrics.h"
#include "prometheus/registry.h"
#endif
#ifdef FERRY_BENCH_XDS
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/ads.ferry.h"
#include "ferry/xds.h"
#endif
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::EchoRequest;
using testing::EchoResponse;

constexpr std::string_view kSample = "/ferry.bench.Stats/Sample";
constexpr std::string_view kExpandRef = "/ferry.bench.Stats/ExpandRef";
constexpr std::size_t kPayload = 32;
constexpr std::size_t kSmallPayload = 8;
constexpr int kInFlight = 64;

std::int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t thread_cpu_ns(std::thread& t) {
  clockid_t id;
  pthread_getcpuclockid(t.native_handle(), &id);
  timespec ts;
  clock_gettime(id, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CPU time and allocations of the server's I/O thread, sampled by a handler running on it.
struct ServerSample {
  std::int64_t cpu_ns = 0;
  std::uint64_t allocs = 0;
};

Service make_stats_service() {
  Service service("ferry.bench.Stats");
  service.add_unary<EchoRequest, EchoResponse>(
      "Sample",
      [](ServerContext&, const EchoRequest&,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        response.set_received_bytes(thread_cpu_ns());
        response.set_index(static_cast<std::int32_t>(thread_allocation_count() & 0x7fffffff));
        co_return absl::OkStatus();
      });
  // Server streaming by reference: response_count EchoResponses whose payload is one body of
  // response_size bytes the handler holds once, written with write_raw (ferry/bytes_field.h).
  service.add_method(
      "ExpandRef", RpcKind::kServerStreaming,
      [](ServerContext& ctx) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        if (!ctx.take_request(request)) co_return absl::InternalError("no request");
        auto owner =
            std::make_shared<std::string>(static_cast<std::size_t>(request.response_size()), 'r');
        SliceChain body;
        body.append(Slice::external(owner->data(), owner->size(), owner));
        const EchoResponse rest;
        SliceChain message;
        for (int i = 0; i < request.response_count(); ++i) {
          message.clear();
          if (absl::Status s = append_with_bytes_field(rest, 1, body, message); !s.ok())
            co_return s;
          if (absl::Status s = co_await ctx.write_raw(message); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  return service;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// Server threads on core 0, the client (this thread) on core 1, when the process may use both:
// left to the scheduler, the two now and then shared a core for a whole run, which halved that
// run's throughput and made A/B medians need many more runs (docs/design/server_call_path.md).
// A thread inherits its creator's cores, so servers are started inside a ServerCores scope.
// FERRY_BENCH_NO_PIN=1 leaves placement to the scheduler.
constexpr int kServerCore = 0;
constexpr int kClientCore = 1;

void pin_this_thread(int core) {
  static const bool wanted = [] {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    return std::getenv("FERRY_BENCH_NO_PIN") == nullptr &&
           sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
           CPU_ISSET(kServerCore, &allowed) && CPU_ISSET(kClientCore, &allowed);
  }();
  if (!wanted) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // both cores were allowed above
}

// Threads started in this scope run on the server's core; the client's core afterwards.
class ServerCores {
 public:
  ServerCores() { pin_this_thread(kServerCore); }
  ~ServerCores() { pin_this_thread(kClientCore); }
  ServerCores(const ServerCores&) = delete;
  ServerCores& operator=(const ServerCores&) = delete;
};

template <class Make>
auto run(asio::io_context& io, Make make) {
  auto future = asio::co_spawn(io, make(), asio::use_future);
  while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
  try {
    return future.get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_bench: %s\n", e.what());
    std::exit(1);
  }
}

// n calls as kInFlight workers (worker(calls) an awaitable making that many) on io, run on
// this thread; returns the calls made (n rounded down to a multiple of kInFlight).
template <class Worker>
int run_in_flight(asio::io_context& io, const Worker& worker, int n) {
  std::vector<std::future<void>> done;
  for (int i = 0; i < kInFlight; ++i) {
    done.push_back(asio::co_spawn(io, worker(n / kInFlight), asio::use_future));
  }
  for (auto& f : done) {
    while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
  }
  return n / kInFlight * kInFlight;
}

struct FerryResult {
  double p50_us, p99_us, calls_per_s, cpu_us_per_call, allocs_per_call, small_allocs_per_call,
      stream_mb_per_s, unary_1mib_mb_per_s, stream_1mib_mb_per_s, stream_1mib_ref_mb_per_s;
  // 64 KiB streaming: CPU time per byte of the server's I/O thread and of the client's thread.
  double stream_server_ns_per_byte, stream_client_ns_per_byte;
  // Spans the tracing rows' processor dropped, its queue full (small_only runs).
  double spans_dropped;
};

// Interceptors that do nothing but be called: what the chain itself costs per call.
class NoOpServerInterceptor final : public ServerInterceptor {};
class NoOpClientInterceptor final : public ClientInterceptor {};

// A 50-rule authorization policy the benchmark's calls pass (cleartext: no peer certificate, so
// no principal): 10 deny rules on headers the calls lack, 39 allow rules on other services'
// exact paths and path prefixes, each with a header, and last the rule that allows them (the
// Echo service's prefix, and the benchmark's own stats service).
std::string fifty_rule_policy() {
  std::string json = R"({"name":"bench","deny_rules":[)";
  for (int i = 0; i < 10; ++i) {
    absl::StrAppend(&json, i ? "," : "", R"({"name":"deny)", i,
                    R"(","request":{"headers":[{"key":"x-block)", i, R"(","values":["*"]}]}})");
  }
  absl::StrAppend(&json, R"(],"allow_rules":[)");
  for (int i = 0; i < 39; ++i) {
    absl::StrAppend(&json, i ? "," : "", R"({"name":"rule)", i,
                    R"(","request":{"paths":["/bench.Service)", i, R"(/Get","/bench.Prefix)", i,
                    R"(/*"],"headers":[{"key":"x-team","values":["team)", i, R"("]}]}})");
  }
  absl::StrAppend(&json, R"(,{"name":"echo","request":{"paths":)",
                  R"(["/ferry.testing.Echo/*","/ferry.bench.Stats/*"]}}]})");
  return json;
}

enum class ServerExtras {
  kNone,
  kNoOpInterceptors,
  kPolicy,
  kTracingUnsampled,
  kTracingSampled,
  kTracingExported,  // sampled, exported over OTLP to FERRY_BENCH_OTLP's Collector
  kMetrics,          // ferry::metrics on both ends
};

// The sampled row's exporter: counts the spans and lets them go (an exporter that kept them
// all would hold hundreds of MB by the end of a run), on the processor's own thread.
class CountingExporter final : public SpanExporter {
 public:
  void export_spans(std::vector<SpanData>& batch) override {
    spans.fetch_add(batch.size(), std::memory_order_relaxed);
  }
  std::atomic<std::uint64_t> spans{0};
};

// small_only: the small-call figures only (latency, calls/s, CPU and allocations per call).
FerryResult measure_ferry(int latency_calls, int throughput_calls, int stream_messages,
                          bool tls = false, ServerExtras extras = ServerExtras::kNone,
                          bool small_only = false) {
#ifdef FERRY_BENCH_METRICS
  prometheus::Registry registry;  // outlives the server and the channel, declared below
#endif
  ServerOptions options;
  options.num_threads = 1;
  ChannelOptions channel_options;
  if (extras == ServerExtras::kNoOpInterceptors) {
    options.interceptors.push_back(std::make_shared<NoOpServerInterceptor>());
    channel_options.interceptors.push_back(std::make_shared<NoOpClientInterceptor>());
  }
  // Tracing on both ends (ferry/tracing.h), W3C propagation: sampling nothing (each call still
  // reads and writes traceparent), or every call, its spans queued to the processor's thread.
  std::shared_ptr<SpanExporter> exporter = std::make_shared<CountingExporter>();
  if (extras == ServerExtras::kTracingExported) {
    OtlpSpanExporterOptions otlp;
    const char* endpoint = std::getenv("FERRY_BENCH_OTLP");
    otlp.exporter.endpoint = endpoint != nullptr ? endpoint : "";
    otlp.exporter.resource = {{"service.name", "rpc_bench"}};
    auto created = OtlpSpanExporter::create(otlp);
    if (!created.ok()) {
      std::fprintf(stderr, "rpc_bench: FERRY_BENCH_OTLP: %s\n",
                   created.status().ToString().c_str());
      std::exit(1);
    }
    exporter = *std::move(created);
  }
  auto processor = std::make_shared<BatchSpanProcessor>(
      exporter, BatchSpanProcessorOptions{.max_queue_size = 1 << 16});
  if (extras == ServerExtras::kTracingUnsampled || extras == ServerExtras::kTracingSampled ||
      extras == ServerExtras::kTracingExported) {
    const TracingOptions tracing{
        .processor = processor,
        .sample_ratio = extras == ServerExtras::kTracingUnsampled ? 0.0 : 1.0};
    options.interceptors.push_back(make_server_tracing(tracing));
    channel_options.interceptors.push_back(make_client_tracing(tracing));
  }
#ifdef FERRY_BENCH_METRICS
  if (extras == ServerExtras::kMetrics) {
    options.interceptors.push_back(make_server_metrics(registry));
    channel_options.interceptors.push_back(make_client_metrics(registry));
  }
#endif
  if (extras == ServerExtras::kPolicy) {
    auto authz = AuthorizationInterceptor::from_policy(fifty_rule_policy());
    if (!authz.ok()) {
      std::fprintf(stderr, "rpc_bench: policy: %s\n", authz.status().ToString().c_str());
      std::exit(1);
    }
    options.interceptors.push_back(*std::move(authz));
  }
  if (tls) {
    options.credentials =
        ServerCredentials::create({.certificate_chain = Pem::file(FERRY_TEST_CERTS "/server.pem"),
                                   .private_key = Pem::file(FERRY_TEST_CERTS "/server.key")})
            .value();
    channel_options.credentials =
        ChannelCredentials::create({.root_certificates = Pem::file(FERRY_TEST_CERTS "/ca.pem")})
            .value();
  }
  Server server(options);
  testing::EchoService echo;
  Service stats = make_stats_service();
  server.add_service(echo);
  server.add_service(stats);
  const int port = [&] {
    ServerCores on_server_core;
    return server.start("127.0.0.1", 0).value();
  }();
  asio::io_context io(1);
  Channel channel(io, "127.0.0.1:" + std::to_string(port), channel_options);
  testing::Echo::Stub stub(channel);
  FerryResult r{};

  EchoResponse sampled;
  auto sample_rpc = [&]() -> asio::awaitable<absl::Status> {
    EchoRequest request;
    ClientContext ctx;
    co_return co_await channel.call(kSample, ctx, request, sampled);
  };
  auto sample = [&] {
    const absl::Status s = run(io, sample_rpc);
    if (!s.ok()) {
      std::fprintf(stderr, "rpc_bench: sample failed: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    return ServerSample{sampled.received_bytes(), static_cast<std::uint64_t>(sampled.index())};
  };
  auto calls = [&](int n, std::vector<double>* latencies,
                   std::size_t payload = kPayload) -> asio::awaitable<void> {
    EchoRequest request;
    request.set_payload(std::string(payload, 'p'));
    EchoResponse response;
    for (int i = 0; i < n; ++i) {
      ClientContext ctx;
      const auto start = Clock::now();
      absl::Status s = co_await stub.Echo(ctx, request, response);
      if (!s.ok()) {
        std::fprintf(stderr, "rpc_bench: call failed: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      if (latencies != nullptr) {
        latencies->push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
    }
  };

  run(io, [&] { return calls(2000, nullptr); });  // warm-up: pools, arenas, coroutine frames

  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(latency_calls));
  run(io, [&] { return calls(latency_calls, &latencies); });
  r.p50_us = percentile(latencies, 0.50);
  r.p99_us = percentile(latencies, 0.99);

  // n calls, `parallel` at a time on the one connection.
  auto in_flight = [&](int n, std::size_t payload, int parallel = kInFlight) {
    run(io, [&]() -> asio::awaitable<void> {
      std::vector<std::future<void>> done;
      for (int i = 0; i < parallel; ++i) {
        done.push_back(asio::co_spawn(io, calls(n / parallel, nullptr, payload), asio::use_future));
      }
      asio::steady_timer timer(io);
      for (auto& f : done) {
        while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
          timer.expires_after(std::chrono::microseconds(200));
          co_await timer.async_wait(asio::use_awaitable);
        }
      }
    });
    return n / parallel * parallel;
  };
  const ServerSample before = sample();
  const auto start = Clock::now();
  const int n = in_flight(throughput_calls, kPayload);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const ServerSample after = sample();
  r.calls_per_s = n / seconds;
  // Each sample is itself a call: subtract nothing, it is one call in n + 1.
  r.cpu_us_per_call = static_cast<double>(after.cpu_ns - before.cpu_ns) / 1000.0 / n;
  r.allocs_per_call = static_cast<double>(after.allocs - before.allocs) / n;
  // Again with payloads short enough for std::string's inline buffer: protobuf 3.21 allocates a
  // longer string field's bytes on the heap even on an arena, so this row shows ferry's own.
  const int small_n = in_flight(throughput_calls / 4, kSmallPayload);
  r.small_allocs_per_call = static_cast<double>(sample().allocs - after.allocs) / small_n;
  if (small_only) {
    processor->force_flush();
    r.spans_dropped = static_cast<double>(processor->dropped());
    return r;
  }

  // 1 MiB unary echoes, 2 in flight: the large-message path (after a warm-up round).
  constexpr std::size_t kLarge = std::size_t{1} << 20;
  in_flight(8, kLarge, 2);
  const auto large_start = Clock::now();
  const int large_n = in_flight(std::max(2, stream_messages / 16), kLarge, 2);
  r.unary_1mib_mb_per_s = static_cast<double>(large_n) * 2 * kLarge /
                          std::chrono::duration<double>(Clock::now() - large_start).count() / 1e6;

  // Server streaming through the typed API: write the request, then read everything.
  auto stream = [&](std::size_t size, int count) {
    return run(io, [&]() -> asio::awaitable<double> {
      ClientContext ctx;
      EchoRequest request;
      request.set_response_size(static_cast<std::int32_t>(size));
      request.set_response_count(count);
      const auto t0 = Clock::now();
      ClientReader<EchoResponse> stream = co_await stub.Expand(ctx, request);
      EchoResponse response;
      std::int64_t bytes = 0;
      while (co_await stream.read(response))
        bytes += static_cast<std::int64_t>(response.payload().size());
      absl::Status s = co_await stream.finish();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!s.ok() || bytes != static_cast<std::int64_t>(size) * count) {
        std::fprintf(stderr, "rpc_bench: stream failed: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      co_return static_cast<double>(bytes) / secs / 1e6;
    });
  };
  const ServerSample stream_before = sample();
  const std::int64_t client_before = thread_cpu_ns();
  r.stream_mb_per_s = stream(64 * 1024, stream_messages);
  const std::int64_t client_after = thread_cpu_ns();
  const double stream_bytes = 64.0 * 1024 * stream_messages;
  r.stream_server_ns_per_byte =
      static_cast<double>(sample().cpu_ns - stream_before.cpu_ns) / stream_bytes;
  r.stream_client_ns_per_byte = static_cast<double>(client_after - client_before) / stream_bytes;
  stream(kLarge, 4);  // warm-up
  r.stream_1mib_mb_per_s = stream(kLarge, std::max(2, stream_messages / 16));

  // The same 1 MiB stream by reference at both ends: the server writes one body it holds
  // (ExpandRef), the client takes each body out of the read blocks without parsing it.
  auto stream_ref = [&](std::size_t size, int count) {
    return run(io, [&]() -> asio::awaitable<double> {
      ClientContext ctx;
      EchoRequest request;
      request.set_response_size(static_cast<std::int32_t>(size));
      request.set_response_count(count);
      const auto t0 = Clock::now();
      ClientStream stream = co_await channel.open(kExpandRef, ctx, request);
      SliceChain message, body;
      std::int64_t bytes = 0;
      while (co_await stream.read_raw(message)) {
        if (!take_bytes_field(message, 1, body).ok()) break;
        bytes += static_cast<std::int64_t>(body.size());
      }
      absl::Status s = co_await stream.finish();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!s.ok() || bytes != static_cast<std::int64_t>(size) * count) {
        std::fprintf(stderr, "rpc_bench: stream by reference failed: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      co_return static_cast<double>(bytes) / secs / 1e6;
    });
  };
  stream_ref(kLarge, 4);  // warm-up
  r.stream_1mib_ref_mb_per_s = stream_ref(kLarge, std::max(2, stream_messages / 16));
  return r;
}

struct EchoResult {
  double p50_us, p99_us, msgs_per_s, cpu_us_per_msg;
};

// A raw TCP echo server on its own thread, and a client that sends kPayload-byte messages.
EchoResult measure_tcp_echo(int latency_msgs, int throughput_msgs) {
  asio::io_context server_io(1);
  asio::ip::tcp::acceptor acceptor(server_io, {asio::ip::make_address("127.0.0.1"), 0});
  const auto endpoint = acceptor.local_endpoint();
  asio::co_spawn(
      server_io,
      [&]() -> asio::awaitable<void> {
        asio::ip::tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
        socket.set_option(asio::ip::tcp::no_delay(true));
        std::vector<char> buf(64 * 1024);
        try {
          while (true) {
            const std::size_t n =
                co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
            co_await asio::async_write(socket, asio::buffer(buf.data(), n), asio::use_awaitable);
          }
        } catch (...) {
        }
      },
      asio::detached);
  std::thread server_thread = [&] {
    ServerCores on_server_core;
    return std::thread([&] { server_io.run(); });
  }();

  asio::io_context io(1);
  asio::ip::tcp::socket socket(io);
  socket.connect(endpoint);
  socket.set_option(asio::ip::tcp::no_delay(true));
  std::vector<char> out(kPayload * kInFlight, 'p');
  std::vector<char> in(kPayload * kInFlight);
  EchoResult r{};
  std::vector<double> latencies;
  for (int i = 0; i < latency_msgs + 2000; ++i) {
    const auto start = Clock::now();
    asio::write(socket, asio::buffer(out.data(), kPayload));
    asio::read(socket, asio::buffer(in.data(), kPayload));
    if (i >= 2000) {
      latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  r.p50_us = percentile(latencies, 0.50);
  r.p99_us = percentile(latencies, 0.99);

  const std::int64_t cpu_before = thread_cpu_ns(server_thread);
  const auto start = Clock::now();
  const int rounds = throughput_msgs / kInFlight;
  for (int i = 0; i < rounds; ++i) {
    asio::write(socket, asio::buffer(out));
    asio::read(socket, asio::buffer(in));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::int64_t cpu_after = thread_cpu_ns(server_thread);
  r.msgs_per_s = rounds * kInFlight / seconds;
  r.cpu_us_per_msg = static_cast<double>(cpu_after - cpu_before) / 1000.0 / (rounds * kInFlight);
  socket.close();
  server_thread.join();
  return r;
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

struct BalancedResult {
  double calls_per_s, client_cpu_us_per_call;
};

// Client side of `calls` unary calls, 64 in flight, on a channel over `servers` Echo servers
// (each on its own I/O thread): one server means one connection (pick_first), two round_robin.
// The client's loop runs on this thread, so its CPU time is this thread's.
BalancedResult measure_balanced(int servers, int calls) {
  ServerOptions options;
  options.num_threads = 1;
  testing::EchoService echo;
  std::vector<std::unique_ptr<Server>> running;
  std::string target = "ipv4:";
  for (int i = 0; i < servers; ++i) {
    running.push_back(std::make_unique<Server>(options));
    running.back()->add_service(echo);
    ServerCores on_server_core;
    const int port = running.back()->start("127.0.0.1", 0).value();
    target += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  }
  ChannelOptions channel_options;
  channel_options.load_balancing =
      servers > 1 ? LoadBalancingPolicy::kRoundRobin : LoadBalancingPolicy::kPickFirst;
  asio::io_context io(1);
  Channel channel(io, target, channel_options);
  testing::Echo::Stub stub(channel);
  auto worker = [&](int n) -> asio::awaitable<void> {
    EchoRequest request;
    request.set_payload(std::string(kPayload, 'p'));
    EchoResponse response;
    for (int i = 0; i < n; ++i) {
      ClientContext ctx;
      absl::Status s = co_await stub.Echo(ctx, request, response);
      if (!s.ok()) {
        std::fprintf(stderr, "rpc_bench: balanced call failed: %s\n", s.ToString().c_str());
        std::exit(1);
      }
    }
  };
  auto round = [&](int n) { return run_in_flight(io, worker, n); };
  round(4 * kInFlight);  // connects every server (round_robin starts with the first ready one)
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  round(2000);  // warm-up, now over every connection
  const std::int64_t cpu_before = thread_cpu_ns();
  const auto start = Clock::now();
  const int n = round(calls);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  BalancedResult r{};
  r.calls_per_s = n / seconds;
  r.client_cpu_us_per_call = static_cast<double>(thread_cpu_ns() - cpu_before) / 1000.0 / n;
  return r;
}

#ifdef FERRY_BENCH_XDS
namespace discovery_v3 = ::envoy::service::discovery::v3;

// A control plane for the xds row: ADS answering each type's first request with the one
// resource of that type (listener "svc" with inline routes to cluster "c", EDS cluster "c", its
// endpoints: every server, one locality), version "1"; ACKs are not answered.
class StaticAdsServer final : public discovery_v3::AggregatedDiscoveryService::Service {
 public:
  explicit StaticAdsServer(const std::vector<int>& ports) {
    namespace hcm_v3 = ::envoy::extensions::filters::network::http_connection_manager::v3;
    envoy::config::listener::v3::Listener listener;
    listener.set_name("svc");
    hcm_v3::HttpConnectionManager hcm;
    auto* host = hcm.mutable_route_config()->add_virtual_hosts();
    host->set_name("vh");
    host->add_domains("*");
    auto* route = host->add_routes();
    route->mutable_match()->set_prefix("/");
    route->mutable_route()->set_cluster("c");
    auto* router = hcm.add_http_filters();
    router->set_name("router");
    router->mutable_typed_config()->set_type_url(
        "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router");
    listener.mutable_api_listener()->mutable_api_listener()->PackFrom(hcm);
    resources_[listener.GetDescriptor()->full_name()].PackFrom(listener);
    envoy::config::cluster::v3::Cluster cluster;
    cluster.set_name("c");
    cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
    cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
    resources_[cluster.GetDescriptor()->full_name()].PackFrom(cluster);
    envoy::config::endpoint::v3::ClusterLoadAssignment endpoints;
    endpoints.set_cluster_name("c");
    auto* locality = endpoints.add_endpoints();
    locality->mutable_load_balancing_weight()->set_value(1);
    for (int port : ports) {
      auto* address = locality->add_lb_endpoints()
                          ->mutable_endpoint()
                          ->mutable_address()
                          ->mutable_socket_address();
      address->set_address("127.0.0.1");
      address->set_port_value(static_cast<std::uint32_t>(port));
    }
    resources_[endpoints.GetDescriptor()->full_name()].PackFrom(endpoints);
  }

  asio::awaitable<absl::Status> StreamAggregatedResources(
      ServerContext&,
      ServerReaderWriter<discovery_v3::DiscoveryRequest, discovery_v3::DiscoveryResponse>& stream)
      override {
    discovery_v3::DiscoveryRequest request;
    while (co_await stream.read(request)) {
      if (request.version_info() == "1") continue;  // an ACK
      const std::string_view url = request.type_url();
      auto it = resources_.find(std::string(url.substr(url.rfind('/') + 1)));
      if (it == resources_.end()) continue;
      discovery_v3::DiscoveryResponse response;
      response.set_version_info("1");
      response.set_nonce("1");
      response.set_type_url(request.type_url());
      *response.add_resources() = it->second;
      if (absl::Status s = co_await stream.write(response); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }

 private:
  std::map<std::string, google::protobuf::Any> resources_;  // by message type
};
#endif

// Client side of `calls` unary calls, 64 in flight, on an xds:/// channel (xds) or a round_robin
// one (not xds) to the same two Echo servers, as measure_balanced does; the xds channel's
// control plane is a StaticAdsServer. Under callgrind (--collect-atstart=no) only the measured
// calls are collected.
BalancedResult measure_xds_or_round_robin(bool xds, int calls) {
  ServerOptions options;
  options.num_threads = 1;
  testing::EchoService echo;
#ifdef FERRY_BENCH_XDS
  std::unique_ptr<StaticAdsServer> ads;  // outlives the servers (one serves it)
#endif
  std::vector<std::unique_ptr<Server>> running;
  std::vector<int> ports;
  std::string target = "ipv4:";
  for (int i = 0; i < 2; ++i) {
    running.push_back(std::make_unique<Server>(options));
    running.back()->add_service(echo);
    ServerCores on_server_core;
    ports.push_back(running.back()->start("127.0.0.1", 0).value());
    target += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(ports.back());
  }
  ChannelOptions channel_options;
  channel_options.load_balancing = LoadBalancingPolicy::kRoundRobin;
#ifdef FERRY_BENCH_XDS
  if (xds) {
    ads = std::make_unique<StaticAdsServer>(ports);
    running.push_back(std::make_unique<Server>(options));
    running.back()->add_service(*ads);
    ServerCores on_server_core;
    const int port = running.back()->start("127.0.0.1", 0).value();
    auto bootstrap = xds::parse_bootstrap(
        absl::StrCat(R"({"xds_servers": [{"server_uri": "127.0.0.1:)", port,
                     R"(", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "bench"}})"));
    channel_options.resolver = xds::make_resolver("xds:///svc", bootstrap.value()).value();
    target = "xds:///svc";
  }
#else
  if (xds) {
    std::fprintf(stderr, "rpc_bench: built without ferry::xds\n");
    std::exit(1);
  }
#endif
  asio::io_context io(1);
  Channel channel(io, target, channel_options);
  testing::Echo::Stub stub(channel);
  auto worker = [&](int n) -> asio::awaitable<void> {
    EchoRequest request;
    request.set_payload(std::string(kPayload, 'p'));
    EchoResponse response;
    for (int i = 0; i < n; ++i) {
      ClientContext ctx;
      ctx.set_wait_for_ready(true);  // the xds channel's first calls wait for its configuration
      absl::Status s = co_await stub.Echo(ctx, request, response);
      if (!s.ok()) {
        std::fprintf(stderr, "rpc_bench: %s call failed: %s\n", xds ? "xds" : "round_robin",
                     s.ToString().c_str());
        std::exit(1);
      }
    }
  };
  auto round = [&](int n) { return run_in_flight(io, worker, n); };
  round(4 * kInFlight);  // connects every server
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  round(2000);  // warm-up, now over every connection
  CALLGRIND_TOGGLE_COLLECT;
  const std::int64_t cpu_before = thread_cpu_ns();
  const auto start = Clock::now();
  const int n = round(calls);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::int64_t cpu = thread_cpu_ns() - cpu_before;
  CALLGRIND_TOGGLE_COLLECT;
  BalancedResult r{};
  r.calls_per_s = n / seconds;
  r.client_cpu_us_per_call = static_cast<double>(cpu) / 1000.0 / n;
  return r;
}

// "xds": an xds:/// channel beside a round_robin one to the same two servers, alternating in
// each repetition (FERRY_BENCH_ROWS=round_robin or xds: that row alone).
int xds_table(int repetitions, int calls) {
  const char* only = std::getenv("FERRY_BENCH_ROWS");
  const std::string_view rows = only != nullptr ? only : "";
  const bool run_rr = rows.empty() || rows.find("round_robin") != std::string_view::npos;
  const bool run_xds = rows.empty() || rows.find("xds") != std::string_view::npos;
  std::vector<BalancedResult> rr, xd;
  for (int i = 0; i < repetitions; ++i) {
    if (run_rr) rr.push_back(measure_xds_or_round_robin(false, calls));
    if (run_xds) xd.push_back(measure_xds_or_round_robin(true, calls));
    std::printf("run %d: round_robin %.2f µs CPU/call (%.0f calls/s), xds %.2f µs (%.0f calls/s)\n",
                i, rr.empty() ? 0.0 : rr.back().client_cpu_us_per_call,
                rr.empty() ? 0.0 : rr.back().calls_per_s,
                xd.empty() ? 0.0 : xd.back().client_cpu_us_per_call,
                xd.empty() ? 0.0 : xd.back().calls_per_s);
  }
  auto m = [](const std::vector<BalancedResult>& v, double BalancedResult::*field) {
    std::vector<double> x;
    for (const auto& r : v) x.push_back(r.*field);
    return x.empty() ? 0.0 : median(std::move(x));
  };
  const double r_cpu = m(rr, &BalancedResult::client_cpu_us_per_call);
  const double x_cpu = m(xd, &BalancedResult::client_cpu_us_per_call);
  const double r_qps = m(rr, &BalancedResult::calls_per_s);
  const double x_qps = m(xd, &BalancedResult::calls_per_s);
  std::printf(
      "\nxds:/// (one route, one EDS cluster of 2 endpoints) beside round_robin over the same 2 "
      "servers, %d in flight, client on 1 thread, medians of %d alternating runs of %d calls\n\n",
      kInFlight, repetitions, calls);
  std::printf("| measure | round_robin | xds:/// | ratio |\n|---|---:|---:|---:|\n");
  std::printf("| unary calls/s | %.0f | %.0f | %.2f× |\n", r_qps, x_qps,
              r_qps > 0 ? x_qps / r_qps : 0.0);
  std::printf("| client CPU per call (µs) | %.2f | %.2f | %.2f× |\n", r_cpu, x_cpu,
              r_cpu > 0 ? x_cpu / r_cpu : 0.0);
  return 0;
}

// ns per Picker::pick() over `ready` connections (the call's hot-path share of load balancing).
double picker_ns(int ready) {
  asio::io_context io(1);
  std::vector<std::shared_ptr<detail::ChannelConnection>> conns;
  for (int i = 0; i < ready; ++i) {
    conns.push_back(std::make_shared<detail::ChannelConnection>(io.get_executor()));
  }
  detail::Picker picker(std::move(conns));
  constexpr int kPicks = 10'000'000;
  std::uintptr_t sink = 0;
  const auto start = Clock::now();
  for (int i = 0; i < kPicks; ++i) {
    const auto* c = picker.pick();
    sink += reinterpret_cast<std::uintptr_t>(c->get());
    asm volatile("" : "+r"(sink));
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kPicks;
}

// "telemetry": ferry without telemetry beside metrics, tracing sampling 0, tracing sampling
// every call (spans counted and dropped by the processor's thread), and every call's spans
// exported over OTLP to FERRY_BENCH_OTLP's Collector (when set), interleaved in each repetition.
int telemetry_table(int repetitions, int latency_calls, int throughput_calls) {
  const char* otlp = std::getenv("FERRY_BENCH_OTLP");
  struct Row {
    const char* name;
    ServerExtras extras;
    std::vector<FerryResult> runs;
  };
  std::vector<Row> rows = {
      {"none", ServerExtras::kNone, {}},
#ifdef FERRY_BENCH_METRICS
      {"metrics (ferry::metrics, both ends)", ServerExtras::kMetrics, {}},
#endif
      {"tracing, sampling 0", ServerExtras::kTracingUnsampled, {}},
      {"tracing, all sampled, spans dropped by the exporter", ServerExtras::kTracingSampled, {}}};
  if (otlp != nullptr && *otlp != '\0') {
    rows.push_back({"tracing, all sampled, exported over OTLP to the Collector",
                    ServerExtras::kTracingExported,
                    {}});
  }
  // FERRY_BENCH_ROWS: a comma-separated list of the rows' first words ("none", "metrics",
  // "tracing, sampling 0" as "sampling", "all sampled" as "sampled", "exported"), to run alone.
  if (const char* only = std::getenv("FERRY_BENCH_ROWS"); only != nullptr && *only != '\0') {
    const std::string wanted = std::string(",") + only + ",";
    auto word = [](const Row& row) -> std::string {
      switch (row.extras) {
        case ServerExtras::kTracingUnsampled:
          return "sampling";
        case ServerExtras::kTracingSampled:
          return "sampled";
        case ServerExtras::kTracingExported:
          return "exported";
        default:
          return std::string(row.name).substr(0, std::string(row.name).find(' '));
      }
    };
    std::erase_if(rows, [&](const Row& row) {
      return wanted.find("," + word(row) + ",") == std::string::npos;
    });
    if (rows.empty()) {
      std::fprintf(stderr, "rpc_bench: FERRY_BENCH_ROWS=%s names no row\n", only);
      return 1;
    }
  }
  for (int i = 0; i < repetitions; ++i) {
    for (Row& row : rows) {
      row.runs.push_back(measure_ferry(latency_calls, throughput_calls, 0, false, row.extras,
                                       /*small_only=*/true));
      const FerryResult& r = row.runs.back();
      std::printf(
          "run %d %-58s p50 %.1f µs, %.0f calls/s, %.2f µs CPU/call, %.2f allocs/call, "
          "%.0f spans dropped\n",
          i, row.name, r.p50_us, r.calls_per_s, r.cpu_us_per_call, r.allocs_per_call,
          r.spans_dropped);
      std::fflush(stdout);
    }
  }
  auto m = [](const std::vector<FerryResult>& v, double FerryResult::*field) {
    std::vector<double> x;
    for (const auto& r : v) x.push_back(r.*field);
    return median(std::move(x));
  };
  // Each run's ratio to the run of "none" in the same repetition, then their median.
  auto ratio = [&](const Row& row, double FerryResult::*field) {
    std::vector<double> x;
    for (std::size_t i = 0; i < row.runs.size(); ++i) {
      x.push_back(row.runs[i].*field / (rows[0].runs[i].*field));
    }
    return median(std::move(x));
  };
  std::printf(
      "\nTelemetry on both ends beside none, %d in flight on 1 connection, server on 1 I/O "
      "thread; medians of %d interleaved runs (ratios: median of each run's ratio to the none run "
      "beside it)\n\n",
      kInFlight, repetitions);
  std::printf(
      "| configuration | server CPU per call (µs) | ratio | calls/s | ratio | p50, 1 in flight "
      "(µs) "
      "| server allocations per call | spans dropped "
      "|\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& row : rows) {
    std::printf("| %s | %.2f | %.2f× | %.0f | %.2f× | %.1f | %.2f | %.0f |\n", row.name,
                m(row.runs, &FerryResult::cpu_us_per_call),
                ratio(row, &FerryResult::cpu_us_per_call), m(row.runs, &FerryResult::calls_per_s),
                ratio(row, &FerryResult::calls_per_s), m(row.runs, &FerryResult::p50_us),
                m(row.runs, &FerryResult::allocs_per_call),
                m(row.runs, &FerryResult::spans_dropped));
  }
  return 0;
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
  using namespace ferry::bench;
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 3;
  const int latency_calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int throughput_calls = argc > 3 ? std::atoi(argv[3]) : 200000;
  const int stream_messages = argc > 4 ? std::atoi(argv[4]) : 4096;
  // "tls" as the fifth argument: only cleartext and TLS, interleaved, each run's figures shown.
  const bool tls_only = argc > 5 && std::string_view(argv[5]) == "tls";
  if (argc > 5 && std::string_view(argv[5]) == "telemetry") {
    return telemetry_table(repetitions, latency_calls, throughput_calls);
  }
  if (argc > 5 && std::string_view(argv[5]) == "xds") {
    pin_this_thread(kClientCore);
    return xds_table(repetitions, throughput_calls);
  }

  pin_this_thread(kClientCore);
  std::vector<FerryResult> ferry, tls, intercepted, authorized, traced, sampled;
  std::vector<EchoResult> echo;
  std::vector<BalancedResult> one_conn, balanced;
  std::vector<double> pick1, pick2;
  for (int i = 0; i < repetitions; ++i) {
    ferry.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages));
    if (tls_only) {
      tls.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, true));
      for (const auto* r : {&ferry.back(), &tls.back()}) {
        std::printf(
            "run %d %-9s p50 %.1f µs, %.0f calls/s, %.2f µs CPU/call, %.2f allocs/call, "
            "64 KiB stream %.0f MB/s (CPU per byte: server %.2f ns, client %.2f ns)\n",
            i, r == &ferry.back() ? "cleartext" : "TLS", r->p50_us, r->calls_per_s,
            r->cpu_us_per_call, r->allocs_per_call, r->stream_mb_per_s,
            r->stream_server_ns_per_byte, r->stream_client_ns_per_byte);
      }
      continue;
    }
    echo.push_back(measure_tcp_echo(latency_calls, throughput_calls));
    tls.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, true));
    intercepted.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, false,
                                        ServerExtras::kNoOpInterceptors));
    authorized.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, false,
                                       ServerExtras::kPolicy));
    traced.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, false,
                                   ServerExtras::kTracingUnsampled));
    sampled.push_back(measure_ferry(latency_calls, throughput_calls, stream_messages, false,
                                    ServerExtras::kTracingSampled));
    one_conn.push_back(measure_balanced(1, throughput_calls));
    balanced.push_back(measure_balanced(2, throughput_calls));
    pick1.push_back(picker_ns(1));
    pick2.push_back(picker_ns(2));
  }
  auto m = [](auto& v, auto field) {
    std::vector<double> x;
    for (auto& r : v) x.push_back(r.*field);
    return median(std::move(x));
  };
  if (tls_only) echo.push_back({1, 1, 1, 1});  // not measured, not shown
  const double f_p50 = m(ferry, &FerryResult::p50_us), e_p50 = m(echo, &EchoResult::p50_us);
  const double f_p99 = m(ferry, &FerryResult::p99_us), e_p99 = m(echo, &EchoResult::p99_us);
  const double f_qps = m(ferry, &FerryResult::calls_per_s),
               e_qps = m(echo, &EchoResult::msgs_per_s);
  const double f_cpu = m(ferry, &FerryResult::cpu_us_per_call);
  const double e_cpu = m(echo, &EchoResult::cpu_us_per_msg);
  if (!tls_only) {
    std::printf("Loopback RPC, %zu-byte payloads, server on 1 I/O thread; medians of %d runs\n\n",
                kPayload, repetitions);
    std::printf("| measure | ferry | raw TCP echo | ferry / echo |\n|---|---:|---:|---:|\n");
    std::printf("| unary latency p50, 1 in flight (µs) | %.1f | %.1f | %.2f× |\n", f_p50, e_p50,
                f_p50 / e_p50);
    std::printf("| unary latency p99, 1 in flight (µs) | %.1f | %.1f | %.2f× |\n", f_p99, e_p99,
                f_p99 / e_p99);
    std::printf("| unary calls/s, %d in flight, 1 connection | %.0f | %.0f | %.2f× |\n", kInFlight,
                f_qps, e_qps, f_qps / e_qps);
    std::printf("| server CPU per call, %d in flight (µs) | %.2f | %.2f | %.2f× |\n", kInFlight,
                f_cpu, e_cpu, f_cpu / e_cpu);
    std::printf("| server heap allocations per call | %.2f | – | |\n",
                m(ferry, &FerryResult::allocs_per_call));
    std::printf("| the same, %zu-byte payloads (no protobuf string buffers) | %.2f | – | |\n",
                kSmallPayload, m(ferry, &FerryResult::small_allocs_per_call));
    std::printf("| server streaming, 64 KiB messages (MB/s) | %.0f | – | |\n",
                m(ferry, &FerryResult::stream_mb_per_s));
    std::printf("| unary echo, 1 MiB messages, 2 in flight (MB/s, both ways) | %.0f | – | |\n",
                m(ferry, &FerryResult::unary_1mib_mb_per_s));
    std::printf("| server streaming, 1 MiB messages (MB/s) | %.0f | – | |\n",
                m(ferry, &FerryResult::stream_1mib_mb_per_s));
    std::printf("| the same, by reference (write_raw / read_raw, MB/s) | %.0f | – | |\n",
                m(ferry, &FerryResult::stream_1mib_ref_mb_per_s));
  }

  const double t_p50 = m(tls, &FerryResult::p50_us), t_qps = m(tls, &FerryResult::calls_per_s);
  const double t_cpu = m(tls, &FerryResult::cpu_us_per_call);
  const double f_mb = m(ferry, &FerryResult::stream_mb_per_s);
  const double t_mb = m(tls, &FerryResult::stream_mb_per_s);
  std::printf("\nTLS (TLS 1.3, AES-128-GCM) beside cleartext, same run\n\n");
  std::printf(
      "| measure | cleartext | TLS | TLS − cleartext | TLS / cleartext "
      "|\n|---|---:|---:|---:|---:|\n");
  std::printf("| unary latency p50, 1 in flight (µs) | %.1f | %.1f | %+.1f | %.2f× |\n", f_p50,
              t_p50, t_p50 - f_p50, t_p50 / f_p50);
  std::printf("| unary calls/s, %d in flight, 1 connection | %.0f | %.0f | | %.2f× |\n", kInFlight,
              f_qps, t_qps, t_qps / f_qps);
  std::printf("| server CPU per call, %d in flight (µs) | %.2f | %.2f | %+.2f | %.2f× |\n",
              kInFlight, f_cpu, t_cpu, t_cpu - f_cpu, t_cpu / f_cpu);
  std::printf("| server heap allocations per call | %.2f | %.2f | | |\n",
              m(ferry, &FerryResult::allocs_per_call), m(tls, &FerryResult::allocs_per_call));
  std::printf(
      "| server streaming, 64 KiB messages (MB/s) | %.0f | %.0f | %+.2f ns/byte | %.2f× |\n", f_mb,
      t_mb, 1e3 / t_mb - 1e3 / f_mb, t_mb / f_mb);
  for (auto [name, field] : {std::pair{"server", &FerryResult::stream_server_ns_per_byte},
                             std::pair{"client", &FerryResult::stream_client_ns_per_byte}}) {
    const double f = m(ferry, field), t = m(tls, field);
    std::printf("| the same, %s CPU per byte (ns) | %.2f | %.2f | %+.2f | %.2f× |\n", name, f, t,
                t - f, t / f);
  }

  if (tls_only) return 0;

  const double i_p50 = m(intercepted, &FerryResult::p50_us);
  const double i_qps = m(intercepted, &FerryResult::calls_per_s);
  const double i_cpu = m(intercepted, &FerryResult::cpu_us_per_call);
  std::printf(
      "\nOne no-op interceptor on the server and one on the channel, beside none, same run\n\n");
  std::printf(
      "| measure | none | one no-op each side | difference | ratio |\n|---|---:|---:|---:|---:|\n");
  std::printf("| unary latency p50, 1 in flight (µs) | %.1f | %.1f | %+.2f | %.2f× |\n", f_p50,
              i_p50, i_p50 - f_p50, i_p50 / f_p50);
  std::printf("| unary calls/s, %d in flight, 1 connection | %.0f | %.0f | | %.2f× |\n", kInFlight,
              f_qps, i_qps, i_qps / f_qps);
  std::printf("| server CPU per call, %d in flight (µs) | %.2f | %.2f | %+.3f | %.2f× |\n",
              kInFlight, f_cpu, i_cpu, i_cpu - f_cpu, i_cpu / f_cpu);
  std::printf("| server heap allocations per call | %.2f | %.2f | | |\n",
              m(ferry, &FerryResult::allocs_per_call),
              m(intercepted, &FerryResult::allocs_per_call));
  std::printf("| the same, %zu-byte payloads | %.2f | %.2f | | |\n", kSmallPayload,
              m(ferry, &FerryResult::small_allocs_per_call),
              m(intercepted, &FerryResult::small_allocs_per_call));

  const double a_p50 = m(authorized, &FerryResult::p50_us);
  const double a_qps = m(authorized, &FerryResult::calls_per_s);
  const double a_cpu = m(authorized, &FerryResult::cpu_us_per_call);
  std::printf(
      "\nA 50-rule authorization policy on the server (ferry::authz), beside none, same run\n\n");
  std::printf(
      "| measure | none | 50-rule policy | difference | ratio |\n|---|---:|---:|---:|---:|\n");
  std::printf("| unary latency p50, 1 in flight (µs) | %.1f | %.1f | %+.2f | %.2f× |\n", f_p50,
              a_p50, a_p50 - f_p50, a_p50 / f_p50);
  std::printf("| unary calls/s, %d in flight, 1 connection | %.0f | %.0f | | %.2f× |\n", kInFlight,
              f_qps, a_qps, a_qps / f_qps);
  std::printf("| server CPU per call, %d in flight (µs) | %.2f | %.2f | %+.3f | %.2f× |\n",
              kInFlight, f_cpu, a_cpu, a_cpu - f_cpu, a_cpu / f_cpu);
  std::printf("| server heap allocations per call | %.2f | %.2f | | |\n",
              m(ferry, &FerryResult::allocs_per_call),
              m(authorized, &FerryResult::allocs_per_call));

  const double un_p50 = m(traced, &FerryResult::p50_us);
  const double un_qps = m(traced, &FerryResult::calls_per_s);
  const double un_cpu = m(traced, &FerryResult::cpu_us_per_call);
  const double s_p50 = m(sampled, &FerryResult::p50_us);
  const double s_qps = m(sampled, &FerryResult::calls_per_s);
  const double s_cpu = m(sampled, &FerryResult::cpu_us_per_call);
  std::printf(
      "\nTracing on both ends (ferry::tracing, W3C traceparent), beside none, same run: sampling "
      "0, and every call sampled (3 spans a call, queued to the processor's thread, whose export "
      "CPU is not the server's)\n\n");
  std::printf(
      "| measure | none | tracing, sampling 0 | ratio | tracing, all sampled | ratio |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  std::printf("| unary latency p50, 1 in flight (µs) | %.1f | %.1f | %.2f× | %.1f | %.2f× |\n",
              f_p50, un_p50, un_p50 / f_p50, s_p50, s_p50 / f_p50);
  std::printf(
      "| unary calls/s, %d in flight, 1 connection | %.0f | %.0f | %.2f× | %.0f | %.2f× |\n",
      kInFlight, f_qps, un_qps, un_qps / f_qps, s_qps, s_qps / f_qps);
  std::printf("| server CPU per call, %d in flight (µs) | %.2f | %.2f | %.2f× | %.2f | %.2f× |\n",
              kInFlight, f_cpu, un_cpu, un_cpu / f_cpu, s_cpu, s_cpu / f_cpu);
  std::printf("| server heap allocations per call | %.2f | %.2f | | %.2f | |\n",
              m(ferry, &FerryResult::allocs_per_call), m(traced, &FerryResult::allocs_per_call),
              m(sampled, &FerryResult::allocs_per_call));

  const double o_qps = m(one_conn, &BalancedResult::calls_per_s);
  const double b_qps = m(balanced, &BalancedResult::calls_per_s);
  const double o_cpu = m(one_conn, &BalancedResult::client_cpu_us_per_call);
  const double b_cpu = m(balanced, &BalancedResult::client_cpu_us_per_call);
  std::printf(
      "\nround_robin over 2 servers beside 1 connection (pick_first, 1 server), %d in flight, "
      "client on 1 thread, same run\n\n",
      kInFlight);
  std::printf(
      "| measure | 1 connection | round_robin, 2 servers | ratio |\n|---|---:|---:|---:|\n");
  std::printf("| unary calls/s | %.0f | %.0f | %.2f× |\n", o_qps, b_qps, b_qps / o_qps);
  std::printf("| client CPU per call (µs) | %.2f | %.2f | %.2f× |\n", o_cpu, b_cpu, b_cpu / o_cpu);
  std::printf("| picker, per pick (ns) | %.1f | %.1f | |\n", median(pick1), median(pick2));
  return 0;
}

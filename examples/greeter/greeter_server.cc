// greeter_server: serves helloworld.Greeter (greeter.proto) on ferry until SIGINT/SIGTERM, with
// gRPC health checking and server reflection beside it (so grpcurl needs no .proto), and, when
// built with ferry::metrics, Prometheus metrics at http://<host>:<metrics_port>/metrics and, with
// --otlp, the same metrics pushed to an OpenTelemetry Collector (OTLP/gRPC) along with gRFC A72's
// Recv spans (ferry::tracing, W3C traceparent and grpc-trace-bin read; the OTEL_* variables set
// the rest, OTEL_TRACES_SAMPLER included: docs/observability.md). Browsers on the origins
// --cors_origin lists (comma-separated, or "*") may call it with gRPC-Web and Connect across
// origins (CORS).
//   greeter_server [--host=127.0.0.1] [--port=50051] [--threads=N] [--metrics_port=N]
//                  [--otlp=http://localhost:4317] [--cors_origin=http://localhost:8080,...]
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_split.h"
#include "ferry/health.h"
#include "ferry/interceptor.h"
#include "ferry/otlp_tracing.h"
#include "ferry/reflection.h"
#include "ferry/server.h"
#include "ferry/tracing.h"
#include "greeter.ferry.h"
#ifdef FERRY_GREETER_METRICS
#include "ferry/metrics.h"
#include "ferry/otlp_metrics.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#endif

namespace {

class GreeterImpl final : public helloworld::Greeter::Service {
 public:
  asio::awaitable<absl::Status> SayHello(ferry::ServerContext&,
                                         const helloworld::HelloRequest& request,
                                         helloworld::HelloReply& reply) override {
    if (request.name().empty()) co_return absl::InvalidArgumentError("name is empty");
    reply.set_message("Hello " + request.name());
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> SayHelloStreamReply(
      ferry::ServerContext& context, const helloworld::HelloRequest& request,
      ferry::ServerWriter<helloworld::HelloReply>& writer) override {
    const int count = request.count() > 0 ? request.count() : 3;
    helloworld::HelloReply reply;
    for (int i = 0; i < count && !context.is_cancelled(); ++i) {
      reply.set_message("Hello " + request.name() + " #" + std::to_string(i + 1));
      // Suspends while the client's window is full; fails once the call is over.
      if (absl::Status s = co_await writer.write(reply); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }
};

std::string_view flag(int argc, char** argv, std::string_view name, std::string_view fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() > name.size() + 3 && arg.substr(0, 2) == "--" &&
        arg.substr(2, name.size()) == name && arg[name.size() + 2] == '=') {
      return arg.substr(name.size() + 3);
    }
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string host(flag(argc, argv, "host", "127.0.0.1"));
  const int port = std::atoi(std::string(flag(argc, argv, "port", "50051")).c_str());
  ferry::ServerOptions options;
  options.num_threads =
      static_cast<unsigned>(std::atoi(std::string(flag(argc, argv, "threads", "0")).c_str()));
  options.cors_allowed_origins =
      absl::StrSplit(std::string(flag(argc, argv, "cors_origin", "")), ',', absl::SkipEmpty());

  // SIGINT/SIGTERM are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const std::string otlp_endpoint(flag(argc, argv, "otlp", ""));
  // With --otlp, A72's spans (ferry/tracing.h) exported to the Collector (ferry/otlp_tracing.h).
  // The processor outlives the server (declared before it); its destructor exports what the
  // last calls queued.
  std::shared_ptr<ferry::BatchSpanProcessor> spans;
  if (!otlp_endpoint.empty()) {
    ferry::OtlpSpanExporterOptions otlp_options =
        ferry::otlp_span_exporter_options_from_environment();
    otlp_options.exporter.endpoint = otlp_endpoint;
    auto& resource = otlp_options.exporter.resource;
    if (std::none_of(resource.begin(), resource.end(),
                     [](const auto& kv) { return kv.first == "service.name"; })) {
      resource.emplace_back("service.name", "greeter_server");  // unless OTEL_* named it
    }
    auto exporter = ferry::OtlpSpanExporter::create(std::move(otlp_options));
    if (!exporter.ok()) {
      std::fprintf(stderr, "greeter_server: --otlp: %s\n", exporter.status().ToString().c_str());
      return 1;
    }
    spans = std::make_shared<ferry::BatchSpanProcessor>(*std::move(exporter));
    ferry::TracingOptions tracing{.processor = spans,
                                  .propagation = ferry::TracePropagation::kBoth};
    std::string warning;
    ferry::tracing_sampler_from_environment(tracing, &warning);
    if (!warning.empty()) std::fprintf(stderr, "greeter_server: %s\n", warning.c_str());
    options.interceptors.push_back(ferry::make_server_tracing(std::move(tracing)));
    std::printf("greeter_server: exporting spans to %s\n", otlp_endpoint.c_str());
  }

#ifdef FERRY_GREETER_METRICS
  // The standard per-method RPC metrics (ferry/metrics.h), served over HTTP when asked for.
  auto registry = std::make_shared<prometheus::Registry>();
  options.interceptors.push_back(ferry::make_server_metrics(*registry));
  std::unique_ptr<prometheus::Exposer> exposer;
  const std::string metrics_port(flag(argc, argv, "metrics_port", ""));
  if (!metrics_port.empty()) {
    exposer = std::make_unique<prometheus::Exposer>(host + ":" + metrics_port);
    exposer->RegisterCollectable(registry);
    std::printf("greeter_server: metrics on http://%s:%d/metrics\n", host.c_str(),
                exposer->GetListeningPorts().front());
  }
  // ... and pushed to a Collector (ferry/otlp_metrics.h); destroyed last, after the server's
  // shutdown, it makes a final push with every call counted.
  std::unique_ptr<ferry::OtlpMetricsExporter> otlp;
  if (!otlp_endpoint.empty()) {
    ferry::OtlpMetricsOptions otlp_options = ferry::otlp_metrics_options_from_environment();
    otlp_options.exporter.endpoint = otlp_endpoint;
    auto& resource = otlp_options.exporter.resource;
    if (std::none_of(resource.begin(), resource.end(),
                     [](const auto& kv) { return kv.first == "service.name"; })) {
      resource.emplace_back("service.name", "greeter_server");  // unless OTEL_* named it
    }
    auto created = ferry::OtlpMetricsExporter::create(*registry, std::move(otlp_options));
    if (!created.ok()) {
      std::fprintf(stderr, "greeter_server: --otlp: %s\n", created.status().ToString().c_str());
      return 1;
    }
    otlp = *std::move(created);
    std::printf("greeter_server: pushing metrics to %s\n", otlp_endpoint.c_str());
  }
#endif

  GreeterImpl greeter;
  ferry::HealthService health;  // "" (the whole server) is SERVING
  ferry::ReflectionService reflection;
  ferry::Server server(options);
  server.add_service(greeter);
  server.add_service(health);
  reflection.add_to(server);
  health.set_status(helloworld::Greeter::kServiceName, ferry::ServingStatus::kServing);
  absl::StatusOr<int> bound = server.start(host, port);
  if (!bound.ok()) {
    std::fprintf(stderr, "greeter_server: %s\n", bound.status().ToString().c_str());
    return 1;
  }
  std::printf("greeter_server: listening on %s:%d\n", host.c_str(), *bound);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  // Health turns NOT_SERVING, then GOAWAY, let calls finish, then cancel.
  server.shutdown(std::chrono::seconds(5));
  std::printf("greeter_server: stopped\n");
  return 0;
}

// greeter_client: calls helloworld.Greeter (greeter.proto) through ferry's generated stubs: one
// SayHello with the awaitable stub, then SayHelloStreamReply with the blocking one. With --otlp,
// each call's gRFC A72 spans (Sent, Attempt) go to an OpenTelemetry Collector and its context in
// traceparent and grpc-trace-bin to the server (docs/observability.md).
//   greeter_client [--target=127.0.0.1:50051] [--name=world] [--count=3]
//                  [--otlp=http://localhost:4317]
// Exits 0 when both calls succeed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/otlp_tracing.h"
#include "ferry/tracing.h"
#include "greeter.ferry.h"

namespace {

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

// The awaitable API: a coroutine on the caller's io_context.
asio::awaitable<absl::Status> say_hello(helloworld::Greeter::Stub& stub, std::string name) {
  ferry::ClientContext context;
  context.set_timeout(std::chrono::seconds(5));  // sent as grpc-timeout, enforced here too
  helloworld::HelloRequest request;
  request.set_name(std::move(name));
  helloworld::HelloReply reply;
  absl::Status status = co_await stub.SayHello(context, request, reply);
  if (status.ok()) std::printf("SayHello: %s\n", reply.message().c_str());
  co_return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target(flag(argc, argv, "target", "127.0.0.1:50051"));
  const std::string name(flag(argc, argv, "name", "world"));
  const int count = std::atoi(std::string(flag(argc, argv, "count", "3")).c_str());

  // With --otlp, the calls are traced (ferry/tracing.h) and their spans exported to the
  // Collector (ferry/otlp_tracing.h); the processor outlives the channel and exports the rest
  // when the client ends.
  ferry::ChannelOptions channel_options;
  std::shared_ptr<ferry::BatchSpanProcessor> spans;
  if (const std::string otlp_endpoint(flag(argc, argv, "otlp", "")); !otlp_endpoint.empty()) {
    ferry::OtlpSpanExporterOptions otlp = ferry::otlp_span_exporter_options_from_environment();
    otlp.exporter.endpoint = otlp_endpoint;
    auto& resource = otlp.exporter.resource;
    if (std::none_of(resource.begin(), resource.end(),
                     [](const auto& kv) { return kv.first == "service.name"; })) {
      resource.emplace_back("service.name", "greeter_client");  // unless OTEL_* named it
    }
    auto exporter = ferry::OtlpSpanExporter::create(std::move(otlp));
    if (!exporter.ok()) {
      std::fprintf(stderr, "greeter_client: --otlp: %s\n", exporter.status().ToString().c_str());
      return 1;
    }
    spans = std::make_shared<ferry::BatchSpanProcessor>(*std::move(exporter));
    ferry::TracingOptions tracing{.processor = spans,
                                  .propagation = ferry::TracePropagation::kBoth};
    std::string warning;
    ferry::tracing_sampler_from_environment(tracing, &warning);
    if (!warning.empty()) std::fprintf(stderr, "greeter_client: %s\n", warning.c_str());
    channel_options.interceptors.push_back(ferry::make_client_tracing(std::move(tracing)));
  }

  // The channel runs its own I/O thread; both stubs share it.
  ferry::Channel channel(target, std::move(channel_options));

  // Unary, awaitable: a coroutine on this thread's io_context (each await hops to the channel's
  // thread and back). run() returns once the coroutine is done.
  absl::Status unary;
  {
    asio::io_context io;
    helloworld::Greeter::Stub stub(channel);
    asio::co_spawn(io, say_hello(stub, name),
                   [&](std::exception_ptr, absl::Status s) { unary = std::move(s); });
    io.run();
  }
  if (!unary.ok()) {
    std::fprintf(stderr, "SayHello failed: %s\n", unary.ToString().c_str());
    return 1;
  }

  // Server streaming, blocking.
  helloworld::Greeter::BlockingStub stub(channel);
  ferry::ClientContext context;
  context.set_timeout(std::chrono::seconds(5));
  helloworld::HelloRequest request;
  request.set_name(name);
  request.set_count(count);
  ferry::BlockingClientReader<helloworld::HelloReply> replies =
      stub.SayHelloStreamReply(context, request);
  helloworld::HelloReply reply;
  int received = 0;
  while (replies.read(reply)) {
    std::printf("SayHelloStreamReply: %s\n", reply.message().c_str());
    ++received;
  }
  const absl::Status streamed = replies.finish();
  if (!streamed.ok()) {
    std::fprintf(stderr, "SayHelloStreamReply failed: %s\n", streamed.ToString().c_str());
    return 1;
  }
  std::printf("greeter_client: %d replies, OK\n", received);
  return 0;
}

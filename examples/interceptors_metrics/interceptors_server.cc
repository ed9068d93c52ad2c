// interceptors_server: serves helloworld.Greeter (examples/greeter/greeter.proto) with two server
// interceptors around every handler: ServerLogging (server_logging.h), then, when built with
// ferry::metrics, the per-method Prometheus metrics, served at http://HOST:METRICS_PORT/metrics.
// Runs until SIGINT or SIGTERM.
//   interceptors_server [--host=127.0.0.1] [--port=50051] [--metrics_port=9464]
// Prints "interceptors_server: listening on HOST:PORT" once it accepts calls and "metrics on
// http://HOST:PORT/metrics" (port 0 for either picks a free one, which these lines report).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/server.h"
#include "greeter.ferry.h"
#include "server_logging.h"
#ifdef FERRY_EXAMPLE_METRICS
#include "ferry/metrics.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#endif

ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on (calls and metrics)");
ABSL_FLAG(int, port, 50051, "port for calls; 0 picks a free one");
ABSL_FLAG(int, metrics_port, 9464, "port for /metrics; 0 picks a free one");

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
      ferry::ServerContext&, const helloworld::HelloRequest& request,
      ferry::ServerWriter<helloworld::HelloReply>& writer) override {
    const int count = request.count() > 0 ? request.count() : 3;
    helloworld::HelloReply reply;
    for (int i = 1; i <= count; ++i) {
      reply.set_message("Hello " + request.name() + " #" + std::to_string(i));
      absl::Status written = co_await writer.write(reply);
      if (!written.ok()) co_return written;
    }
    co_return absl::OkStatus();
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a watching script sees each line at once
  const std::string host = absl::GetFlag(FLAGS_host);

  // SIGINT/SIGTERM are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // The interceptors' on_start hooks run in this order and their on_finish hooks in reverse, so
  // the metrics time the call without the logging.
  ferry::ServerOptions options;
  options.num_threads = 1;
  options.interceptors.push_back(std::make_shared<ServerLogging>());
#ifdef FERRY_EXAMPLE_METRICS
  // The registry must outlive the interceptor, the exposer serves it over HTTP.
  auto registry = std::make_shared<prometheus::Registry>();
  options.interceptors.push_back(ferry::make_server_metrics(*registry));
  prometheus::Exposer exposer(host + ":" + std::to_string(absl::GetFlag(FLAGS_metrics_port)));
  exposer.RegisterCollectable(registry);
  std::printf("interceptors_server: metrics on http://%s:%d/metrics\n", host.c_str(),
              exposer.GetListeningPorts().front());
#endif

  GreeterImpl greeter;
  ferry::Server server(options);
  server.add_service(greeter);
  absl::StatusOr<int> port = server.start(host, absl::GetFlag(FLAGS_port));
  if (!port.ok()) {
    std::fprintf(stderr, "interceptors_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::printf("interceptors_server: listening on %s:%d\n", host.c_str(), *port);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(5));
  std::printf("interceptors_server: stopped\n");
  return 0;
}

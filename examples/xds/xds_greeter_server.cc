// xds_greeter_server: one of the xds example's three servers, an ordinary ferry server (xDS is the
// client's business: the control plane tells the client where the servers are). Serves
// xdsdemo.Greeter (greeter.proto), answering every call with its --name.
//   xds_greeter_server --name=NAME [--host=127.0.0.1] [--port=50061]
// Prints "xds_greeter_server NAME: listening on HOST:PORT" once it accepts calls (--port=0 picks a
// free one); on SIGINT or SIGTERM it shuts down and prints "... stopped after N calls".
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/server.h"
#include "greeter.ferry.h"

ABSL_FLAG(std::string, name, "server", "the name this server answers with");
ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on");
ABSL_FLAG(int, port, 50061, "port to listen on; 0 picks a free one");

namespace {

class GreeterImpl final : public xdsdemo::Greeter::Service {
 public:
  explicit GreeterImpl(std::string name) : name_(std::move(name)) {}

  asio::awaitable<absl::Status> SayHello(ferry::ServerContext&,
                                         const xdsdemo::HelloRequest& request,
                                         xdsdemo::HelloReply& reply) override {
    reply.set_message("Hello " + request.name());
    reply.set_server(name_);
    calls_.fetch_add(1, std::memory_order_relaxed);
    co_return absl::OkStatus();
  }

  int calls() const { return calls_.load(); }

 private:
  const std::string name_;
  std::atomic<int> calls_{0};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a watching script sees each line at once
  const std::string name = absl::GetFlag(FLAGS_name);

  // SIGINT/SIGTERM are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  GreeterImpl greeter(name);
  ferry::ServerOptions options;
  options.num_threads = 1;
  ferry::Server server(options);
  server.add_service(greeter);
  const std::string host = absl::GetFlag(FLAGS_host);
  absl::StatusOr<int> port = server.start(host, absl::GetFlag(FLAGS_port));
  if (!port.ok()) {
    std::fprintf(stderr, "xds_greeter_server %s: %s\n", name.c_str(),
                 port.status().ToString().c_str());
    return 1;
  }
  std::printf("xds_greeter_server %s: listening on %s:%d\n", name.c_str(), host.c_str(), *port);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(5));
  std::printf("xds_greeter_server %s: stopped after %d calls\n", name.c_str(), greeter.calls());
  return 0;
}

// load_balancing_server: one of the load_balancing example's replicas. Serves lbdemo.Backend
// (backend.proto), answering every call with its --name after --work_ms of simulated work (so
// that calls are in flight when it stops). On SIGINT or SIGTERM it shuts down gracefully: GOAWAY
// tells its clients to send new calls elsewhere, and the calls in flight finish.
//   load_balancing_server --name=NAME [--host=127.0.0.1] [--port=50051] [--work_ms=5]
// Prints "load_balancing_server NAME: listening on HOST:PORT" once it accepts calls (--port=0
// picks a free port) and, once stopped, "load_balancing_server NAME: stopped after N calls".
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "backend.ferry.h"
#include "ferry/server.h"

ABSL_FLAG(std::string, name, "server", "the name this server answers with");
ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on");
ABSL_FLAG(int, port, 50051, "port to listen on; 0 picks a free one");
ABSL_FLAG(int, work_ms, 5, "how long each call takes");

namespace {

class BackendImpl final : public lbdemo::Backend::Service {
 public:
  BackendImpl(std::string name, std::chrono::milliseconds work)
      : name_(std::move(name)), work_(work) {}

  asio::awaitable<absl::Status> Identify(ferry::ServerContext&, const lbdemo::IdentifyRequest&,
                                         lbdemo::IdentifyReply& reply) override {
    // The work: a timer on the call's own I/O thread, which serves other calls meanwhile.
    asio::steady_timer timer(co_await asio::this_coro::executor, work_);
    co_await timer.async_wait(asio::use_awaitable);
    reply.set_server(name_);
    calls_.fetch_add(1, std::memory_order_relaxed);
    co_return absl::OkStatus();
  }

  int calls() const { return calls_.load(); }

 private:
  const std::string name_;
  const std::chrono::milliseconds work_;
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

  BackendImpl backend(name, std::chrono::milliseconds(absl::GetFlag(FLAGS_work_ms)));
  ferry::ServerOptions options;
  options.num_threads = 1;
  ferry::Server server(options);
  server.add_service(backend);
  const std::string host = absl::GetFlag(FLAGS_host);
  absl::StatusOr<int> port = server.start(host, absl::GetFlag(FLAGS_port));
  if (!port.ok()) {
    std::fprintf(stderr, "load_balancing_server %s: %s\n", name.c_str(),
                 port.status().ToString().c_str());
    return 1;
  }
  std::printf("load_balancing_server %s: listening on %s:%d\n", name.c_str(), host.c_str(), *port);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  // Graceful: GOAWAY, then up to 5 s for the calls in flight (they take --work_ms).
  server.shutdown(std::chrono::seconds(5));
  std::printf("load_balancing_server %s: stopped after %d calls\n", name.c_str(), backend.calls());
  return 0;
}

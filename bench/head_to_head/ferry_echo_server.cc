// h2h_ferry_server: ferry.testing.Echo/Echo and grpc_bench's helloworld.Greeter/SayHello served by
// ferry on ONE I/O thread (ServerOptions::num_threads = 1: accepting, HTTP/2, decoding, the
// handler and encoding all run there), for the head-to-head benchmark (run.py). Where it is built
// with the allocation counter (bench/alloc_counter.cc, not under the sanitizers), each SIGUSR1
// prints "allocations <count since start>" for run.py's allocations per call. Also serves
// ferry.testing.Echo/Expand (server streaming, for the TLS table's 64 KiB stream).
// Usage: h2h_ferry_server [port [certificate.pem key.pem]]  (with the files: TLS, ALPN h2)
#include <chrono>
#include <cstdio>

#include "ferry/server.h"
#include "ferry/testing/echo.ferry.h"
#include "ferry/tls.h"
#include "grpc_bench/helloworld.ferry.h"
#include "serve_main.h"
#ifdef FERRY_H2H_COUNT_ALLOCATIONS
#include "alloc_counter.h"
#endif

namespace {

// Echo only: the response carries a copy of the request's payload, as in the grpc++ servers.
class EchoImpl final : public ferry::testing::Echo::Service {
 public:
  asio::awaitable<absl::Status> Echo(ferry::ServerContext&,
                                     const ferry::testing::EchoRequest& request,
                                     ferry::testing::EchoResponse& response) override {
    response.set_payload(request.payload());
    co_return absl::OkStatus();
  }

  // response_count responses of response_size bytes: one message, its payload set once, written
  // again and again (as the grpc++ and grpc-go servers of the head-to-head do).
  asio::awaitable<absl::Status> Expand(
      ferry::ServerContext&, const ferry::testing::EchoRequest& request,
      ferry::ServerWriter<ferry::testing::EchoResponse>& writer) override {
    ferry::testing::EchoResponse response;
    response.mutable_payload()->assign(static_cast<std::size_t>(request.response_size()), 'x');
    for (int i = 0; i < request.response_count(); ++i) {
      response.set_index(i);
      if (absl::Status s = co_await writer.write(response); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }
};

// grpc_bench's complex_proto: the request's Hello becomes the reply's. ferry hands the handler a
// const request, so it is copied (grpc_bench's Go and Rust servers move it).
class GreeterImpl final : public helloworld::Greeter::Service {
 public:
  asio::awaitable<absl::Status> SayHello(ferry::ServerContext&,
                                         const helloworld::HelloRequest& request,
                                         helloworld::HelloReply& reply) override {
    *reply.mutable_response() = request.request();
    co_return absl::OkStatus();
  }
};

void report_allocations() {
#ifdef FERRY_H2H_COUNT_ALLOCATIONS
  std::printf("allocations %llu\n",
              static_cast<unsigned long long>(ferry::bench::allocation_count()));
  std::fflush(stdout);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop = h2h::block_stop_signals();
  EchoImpl echo;
  GreeterImpl greeter;
  ferry::ServerOptions options;
  options.num_threads = 1;
  if (argc > 3) {
    auto credentials = ferry::ServerCredentials::create(
        {.certificate_chain = ferry::Pem::file(argv[2]), .private_key = ferry::Pem::file(argv[3])});
    if (!credentials.ok()) {
      std::fprintf(stderr, "h2h_ferry_server: %s\n", credentials.status().ToString().c_str());
      return 1;
    }
    options.credentials = *credentials;
  }
  ferry::Server server(options);
  server.add_service(echo);
  server.add_service(greeter);
  absl::StatusOr<int> port = server.start("127.0.0.1", h2h::requested_port(argc, argv));
  if (!port.ok()) {
    std::fprintf(stderr, "h2h_ferry_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  h2h::announce_and_wait("h2h_ferry_server", *port, stop, report_allocations);
  server.shutdown(std::chrono::seconds(1));
  return 0;
}

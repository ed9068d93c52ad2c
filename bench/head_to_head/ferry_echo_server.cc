// h2h_ferry_server: ferry.testing.Echo/Echo served by ferry on ONE I/O thread
// (ServerOptions::num_threads = 1: accepting, HTTP/2, decoding, the handler and encoding all run
// there), for the head-to-head benchmark (run.py). Usage: h2h_ferry_server [port]
#include <chrono>
#include <cstdio>

#include "ferry/server.h"
#include "ferry/testing/echo.ferry.h"
#include "serve_main.h"

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
};

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop = h2h::block_stop_signals();
  EchoImpl service;
  ferry::ServerOptions options;
  options.num_threads = 1;
  ferry::Server server(options);
  server.add_service(service);
  absl::StatusOr<int> port = server.start("127.0.0.1", h2h::requested_port(argc, argv));
  if (!port.ok()) {
    std::fprintf(stderr, "h2h_ferry_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  h2h::announce_and_wait("h2h_ferry_server", *port, stop);
  server.shutdown(std::chrono::seconds(1));
  return 0;
}

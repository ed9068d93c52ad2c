// h2h_grpc_callback_server: ferry.testing.Echo/Echo served by grpc++'s callback API
// (CallbackService, the default ServerUnaryReactor), for the head-to-head benchmark (run.py).
// grpc++ 1.51 offers no knob for the threads behind the callback API: its event engine polls
// and runs the reactors on threads of its own; run.py pins the whole process to one core.
// Usage: h2h_grpc_callback_server [port]
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "ferry/testing/echo.grpc.pb.h"
#include "serve_main.h"

namespace {

// Echo only: the response carries a copy of the request's payload.
class EchoImpl final : public ferry::testing::Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const ferry::testing::EchoRequest* request,
                                 ferry::testing::EchoResponse* response) override {
    response->set_payload(request->payload());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop = h2h::block_stop_signals();
  EchoImpl service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(h2h::requested_port(argc, argv)),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "h2h_grpc_callback_server: cannot listen\n");
    return 1;
  }
  h2h::announce_and_wait("h2h_grpc_callback_server", port, stop);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

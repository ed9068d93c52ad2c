// h2h_grpc_async_server: ferry.testing.Echo/Echo served by grpc++'s asynchronous API with ONE
// completion queue drained by ONE thread (the classic CallData state machine), for the
// head-to-head benchmark (run.py). grpc++ still starts a few internal threads of its own (timer
// and executor); run.py pins the whole process to one core. Usage: h2h_grpc_async_server [port]
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "ferry/testing/echo.grpc.pb.h"
#include "serve_main.h"

namespace {

using AsyncService = ferry::testing::Echo::AsyncService;

// Calls requested up front, so that up to this many calls that arrive together are matched at
// once (the most the benchmark keeps in flight: 4 connections x 64 streams).
constexpr int kRequestedCalls = 256;

// One call: requested, then answered, then deleted. Its address is the completion queue tag.
class CallData {
 public:
  CallData(AsyncService* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), responder_(&context_) {
    service_->RequestEcho(&context_, &request_, &responder_, cq_, cq_, this);
  }

  // Advances on the tag's completion; ok is false when the server shuts down.
  void proceed(bool ok) {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    new CallData(service_, cq_);  // keeps kRequestedCalls requested
    response_.set_payload(request_.payload());
    answered_ = true;
    responder_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  ferry::testing::EchoRequest request_;
  ferry::testing::EchoResponse response_;
  grpc::ServerAsyncResponseWriter<ferry::testing::EchoResponse> responder_;
  bool answered_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop = h2h::block_stop_signals();
  AsyncService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(h2h::requested_port(argc, argv)),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "h2h_grpc_async_server: cannot listen\n");
    return 1;
  }
  for (int i = 0; i < kRequestedCalls; ++i) new CallData(&service, cq.get());
  std::thread poller([&cq] {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) static_cast<CallData*>(tag)->proceed(ok);
  });
  h2h::announce_and_wait("h2h_grpc_async_server", port, stop);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  cq->Shutdown();  // Next() returns false once every pending tag has been drained
  poller.join();
  return 0;
}

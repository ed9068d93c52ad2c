// h2h_grpc_async_server: ferry.testing.Echo/Echo and grpc_bench's helloworld.Greeter/SayHello
// served by grpc++'s asynchronous API with ONE completion queue drained by ONE thread (the classic
// CallData state machine), for the head-to-head benchmark (run.py). grpc++ still starts a few
// internal threads of its own (timer and executor); run.py pins the whole process to one core.
// Also serves ferry.testing.Echo/Expand (server streaming, for the TLS table's 64 KiB stream).
// Usage: h2h_grpc_async_server [port [certificate.pem key.pem]]  (with the files: grpc++'s TLS)
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "ferry/testing/echo.grpc.pb.h"
#include "grpc_bench/helloworld.grpc.pb.h"
#include "serve_main.h"

namespace {

// A unary method: its async service, messages, how a call of it is requested and answered, and
// how many calls are requested up front, so that up to that many that arrive together are
// matched at once (the most the benchmark keeps in flight on it).
struct EchoMethod {
  using Service = ferry::testing::Echo::AsyncService;
  using Request = ferry::testing::EchoRequest;
  using Response = ferry::testing::EchoResponse;
  static constexpr int kRequestedCalls = 256;  // 4 connections x 64 streams
  static void request(Service* service, grpc::ServerContext* context, Request* request,
                      grpc::ServerAsyncResponseWriter<Response>* responder,
                      grpc::ServerCompletionQueue* cq, void* tag) {
    service->RequestEcho(context, request, responder, cq, cq, tag);
  }
  static void answer(const Request& request, Response& response) {
    response.set_payload(request.payload());
  }
};

struct SayHelloMethod {
  using Service = helloworld::Greeter::AsyncService;
  using Request = helloworld::HelloRequest;
  using Response = helloworld::HelloReply;
  static constexpr int kRequestedCalls = 1024;  // 50 connections x 20 streams
  static void request(Service* service, grpc::ServerContext* context, Request* request,
                      grpc::ServerAsyncResponseWriter<Response>* responder,
                      grpc::ServerCompletionQueue* cq, void* tag) {
    service->RequestSayHello(context, request, responder, cq, cq, tag);
  }
  // The request's Hello is moved into the reply, as grpc_bench's servers do.
  static void answer(Request& request, Response& response) {
    response.mutable_response()->Swap(request.mutable_request());
  }
};

// The completion queue's tag: a call of any method.
class Call {
 public:
  virtual ~Call() = default;
  // Advances on the tag's completion; ok is false when the server shuts down.
  virtual void proceed(bool ok) = 0;
};

// One call: requested, then answered, then deleted. Its address is the completion queue tag.
template <typename Method>
class CallData final : public Call {
 public:
  CallData(typename Method::Service* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), responder_(&context_) {
    Method::request(service_, &context_, &request_, &responder_, cq_, this);
  }

  void proceed(bool ok) override {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    new CallData(service_, cq_);  // keeps Method::kRequestedCalls requested
    Method::answer(request_, response_);
    answered_ = true;
    responder_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  typename Method::Service* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  typename Method::Request request_;
  typename Method::Response response_;
  grpc::ServerAsyncResponseWriter<typename Method::Response> responder_;
  bool answered_ = false;
};

// Echo/Expand: response_count responses of response_size bytes, each written once the previous
// write has completed (grpc++ takes one write at a time). One message, its payload set once.
class ExpandCall final : public Call {
 public:
  static constexpr int kRequestedCalls = 64;
  ExpandCall(ferry::testing::Echo::AsyncService* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), writer_(&context_) {
    service_->RequestExpand(&context_, &request_, &writer_, cq_, cq_, this);
  }

  void proceed(bool ok) override {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    if (!started_) {  // the call has just arrived
      started_ = true;
      new ExpandCall(service_, cq_);
      response_.mutable_payload()->assign(static_cast<std::size_t>(request_.response_size()), 'x');
    }
    if (written_ < request_.response_count()) {
      response_.set_index(written_++);
      writer_.Write(response_, this);
      return;
    }
    finishing_ = true;
    writer_.Finish(grpc::Status::OK, this);
  }

 private:
  ferry::testing::Echo::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  ferry::testing::EchoRequest request_;
  ferry::testing::EchoResponse response_;
  grpc::ServerAsyncWriter<ferry::testing::EchoResponse> writer_;
  int written_ = 0;
  bool started_ = false;
  bool finishing_ = false;
};

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename Method>
void request_calls(typename Method::Service* service, grpc::ServerCompletionQueue* cq) {
  for (int i = 0; i < Method::kRequestedCalls; ++i) new CallData<Method>(service, cq);
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop = h2h::block_stop_signals();
  EchoMethod::Service echo;
  SayHelloMethod::Service greeter;
  int port = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (argc > 3) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({read_file(argv[3]), read_file(argv[2])});
    credentials = grpc::SslServerCredentials(tls);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(h2h::requested_port(argc, argv)),
                           credentials, &port);
  builder.RegisterService(&echo);
  builder.RegisterService(&greeter);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "h2h_grpc_async_server: cannot listen\n");
    return 1;
  }
  request_calls<EchoMethod>(&echo, cq.get());
  request_calls<SayHelloMethod>(&greeter, cq.get());
  for (int i = 0; i < ExpandCall::kRequestedCalls; ++i) new ExpandCall(&echo, cq.get());
  std::thread poller([&cq] {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->proceed(ok);
  });
  h2h::announce_and_wait("h2h_grpc_async_server", port, stop);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  cq->Shutdown();  // Next() returns false once every pending tag has been drained
  poller.join();
  return 0;
}

// interceptors_client: calls helloworld.Greeter on interceptors_server through a channel with
// the ClientLogging interceptor (client_logging.h), which tags each call with an x-request-id
// and logs how it ended: --count SayHello calls, one SayHelloStreamReply of --replies messages,
// and one SayHello with an empty name, which the server rejects with INVALID_ARGUMENT (to show a
// failed call in both logs and in the metrics).
//   interceptors_client [--target=127.0.0.1:50051] [--count=3] [--replies=4]
// Exits 0 when the calls succeeded and the last one failed as it should, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client_logging.h"
#include "ferry/channel.h"
#include "greeter.ferry.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "the server, as a gRPC target");
ABSL_FLAG(int, count, 3, "SayHello calls to make");
ABSL_FLAG(int, replies, 4, "replies to ask SayHelloStreamReply for");

namespace {

absl::Status say_hello(helloworld::Greeter::BlockingStub& stub, const std::string& name) {
  ferry::ClientContext context;
  context.set_timeout(std::chrono::seconds(10));
  helloworld::HelloRequest request;
  request.set_name(name);
  helloworld::HelloReply reply;
  absl::Status status = stub.SayHello(context, request, reply);
  if (status.ok()) std::printf("SayHello: %s\n", reply.message().c_str());
  return status;
}

absl::Status say_hello_stream_reply(helloworld::Greeter::BlockingStub& stub, int replies) {
  ferry::ClientContext context;
  context.set_timeout(std::chrono::seconds(10));
  helloworld::HelloRequest request;
  request.set_name("stream");
  request.set_count(replies);
  ferry::BlockingClientReader<helloworld::HelloReply> reader =
      stub.SayHelloStreamReply(context, request);
  helloworld::HelloReply reply;
  while (reader.read(reply)) std::printf("SayHelloStreamReply: %s\n", reply.message().c_str());
  return reader.finish();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the interceptor logs from the channel's thread

  ferry::ChannelOptions options;
  options.interceptors.push_back(std::make_shared<ClientLogging>());
  ferry::Channel channel(absl::GetFlag(FLAGS_target), options);
  helloworld::Greeter::BlockingStub stub(channel);

  for (int i = 1; i <= absl::GetFlag(FLAGS_count); ++i) {
    absl::Status status = say_hello(stub, "call " + std::to_string(i));
    if (!status.ok()) {
      std::fprintf(stderr, "interceptors_client: SayHello failed: %s\n", status.ToString().c_str());
      return 1;
    }
  }
  absl::Status streamed = say_hello_stream_reply(stub, absl::GetFlag(FLAGS_replies));
  if (!streamed.ok()) {
    std::fprintf(stderr, "interceptors_client: SayHelloStreamReply failed: %s\n",
                 streamed.ToString().c_str());
    return 1;
  }
  absl::Status rejected = say_hello(stub, "");
  if (rejected.code() != absl::StatusCode::kInvalidArgument) {
    std::fprintf(stderr,
                 "interceptors_client: SayHello(\"\") should fail with "
                 "INVALID_ARGUMENT, got %s\n",
                 rejected.ToString().c_str());
    return 1;
  }
  std::printf("interceptors_client: OK\n");
  return 0;
}

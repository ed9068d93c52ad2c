// greeter_client: calls helloworld.Greeter (greeter.proto) through ferry's generated stubs: one
// SayHello with the awaitable stub, then SayHelloStreamReply with the blocking one.
//   greeter_client [--target=127.0.0.1:50051] [--name=world] [--count=3]
// Exits 0 when both calls succeed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "ferry/channel.h"
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

  // The channel runs its own I/O thread; both stubs share it.
  ferry::Channel channel(target);

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

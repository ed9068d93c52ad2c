// Consumer of an installed ferry: frames a payload and decodes it back, then serves its own
// generated service with health checking and reflection beside it, and calls it and the health
// service through generated blocking stubs. Exits 0 on success.
#include <chrono>
#include <cstdio>
#include <string>

#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"
#include "ferry/health.h"
#include "ferry/reflection.h"
#include "ferry/server.h"
#include "grpc/health/v1/health.ferry.h"
#include "hello.ferry.h"

namespace {

class HelloImpl final : public consumer::Hello::Service {
 public:
  asio::awaitable<absl::Status> Greet(ferry::ServerContext&, const consumer::Name& request,
                                      consumer::Name& response) override {
    response.set_text("hello, " + request.text());
    co_return absl::OkStatus();
  }
};

bool codec_round_trip() {
  const std::string payload = "hello from a downstream project";
  ferry::SliceChain wire;
  if (!ferry::encode_bytes(payload, /*compressed=*/false, wire).ok()) return false;
  ferry::FrameDecoder decoder;
  for (const ferry::Slice& s : wire) decoder.push(s);
  ferry::DecodedMessage message;
  absl::StatusOr<bool> got = decoder.next(message);
  return got.ok() && *got && message.payload.to_string() == payload;
}

}  // namespace

int main() {
  if (!codec_round_trip()) {
    std::fprintf(stderr, "codec round trip failed\n");
    return 1;
  }

  HelloImpl hello;
  ferry::HealthService health;
  ferry::ReflectionService reflection;
  ferry::ServerOptions options;
  options.num_threads = 1;
  ferry::Server server(options);
  server.add_service(hello);
  server.add_service(health);
  reflection.add_to(server);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "start: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::string text;
  absl::Status status;
  grpc::health::v1::HealthCheckResponse health_reply;
  absl::Status health_status;
  {
    ferry::Channel channel("127.0.0.1:" + std::to_string(*port));
    consumer::Hello::BlockingStub stub(channel);
    ferry::ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    consumer::Name request, reply;
    request.set_text("consumer");
    status = stub.Greet(ctx, request, reply);
    text = reply.text();
    grpc::health::v1::Health::BlockingStub health_stub(channel);
    ferry::ClientContext health_ctx;
    health_ctx.set_timeout(std::chrono::seconds(10));
    health_status = health_stub.Check(health_ctx, {}, health_reply);
  }
  server.shutdown(std::chrono::seconds(1));
  if (!status.ok() || text != "hello, consumer") {
    std::fprintf(stderr, "call failed: %s, reply \"%s\"\n", status.ToString().c_str(),
                 text.c_str());
    return 1;
  }
  if (!health_status.ok() ||
      health_reply.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    std::fprintf(stderr, "health check failed: %s\n", health_status.ToString().c_str());
    return 1;
  }
  std::printf("ferry consumer ok: codec round trip, a generated stub's call, a health check\n");
  return 0;
}

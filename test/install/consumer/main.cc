// Consumer of an installed ferry: frames a payload and decodes it back, then serves its own
// generated service and calls it through the generated blocking stub. Exits 0 on success.
#include <chrono>
#include <cstdio>
#include <string>

#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"
#include "ferry/server.h"
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
  ferry::ServerOptions options;
  options.num_threads = 1;
  ferry::Server server(options);
  server.add_service(hello);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "start: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::string text;
  absl::Status status;
  {
    ferry::Channel channel("127.0.0.1:" + std::to_string(*port));
    consumer::Hello::BlockingStub stub(channel);
    ferry::ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    consumer::Name request, reply;
    request.set_text("consumer");
    status = stub.Greet(ctx, request, reply);
    text = reply.text();
  }
  server.shutdown(std::chrono::seconds(1));
  if (!status.ok() || text != "hello, consumer") {
    std::fprintf(stderr, "call failed: %s, reply \"%s\"\n", status.ToString().c_str(), text.c_str());
    return 1;
  }
  std::printf("ferry consumer ok: codec round trip and a generated stub's call\n");
  return 0;
}

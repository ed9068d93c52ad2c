// h2h_protobuf_floor: what protobuf alone costs a server for one call of grpc_bench's
// complex_proto scenario, the floor that run.py prints beside the servers' CPU per call: parse
// the HelloRequest, copy its Hello into a HelloReply, serialize the reply, in a tight loop on one
// core. Two ways: messages reused from call to call (the cheapest a server can do), and a fresh
// protobuf Arena per call (as ferry's server allocates its messages).
// Usage: h2h_protobuf_floor REQUEST_FILE   (the serialized HelloRequest, without the gRPC prefix)
// Prints "floor_reused_us X" and "floor_arena_us Y": medians of 5 timed loops, µs per call.
#include <google/protobuf/arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "grpc_bench/helloworld.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCallsPerLoop = 200000;
constexpr int kLoops = 5;

// One call's protobuf work with the given messages; returns the reply's size so that the
// compiler cannot drop the serialization.
size_t parse_copy_serialize(const std::string& wire, helloworld::HelloRequest& request,
                            helloworld::HelloReply& reply, std::vector<uint8_t>& out) {
  request.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
  *reply.mutable_response() = request.request();
  const size_t size = reply.ByteSizeLong();
  reply.SerializeWithCachedSizesToArray(out.data());
  return size;
}

template <typename Loop>
double median_us_per_call(Loop loop) {
  std::vector<double> us;
  for (int i = 0; i < kLoops; ++i) {
    const Clock::time_point start = Clock::now();
    loop();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                 kCallsPerLoop);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: h2h_protobuf_floor REQUEST_FILE\n");
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  const std::string wire((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  helloworld::HelloRequest request;
  helloworld::HelloReply reply;
  std::vector<uint8_t> out(wire.size() + 64);
  // The reply of a correct server has the request's bytes: checks the request file too.
  const size_t size = parse_copy_serialize(wire, request, reply, out);
  if (!request.has_request() || size != wire.size() ||
      std::memcmp(wire.data(), out.data(), size) != 0) {
    std::fprintf(stderr, "h2h_protobuf_floor: %s is not a HelloRequest that round-trips\n",
                 argv[1]);
    return 1;
  }
  size_t sink = 0;
  const double reused = median_us_per_call([&] {
    for (int i = 0; i < kCallsPerLoop; ++i) sink += parse_copy_serialize(wire, request, reply, out);
  });
  const double arena = median_us_per_call([&] {
    for (int i = 0; i < kCallsPerLoop; ++i) {
      google::protobuf::Arena call_arena;
      auto* fresh_request =
          google::protobuf::Arena::CreateMessage<helloworld::HelloRequest>(&call_arena);
      auto* fresh_reply =
          google::protobuf::Arena::CreateMessage<helloworld::HelloReply>(&call_arena);
      sink += parse_copy_serialize(wire, *fresh_request, *fresh_reply, out);
    }
  });
  std::printf("floor_reused_us %.4f\nfloor_arena_us %.4f\n", reused, arena);
  return sink == 0 ? 1 : 0;
}

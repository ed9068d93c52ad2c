// xds_greeter_client: calls xdsdemo.Greeter through one channel to an xds:/// target. The channel
// asks the control plane named by the bootstrap (GRPC_XDS_BOOTSTRAP, a file, or
// GRPC_XDS_BOOTSTRAP_CONFIG, its JSON: the format grpc-go and gRPC C++ read) for the target's
// listener, routes, cluster and endpoints, and spreads its calls over the endpoints with
// round_robin, as the control plane says. Counts where each call went and prints
//   "xds_greeter_client: NAME: N calls" per server and "xds_greeter_client: N calls OK, M failed".
// Exits 0 when no call failed and at least --servers servers answered.
//   GRPC_XDS_BOOTSTRAP=bootstrap.json xds_greeter_client [--target=xds:///greeter]
//                                                        [--calls=300] [--servers=3]
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/channel.h"
#include "ferry/xds.h"
#include "greeter.ferry.h"

ABSL_FLAG(std::string, target, "xds:///greeter", "the xds:/// target: the listener's name");
ABSL_FLAG(int, calls, 300, "calls to make");
ABSL_FLAG(int, servers, 3, "servers that must have answered for the exit status to be 0");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ferry::xds::register_resolver();  // once, before the first xds:/// channel
  ferry::Channel channel(absl::GetFlag(FLAGS_target));
  xdsdemo::Greeter::BlockingStub stub(channel);

  std::map<std::string, int> per_server;
  int ok = 0, failed = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_calls); ++i) {
    xdsdemo::HelloRequest request;
    request.set_name("xds");
    xdsdemo::HelloReply reply;
    ferry::ClientContext context;
    context.set_timeout(std::chrono::seconds(10));
    // The first calls wait while the channel learns its endpoints from the control plane.
    context.set_wait_for_ready(true);
    absl::Status status = stub.SayHello(context, request, reply);
    if (status.ok()) {
      ++ok;
      ++per_server[reply.server()];
    } else {
      ++failed;
      std::printf("xds_greeter_client: call %d failed: %s\n", i, status.ToString().c_str());
    }
  }
  for (const auto& [server, n] : per_server) {
    std::printf("xds_greeter_client: %s: %d calls\n", server.c_str(), n);
  }
  std::printf("xds_greeter_client: %d calls OK, %d failed\n", ok, failed);
  const bool spread = static_cast<int>(per_server.size()) >= absl::GetFlag(FLAGS_servers);
  return failed == 0 && spread ? 0 : 1;
}

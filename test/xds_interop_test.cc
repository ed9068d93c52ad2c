// xds:/// channels against a real control plane: go-control-plane's snapshot cache served over
// ADS (test/peers/xds_control_plane_go, installed by scripts/install_peers.sh), in front of ferry
// Echo servers as the endpoints. The test sets the control plane's snapshots as it goes and asks
// it what it saw (streams, ACKed versions, NACKs). Skipped when the peer is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ferry/blocking_stream.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/xds.h"
#include "support/attempt_echo.h"
#include "support/echo_service.h"
#include "support/xds_peers.h"

namespace ferry::xds_interop_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;

std::string grpc_go_path() { return std::string(FERRY_PEERS_DIR) + "/bin/xds_client_go"; }

using testing::xds_peers::ControlPlane;
using testing::xds_peers::peer_missing;
using testing::xds_peers::peer_path;
using testing::xds_peers::PeerProcess;
using Backend = testing::xds_peers::EchoBackend;

// A snapshot: listener "svc" (RDS "route-svc", or inline routes) -> cluster "c" -> endpoints.
std::string snapshot(const std::vector<const Backend*>& backends, bool rds = true,
                     const std::string& cluster_extra = "") {
  std::vector<std::string> addresses;
  for (const Backend* b : backends) addresses.push_back("\"" + b->address() + "\"");
  const std::string routes = R"([{"prefix": "/", "cluster": "c"}])";
  const std::string listener = rds ? R"({"name": "svc", "rds": "route-svc"})"
                                   : absl::StrCat(R"({"name": "svc", "routes": )", routes, "}");
  return absl::StrCat(
      R"({"listeners": [)", listener, R"(], "routes": [{"name": "route-svc", "routes": )", routes,
      R"(}], "clusters": [{"name": "c")", cluster_extra,
      R"(}], "endpoints": [{"name": "c", "localities": [{"priority": 0, "weight": 1, "addresses": [)",
      absl::StrJoin(addresses, ", "), "]}]}]}");
}

// gRFC A28's scenario: listener "svc" -> RDS "route-svc" with routes (JSON, the control plane's
// ROUTE list) -> clusters "c1" (endpoint a) and "c2" (endpoint b); clusters listed in `clusters`.
std::string routed_snapshot(const std::string& routes, const Backend& a, const Backend& b,
                            const std::vector<std::string>& clusters = {"c1", "c2"}) {
  std::vector<std::string> cds, eds;
  for (const std::string& c : clusters) {
    cds.push_back(absl::StrCat(R"({"name": ")", c, R"("})"));
    eds.push_back(absl::StrCat(R"({"name": ")", c,
                               R"(", "localities": [{"priority": 0, "weight": 1, "addresses": [")",
                               (c == "c1" ? a : b).address(), R"("]}]})"));
  }
  return absl::StrCat(
      R"({"listeners": [{"name": "svc", "rds": "route-svc"}], "routes": [{"name": "route-svc", )",
      R"("routes": )", routes, R"(}], "clusters": [)", absl::StrJoin(cds, ", "),
      R"(], "endpoints": [)", absl::StrJoin(eds, ", "), "]}");
}
constexpr std::string_view kRoutesPerMethod =
    R"([{"path": "/ferry.testing.Echo/Collect", "cluster": "c2"},)"
    R"( {"prefix": "/ferry.testing.Echo/Echo", "cluster": "c1"}])";
constexpr std::string_view kRoutesSplit =
    R"([{"prefix": "/", "weighted": [{"cluster": "c1", "weight": 50}, {"cluster": "c2", "weight": 50}]}])";
constexpr std::string_view kRoutesC1Only = R"([{"prefix": "/", "cluster": "c1"}])";
constexpr int kSplitCalls = 1000;
// Header routes: x-tier "gold" to c2; x-token-bin present to c2 (never: A28 matches no -bin
// header); an x-tier not starting with "sil" and a gRPC content-type to c1 (an absent x-tier
// matches no value matcher, inverted or not); else no route.
constexpr std::string_view kRoutesByHeader =
    R"([{"prefix": "/", "headers": [{"name": "x-tier", "exact": "gold"}], "cluster": "c2"},)"
    R"( {"prefix": "/", "headers": [{"name": "x-token-bin", "present": true}], "cluster": "c2"},)"
    R"( {"prefix": "/", "headers": [{"name": "x-tier", "prefix": "sil", "invert": true},)"
    R"(                             {"name": "content-type", "prefix": "application/grpc"}],)"
    R"(  "cluster": "c1"}])";
// The same without the -bin and content-type matchers, which grpc-go 1.85 does not treat as A28
// says (it matches -bin headers, and sees no content-type when it routes): for the comparison.
constexpr std::string_view kRoutesByHeaderForGrpcGo =
    R"([{"prefix": "/", "headers": [{"name": "x-tier", "exact": "gold"}], "cluster": "c2"},)"
    R"( {"prefix": "/", "headers": [{"name": "x-tier", "prefix": "sil", "invert": true}],)"
    R"(  "cluster": "c1"}])";

xds::Bootstrap bootstrap_for(int port) {
  absl::StatusOr<xds::Bootstrap> b = xds::parse_bootstrap(absl::StrCat(
      R"({"xds_servers": [{"server_uri": "127.0.0.1:)", port,
      R"(", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "ferry-xds-test"}})"));
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

xds::XdsClientOptions fast_options() {
  xds::XdsClientOptions options;
  options.resource_does_not_exist_timeout = 2s;
  options.backoff.initial = 100ms;
  options.backoff.max = 500ms;
  return options;
}

std::unique_ptr<Channel> xds_channel(int control_plane_port) {
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(control_plane_port), fast_options());
  EXPECT_TRUE(resolver.ok()) << resolver.status();
  ChannelOptions options;
  options.resolver = *resolver;
  return std::make_unique<Channel>("xds:///svc", options);
}

absl::Status echo(Channel& channel, bool wait_for_ready = true,
                  std::vector<std::pair<std::string, std::string>> metadata = {}) {
  testing::Echo::BlockingStub stub(channel);
  EchoRequest request;
  request.set_payload("hi");
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(wait_for_ready);
  for (const auto& [key, value] : metadata) ctx.add_metadata(key, value);
  return stub.Echo(ctx, request, response);
}

// One Collect call (client streaming) of one request, as a unary call would send it.
absl::Status collect(Channel& channel) {
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(true);
  BlockingClientStream stream = channel.open_blocking("/ferry.testing.Echo/Collect", ctx);
  EchoRequest request;
  request.set_payload("hi");
  (void)stream.write_last(request);
  EchoResponse response;
  (void)stream.read(response);
  return stream.finish();
}

TEST(XdsControlPlane, ResolvesThroughLdsRdsCdsEdsAndCallsEveryEndpoint) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a, &b})), "ok");
  auto channel = xds_channel(cp.port());
  // round_robin picks among the endpoints whose connection is ready: until the second one's is
  // (later on a loaded machine), every call goes to the first.
  for (int i = 0; i < 200 && (a.calls() == 0 || b.calls() == 0); ++i) {
    absl::Status status = echo(*channel);
    ASSERT_TRUE(status.ok()) << i << " " << status;
    if (a.calls() == 0 || b.calls() == 0) std::this_thread::sleep_for(10ms);
  }
  // Then round_robin over the cluster's endpoints: both served in turn.
  const int a_before = a.calls(), b_before = b.calls();
  for (int i = 0; i < 20; ++i) {
    absl::Status status = echo(*channel);
    ASSERT_TRUE(status.ok()) << i << " " << status;
  }
  EXPECT_GE(a.calls() - a_before, 5);
  EXPECT_GE(b.calls() - b_before, 5);
  // Every resource of the chain was ACKed with the snapshot's version.
  for (const char* type : {"lds", "rds", "cds", "eds"}) {
    EXPECT_EQ(cp.await(absl::StrCat("acked ", type), "1"), "1") << type;
  }
  EXPECT_EQ(cp.command("nacks"), "0");
  std::vector<xds::ResourceStatus> status =
      xds::client_status(bootstrap_for(cp.port()), fast_options());
  EXPECT_EQ(status.size(), 4u);
  for (const auto& s : status) {
    EXPECT_EQ(s.state, xds::ResourceStatus::State::kAcked) << s.type_url << " " << s.name;
    EXPECT_EQ(s.version, "1");
  }
}

TEST(XdsControlPlane, InlineRoutesAndTheRegisteredSchemeWithTheEnvironmentsBootstrap) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  Backend a;
  ASSERT_EQ(cp.command("snapshot 7 " + snapshot({&a}, /*rds=*/false)), "ok");
  xds::register_resolver();
  const std::string config =
      absl::StrCat(R"({"xds_servers": [{"server_uri": "127.0.0.1:)", cp.port(),
                   R"(", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "env"}})");
  unsetenv("GRPC_XDS_BOOTSTRAP");
  setenv("GRPC_XDS_BOOTSTRAP_CONFIG", config.c_str(), 1);
  {
    Channel channel("xds:///svc");
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(echo(channel).ok());
  }
  EXPECT_EQ(a.calls(), 3);
  // No route configuration was asked for: the listener carried its routes.
  EXPECT_EQ(cp.command("acked rds"), "-");
  unsetenv("GRPC_XDS_BOOTSTRAP_CONFIG");
  // Without a bootstrap a channel fails its calls, saying why.
  Channel broken("xds:///svc");
  absl::Status status = echo(broken, /*wait_for_ready=*/false);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("GRPC_XDS_BOOTSTRAP"), std::string::npos) << status;
}

TEST(XdsControlPlane, AnEndpointUpdateMovesTheCalls) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  auto channel = xds_channel(cp.port());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel).ok());
  EXPECT_EQ(a.calls(), 5);
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&b})), "ok");
  // The new endpoints reach the channel without a call failing; then every call goes to b.
  for (int i = 0; i < 200 && b.calls() == 0; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GT(b.calls(), 0);
  const int a_before = a.calls();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(echo(*channel).ok());
  EXPECT_EQ(a.calls(), a_before);
  EXPECT_EQ(cp.await("acked eds", "2"), "2");
}

TEST(XdsControlPlane, AnInvalidResourceIsNackedAndTheLastGoodOneStaysInUse) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  ASSERT_EQ(cp.await("acked cds", "1"), "1");
  // Version 2's cluster is STATIC: gRFC A27 accepts EDS clusters only.
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&a}, true, R"(, "type": "STATIC")")), "ok");
  EXPECT_EQ(cp.await("nacks", "1"), "1");
  const std::string nack = cp.command("last_nack");
  EXPECT_NE(nack.find("envoy.config.cluster.v3.Cluster"), std::string::npos) << nack;
  EXPECT_NE(nack.find("is not EDS"), std::string::npos) << nack;
  EXPECT_EQ(cp.command("acked cds"), "1");  // the NACK carried the last good version
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  bool saw_nacked_cluster = false;
  for (const auto& s : xds::client_status(bootstrap_for(cp.port()), fast_options())) {
    if (s.name == "c" && s.type_url == "type.googleapis.com/envoy.config.cluster.v3.Cluster") {
      saw_nacked_cluster = s.state == xds::ResourceStatus::State::kNacked && s.version == "1" &&
                           s.error.find("is not EDS") != std::string::npos;
    }
  }
  EXPECT_TRUE(saw_nacked_cluster);
  // A listener without an api_listener: NACKed too, calls go on. (The snapshot keeps the
  // cluster: one it left out would be deleted, and its calls fail, as in gRPC.)
  std::string bad_listener = snapshot({&a});
  const std::string good_listener = R"({"name": "svc", "rds": "route-svc"})";
  bad_listener.replace(bad_listener.find(good_listener), good_listener.size(),
                       R"({"name": "svc", "no_api_listener": true})");
  ASSERT_EQ(cp.command("snapshot 3 " + bad_listener), "ok");
  EXPECT_EQ(cp.await("nacks", "2"), "2");
  EXPECT_NE(cp.command("last_nack").find("no api_listener"), std::string::npos);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  EXPECT_EQ(a.calls(), 11);
  // A good version after the bad ones is taken again.
  Backend b;
  ASSERT_EQ(cp.command("snapshot 4 " + snapshot({&b})), "ok");
  EXPECT_EQ(cp.await("acked lds", "4"), "4");
  for (int i = 0; i < 200 && b.calls() == 0; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(b.calls(), 0);
}

TEST(XdsControlPlane, ARestartedControlPlaneKeepsCallsWorkingAndIsAskedAgainWithTheVersions) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  ASSERT_EQ(cp.await("acked eds", "1"), "1");
  EXPECT_EQ(cp.command("streams"), "1");
  ASSERT_EQ(cp.command("stop"), "ok");
  // No control plane: the cached configuration keeps serving (gRFC A57).
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    std::this_thread::sleep_for(30ms);
  }
  ASSERT_EQ(cp.command("start"), "ok");
  EXPECT_EQ(cp.await("streams", "2"), "2");
  // The new stream asked with the versions the client has.
  EXPECT_EQ(cp.await("first_version lds", "1"), "1");
  EXPECT_EQ(cp.await("first_version eds", "1"), "1");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  // And it is followed: new endpoints move the calls.
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&b})), "ok");
  for (int i = 0; i < 200 && b.calls() == 0; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(b.calls(), 0);
}

TEST(XdsControlPlane, AListenerTheControlPlaneLacksFailsCallsAfterTheDoesNotExistTimer) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///nowhere", bootstrap_for(cp.port()), fast_options());
  ASSERT_TRUE(resolver.ok());
  ChannelOptions options;
  options.resolver = *resolver;
  Channel channel("xds:///nowhere", options);
  const auto start = std::chrono::steady_clock::now();
  testing::Echo::BlockingStub stub(channel);
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  absl::Status status = stub.Echo(ctx, request, response);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("'nowhere' does not exist"), std::string::npos) << status;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1500ms);
}

// gRFC A28 through go-control-plane: a route per method to two clusters, then a 50/50 split of
// one route's calls between them, then one cluster dropped from the routes (and its CDS/EDS
// subscriptions with it). XdsGrpcGo.RoutesPerMethodAndSplitsByWeight runs the same with grpc-go.
TEST(XdsControlPlane, RoutesPerMethodAndSplitsByWeight) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + routed_snapshot(std::string(kRoutesPerMethod), a, b)), "ok");
  auto channel = xds_channel(cp.port());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    absl::Status status = collect(*channel);
    ASSERT_TRUE(status.ok()) << i << " " << status;
  }
  EXPECT_EQ(a.calls(), 10);  // Echo's route: c1
  EXPECT_EQ(b.calls(), 10);  // Collect's: c2
  ASSERT_EQ(cp.command("snapshot 2 " + routed_snapshot(std::string(kRoutesSplit), a, b)), "ok");
  ASSERT_EQ(cp.await("acked rds", "2"), "2");
  // The new routes reach the channel: Echo's calls go to both clusters.
  for (int i = 0; i < 200 && b.calls() == 10; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    std::this_thread::sleep_for(10ms);
  }
  const int a0 = a.calls(), b0 = b.calls();
  for (int i = 0; i < kSplitCalls; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  // 50/50 over 1000 calls: within 7 standard deviations (15.8 each) of 500.
  EXPECT_NEAR(a.calls() - a0, kSplitCalls / 2, 110);
  EXPECT_NEAR(b.calls() - b0, kSplitCalls / 2, 110);
  EXPECT_EQ(a.calls() - a0 + b.calls() - b0, kSplitCalls);
  // c2 leaves the routes: its subscriptions go (the snapshot still has it), calls go to c1.
  ASSERT_EQ(cp.command("snapshot 3 " + routed_snapshot(std::string(kRoutesC1Only), a, b)), "ok");
  bool c2_dropped = false;
  for (int i = 0; i < 200 && !c2_dropped; ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    c2_dropped = true;
    for (const auto& s : xds::client_status(bootstrap_for(cp.port()), fast_options())) {
      if (s.name == "c2") c2_dropped = false;
    }
    if (!c2_dropped) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(c2_dropped);
  const int b1 = b.calls();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  EXPECT_EQ(b.calls(), b1);
  EXPECT_EQ(cp.command("nacks"), "0");
  // A safe_regex route is NACKed (ferry has no RE2; grpc-go would take it): version 3 stays.
  ASSERT_EQ(
      cp.command("snapshot 4 " + routed_snapshot(R"([{"regex": "^/.*$", "cluster": "c2"}])", a, b)),
      "ok");
  EXPECT_EQ(cp.await("nacks", "1"), "1");
  EXPECT_NE(cp.command("last_nack").find("regular expressions are not supported"),
            std::string::npos);
  EXPECT_EQ(cp.command("acked rds"), "3");
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  EXPECT_EQ(b.calls(), b1);
}

TEST(XdsControlPlane, RoutesByHeader) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + routed_snapshot(std::string(kRoutesByHeader), a, b)), "ok");
  auto channel = xds_channel(cp.port());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel, true, {{"x-tier", "gold"}}).ok());
  EXPECT_EQ(b.calls(), 5);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(echo(*channel, true, {{"x-tier", "bronze"}, {"x-token-bin", "abc"}}).ok());
  }
  EXPECT_EQ(a.calls(), 5);
  EXPECT_EQ(b.calls(), 5);
  for (const auto& metadata : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"x-tier", "silver"}}, {{"x-token-bin", "abc"}}, {}}) {
    absl::Status status = echo(*channel, true, metadata);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  }
  EXPECT_EQ(a.calls() + b.calls(), 10);
  // The routes XdsGrpcGo.RoutesByHeader compares, with its calls and outcomes.
  ASSERT_EQ(
      cp.command("snapshot 2 " + routed_snapshot(std::string(kRoutesByHeaderForGrpcGo), a, b)),
      "ok");
  ASSERT_EQ(cp.await("acked rds", "2"), "2");
  for (int i = 0; i < 200; ++i) {  // until the new routes are in use: bronze goes to a
    if (echo(*channel, true, {{"x-tier", "bronze"}}).ok()) break;
    std::this_thread::sleep_for(10ms);
  }
  const int a0 = a.calls(), b0 = b.calls();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel, true, {{"x-tier", "gold"}}).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(echo(*channel, true, {{"x-tier", "bronze"}}).ok());
  EXPECT_EQ(a.calls() - a0, 5);
  EXPECT_EQ(b.calls() - b0, 5);
  for (const auto& metadata :
       std::vector<std::vector<std::pair<std::string, std::string>>>{{{"x-tier", "silver"}}, {}}) {
    EXPECT_EQ(echo(*channel, true, metadata).code(), absl::StatusCode::kUnavailable);
  }
}

// gRFC A27's endpoint picking: an endpoint that can stop and start again on its port.
class RestartableBackend {
 public:
  RestartableBackend() : service_(&probe_) { EXPECT_TRUE(start(0).ok()); }
  ~RestartableBackend() { stop(); }
  absl::Status start(int port) {
    server_ = std::make_unique<Server>();
    server_->add_service(service_);
    absl::StatusOr<int> bound = server_->start("127.0.0.1", port);
    if (!bound.ok()) return bound.status();
    port_ = *bound;
    return absl::OkStatus();
  }
  // On the same port, which the stopped server's sockets may hold a moment longer.
  void restart() {
    absl::Status status;
    for (int i = 0; i < 100; ++i) {
      status = start(port_);
      if (status.ok()) return;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << status;
  }
  void stop() {
    if (server_ != nullptr) server_->shutdown(100ms);
    server_.reset();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int calls() const { return probe_.started.load(); }

 private:
  testing::EchoProbe probe_;
  testing::EchoService service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

// Listener "svc" -> cluster "c" whose ClusterLoadAssignment has two localities, {priority,
// weight, address} each.
struct LocalitySpec {
  int priority;
  int weight;
  std::string address;
};
std::string localities_snapshot(const LocalitySpec& l1, const LocalitySpec& l2) {
  auto locality = [](const LocalitySpec& l) {
    return absl::StrCat(R"({"priority": )", l.priority, R"(, "weight": )", l.weight,
                        R"(, "addresses": [")", l.address, R"("]})");
  };
  return absl::StrCat(
      R"({"listeners": [{"name": "svc", "rds": "route-svc"}], "routes": [{"name": "route-svc", )",
      R"("routes": [{"prefix": "/", "cluster": "c"}]}], "clusters": [{"name": "c"}], )",
      R"("endpoints": [{"name": "c", "localities": [)", locality(l1), ", ", locality(l2), "]}]}");
}
constexpr int kWeightedCalls = 4000;

// Two localities of weights 3:1 in one priority: a locality drawn by weight per call (gRPC's
// weighted_target), 4,000 calls within 3% (120 calls, 4.4 standard deviations) of 3,000 / 1,000.
// XdsGrpcGo.LocalitiesSplitCallsByWeight runs the same with grpc-go.
TEST(XdsControlPlane, LocalitiesSplitCallsByWeight) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(
      cp.command("snapshot 1 " + localities_snapshot({0, 3, a.address()}, {0, 1, b.address()})),
      "ok");
  auto channel = xds_channel(cp.port());
  // Until both localities' connections are ready (a locality without one takes no call).
  for (int i = 0; i < 200 && (a.calls() == 0 || b.calls() == 0); ++i) {
    ASSERT_TRUE(echo(*channel).ok()) << i;
    if (a.calls() == 0 || b.calls() == 0) std::this_thread::sleep_for(10ms);
  }
  const int a0 = a.calls(), b0 = b.calls();
  for (int i = 0; i < kWeightedCalls; ++i) ASSERT_TRUE(echo(*channel).ok()) << i;
  EXPECT_NEAR(a.calls() - a0, kWeightedCalls * 3 / 4, kWeightedCalls * 3 / 100);
  EXPECT_NEAR(b.calls() - b0, kWeightedCalls / 4, kWeightedCalls * 3 / 100);
  EXPECT_EQ(a.calls() - a0 + b.calls() - b0, kWeightedCalls);
}

// Priority 0's locality serves; its server stops: calls go on, on priority 1 (fail-fast calls:
// none fails while priority 1 is healthy); it starts again on its port: the calls go back.
// XdsGrpcGo.PriorityFailoverAndBack runs the same with grpc-go, with the same outcomes.
TEST(XdsControlPlane, PriorityFailoverAndBack) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  RestartableBackend a;
  Backend b;
  ASSERT_EQ(
      cp.command("snapshot 1 " + localities_snapshot({0, 1, a.address()}, {1, 1, b.address()})),
      "ok");
  xds::XdsClientOptions options = fast_options();
  options.priority_failover_timeout = 2s;
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(cp.port()), options);
  ASSERT_TRUE(resolver.ok());
  ChannelOptions channel_options;
  channel_options.resolver = *resolver;
  Channel channel("xds:///svc", channel_options);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(channel).ok()) << i;
  EXPECT_EQ(a.calls(), 20);
  EXPECT_EQ(b.calls(), 0);  // priority 1 is not even connected
  a.stop();
  std::this_thread::sleep_for(200ms);  // the client sees the GOAWAY (grpc-go's is given as long)
  int failed = 0;
  for (int i = 0; i < 100; ++i) {
    absl::Status status = echo(channel, /*wait_for_ready=*/false);
    if (!status.ok()) {
      ++failed;
      ADD_FAILURE() << i << " " << status;
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(a.calls(), 20);
  EXPECT_EQ(b.calls(), 100);
  a.restart();
  // Priority 0's connection is retried with back-off (1 s, then 1.6 times longer, jittered):
  // once READY it takes the calls back.
  for (int i = 0; i < 1000 && a.calls() == 20; ++i) {
    ASSERT_TRUE(echo(channel, /*wait_for_ready=*/false).ok()) << i;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(a.calls(), 20);
  const int a1 = a.calls(), b1 = b.calls();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(echo(channel, /*wait_for_ready=*/false).ok()) << i;
  EXPECT_EQ(a.calls() - a1, 20);
  EXPECT_EQ(b.calls(), b1);
}

// gRFC A31 and A44 through go-control-plane, for ferry's channel here and grpc-go's client in
// XdsGrpcGo.RouteMaxStreamDurationAndRetryPolicy, with the same outcomes: a route's (or its
// listener's) max_stream_duration ends a slow call with DEADLINE_EXCEEDED, grpc_timeout_header_max
// 0 lifts it; a route's (or its virtual host's) retry policy on "unavailable" makes calls whose
// first attempts fail succeed, each attempt counted at the server, and without it they fail.
using testing::AttemptBackend;

// Listener "svc" (listener_extra: its fields) -> RDS "route-svc" (host_extra: the virtual
// host's) -> one route to cluster "c1" (route_extra: the route's) -> backend a.
std::string settings_snapshot(const AttemptBackend& a, const std::string& route_extra,
                              const std::string& listener_extra = "",
                              const std::string& host_extra = "") {
  return absl::StrCat(
      R"({"listeners": [{"name": "svc", "rds": "route-svc")", listener_extra,
      R"(}], "routes": [{"name": "route-svc")", host_extra,
      R"(, "routes": [{"prefix": "/", "cluster": "c1")", route_extra,
      R"(}]}], "clusters": [{"name": "c1"}], "endpoints": [{"name": "c1", "localities": )",
      R"([{"priority": 0, "weight": 1, "addresses": [")", a.address(), R"("]}]}]})");
}

// The scenarios; call makes one Echo call and answers "ok" or grpc-go's name of its code
// ("DeadlineExceeded", "Unavailable").
void run_route_settings_scenarios(ControlPlane& cp, AttemptBackend& a,
                                  const std::function<std::string()>& call) {
  // Calls until one answers want (the new snapshot reached the client), at most 10 s.
  auto until = [&](const std::string& want) {
    std::string answer;
    for (int i = 0; i < 100 && (answer = call()) != want; ++i) std::this_thread::sleep_for(20ms);
    return answer;
  };
  a.service().delay_ms = 1000;
  ASSERT_EQ(cp.command("snapshot 1 " + settings_snapshot(a, R"(, "max_stream_duration_ms": 150)")),
            "ok");
  EXPECT_EQ(call(), "DeadlineExceeded");
  // grpc_timeout_header_max 0: no limit, the route's and the listener's ignored.
  ASSERT_EQ(cp.command("snapshot 2 " + settings_snapshot(a,
                                                         R"(, "max_stream_duration_ms": 150,)"
                                                         R"( "grpc_timeout_header_max_ms": 0)",
                                                         R"(, "max_stream_duration_ms": 150)")),
            "ok");
  EXPECT_EQ(until("ok"), "ok");
  // The listener's default, for a route without its own.
  ASSERT_EQ(
      cp.command("snapshot 3 " + settings_snapshot(a, "", R"(, "max_stream_duration_ms": 150)")),
      "ok");
  EXPECT_EQ(until("DeadlineExceeded"), "DeadlineExceeded");
  a.service().delay_ms = 0;
  // The route's retry policy: two retries on UNAVAILABLE; each call's first two attempts fail.
  a.service().fail_attempts = 2;
  ASSERT_EQ(cp.command("snapshot 4 " +
                       settings_snapshot(a, R"(, "retry_policy": {"retry_on": "unavailable,5xx",)"
                                            R"( "num_retries": 2, "base_interval_ms": 1})")),
            "ok");
  EXPECT_EQ(until("ok"), "ok");
  int before = a.service().attempts();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(call(), "ok") << i;
  EXPECT_EQ(a.service().attempts() - before, 15);  // three attempts each
  // Without it: the first attempt's failure is the call's.
  ASSERT_EQ(cp.command("snapshot 5 " + settings_snapshot(a, "")), "ok");
  EXPECT_EQ(until("Unavailable"), "Unavailable");
  before = a.service().attempts();
  EXPECT_EQ(call(), "Unavailable");
  EXPECT_EQ(a.service().attempts() - before, 1);
  // The virtual host's policy, for a route without its own: one retry.
  a.service().fail_attempts = 1;
  ASSERT_EQ(cp.command("snapshot 6 " +
                       settings_snapshot(a, "", "",
                                         R"(, "retry_policy": {"retry_on": "unavailable",)"
                                         R"( "num_retries": 1, "base_interval_ms": 1})")),
            "ok");
  EXPECT_EQ(until("ok"), "ok");
  before = a.service().attempts();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(call(), "ok") << i;
  EXPECT_EQ(a.service().attempts() - before, 10);
  EXPECT_EQ(cp.command("nacks"), "0");
}

// gRFC A31: a call's retries go to the cluster its first attempt went to. Routes split 50/50
// between c1 (backend a) and c2 (b), with one retry on UNAVAILABLE; both backends fail every
// call's first attempt. call_n(n) makes n calls, call i with x-call-id "call-i", and answers
// "ok" or the first failure.
void run_retries_keep_their_cluster(ControlPlane& cp, AttemptBackend& a, AttemptBackend& b,
                                    const std::function<std::string(int)>& call_n) {
  a.service().fail_attempts = 1;
  b.service().fail_attempts = 1;
  auto cluster = [](const std::string& name, const AttemptBackend& backend) {
    return absl::StrCat(R"({"name": ")", name,
                        R"(", "localities": [{"priority": 0, "weight": 1, "addresses": [")",
                        backend.address(), R"("]}]})");
  };
  ASSERT_EQ(cp.command(absl::StrCat(
                "snapshot 1 ",
                R"({"listeners": [{"name": "svc", "rds": "route-svc"}], "routes": [{"name": )",
                R"("route-svc", "routes": [{"prefix": "/", "weighted": [{"cluster": "c1", )",
                R"("weight": 50}, {"cluster": "c2", "weight": 50}], "retry_policy": )",
                R"({"retry_on": "unavailable", "num_retries": 1, "base_interval_ms": 1}}]}], )",
                R"("clusters": [{"name": "c1"}, {"name": "c2"}], "endpoints": [)", cluster("c1", a),
                ", ", cluster("c2", b), "]}")),
            "ok");
  constexpr int kCalls = 40;
  ASSERT_EQ(call_n(kCalls), "ok");
  const auto by_a = a.service().attempts_by_call(), by_b = b.service().attempts_by_call();
  for (const auto& [id, n] : by_a) EXPECT_EQ(n, 2) << id << " also went to b";
  for (const auto& [id, n] : by_b) EXPECT_EQ(n, 2) << id << " also went to a";
  EXPECT_EQ(by_a.size() + by_b.size(), static_cast<std::size_t>(kCalls));
  EXPECT_GE(by_a.size(), 5u);
  EXPECT_GE(by_b.size(), 5u);
}

std::string grpc_go_code_name(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case absl::StatusCode::kUnavailable:
      return "Unavailable";
    default:
      return absl::StatusCodeToString(status.code());
  }
}

TEST(XdsControlPlane, RouteMaxStreamDurationAndRetryPolicy) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  AttemptBackend a;
  auto channel = xds_channel(cp.port());
  run_route_settings_scenarios(cp, a, [&] { return grpc_go_code_name(echo(*channel)); });
}

TEST(XdsControlPlane, ARetryGoesToTheClusterOfItsCallsFirstAttempt) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  AttemptBackend a, b;
  auto channel = xds_channel(cp.port());
  run_retries_keep_their_cluster(cp, a, b, [&](int n) {
    for (int i = 0; i < n; ++i) {
      absl::Status status = echo(*channel, true, {{"x-call-id", absl::StrCat("call-", i)}});
      if (!status.ok()) return grpc_go_code_name(status);
    }
    return std::string("ok");
  });
}

// The same scenarios through grpc-go's xDS client (xds_client_go), with the same bootstrap,
// control plane and endpoints: the outcomes must match ferry's above.
// gRFC A32 and A50's scenarios, for ferry's channel here and grpc-go's below (XdsGrpcGo.*):
// the same control plane snapshots, backends and outcomes.
constexpr std::string_view kMaxRequests2 = R"(, "max_requests": 2)";
// Failure-percentage ejection (success rate off): over 50% failed of at least 5 calls, with 3
// endpoints so counted, every 500 ms; ejected for 2 s (x its multiplier), at most half of them.
constexpr std::string_view kFailurePercentageEjection =
    R"(, "outlier_detection": {"interval_ms": 500, "base_ejection_time_ms": 2000,)"
    R"( "max_ejection_percent": 50, "failure_percentage_threshold": 50,)"
    R"( "enforcing_failure_percentage": 100, "failure_percentage_minimum_hosts": 3,)"
    R"( "failure_percentage_request_volume": 5, "enforcing_success_rate": 0})";

// An endpoint whose Echo fails every call (UNAVAILABLE) while failing is set.
class FlakyEcho final : public testing::Echo::Service {
 public:
  asio::awaitable<absl::Status> Echo(ServerContext&, const EchoRequest& request,
                                     EchoResponse& response) override {
    calls.fetch_add(1);
    if (failing.load()) co_return absl::UnavailableError("failing on purpose");
    response.set_payload(request.payload());
    co_return absl::OkStatus();
  }
  std::atomic<int> calls{0};
  std::atomic<bool> failing{false};
};

class FlakyBackend {
 public:
  FlakyBackend() {
    server_.add_service(service_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~FlakyBackend() { server_.shutdown(100ms); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int calls() const { return service_.calls.load(); }
  void set_failing(bool failing) { service_.failing.store(failing); }

 private:
  FlakyEcho service_;
  Server server_;
  int port_ = 0;
};

// Listener "svc" -> cluster "c" (with cluster_extra) -> endpoints a, b and flaky.
std::string three_endpoint_snapshot(const Backend& a, const Backend& b, const FlakyBackend& flaky,
                                    std::string_view cluster_extra) {
  return absl::StrCat(
      R"({"listeners": [{"name": "svc", "rds": "route-svc"}], "routes": [{"name": "route-svc", )",
      R"("routes": [{"prefix": "/", "cluster": "c"}]}], "clusters": [{"name": "c")",
      std::string(cluster_extra),
      R"(}], "endpoints": [{"name": "c", "localities": [{"priority": 0, "weight": 1, )",
      R"("addresses": [")", a.address(), R"(", ")", b.address(), R"(", ")", flaky.address(),
      R"("]}]}]})");
}

// A50's scenario, driven by calls(n) (n Echo calls of the client under test, whatever fails):
// flaky fails every call until it gets none for a batch (ejected), then heals and gets calls
// again once its ejection time has passed. Returns what went wrong, or "".
template <class Calls>
std::string eject_and_return(Calls calls, const Backend& a, const Backend& b, FlakyBackend& flaky) {
  using Clock = std::chrono::steady_clock;
  // Every endpoint connected and served first.
  for (int i = 0; i < 100 && (a.calls() == 0 || b.calls() == 0 || flaky.calls() == 0); ++i) {
    calls(3);
    std::this_thread::sleep_for(10ms);
  }
  if (a.calls() == 0 || b.calls() == 0 || flaky.calls() == 0) return "not every endpoint served";
  flaky.set_failing(true);
  bool ejected = false;
  // The ejection came after the start of the batch before the one that saw it (flaky still got
  // calls then): it lasts at least until that start + 2 s.
  Clock::time_point batch_start = Clock::now(), previous_start = batch_start;
  for (auto end = Clock::now() + 15s; !ejected && Clock::now() < end;) {
    previous_start = batch_start;
    batch_start = Clock::now();
    const int before = flaky.calls();
    calls(30);
    ejected = flaky.calls() == before;
  }
  if (!ejected) return "the failing endpoint was not ejected within 15 s";
  const auto ejected_seen = Clock::now();
  // Ejected: no call reaches it, and the others take every call. Judged when the batch ended
  // within the ejection's least length (on a loaded machine it may not have).
  const int flaky_then = flaky.calls(), others_then = a.calls() + b.calls();
  calls(30);
  if (Clock::now() < previous_start + 1900ms) {
    if (flaky.calls() != flaky_then) return "an ejected endpoint got calls";
    if (a.calls() + b.calls() - others_then != 30) return "the healthy endpoints missed calls";
  }
  flaky.set_failing(false);
  // Back after base_ejection_time (2 s, and the interval's 500 ms at most).
  bool returned = false;
  for (auto end = Clock::now() + 15s; !returned && Clock::now() < end;) {
    calls(3);
    returned = flaky.calls() > flaky_then;
    if (!returned) std::this_thread::sleep_for(20ms);
  }
  if (!returned) return "the healed endpoint got no calls 15 s after its ejection";
  if (Clock::now() - ejected_seen < 1s) return "the endpoint came back well before 2 s";
  return "";
}

// The attacker's case of A50: every endpoint fails every call. max_ejection_percent (50: A50
// stops ejecting once the ejected share is at or above it, so two of three) keeps at least one
// in the picker: every call still reaches an endpoint (and fails there), while some are ejected.
std::string never_all_ejected(const std::function<void(int)>& calls,
                              std::vector<FlakyBackend*> flaky) {
  using Clock = std::chrono::steady_clock;
  auto total = [&] {
    int n = 0;
    for (FlakyBackend* f : flaky) n += f->calls();
    return n;
  };
  for (int i = 0; i < 100 && std::any_of(flaky.begin(), flaky.end(),
                                         [](FlakyBackend* f) { return f->calls() == 0; });
       ++i) {
    calls(3);
    std::this_thread::sleep_for(10ms);
  }
  for (FlakyBackend* f : flaky) f->set_failing(true);
  bool some_ejected = false;
  for (auto end = Clock::now() + 4s; Clock::now() < end;) {
    std::vector<int> before;
    for (FlakyBackend* f : flaky) before.push_back(f->calls());
    const int total_before = total();
    calls(30);
    if (total() - total_before != 30) return "a call reached no endpoint: all were ejected";
    int idle = 0;
    for (std::size_t i = 0; i < flaky.size(); ++i) idle += flaky[i]->calls() == before[i];
    if (idle == static_cast<int>(flaky.size())) return "no endpoint got calls";
    some_ejected = some_ejected || idle > 0;
  }
  if (!some_ejected) return "no endpoint was ejected";
  return "";
}

TEST(XdsControlPlane, EveryEndpointFailingNeverEjectsThemAll) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  FlakyBackend x, y, z;
  ASSERT_EQ(cp.command(absl::StrCat("snapshot 1 ",
                                    R"({"listeners": [{"name": "svc", "rds": "route-svc"}], )",
                                    R"("routes": [{"name": "route-svc", "routes": [{"prefix": )",
                                    R"("/", "cluster": "c"}]}], "clusters": [{"name": "c")",
                                    std::string(kFailurePercentageEjection),
                                    R"(}], "endpoints": [{"name": "c", "localities": [{)",
                                    R"("priority": 0, "weight": 1, "addresses": [")", x.address(),
                                    R"(", ")", y.address(), R"(", ")", z.address(), R"("]}]}]})")),
            "ok");
  auto channel = xds_channel(cp.port());
  std::string last_error;
  const std::string outcome = never_all_ejected(
      [&](int n) {
        for (int i = 0; i < n; ++i) {
          // Not wait-for-ready: a call with every endpoint ejected fails at once, not later.
          absl::Status status = echo(*channel, /*wait_for_ready=*/false);
          if (!status.ok()) last_error = std::string(status.message());
        }
      },
      {&x, &y, &z});
  EXPECT_EQ(outcome, "");
  EXPECT_EQ(last_error, "failing on purpose");  // the endpoint's, never the channel's
}

TEST(XdsControlPlane, CircuitBreakingFailsCallsOverMaxRequests) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a}, true, std::string(kMaxRequests2))), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  // Two calls held open at the server: Collect streams whose requests never end.
  std::vector<std::unique_ptr<ClientContext>> contexts;
  std::vector<BlockingClientStream> held;
  EchoRequest request;
  request.set_payload("held");
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<ClientContext>());
    contexts.back()->set_timeout(30s);
    held.push_back(channel->open_blocking("/ferry.testing.Echo/Collect", *contexts.back()));
    ASSERT_TRUE(held.back().write(request).ok());
  }
  for (int i = 0; i < 500 && a.calls() < 3; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(a.calls(), 3);
  // gRFC A32: the third call in flight fails at once, wait_for_ready or not.
  absl::Status over = echo(*channel);
  EXPECT_EQ(over.code(), absl::StatusCode::kUnavailable) << over;
  EXPECT_NE(over.message().find("max requests 2"), std::string::npos) << over;
  EXPECT_EQ(echo(*channel, /*wait_for_ready=*/false).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a.calls(), 3);  // never sent
  // One released: a call goes through again (one held, one new: two in flight).
  EchoResponse response;
  ASSERT_TRUE(held[0].write_last(request).ok());
  EXPECT_TRUE(held[0].finish_with_response(response).ok());
  EXPECT_TRUE(echo(*channel).ok());
  // The limit follows the cluster's updates: max_requests 1 (the held call fills it), then none
  // (1024).
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&a}, true, R"(, "max_requests": 1)")), "ok");
  ASSERT_EQ(cp.await("acked cds", "2"), "2");
  for (int i = 0; i < 200 && echo(*channel).ok(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(echo(*channel).code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(cp.command("snapshot 3 " + snapshot({&a})), "ok");
  ASSERT_EQ(cp.await("acked cds", "3"), "3");
  absl::Status status;
  for (int i = 0; i < 200 && !(status = echo(*channel)).ok(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_TRUE(held[1].write_last(request).ok());
  EXPECT_TRUE(held[1].finish_with_response(response).ok());
  // max_requests 0: every call fails, none in flight (grpc-go alike, below).
  ASSERT_EQ(cp.command("snapshot 4 " + snapshot({&a}, true, R"(, "max_requests": 0)")), "ok");
  ASSERT_EQ(cp.await("acked cds", "4"), "4");
  for (int i = 0; i < 200 && (status = echo(*channel)).ok(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(echo(*channel).code(), absl::StatusCode::kUnavailable);
}

TEST(XdsControlPlane, OutlierDetectionEjectsAFailingEndpointAndReturnsIt) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed: " << peer_path();
  ControlPlane cp;
  Backend a, b;
  FlakyBackend flaky;
  ASSERT_EQ(
      cp.command("snapshot 1 " + three_endpoint_snapshot(a, b, flaky, kFailurePercentageEjection)),
      "ok");
  auto channel = xds_channel(cp.port());
  const std::string outcome = eject_and_return(
      [&](int n) {
        for (int i = 0; i < n; ++i) (void)echo(*channel);
      },
      a, b, flaky);
  EXPECT_EQ(outcome, "");
  EXPECT_EQ(cp.command("nacks"), "0");
}

class GrpcGoXdsClient : public PeerProcess {
 public:
  explicit GrpcGoXdsClient(int control_plane_port)
      : PeerProcess({grpc_go_path(), "xds:///svc"},
                    {absl::StrCat(
                        R"(GRPC_XDS_BOOTSTRAP_CONFIG={"xds_servers": [{"server_uri": "127.0.0.1:)",
                        control_plane_port,
                        R"(", "channel_creds": [{"type": "insecure"}], "server_features": )"
                        R"(["xds_v3"]}], "node": {"id": "grpc-go"}})")}) {}
  // metadata: "key=value" entries, after the method.
  std::string call(int n, const std::string& method = "", const std::string& metadata = "") {
    return command(absl::StrCat("call ", n, method.empty() ? "" : " ", method,
                                metadata.empty() ? "" : " ", metadata));
  }
};

bool grpc_go_missing() { return peer_missing() || access(grpc_go_path().c_str(), X_OK) != 0; }

TEST(XdsGrpcGo, ResolvesCallsEveryEndpointAndFollowsAnEndpointUpdate) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a, b, c;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a, &b})), "ok");
  GrpcGoXdsClient client(cp.port());
  // As for ferry's channel above: until both endpoints' connections are ready, one takes all.
  for (int i = 0; i < 200 && (a.calls() == 0 || b.calls() == 0); ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    if (a.calls() == 0 || b.calls() == 0) std::this_thread::sleep_for(10ms);
  }
  const int a_before = a.calls(), b_before = b.calls();
  ASSERT_EQ(client.call(20), "ok");
  EXPECT_GE(a.calls() - a_before, 5);
  EXPECT_GE(b.calls() - b_before, 5);
  for (const char* type : {"lds", "rds", "cds", "eds"}) {
    EXPECT_EQ(cp.await(absl::StrCat("acked ", type), "1"), "1") << type;
  }
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&c})), "ok");
  for (int i = 0; i < 200 && c.calls() == 0; ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GT(c.calls(), 0);
  const int ab = a.calls() + b.calls();
  ASSERT_EQ(client.call(10), "ok");
  EXPECT_EQ(a.calls() + b.calls(), ab);
}

TEST(XdsGrpcGo, AnInvalidClusterIsNackedAndTheLastGoodOneStaysInUse) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  GrpcGoXdsClient client(cp.port());
  ASSERT_EQ(client.call(1), "ok");
  ASSERT_EQ(cp.await("acked cds", "1"), "1");
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&a}, true, R"(, "type": "STATIC")")), "ok");
  EXPECT_EQ(cp.await("nacks", "1"), "1");
  EXPECT_NE(cp.command("last_nack").find("envoy.config.cluster.v3.Cluster"), std::string::npos);
  EXPECT_EQ(cp.command("acked cds"), "1");
  ASSERT_EQ(client.call(5), "ok");
  EXPECT_EQ(a.calls(), 6);
}

TEST(XdsGrpcGo, ARestartedControlPlaneKeepsCallsWorkingAndIsAskedAgainWithTheVersions) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a})), "ok");
  GrpcGoXdsClient client(cp.port());
  ASSERT_EQ(client.call(1), "ok");
  ASSERT_EQ(cp.await("acked eds", "1"), "1");
  ASSERT_EQ(cp.command("stop"), "ok");
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    std::this_thread::sleep_for(30ms);
  }
  ASSERT_EQ(cp.command("start"), "ok");
  EXPECT_EQ(cp.await("streams", "2"), "2");
  EXPECT_EQ(cp.await("first_version lds", "1"), "1");
  ASSERT_EQ(client.call(5), "ok");
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&b})), "ok");
  for (int i = 0; i < 200 && b.calls() == 0; ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(b.calls(), 0);
}

TEST(XdsGrpcGo, RoutesPerMethodAndSplitsByWeight) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(cp.command("snapshot 1 " + routed_snapshot(std::string(kRoutesPerMethod), a, b)), "ok");
  GrpcGoXdsClient client(cp.port());
  ASSERT_EQ(client.call(10), "ok");
  ASSERT_EQ(client.call(10, "/ferry.testing.Echo/Collect"), "ok");
  EXPECT_EQ(a.calls(), 10);
  EXPECT_EQ(b.calls(), 10);
  ASSERT_EQ(cp.command("snapshot 2 " + routed_snapshot(std::string(kRoutesSplit), a, b)), "ok");
  ASSERT_EQ(cp.await("acked rds", "2"), "2");
  for (int i = 0; i < 200 && b.calls() == 10; ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    std::this_thread::sleep_for(10ms);
  }
  const int a0 = a.calls(), b0 = b.calls();
  ASSERT_EQ(client.call(kSplitCalls), "ok");
  EXPECT_NEAR(a.calls() - a0, kSplitCalls / 2, 110);
  EXPECT_NEAR(b.calls() - b0, kSplitCalls / 2, 110);
  ASSERT_EQ(cp.command("snapshot 3 " + routed_snapshot(std::string(kRoutesC1Only), a, b)), "ok");
  ASSERT_EQ(cp.await("acked rds", "3"), "3");
  // grpc-go keeps a removed cluster's balancer for calls in flight a moment: wait for the move.
  for (int i = 0; i < 200; ++i) {
    const int before = b.calls();
    ASSERT_EQ(client.call(5), "ok");
    if (b.calls() == before) break;
    std::this_thread::sleep_for(20ms);
  }
  const int b1 = b.calls();
  ASSERT_EQ(client.call(20), "ok");
  EXPECT_EQ(b.calls(), b1);
  EXPECT_EQ(cp.command("nacks"), "0");
}

TEST(XdsGrpcGo, RoutesByHeader) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(
      cp.command("snapshot 1 " + routed_snapshot(std::string(kRoutesByHeaderForGrpcGo), a, b)),
      "ok");
  GrpcGoXdsClient client(cp.port());
  const std::string echo_method = "/ferry.testing.Echo/Echo";
  ASSERT_EQ(client.call(5, echo_method, "x-tier=gold"), "ok");
  EXPECT_EQ(b.calls(), 5);
  ASSERT_EQ(client.call(5, echo_method, "x-tier=bronze"), "ok");
  EXPECT_EQ(a.calls(), 5);
  EXPECT_EQ(b.calls(), 5);
  for (const std::string metadata : {"x-tier=silver", ""}) {
    const std::string answer = client.call(1, echo_method, metadata);
    EXPECT_EQ(answer.rfind("error Unavailable", 0), 0u) << metadata << ": " << answer;
  }
  EXPECT_EQ(a.calls() + b.calls(), 10);
}

TEST(XdsGrpcGo, LocalitiesSplitCallsByWeight) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  Backend a, b;
  ASSERT_EQ(
      cp.command("snapshot 1 " + localities_snapshot({0, 3, a.address()}, {0, 1, b.address()})),
      "ok");
  GrpcGoXdsClient client(cp.port());
  for (int i = 0; i < 200 && (a.calls() == 0 || b.calls() == 0); ++i) {
    ASSERT_EQ(client.call(1), "ok") << i;
    if (a.calls() == 0 || b.calls() == 0) std::this_thread::sleep_for(10ms);
  }
  const int a0 = a.calls(), b0 = b.calls();
  ASSERT_EQ(client.call(kWeightedCalls), "ok");
  EXPECT_NEAR(a.calls() - a0, kWeightedCalls * 3 / 4, kWeightedCalls * 3 / 100);
  EXPECT_NEAR(b.calls() - b0, kWeightedCalls / 4, kWeightedCalls * 3 / 100);
  EXPECT_EQ(a.calls() - a0 + b.calls() - b0, kWeightedCalls);
}

TEST(XdsGrpcGo, PriorityFailoverAndBack) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  RestartableBackend a;
  Backend b;
  ASSERT_EQ(
      cp.command("snapshot 1 " + localities_snapshot({0, 1, a.address()}, {1, 1, b.address()})),
      "ok");
  GrpcGoXdsClient client(cp.port());
  ASSERT_EQ(client.call(20), "ok");
  EXPECT_EQ(a.calls(), 20);
  EXPECT_EQ(b.calls(), 0);
  a.stop();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(client.command("fail_fast 100"), "ok");  // as ferry's: no call fails
  EXPECT_EQ(a.calls(), 20);
  EXPECT_EQ(b.calls(), 100);
  a.restart();
  for (int i = 0; i < 1000 && a.calls() == 20; ++i) {
    ASSERT_EQ(client.command("fail_fast 1"), "ok") << i;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(a.calls(), 20);
  const int a1 = a.calls(), b1 = b.calls();
  ASSERT_EQ(client.command("fail_fast 20"), "ok");
  EXPECT_EQ(a.calls() - a1, 20);
  EXPECT_EQ(b.calls(), b1);
}

TEST(XdsGrpcGo, RouteMaxStreamDurationAndRetryPolicy) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  AttemptBackend a;
  GrpcGoXdsClient client(cp.port());
  run_route_settings_scenarios(cp, a, [&] {
    const std::string answer = client.call(1);
    if (answer.rfind("error ", 0) != 0) return answer;
    return answer.substr(6, answer.find(' ', 6) - 6);  // the code's name
  });
}

TEST(XdsGrpcGo, ARetryGoesToTheClusterOfItsCallsFirstAttempt) {
  if (grpc_go_missing()) GTEST_SKIP() << "xds peers not installed in " << FERRY_PEERS_DIR;
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  AttemptBackend a, b;
  GrpcGoXdsClient client(cp.port());
  run_retries_keep_their_cluster(cp, a, b, [&](int n) {
    return client.call(n, "/ferry.testing.Echo/Echo", "x-call-id=call-{i}");
  });
}

TEST(XdsGrpcGo, CircuitBreakingFailsCallsOverMaxRequests) {
  if (peer_missing() || grpc_go_missing()) GTEST_SKIP() << "xDS peers not installed";
  ControlPlane cp;
  Backend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot({&a}, true, std::string(kMaxRequests2))), "ok");
  GrpcGoXdsClient client(cp.port());
  ASSERT_EQ(client.command("call 1"), "ok");
  ASSERT_EQ(client.command("hold 2"), "ok");
  for (int i = 0; i < 500 && a.calls() < 3; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(a.calls(), 3);
  const std::string over = client.command("call 1");
  EXPECT_EQ(over.rfind("error Unavailable", 0), 0u) << over;
  EXPECT_EQ(a.calls(), 3);
  EXPECT_EQ(client.command("release"), "ok");
  EXPECT_EQ(client.command("call 1"), "ok");
  EXPECT_EQ(client.command("release"), "ok");
  // max_requests 0: every call fails.
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot({&a}, true, R"(, "max_requests": 0)")), "ok");
  ASSERT_EQ(cp.await("acked cds", "2"), "2");
  std::string answer;
  for (int i = 0; i < 200 && (answer = client.command("call 1")) == "ok"; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(answer.rfind("error Unavailable", 0), 0u) << answer;
}

TEST(XdsGrpcGo, OutlierDetectionEjectsAFailingEndpointAndReturnsIt) {
  if (peer_missing() || grpc_go_missing()) GTEST_SKIP() << "xDS peers not installed";
  ControlPlane cp;
  Backend a, b;
  FlakyBackend flaky;
  ASSERT_EQ(
      cp.command("snapshot 1 " + three_endpoint_snapshot(a, b, flaky, kFailurePercentageEjection)),
      "ok");
  GrpcGoXdsClient client(cp.port());
  const std::string outcome = eject_and_return(
      [&](int n) { (void)client.command(absl::StrCat("tally ", n)); }, a, b, flaky);
  EXPECT_EQ(outcome, "");
  EXPECT_EQ(cp.command("nacks"), "0");
}

TEST(XdsGrpcGo, EveryEndpointFailingNeverEjectsThemAll) {
  if (peer_missing() || grpc_go_missing()) GTEST_SKIP() << "xDS peers not installed";
  ControlPlane cp;
  FlakyBackend x, y, z;
  ASSERT_EQ(cp.command(absl::StrCat("snapshot 1 ",
                                    R"({"listeners": [{"name": "svc", "rds": "route-svc"}], )",
                                    R"("routes": [{"name": "route-svc", "routes": [{"prefix": )",
                                    R"("/", "cluster": "c"}]}], "clusters": [{"name": "c")",
                                    std::string(kFailurePercentageEjection),
                                    R"(}], "endpoints": [{"name": "c", "localities": [{)",
                                    R"("priority": 0, "weight": 1, "addresses": [")", x.address(),
                                    R"(", ")", y.address(), R"(", ")", z.address(), R"("]}]}]})")),
            "ok");
  GrpcGoXdsClient client(cp.port());
  const std::string outcome = never_all_ejected(
      [&](int n) { (void)client.command(absl::StrCat("tally ", n)); }, {&x, &y, &z});
  EXPECT_EQ(outcome, "");
}

}  // namespace
}  // namespace ferry::xds_interop_test

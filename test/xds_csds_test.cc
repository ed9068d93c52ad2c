// gRFC A40's CSDS (ferry/csds.h) on a ferry server, answering for an xds:/// channel resolved
// through a real control plane (go-control-plane, test/support/xds_peers.h): every resource of
// the chain with its version, contents and ACKED; a NACKed cluster with its error and refused
// version; the response bound; StreamClientStatus; and grpcurl asking through reflection.
// Skipped when the peer is not installed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/service/status/v3/csds.pb.h"
#include "ferry/blocking_stream.h"
#include "ferry/channel.h"
#include "ferry/csds.h"
#include "ferry/reflection.h"
#include "ferry/server.h"
#include "ferry/xds.h"
#include "support/xds_peers.h"

namespace ferry::xds_csds_test {
namespace {

using namespace std::chrono_literals;
using testing::xds_peers::ControlPlane;
using testing::xds_peers::EchoBackend;
using testing::xds_peers::peer_missing;
namespace status_v3 = ::envoy::service::status::v3;
constexpr std::string_view kFetch =
    "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus";
constexpr std::string_view kStream =
    "/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus";
constexpr std::string_view kClusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

// listener "svc" -> RDS "route-svc" -> cluster "c" (cluster_extra: more of its JSON) -> a.
std::string snapshot(const EchoBackend& a, const std::string& cluster_extra = "") {
  return absl::StrCat(
      R"({"listeners": [{"name": "svc", "rds": "route-svc"}], "routes": [{"name": "route-svc", )",
      R"("routes": [{"prefix": "/", "cluster": "c"}]}], "clusters": [{"name": "c")", cluster_extra,
      R"(}], "endpoints": [{"name": "c", "localities": [{"priority": 0, "weight": 1, )",
      R"("addresses": [")", a.address(), R"("]}]}]})");
}

xds::Bootstrap bootstrap_for(int port) {
  absl::StatusOr<xds::Bootstrap> b = xds::parse_bootstrap(absl::StrCat(
      R"({"xds_servers": [{"server_uri": "127.0.0.1:)", port,
      R"(", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "ferry-csds-test",)",
      R"( "cluster": "csds"}})"));
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

std::unique_ptr<Channel> xds_channel(int control_plane_port) {
  xds::XdsClientOptions xds_options;
  xds_options.backoff.initial = 100ms;
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(control_plane_port), xds_options);
  EXPECT_TRUE(resolver.ok()) << resolver.status();
  ChannelOptions options;
  options.resolver = *resolver;
  return std::make_unique<Channel>("xds:///svc", options);
}

absl::Status echo(Channel& channel) {
  testing::EchoRequest request;
  request.set_payload("hi");
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(true);
  return channel.call_blocking(testing::echo_methods::kEcho, ctx, request, response);
}

// A server with CSDS (and reflection, for grpcurl).
class CsdsServer {
 public:
  explicit CsdsServer(xds::CsdsServiceOptions options = {}) : csds_(options) {
    server_.add_service(csds_);
    reflection_.add_to(server_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
    channel_ = std::make_unique<Channel>(absl::StrCat("127.0.0.1:", port_));
  }
  ~CsdsServer() { server_.shutdown(100ms); }
  int port() const { return port_; }
  absl::Status fetch(status_v3::ClientStatusResponse& response, bool exclude_contents = false) {
    status_v3::ClientStatusRequest request;
    request.set_exclude_resource_contents(exclude_contents);
    ClientContext ctx;
    ctx.set_timeout(10s);
    return channel_->call_blocking(kFetch, ctx, request, response);
  }
  Channel& channel() { return *channel_; }

 private:
  xds::CsdsService csds_;
  ReflectionService reflection_;
  Server server_;
  int port_ = 0;
  std::unique_ptr<Channel> channel_;
};

// The entries of the one client whose node is ferry-csds-test, by "type_url name".
std::map<std::string, status_v3::ClientConfig::GenericXdsConfig> entries_of(
    const status_v3::ClientStatusResponse& response) {
  std::map<std::string, status_v3::ClientConfig::GenericXdsConfig> out;
  for (const auto& config : response.config()) {
    if (config.node().id() != "ferry-csds-test") continue;
    for (const auto& e : config.generic_xds_configs()) out[e.type_url() + " " + e.name()] = e;
  }
  return out;
}

TEST(XdsCsds, FetchClientStatusShowsTheChainAckedThenANackedClusterWithItsError) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed";
  ControlPlane cp;
  ASSERT_GT(cp.port(), 0);
  EchoBackend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot(a)), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  for (const char* type : {"lds", "rds", "cds", "eds"}) {
    ASSERT_EQ(cp.await(absl::StrCat("acked ", type), "1"), "1") << type;
  }
  CsdsServer csds;
  ASSERT_GT(csds.port(), 0);
  status_v3::ClientStatusResponse response;
  ASSERT_TRUE(csds.fetch(response).ok());
  const std::string listener_type = "type.googleapis.com/envoy.config.listener.v3.Listener";
  const std::string route_type = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
  const std::string cluster_type(kClusterType);
  const std::string endpoint_type =
      "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  auto entries = entries_of(response);
  ASSERT_EQ(entries.size(), 4u) << response.DebugString();
  for (const std::string& key : {listener_type + " svc", route_type + " route-svc",
                                 cluster_type + " c", endpoint_type + " c"}) {
    ASSERT_EQ(entries.count(key), 1u) << key;
    const auto& e = entries[key];
    EXPECT_EQ(e.version_info(), "1") << key;
    EXPECT_EQ(e.client_status(), envoy::admin::v3::ACKED) << key;
    EXPECT_FALSE(e.has_error_state()) << key;
    EXPECT_TRUE(e.has_last_updated()) << key;
    // The contents as the control plane sent them, of the entry's type.
    EXPECT_EQ(e.xds_config().type_url(), e.type_url()) << key;
  }
  envoy::config::listener::v3::Listener listener;
  ASSERT_TRUE(entries[listener_type + " svc"].xds_config().UnpackTo(&listener));
  EXPECT_EQ(listener.name(), "svc");
  for (const auto& config : response.config()) {
    if (config.node().id() == "ferry-csds-test") {
      EXPECT_EQ(config.node().cluster(), "csds");
    }
  }
  // exclude_resource_contents: the statuses without the resources.
  ASSERT_TRUE(csds.fetch(response, /*exclude_contents=*/true).ok());
  entries = entries_of(response);
  ASSERT_EQ(entries.size(), 4u);
  for (const auto& [key, e] : entries) EXPECT_FALSE(e.has_xds_config()) << key;

  // Version 2's cluster is STATIC: NACKed, the last good version stays and CSDS says why.
  ASSERT_EQ(cp.command("snapshot 2 " + snapshot(a, R"(, "type": "STATIC")")), "ok");
  ASSERT_EQ(cp.await("nacks", "1"), "1");
  ASSERT_TRUE(csds.fetch(response).ok());
  entries = entries_of(response);
  const auto& cluster = entries[cluster_type + " c"];
  EXPECT_EQ(cluster.client_status(), envoy::admin::v3::NACKED) << cluster.DebugString();
  EXPECT_EQ(cluster.version_info(), "1");
  EXPECT_EQ(cluster.error_state().version_info(), "2");
  EXPECT_NE(cluster.error_state().details().find("is not EDS"), std::string::npos)
      << cluster.DebugString();
  EXPECT_TRUE(cluster.error_state().has_last_update_attempt());
  envoy::config::cluster::v3::Cluster kept;
  ASSERT_TRUE(cluster.xds_config().UnpackTo(&kept));
  EXPECT_EQ(kept.type(), envoy::config::cluster::v3::Cluster::EDS);  // the good version, 1
  EXPECT_EQ(entries[listener_type + " svc"].client_status(), envoy::admin::v3::ACKED);
  ASSERT_TRUE(echo(*channel).ok());

  // StreamClientStatus answers each request on the stream.
  ClientContext ctx;
  ctx.set_timeout(10s);
  BlockingClientStream stream = csds.channel().open_blocking(kStream, ctx);
  status_v3::ClientStatusRequest request;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(stream.write(request).ok());
    status_v3::ClientStatusResponse streamed;
    ASSERT_TRUE(stream.read(streamed)) << i;
    EXPECT_EQ(entries_of(streamed).size(), 4u) << i;
  }
  stream.writes_done();
  EXPECT_TRUE(stream.finish().ok());
}

TEST(XdsCsds, TheResponseStaysWithinItsLimit) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed";
  ControlPlane cp;
  EchoBackend a;
  ASSERT_EQ(cp.command("snapshot 1 " + snapshot(a)), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  ASSERT_EQ(cp.await("acked eds", "1"), "1");
  status_v3::ClientStatusResponse full;
  {
    CsdsServer csds;
    ASSERT_TRUE(csds.fetch(full).ok());
  }
  ASSERT_EQ(entries_of(full).size(), 4u);
  // Room for the statuses but not every resource: each entry is there, some without contents,
  // and the response within the limit.
  status_v3::ClientStatusResponse bare;
  {
    CsdsServer csds;
    ASSERT_TRUE(csds.fetch(bare, /*exclude_contents=*/true).ok());
  }
  const std::size_t limit = (bare.ByteSizeLong() + full.ByteSizeLong()) / 2;
  {
    CsdsServer csds({.max_response_bytes = limit});
    status_v3::ClientStatusResponse response;
    absl::Status status = csds.fetch(response);
    ASSERT_TRUE(status.ok()) << status << " " << limit << " " << bare.ByteSizeLong();
    EXPECT_LE(response.ByteSizeLong(), limit);
    auto entries = entries_of(response);
    EXPECT_EQ(entries.size(), 4u);
    int with_contents = 0;
    for (const auto& [key, e] : entries) with_contents += e.has_xds_config() ? 1 : 0;
    EXPECT_LT(with_contents, 4);
  }
  // No room for the statuses themselves: RESOURCE_EXHAUSTED, not a response over the limit.
  {
    CsdsServer csds({.max_response_bytes = bare.ByteSizeLong() / 2});
    status_v3::ClientStatusResponse response;
    absl::Status status = csds.fetch(response);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  }
}

// grpcurl (a real CSDS client, through ferry's reflection service) sees the same.
TEST(XdsCsds, GrpcurlFetchesTheClientStatusThroughReflection) {
  if (peer_missing()) GTEST_SKIP() << "xds_control_plane_go not installed";
  const std::string grpcurl = std::string(FERRY_PEERS_DIR) + "/bin/grpcurl";
  if (access(grpcurl.c_str(), X_OK) != 0) GTEST_SKIP() << "grpcurl not installed";
  ControlPlane cp;
  EchoBackend a;
  ASSERT_EQ(cp.command("snapshot 5 " + snapshot(a)), "ok");
  auto channel = xds_channel(cp.port());
  ASSERT_TRUE(echo(*channel).ok());
  ASSERT_EQ(cp.await("acked eds", "5"), "5");
  CsdsServer csds;
  // exclude_resource_contents: the resources' own types are not the service's imports, so
  // reflection cannot describe them to grpcurl's JSON printer.
  const std::string command = absl::StrCat(
      grpcurl,
      " -plaintext -max-time 10 -d '{\"exclude_resource_contents\": true}' 127.0.0.1:", csds.port(),
      " envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  EXPECT_EQ(pclose(pipe), 0) << output;
  EXPECT_NE(output.find("\"ferry-csds-test\""), std::string::npos) << output;
  for (const char* type : {"envoy.config.listener.v3.Listener", "envoy.config.cluster.v3.Cluster",
                           "envoy.config.route.v3.RouteConfiguration",
                           "envoy.config.endpoint.v3.ClusterLoadAssignment"}) {
    EXPECT_NE(output.find(type), std::string::npos) << type << "\n" << output;
  }
  // grpcurl prints the .proto's field names.
  EXPECT_NE(output.find("\"client_status\": \"ACKED\""), std::string::npos) << output;
  EXPECT_NE(output.find("\"version_info\": \"5\""), std::string::npos) << output;
}

}  // namespace
}  // namespace ferry::xds_csds_test

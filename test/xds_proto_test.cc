// ferry::xds_proto, the vendored Envoy API closure (third_party/envoy-api): the resources gRPC's
// xDS client reads are all there, generated with optimize_for = CODE_SIZE (the vendoring
// rewrite), and still Envoy's wire format: a Listener carrying an HttpConnectionManager in an
// Any, a Cluster and a ClusterLoadAssignment round-trip through bytes, and an unknown field (a
// newer control plane's) is kept, not an error.
#include <gtest/gtest.h>

#include <string>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/ads.ferry.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace ferry::xds_proto_test {
namespace {

namespace listener = envoy::config::listener::v3;
namespace hcm = envoy::extensions::filters::network::http_connection_manager::v3;
namespace cluster = envoy::config::cluster::v3;
namespace endpoint = envoy::config::endpoint::v3;

TEST(XdsProto, ResourceTypesAreGeneratedForCodeSize) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* name :
       {"envoy.config.listener.v3.Listener", "envoy.config.route.v3.RouteConfiguration",
        "envoy.config.cluster.v3.Cluster", "envoy.config.endpoint.v3.ClusterLoadAssignment",
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "envoy.service.discovery.v3.DiscoveryRequest", "google.rpc.Status"}) {
    const auto* message = pool->FindMessageTypeByName(name);
    ASSERT_NE(message, nullptr) << name;
    if (std::string(name) != "google.rpc.Status") {  // ferry::rich_status's, not vendored
      EXPECT_EQ(message->file()->options().optimize_for(), google::protobuf::FileOptions::CODE_SIZE)
          << name;
    }
  }
}

TEST(XdsProto, ListenerWithHttpConnectionManagerRoundTrips) {
  hcm::HttpConnectionManager manager;
  manager.mutable_rds()->set_route_config_name("route-a");
  manager.mutable_rds()->mutable_config_source()->mutable_ads();
  manager.add_http_filters()->set_name("envoy.filters.http.router");
  listener::Listener in;
  in.set_name("server.example.com");
  in.mutable_api_listener()->mutable_api_listener()->PackFrom(manager);

  listener::Listener out;
  ASSERT_TRUE(out.ParseFromString(in.SerializeAsString()));
  EXPECT_EQ(out.name(), "server.example.com");
  hcm::HttpConnectionManager unpacked;
  ASSERT_TRUE(out.api_listener().api_listener().UnpackTo(&unpacked));
  EXPECT_EQ(unpacked.rds().route_config_name(), "route-a");
  EXPECT_TRUE(unpacked.rds().config_source().has_ads());
  EXPECT_EQ(out.api_listener().api_listener().type_url(),
            "type.googleapis.com/"
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
}

TEST(XdsProto, ClusterAndAssignmentRoundTripAndKeepUnknownFields) {
  cluster::Cluster in;
  in.set_name("cluster-a");
  in.set_type(cluster::Cluster::EDS);
  in.mutable_eds_cluster_config()->set_service_name("eds-a");
  in.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  std::string bytes = in.SerializeAsString();
  // Field 9999, varint 7: no Cluster field has that number.
  bytes += std::string("\xf8\xf0\x04\x07", 4);
  cluster::Cluster out;
  ASSERT_TRUE(out.ParseFromString(bytes));
  EXPECT_EQ(out.eds_cluster_config().service_name(), "eds-a");
  EXPECT_EQ(out.type(), cluster::Cluster::EDS);
  EXPECT_EQ(out.SerializeAsString(), bytes);  // the unknown field is carried through

  endpoint::ClusterLoadAssignment assignment;
  assignment.set_cluster_name("eds-a");
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(3);
  locality->set_priority(1);
  auto* address =
      locality->add_lb_endpoints()->mutable_endpoint()->mutable_address()->mutable_socket_address();
  address->set_address("127.0.0.1");
  address->set_port_value(50051);
  endpoint::ClusterLoadAssignment parsed;
  ASSERT_TRUE(parsed.ParseFromString(assignment.SerializeAsString()));
  ASSERT_EQ(parsed.endpoints_size(), 1);
  EXPECT_EQ(parsed.endpoints(0).priority(), 1u);
  EXPECT_EQ(parsed.endpoints(0).load_balancing_weight().value(), 3u);
  EXPECT_EQ(parsed.endpoints(0).lb_endpoints(0).endpoint().address().socket_address().port_value(),
            50051u);
}

// A NACK as the ADS client sends it: the node, the version and nonce, and google.rpc.Status
// (ferry::rich_status's message) as error_detail.
TEST(XdsProto, DiscoveryRequestCarriesNackDetail) {
  envoy::service::discovery::v3::DiscoveryRequest in;
  in.mutable_node()->set_id("node-1");
  in.mutable_node()->mutable_locality()->set_zone("z1");
  in.set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  in.set_version_info("3");
  in.set_response_nonce("n4");
  in.add_resource_names("cluster-a");
  in.mutable_error_detail()->set_code(3);
  in.mutable_error_detail()->set_message("cluster-a: unsupported type STATIC");
  envoy::service::discovery::v3::DiscoveryRequest out;
  ASSERT_TRUE(out.ParseFromString(in.SerializeAsString()));
  EXPECT_EQ(out.node().locality().zone(), "z1");
  EXPECT_EQ(out.response_nonce(), "n4");
  EXPECT_EQ(out.error_detail().message(), "cluster-a: unsupported type STATIC");
}

TEST(XdsProto, TruncatedResourceIsRefused) {
  cluster::Cluster in;
  in.set_name("cluster-with-a-long-enough-name");
  const std::string bytes = in.SerializeAsString();
  cluster::Cluster out;
  EXPECT_FALSE(out.ParseFromString(bytes.substr(0, bytes.size() - 3)));
}

}  // namespace
}  // namespace ferry::xds_proto_test

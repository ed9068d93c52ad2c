// ferry's ADS client against a scripted, hostile control plane: a ferry server whose
// AggregatedDiscoveryService answers each request as the test says (malformed resources and
// messages, unknown type URLs, huge and crowded responses, nonces out of order), and gRFC A27's
// validation rules one by one (src/xds/resources.h). The client must NACK or reconnect, keep its
// last good configuration, hold bounded memory and never crash.
#include "xds/xds_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/ads.ferry.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/slice_chain.h"
#include "ferry/xds.h"
#include "support/echo_service.h"
#include "xds/resources.h"

namespace ferry::xds_client_test {
namespace {

using namespace std::chrono_literals;
using envoy::service::discovery::v3::DiscoveryRequest;
using envoy::service::discovery::v3::DiscoveryResponse;
namespace xd = ::ferry::xds::detail;

constexpr std::string_view kLds = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr std::string_view kRds = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
constexpr std::string_view kCds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr std::string_view kEds =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

google::protobuf::Any pack(const google::protobuf::Message& m) {
  google::protobuf::Any any;
  any.PackFrom(m);
  return any;
}

envoy::config::listener::v3::Listener listener(const std::string& name, const std::string& rds) {
  envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager hcm;
  hcm.mutable_rds()->set_route_config_name(rds);
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  envoy::config::listener::v3::Listener l;
  l.set_name(name);
  l.mutable_api_listener()->mutable_api_listener()->PackFrom(hcm);
  return l;
}

envoy::config::route::v3::RouteConfiguration route_config(const std::string& name,
                                                          const std::string& cluster) {
  envoy::config::route::v3::RouteConfiguration rc;
  rc.set_name(name);
  auto* vh = rc.add_virtual_hosts();
  vh->add_domains("*");
  auto* route = vh->add_routes();
  route->mutable_match()->set_prefix("");
  route->mutable_route()->set_cluster(cluster);
  return rc;
}

envoy::config::cluster::v3::Cluster eds_cluster(const std::string& name) {
  envoy::config::cluster::v3::Cluster c;
  c.set_name(name);
  c.set_type(envoy::config::cluster::v3::Cluster::EDS);
  c.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  return c;
}

envoy::config::endpoint::v3::ClusterLoadAssignment endpoints(const std::string& name, int port,
                                                             std::uint32_t priority = 0) {
  envoy::config::endpoint::v3::ClusterLoadAssignment cla;
  cla.set_cluster_name(name);
  auto* locality = cla.add_endpoints();
  locality->set_priority(priority);
  locality->mutable_load_balancing_weight()->set_value(1);
  auto* address = locality->add_lb_endpoints()->mutable_endpoint()->mutable_address();
  address->mutable_socket_address()->set_address("127.0.0.1");
  address->mutable_socket_address()->set_port_value(port);
  return cla;
}

DiscoveryResponse response(std::string_view type, const std::string& version,
                           const std::string& nonce,
                           const std::vector<google::protobuf::Any>& resources) {
  DiscoveryResponse r;
  r.set_type_url(std::string(type));
  r.set_version_info(version);
  r.set_nonce(nonce);
  for (const auto& any : resources) *r.add_resources() = any;
  return r;
}

// The scripted control plane. script(request, stream_number) returns what to send after each
// request: responses, or raw bytes (a message that is not a DiscoveryResponse).
struct Reply {
  std::vector<DiscoveryResponse> responses;
  std::string raw;  // non-empty: sent as one message's bytes, instead
};

class FakeControlPlane final
    : public envoy::service::discovery::v3::AggregatedDiscoveryService::Service {
 public:
  using Script = std::function<Reply(const DiscoveryRequest&, int stream)>;
  explicit FakeControlPlane(Script script) : script_(std::move(script)) {
    server_.add_service(*this);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~FakeControlPlane() override { server_.shutdown(100ms); }

  asio::awaitable<absl::Status> StreamAggregatedResources(
      ServerContext&, ServerReaderWriter<DiscoveryRequest, DiscoveryResponse>& stream) override {
    int number;
    {
      std::lock_guard lock(mutex_);
      number = ++streams_;
    }
    DiscoveryRequest request;
    while (true) {
      const bool got = co_await stream.read(request);
      if (!got) break;
      Reply reply;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
        reply = script_(request, number);
      }
      if (!reply.raw.empty()) {
        SliceChain raw;
        raw.append_copy(reply.raw.data(), reply.raw.size());
        absl::Status written = co_await stream.write_raw(raw);
        if (!written.ok()) break;
        continue;
      }
      for (const auto& r : reply.responses) {
        absl::Status written = co_await stream.write(r);
        if (!written.ok()) co_return written;
      }
    }
    co_return absl::OkStatus();
  }

  int port() const { return port_; }
  int streams() {
    std::lock_guard lock(mutex_);
    return streams_;
  }
  std::vector<DiscoveryRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // Waits until pred holds for the requests so far (or 10 s pass).
  bool await(const std::function<bool(const std::vector<DiscoveryRequest>&)>& pred) {
    for (int i = 0; i < 500; ++i) {
      if (pred(requests())) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

 private:
  Script script_;
  Server server_;
  int port_ = 0;
  std::mutex mutex_;
  int streams_ = 0;
  std::vector<DiscoveryRequest> requests_;
};

// The good chain svc -> route -> c -> endpoints at port, for every request of a type.
Reply good_chain(const DiscoveryRequest& request, int port, const std::string& version = "1") {
  if (request.type_url() == kLds) {
    return {{response(kLds, version, "l" + version, {pack(listener("svc", "route"))})}, {}};
  }
  if (request.type_url() == kRds) {
    return {{response(kRds, version, "r" + version, {pack(route_config("route", "c"))})}, {}};
  }
  if (request.type_url() == kCds) {
    return {{response(kCds, version, "c" + version, {pack(eds_cluster("c"))})}, {}};
  }
  return {{response(kEds, version, "e" + version, {pack(endpoints("c", port))})}, {}};
}

// Answers a type's first request only (later ones are ACKs or NACKs).
bool first_of_its_type(const DiscoveryRequest& request) { return request.response_nonce().empty(); }

xds::Bootstrap bootstrap_for(int port) {
  absl::StatusOr<xds::Bootstrap> b = xds::parse_bootstrap(absl::StrCat(
      R"({"xds_servers": [{"server_uri": "127.0.0.1:)", port,
      R"(", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "hostile-test"}})"));
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

xds::XdsClientOptions fast_options() {
  xds::XdsClientOptions options;
  options.resource_does_not_exist_timeout = 1s;
  options.backoff.initial = 50ms;
  options.backoff.max = 200ms;
  return options;
}

class Backend {
 public:
  Backend() {
    server_.add_service(service_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~Backend() { server_.shutdown(100ms); }
  int port() const { return port_; }

 private:
  testing::EchoService service_;
  Server server_;
  int port_ = 0;
};

// wait_for_ready: the call waits out a failed stream (without it, a channel whose control plane
// failed before any configuration came fails fast, as gRFC A57 says).
absl::Status echo_through(int control_plane_port, std::chrono::milliseconds timeout = 5s,
                          bool wait_for_ready = false) {
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(control_plane_port), fast_options());
  if (!resolver.ok()) return resolver.status();
  ChannelOptions options;
  options.resolver = *resolver;
  Channel channel("xds:///svc", options);
  testing::Echo::BlockingStub stub(channel);
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(timeout);
  ctx.set_wait_for_ready(wait_for_ready);
  return stub.Echo(ctx, request, response);
}

const DiscoveryRequest* find_nack(const std::vector<DiscoveryRequest>& requests,
                                  std::string_view type) {
  for (const auto& r : requests) {
    if (r.type_url() == type && r.has_error_detail()) return &r;
  }
  return nullptr;
}

TEST(XdsHostileControlPlane, AMalformedResourceIsNackedWithTheNonceAndNoVersion) {
  Backend backend;
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (request.type_url() == kLds && first_of_its_type(request)) {
      google::protobuf::Any garbage;
      garbage.set_type_url(std::string(kLds));
      garbage.set_value("\xff\xff\xff\xff not a listener");
      return {{response(kLds, "1", "n1", {garbage})}, {}};
    }
    return {};
  });
  EXPECT_EQ(echo_through(cp.port(), 3s).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(cp.await([](const auto& rs) { return find_nack(rs, kLds) != nullptr; }));
  const DiscoveryRequest nack = *find_nack(cp.requests(), kLds);
  EXPECT_EQ(nack.version_info(), "");  // nothing accepted yet
  EXPECT_EQ(nack.response_nonce(), "n1");
  EXPECT_NE(nack.error_detail().message().find("does not parse"), std::string::npos)
      << nack.error_detail().message();
  // The first request carried the node; its id is the bootstrap's.
  EXPECT_EQ(cp.requests().front().node().id(), "hostile-test");
}

TEST(XdsHostileControlPlane, AMessageThatIsNotADiscoveryResponseEndsTheStreamAndItIsRetried) {
  Backend backend;
  FakeControlPlane cp([&](const DiscoveryRequest& request, int stream) -> Reply {
    if (stream == 1) return {{}, "\x0a\xff\xff\xff\xff\x0f garbage"};  // a length past the end
    if (!first_of_its_type(request)) return {};
    return good_chain(request, backend.port());
  });
  EXPECT_TRUE(echo_through(cp.port(), 5s, /*wait_for_ready=*/true).ok());
  EXPECT_GE(cp.streams(), 2);
}

TEST(XdsHostileControlPlane, UnknownTypeUrlsAreIgnoredAndOutOfOrderNoncesEchoedAsTheyCame) {
  Backend backend;
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (!first_of_its_type(request)) return {};
    Reply reply;
    if (request.type_url() == kLds) {
      // A type nobody asked for first, then the listener twice with nonces that go backwards.
      reply.responses.push_back(response("type.googleapis.com/unknown.Thing", "9", "zzz", {}));
      reply.responses.push_back(response(kLds, "1", "b", {pack(listener("svc", "route"))}));
      reply.responses.push_back(response(kLds, "2", "a", {pack(listener("svc", "route"))}));
      return reply;
    }
    return good_chain(request, backend.port());
  });
  EXPECT_TRUE(echo_through(cp.port()).ok());
  ASSERT_TRUE(cp.await([](const auto& rs) {
    for (const auto& r : rs) {
      if (r.type_url() == kLds && r.response_nonce() == "a") return true;
    }
    return false;
  }));
  bool acked_b = false;
  for (const auto& r : cp.requests()) {
    EXPECT_NE(r.type_url(), "type.googleapis.com/unknown.Thing");  // never answered
    EXPECT_FALSE(r.has_error_detail()) << r.error_detail().message();
    if (r.type_url() == kLds && r.response_nonce() == "b") acked_b = r.version_info() == "1";
    if (r.type_url() == kLds && r.response_nonce() == "a") EXPECT_EQ(r.version_info(), "2");
  }
  EXPECT_TRUE(acked_b);
}

TEST(XdsHostileControlPlane, AHugeResponseFailsTheStreamBeforeItIsBufferedAndItIsRetried) {
  Backend backend;
  FakeControlPlane cp([&](const DiscoveryRequest& request, int stream) -> Reply {
    if (!first_of_its_type(request)) return {};
    if (stream == 1 && request.type_url() == kLds) {
      auto l = listener("svc", "route");
      l.mutable_stat_prefix()->assign(9 << 20, 'x');  // over the client's 8 MiB limit
      return {{response(kLds, "1", "huge", {pack(l)})}, {}};
    }
    return good_chain(request, backend.port());
  });
  EXPECT_TRUE(echo_through(cp.port(), 5s, /*wait_for_ready=*/true).ok());
  EXPECT_GE(cp.streams(), 2);
}

TEST(XdsHostileControlPlane, TooManyResourcesInOneResponseAreNackedUnread) {
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (request.type_url() != kLds || !first_of_its_type(request)) return {};
    std::vector<google::protobuf::Any> many(xd::kMaxResourcesPerResponse + 1,
                                            pack(listener("other", "route")));
    return {{response(kLds, "1", "n", many)}, {}};
  });
  EXPECT_FALSE(echo_through(cp.port(), 2s).ok());
  ASSERT_TRUE(cp.await([](const auto& rs) { return find_nack(rs, kLds) != nullptr; }));
  EXPECT_NE(
      find_nack(cp.requests(), kLds)->error_detail().message().find("resources in one response"),
      std::string::npos);
}

TEST(XdsHostileControlPlane, ANackNamesEveryBadResourceWithinItsBound) {
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (request.type_url() != kLds || !first_of_its_type(request)) return {};
    std::vector<google::protobuf::Any> bad;
    for (int i = 0; i < 2000; ++i) {
      envoy::config::listener::v3::Listener l;  // no api_listener
      l.set_name(absl::StrCat("bad-", i));
      bad.push_back(pack(l));
    }
    return {{response(kLds, "1", "n", bad)}, {}};
  });
  EXPECT_FALSE(echo_through(cp.port(), 2s).ok());
  ASSERT_TRUE(cp.await([](const auto& rs) { return find_nack(rs, kLds) != nullptr; }));
  const std::string message = find_nack(cp.requests(), kLds)->error_detail().message();
  EXPECT_LE(message.size(), xd::kMaxNackMessageBytes);
  EXPECT_NE(message.find("'bad-0': listener: no api_listener"), std::string::npos) << message;
}

// gRFC A27's rules, resource by resource.
xd::DecodedResource decode(xd::ResourceType type, const google::protobuf::Message& m) {
  return xd::decode_resource(type, pack(m));
}

TEST(XdsResourceValidation, ListenersNeedAnHttpConnectionManagerWithAdsRdsOrInlineRoutes) {
  EXPECT_TRUE(decode(xd::ResourceType::kListener, listener("l", "r")).value.ok());
  envoy::config::listener::v3::Listener bare;
  bare.set_name("l");
  EXPECT_FALSE(decode(xd::ResourceType::kListener, bare).value.ok());
  envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager hcm;
  hcm.mutable_rds()->set_route_config_name("r");
  hcm.mutable_rds()->mutable_config_source()->set_path("/etc/routes");  // not ads or self
  auto l = listener("l", "r");
  l.mutable_api_listener()->mutable_api_listener()->PackFrom(hcm);
  auto decoded = decode(xd::ResourceType::kListener, l);
  ASSERT_FALSE(decoded.value.ok());
  EXPECT_NE(decoded.value.status().message().find("neither ads nor self"), std::string::npos);
  // The wrong message in the Any: named, NACKed.
  EXPECT_FALSE(decode(xd::ResourceType::kListener, eds_cluster("c")).value.ok());
}

TEST(XdsResourceValidation, RoutesClustersAndEndpoints) {
  auto rc = route_config("r", "");
  EXPECT_FALSE(decode(xd::ResourceType::kRouteConfig, rc).value.ok());  // an empty cluster
  rc = route_config("r", "c");
  rc.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_route()
      ->mutable_weighted_clusters()
      ->add_clusters()
      ->set_name("a");
  EXPECT_FALSE(decode(xd::ResourceType::kRouteConfig, rc).value.ok());  // weights sum to 0
  auto c = eds_cluster("c");
  EXPECT_TRUE(decode(xd::ResourceType::kCluster, c).value.ok());
  c.set_lb_policy(envoy::config::cluster::v3::Cluster::MAGLEV);
  EXPECT_FALSE(decode(xd::ResourceType::kCluster, c).value.ok());
  c = eds_cluster("c");
  c.set_type(envoy::config::cluster::v3::Cluster::STATIC);
  EXPECT_FALSE(decode(xd::ResourceType::kCluster, c).value.ok());
  EXPECT_TRUE(decode(xd::ResourceType::kEndpoints, endpoints("c", 80)).value.ok());
  EXPECT_FALSE(decode(xd::ResourceType::kEndpoints, endpoints("c", 80, /*priority=*/1)).value.ok());
  auto cla = endpoints("c", 80);
  cla.mutable_endpoints(0)
      ->mutable_lb_endpoints(0)
      ->mutable_endpoint()
      ->mutable_address()
      ->mutable_socket_address()
      ->set_address("not-an-ip");
  EXPECT_FALSE(decode(xd::ResourceType::kEndpoints, cla).value.ok());
  // Priority 1 is used only while priority 0 has no endpoint.
  cla = endpoints("c", 80);
  *cla.add_endpoints() = endpoints("c", 81, 1).endpoints(0);
  auto both = decode(xd::ResourceType::kEndpoints, cla);
  ASSERT_TRUE(both.value.ok());
  auto addresses = xd::addresses_to_use(std::get<xd::EndpointsResource>(*both.value));
  ASSERT_EQ(addresses.size(), 1u);
  EXPECT_EQ(addresses[0].tcp.port(), 80);
  cla.mutable_endpoints(0)->mutable_lb_endpoints(0)->set_health_status(
      envoy::config::core::v3::UNHEALTHY);
  both = decode(xd::ResourceType::kEndpoints, cla);
  addresses = xd::addresses_to_use(std::get<xd::EndpointsResource>(*both.value));
  ASSERT_EQ(addresses.size(), 1u);
  EXPECT_EQ(addresses[0].tcp.port(), 81);
}

TEST(XdsResourceValidation, VirtualHostsAreChosenByTheMostSpecificDomain) {
  xd::RouteConfig config;
  for (const char* d : {"*", "*.example.com", "svc.*", "svc.example.com"}) {
    xd::VirtualHost vh;
    vh.domains = {d};
    config.virtual_hosts.push_back(vh);
  }
  EXPECT_EQ(xd::find_virtual_host(config, "svc.example.com")->domains[0], "svc.example.com");
  EXPECT_EQ(xd::find_virtual_host(config, "a.example.com")->domains[0], "*.example.com");
  EXPECT_EQ(xd::find_virtual_host(config, "svc.other")->domains[0], "svc.*");
  EXPECT_EQ(xd::find_virtual_host(config, "other")->domains[0], "*");
  config.virtual_hosts.erase(config.virtual_hosts.begin());
  EXPECT_EQ(xd::find_virtual_host(config, "other"), nullptr);
}

}  // namespace
}  // namespace ferry::xds_client_test

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
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "asio/use_future.hpp"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/ads.ferry.h"
#include "ferry/blocking_stream.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/slice_chain.h"
#include "ferry/xds.h"
#include "support/attempt_echo.h"
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
  Backend() : service_(&probe_) {
    server_.add_service(service_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~Backend() { server_.shutdown(100ms); }
  int port() const { return port_; }
  int calls() const { return probe_.started.load(); }

 private:
  testing::EchoProbe probe_;
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
  // addresses_to_use: the lowest priority's that has any (none: no healthy endpoint).
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

// gRFC A27's endpoints as a hostile control plane may send them: priorities with gaps, a
// priority's weights past 2^32-1, and ferry's bounds (xds/resources.h: 10,000 localities,
// 10,000 endpoints, 1,000 priorities per ClusterLoadAssignment), each NACKed naming why; the
// bounds themselves are accepted.
TEST(XdsResourceValidation, EndpointsPastTheBoundsAreNacked) {
  auto nacked = [](const envoy::config::endpoint::v3::ClusterLoadAssignment& cla) -> std::string {
    xd::DecodedResource decoded = decode(xd::ResourceType::kEndpoints, cla);
    return decoded.value.ok() ? "" : std::string(decoded.value.status().message());
  };
  auto locality = [](envoy::config::endpoint::v3::ClusterLoadAssignment& cla,
                     std::uint32_t priority, std::uint32_t weight, int endpoints) {
    auto* l = cla.add_endpoints();
    l->set_priority(priority);
    l->mutable_load_balancing_weight()->set_value(weight);
    for (int e = 0; e < endpoints; ++e) {
      auto* address = l->add_lb_endpoints()->mutable_endpoint()->mutable_address();
      address->mutable_socket_address()->set_address("127.0.0.1");
      address->mutable_socket_address()->set_port_value(1000 + e % 60000);
    }
  };
  // Priorities 0 and 2: a gap.
  envoy::config::endpoint::v3::ClusterLoadAssignment gap;
  locality(gap, 0, 1, 1);
  locality(gap, 2, 1, 1);
  locality(gap, 2, 1, 1);
  EXPECT_NE(nacked(gap).find("not contiguous"), std::string::npos) << nacked(gap);
  // One priority's weights summing to 2^32: NACKed; to 2^32-1, or 2^32 over two priorities: not.
  envoy::config::endpoint::v3::ClusterLoadAssignment heavy;
  locality(heavy, 0, 4294967295u, 1);
  EXPECT_EQ(nacked(heavy), "");
  locality(heavy, 1, 1, 1);
  EXPECT_EQ(nacked(heavy), "");
  locality(heavy, 0, 1, 1);
  EXPECT_NE(nacked(heavy).find("sum to over 2^32-1"), std::string::npos) << nacked(heavy);
  // 10,000 localities of one endpoint each: taken; one more: NACKed.
  envoy::config::endpoint::v3::ClusterLoadAssignment wide;
  for (int i = 0; i < 10000; ++i) locality(wide, 0, 1, 1);
  xd::DecodedResource decoded = decode(xd::ResourceType::kEndpoints, wide);
  ASSERT_TRUE(decoded.value.ok()) << decoded.value.status();
  EXPECT_EQ(std::get<xd::EndpointsResource>(*decoded.value).priorities.at(0).size(), 10000u);
  locality(wide, 0, 1, 0);
  EXPECT_NE(nacked(wide).find("10001 localities, over 10000"), std::string::npos) << nacked(wide);
  // 10,001 endpoints in two localities (unhealthy ones count: they are read).
  envoy::config::endpoint::v3::ClusterLoadAssignment crowded;
  locality(crowded, 0, 1, 5000);
  locality(crowded, 0, 1, 5000);
  EXPECT_EQ(nacked(crowded), "");
  crowded.mutable_endpoints(1)->add_lb_endpoints()->set_health_status(
      envoy::config::core::v3::UNHEALTHY);
  EXPECT_NE(nacked(crowded).find("10001 endpoints, over 10000"), std::string::npos)
      << nacked(crowded);
  // 1,000 priorities: taken; priority 1000: NACKed.
  envoy::config::endpoint::v3::ClusterLoadAssignment deep;
  for (std::uint32_t p = 0; p < 1000; ++p) locality(deep, p, 1, 1);
  EXPECT_EQ(nacked(deep), "");
  locality(deep, 1000, 1, 1);
  EXPECT_NE(nacked(deep).find("over 1000 priorities"), std::string::npos) << nacked(deep);
}

// gRFC A28: route matching, one matcher kind at a time, on the decoded (validated) routes.
envoy::config::route::v3::RouteConfiguration one_route(
    const std::function<void(envoy::config::route::v3::Route&)>& edit) {
  auto rc = route_config("r", "c");
  edit(*rc.mutable_virtual_hosts(0)->mutable_routes(0));
  return rc;
}

absl::StatusOr<xd::VirtualHost> decoded_host(
    const envoy::config::route::v3::RouteConfiguration& rc) {
  xd::DecodedResource decoded = decode(xd::ResourceType::kRouteConfig, rc);
  if (!decoded.value.ok()) return decoded.value.status();
  return std::get<xd::RouteConfig>(*decoded.value).virtual_hosts.at(0);
}

// Whether a call of path with metadata matches the one route of rc.
bool matches(const envoy::config::route::v3::RouteConfiguration& rc, std::string_view path,
             const Metadata& metadata = {}) {
  absl::StatusOr<xd::VirtualHost> host = decoded_host(rc);
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return false;
  xd::RouteRandom random{1};
  return xd::match_route(*host, path, metadata, random) == 0;
}

Metadata with(std::initializer_list<std::pair<std::string_view, std::string_view>> entries) {
  Metadata m;
  for (const auto& [k, v] : entries) m.add(k, v);
  return m;
}

TEST(XdsRouteMatching, PathPrefixPathAndCaseSensitivity) {
  auto prefix = one_route([](auto& r) { r.mutable_match()->set_prefix("/svc.A/"); });
  EXPECT_TRUE(matches(prefix, "/svc.A/Get"));
  EXPECT_FALSE(matches(prefix, "/svc.B/Get"));
  EXPECT_FALSE(matches(prefix, "/SVC.a/Get"));  // case-sensitive by default
  auto blind = prefix;
  blind.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_case_sensitive()
      ->set_value(false);
  EXPECT_TRUE(matches(blind, "/SVC.a/Get"));
  auto path = one_route([](auto& r) { r.mutable_match()->set_path("/svc.A/Get"); });
  EXPECT_TRUE(matches(path, "/svc.A/Get"));
  EXPECT_FALSE(matches(path, "/svc.A/GetMore"));
  EXPECT_FALSE(matches(path, "/svc.a/get"));
  path.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_case_sensitive()
      ->set_value(false);
  EXPECT_TRUE(matches(path, "/svc.a/get"));
  // The first route that matches wins, even when a later one is more specific.
  auto rc = route_config("r", "first");
  auto* second = rc.mutable_virtual_hosts(0)->add_routes();
  second->mutable_match()->set_path("/svc.A/Get");
  second->mutable_route()->set_cluster("second");
  absl::StatusOr<xd::VirtualHost> host = decoded_host(rc);
  ASSERT_TRUE(host.ok());
  xd::RouteRandom random{1};
  EXPECT_EQ(xd::match_route(*host, "/svc.A/Get", {}, random), 0);
  // No route matches: -1 (the channel fails the call with UNAVAILABLE).
  EXPECT_EQ(xd::match_route(*decoded_host(path), "/other/Get", {}, random), -1);
}

TEST(XdsRouteMatching, HeaderMatchersOfEveryKind) {
  using HM = envoy::config::route::v3::HeaderMatcher;
  auto with_header = [](const std::function<void(HM&)>& edit) {
    return one_route([&](auto& r) {
      HM* h = r.mutable_match()->add_headers();
      h->set_name("x-user");
      edit(*h);
    });
  };
  auto exact = with_header([](HM& h) { h.set_exact_match("alice"); });
  EXPECT_TRUE(matches(exact, "/s/m", with({{"x-user", "alice"}})));
  EXPECT_FALSE(matches(exact, "/s/m", with({{"x-user", "Alice"}})));
  EXPECT_FALSE(matches(exact, "/s/m"));  // absent
  // A header sent twice is matched as its values joined with ",".
  EXPECT_FALSE(matches(exact, "/s/m", with({{"x-user", "alice"}, {"x-user", "bob"}})));
  auto joined = with_header([](HM& h) { h.set_exact_match("alice,bob"); });
  EXPECT_TRUE(matches(joined, "/s/m", with({{"x-user", "alice"}, {"x-user", "bob"}})));
  auto prefix = with_header([](HM& h) { h.set_prefix_match("al"); });
  EXPECT_TRUE(matches(prefix, "/s/m", with({{"x-user", "alice"}})));
  EXPECT_FALSE(matches(prefix, "/s/m", with({{"x-user", "bob"}})));
  auto suffix = with_header([](HM& h) { h.set_suffix_match("ice"); });
  EXPECT_TRUE(matches(suffix, "/s/m", with({{"x-user", "alice"}})));
  EXPECT_FALSE(matches(suffix, "/s/m", with({{"x-user", "alicE"}})));
  auto contains = with_header([](HM& h) { h.set_contains_match("lic"); });
  EXPECT_TRUE(matches(contains, "/s/m", with({{"x-user", "alice"}})));
  EXPECT_FALSE(matches(contains, "/s/m", with({{"x-user", "bob"}})));
  auto present = with_header([](HM& h) { h.set_present_match(true); });
  EXPECT_TRUE(matches(present, "/s/m", with({{"x-user", ""}})));
  EXPECT_FALSE(matches(present, "/s/m", with({{"x-other", "1"}})));
  auto absent = with_header([](HM& h) { h.set_present_match(false); });
  EXPECT_TRUE(matches(absent, "/s/m"));
  EXPECT_FALSE(matches(absent, "/s/m", with({{"x-user", "a"}})));
  auto range = with_header([](HM& h) {
    h.mutable_range_match()->set_start(-5);
    h.mutable_range_match()->set_end(10);
  });
  EXPECT_TRUE(matches(range, "/s/m", with({{"x-user", "-5"}})));
  EXPECT_TRUE(matches(range, "/s/m", with({{"x-user", "9"}})));
  EXPECT_FALSE(matches(range, "/s/m", with({{"x-user", "10"}})));  // [start, end)
  EXPECT_FALSE(matches(range, "/s/m", with({{"x-user", "nine"}})));
  EXPECT_FALSE(matches(range, "/s/m", with({{"x-user", "99999999999999999999999"}})));
  // invert_match negates the matcher; an absent header matches no value matcher, inverted or
  // not (as in Envoy and grpc-go), but an inverted present_match.
  auto inverted = with_header([](HM& h) {
    h.set_exact_match("alice");
    h.set_invert_match(true);
  });
  EXPECT_FALSE(matches(inverted, "/s/m", with({{"x-user", "alice"}})));
  EXPECT_TRUE(matches(inverted, "/s/m", with({{"x-user", "bob"}})));
  EXPECT_FALSE(matches(inverted, "/s/m"));
  auto inverted_present = with_header([](HM& h) {
    h.set_present_match(true);
    h.set_invert_match(true);
  });
  EXPECT_TRUE(matches(inverted_present, "/s/m"));
  EXPECT_FALSE(matches(inverted_present, "/s/m", with({{"x-user", "a"}})));
  // string_match, with ignore_case.
  auto blind = with_header([](HM& h) {
    h.mutable_string_match()->set_prefix("ALI");
    h.mutable_string_match()->set_ignore_case(true);
  });
  EXPECT_TRUE(matches(blind, "/s/m", with({{"x-user", "alice"}})));
  auto blind_contains = with_header([](HM& h) {
    h.mutable_string_match()->set_contains("LIC");
    h.mutable_string_match()->set_ignore_case(true);
  });
  EXPECT_TRUE(matches(blind_contains, "/s/m", with({{"x-user", "aLiCe"}})));
  EXPECT_FALSE(matches(blind_contains, "/s/m", with({{"x-user", "alc"}})));
  // Header names are matched whatever their case in the matcher.
  auto upper = one_route([](auto& r) {
    auto* h = r.mutable_match()->add_headers();
    h->set_name("X-User");
    h->set_exact_match("alice");
  });
  EXPECT_TRUE(matches(upper, "/s/m", with({{"x-user", "alice"}})));
  // Several matchers: all must match.
  auto both = exact;
  auto* second = both.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_match()->add_headers();
  second->set_name("x-tier");
  second->set_exact_match("gold");
  EXPECT_TRUE(matches(both, "/s/m", with({{"x-user", "alice"}, {"x-tier", "gold"}})));
  EXPECT_FALSE(matches(both, "/s/m", with({{"x-user", "alice"}, {"x-tier", "lead"}})));
}

TEST(XdsRouteMatching, BinHeadersAreSkippedAndContentTypeIsApplicationGrpc) {
  using HM = envoy::config::route::v3::HeaderMatcher;
  auto bin = one_route([](auto& r) {
    HM* h = r.mutable_match()->add_headers();
    h->set_name("x-token-bin");
    h->set_present_match(true);
  });
  EXPECT_FALSE(matches(bin, "/s/m", with({{"x-token-bin", "AAEC"}})));  // as if absent
  bin.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_headers(0)
      ->set_present_match(false);
  EXPECT_TRUE(matches(bin, "/s/m", with({{"x-token-bin", "AAEC"}})));
  auto content_type = one_route([](auto& r) {
    HM* h = r.mutable_match()->add_headers();
    h->set_name("content-type");
    h->set_exact_match("application/grpc");
  });
  EXPECT_TRUE(matches(content_type, "/s/m"));
  content_type.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_headers(0)
      ->set_exact_match("application/json");
  EXPECT_FALSE(matches(content_type, "/s/m"));
}

TEST(XdsRouteMatching, RuntimeFractionAndWeightedClustersSplitByTheirShares) {
  // runtime_fraction's default_value: 25% of the calls consider the route.
  auto fraction = one_route([](auto& r) {
    auto* v = r.mutable_match()->mutable_runtime_fraction()->mutable_default_value();
    v->set_numerator(25);
    v->set_denominator(envoy::type::v3::FractionalPercent::HUNDRED);
  });
  absl::StatusOr<xd::VirtualHost> host = decoded_host(fraction);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->routes[0].fraction_per_million, 250000u);
  xd::RouteRandom random{42};
  int matched = 0;
  for (int i = 0; i < 1000; ++i) matched += xd::match_route(*host, "/s/m", {}, random) == 0;
  EXPECT_GE(matched, 200);
  EXPECT_LE(matched, 300);
  // 0 never, and a numerator over its denominator is 100%.
  fraction.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_runtime_fraction()
      ->mutable_default_value()
      ->set_numerator(0);
  EXPECT_FALSE(matches(fraction, "/s/m"));
  fraction.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_runtime_fraction()
      ->mutable_default_value()
      ->set_numerator(500);
  host = decoded_host(fraction);
  ASSERT_TRUE(host.ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(xd::match_route(*host, "/s/m", {}, random), 0);
  // weighted_clusters 70/20/10 (and a weight-0 cluster that takes nothing), 1000 picks.
  auto weighted = one_route([](auto& r) {
    auto* wc = r.mutable_route()->mutable_weighted_clusters();
    for (auto [name, weight] :
         {std::pair<const char*, int>{"a", 70}, {"b", 20}, {"zero", 0}, {"c", 10}}) {
      auto* c = wc->add_clusters();
      c->set_name(name);
      c->mutable_weight()->set_value(weight);
    }
  });
  host = decoded_host(weighted);
  ASSERT_TRUE(host.ok()) << host.status();
  const xd::Route& route = host->routes[0];
  ASSERT_EQ(route.weighted_clusters.size(), 3u);
  EXPECT_EQ(route.total_weight, 100u);
  std::map<std::string, int> picks;
  for (int i = 0; i < 1000; ++i)
    ++picks[route.weighted_clusters[xd::pick_weighted(route, random)].first];
  EXPECT_NEAR(picks["a"], 700, 50);
  EXPECT_NEAR(picks["b"], 200, 40);
  EXPECT_NEAR(picks["c"], 100, 30);
  EXPECT_EQ(picks.count("zero"), 0u);
}

TEST(XdsRouteMatching, BadMatchersAndWeightsAreNackedAndLimitsBoundTheWork) {
  auto nacked = [](const envoy::config::route::v3::RouteConfiguration& rc) -> std::string {
    xd::DecodedResource decoded = decode(xd::ResourceType::kRouteConfig, rc);
    return decoded.value.ok() ? "" : std::string(decoded.value.status().message());
  };
  // safe_regex: NACKed, path or header (ferry has no RE2, docs/xds.md).
  EXPECT_NE(nacked(one_route([](auto& r) {
              r.mutable_match()->mutable_safe_regex()->set_regex("^/s/.*$");
            })).find("regular expressions are not supported"),
            std::string::npos);
  EXPECT_NE(nacked(one_route([](auto& r) {
              auto* h = r.mutable_match()->add_headers();
              h->set_name("x");
              h->mutable_safe_regex_match()->set_regex("(a+)+$");
            })).find("safe_regex_match"),
            std::string::npos);
  EXPECT_NE(nacked(one_route([](auto& r) {
              auto* h = r.mutable_match()->add_headers();
              h->set_name("x");
              h->mutable_string_match()->mutable_safe_regex()->set_regex("a");
            })).find("string_match.safe_regex"),
            std::string::npos);
  // A range whose start is past its end, a header matcher without a name or a kind.
  EXPECT_NE(nacked(one_route([](auto& r) {
              auto* h = r.mutable_match()->add_headers();
              h->set_name("x");
              h->mutable_range_match()->set_start(5);
              h->mutable_range_match()->set_end(1);
            })).find("start 5 > end 1"),
            std::string::npos);
  EXPECT_NE(nacked(one_route([](auto& r) {
              r.mutable_match()->add_headers()->set_exact_match("a");
            })).find("no name"),
            std::string::npos);
  EXPECT_NE(nacked(one_route([](auto& r) {
              r.mutable_match()->add_headers()->set_name("x");
            })).find("no supported header_match_specifier"),
            std::string::npos);
  // Weights: summing to 0, or past 2^32-1.
  auto weights = [](std::vector<std::uint32_t> ws) {
    return one_route([&](auto& r) {
      auto* wc = r.mutable_route()->mutable_weighted_clusters();
      for (std::size_t i = 0; i < ws.size(); ++i) {
        auto* c = wc->add_clusters();
        c->set_name(absl::StrCat("c", i));
        c->mutable_weight()->set_value(ws[i]);
      }
    });
  };
  EXPECT_NE(nacked(weights({0, 0})).find("sum to 0"), std::string::npos);
  EXPECT_NE(nacked(weights({4000000000u, 400000000u})).find("over 2^32-1"), std::string::npos);
  EXPECT_EQ(nacked(weights({4000000000u, 294967295u})), "");  // exactly 2^32-1
  // The bounds: routes per virtual host, header matchers per route, clusters per route and
  // per virtual host (a hostile control plane's 10,000 routes are NACKed unread past them).
  auto many_routes = route_config("r", "c");
  for (std::size_t i = 1; i <= xd::kMaxRoutesPerVirtualHost; ++i) {
    *many_routes.mutable_virtual_hosts(0)->add_routes() = many_routes.virtual_hosts(0).routes(0);
  }
  EXPECT_NE(nacked(many_routes).find("routes, over"), std::string::npos);
  auto many_headers = one_route([](auto& r) {
    for (std::size_t i = 0; i <= xd::kMaxHeaderMatchersPerRoute; ++i) {
      auto* h = r.mutable_match()->add_headers();
      h->set_name("x");
      h->set_present_match(true);
    }
  });
  EXPECT_NE(nacked(many_headers).find("header matchers, over"), std::string::npos);
  auto spread_headers = route_config("r", "c");
  for (std::size_t i = 0; i < xd::kMaxHeaderMatchersPerVirtualHost / xd::kMaxHeaderMatchersPerRoute;
       ++i) {
    auto* route = spread_headers.mutable_virtual_hosts(0)->add_routes();
    route->mutable_match()->set_prefix("/");
    route->mutable_route()->set_cluster("c");
    for (std::size_t j = 0; j < xd::kMaxHeaderMatchersPerRoute; ++j) {
      auto* h = route->mutable_match()->add_headers();
      h->set_name("x");
      h->set_present_match(true);
    }
  }
  EXPECT_EQ(nacked(spread_headers), "");  // exactly at the bound
  auto* one_more =
      spread_headers.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_match()->add_headers();
  one_more->set_name("x");
  one_more->set_present_match(true);
  EXPECT_NE(nacked(spread_headers).find("header matchers in its routes"), std::string::npos);
  EXPECT_NE(nacked(weights(std::vector<std::uint32_t>(xd::kMaxWeightedClustersPerRoute + 1, 1)))
                .find("clusters, over"),
            std::string::npos);
  auto many_clusters = route_config("r", "c0");
  for (std::size_t i = 1; i <= xd::kMaxClustersPerVirtualHost; ++i) {
    auto* route = many_clusters.mutable_virtual_hosts(0)->add_routes();
    route->mutable_match()->set_prefix(absl::StrCat("/", i));
    route->mutable_route()->set_cluster(absl::StrCat("c", i));
  }
  EXPECT_NE(nacked(many_clusters).find("clusters, over"), std::string::npos);
  // Not NACKed: a route with query_parameters or a cluster_header is ignored (A28), one with a
  // non-forwarding action is kept (its calls fail).
  auto ignored = route_config("r", "c");
  ignored.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->add_query_parameters()
      ->set_name("q");
  auto* by_header = ignored.mutable_virtual_hosts(0)->add_routes();
  by_header->mutable_match()->set_prefix("");
  by_header->mutable_route()->set_cluster_header("x-cluster");
  auto* non_forwarding = ignored.mutable_virtual_hosts(0)->add_routes();
  non_forwarding->mutable_match()->set_prefix("");
  non_forwarding->mutable_non_forwarding_action();
  absl::StatusOr<xd::VirtualHost> host = decoded_host(ignored);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_EQ(host->routes.size(), 1u);
  EXPECT_FALSE(host->routes[0].forwards());
}

// Per-call routing through a channel: two clusters, a route by header, a route by method, a
// weighted split, a non-forwarding route and no match; then a RouteConfiguration with a bad
// matcher is NACKed while the good one stays in use.
TEST(XdsRouting, EachCallTakesItsRouteAndClusterAndABadUpdateIsNacked) {
  Backend a, b;
  std::mutex mutex;
  int rds_version = 1;
  auto routes = [&](int version) {
    envoy::config::route::v3::RouteConfiguration rc;
    rc.set_name("route");
    auto* vh = rc.add_virtual_hosts();
    vh->add_domains("*");
    auto* by_header = vh->add_routes();
    by_header->mutable_match()->set_prefix("");
    auto* h = by_header->mutable_match()->add_headers();
    h->set_name("x-cluster");
    h->set_exact_match("b");
    by_header->mutable_route()->set_cluster("cb");
    auto* collect = vh->add_routes();
    collect->mutable_match()->set_path("/ferry.testing.Echo/Collect");
    collect->mutable_non_forwarding_action();
    auto* split = vh->add_routes();
    split->mutable_match()->set_prefix("/ferry.testing.Echo/");
    auto* wc = split->mutable_route()->mutable_weighted_clusters();
    for (const char* name : {"ca", "cb"}) {
      auto* c = wc->add_clusters();
      c->set_name(name);
      c->mutable_weight()->set_value(50);
    }
    if (version >= 2) {  // bad: a regex
      split->mutable_match()->mutable_safe_regex()->set_regex(".*");
    }
    return rc;
  };
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (request.type_url() == kLds && first_of_its_type(request)) {
      return {{response(kLds, "1", "l1", {pack(listener("svc", "route"))})}, {}};
    }
    if (request.type_url() == kRds) {
      std::lock_guard lock(mutex);
      // Answers the first request, and the ACK of version 1 with version 2.
      if (first_of_its_type(request) || (request.version_info() == "1" && rds_version == 1)) {
        const int v = first_of_its_type(request) ? 1 : ++rds_version;
        return {{response(kRds, std::to_string(v), absl::StrCat("r", v), {pack(routes(v))})}, {}};
      }
      return {};
    }
    if (!first_of_its_type(request)) return {};
    if (request.type_url() == kCds) {
      return {{response(kCds, "1", "c1", {pack(eds_cluster("ca")), pack(eds_cluster("cb"))})}, {}};
    }
    if (request.type_url() == kEds) {
      return {{response(kEds, "1", "e1",
                        {pack(endpoints("ca", a.port())), pack(endpoints("cb", b.port()))})},
              {}};
    }
    return {};
  });
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(cp.port()), fast_options());
  ASSERT_TRUE(resolver.ok());
  ChannelOptions options;
  options.resolver = *resolver;
  Channel channel("xds:///svc", options);
  testing::Echo::BlockingStub stub(channel);
  auto call = [&](const char* cluster_header) {
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(5s);
    ctx.set_wait_for_ready(true);
    if (cluster_header != nullptr) ctx.add_metadata("x-cluster", cluster_header);
    return stub.Echo(ctx, request, response);
  };
  // Both clusters' subscriptions were made and answered.
  ASSERT_TRUE(call(nullptr).ok());
  // The NACK of version 2 came (the RDS ACK of version 1 got version 2 back).
  ASSERT_TRUE(cp.await([](const auto& rs) { return find_nack(rs, kRds) != nullptr; }));
  EXPECT_NE(find_nack(cp.requests(), kRds)->error_detail().message().find("regular expressions"),
            std::string::npos);
  EXPECT_EQ(find_nack(cp.requests(), kRds)->version_info(), "1");
  // Version 1 stays in use: the header route takes every call to b.
  const int a0 = a.calls(), b0 = b.calls();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(call("b").ok()) << i;
  EXPECT_EQ(a.calls(), a0);
  EXPECT_EQ(b.calls(), b0 + 20);
  // The weighted route splits the rest about evenly between a and b.
  const int a1 = a.calls(), b1 = b.calls();
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(call("a").ok()) << i;
  EXPECT_NEAR(a.calls() - a1, 200, 60);
  EXPECT_NEAR(b.calls() - b1, 200, 60);
  // Collect's route does not forward; a method outside every route matches none: UNAVAILABLE.
  for (const char* method : {"/ferry.testing.Echo/Collect", "/other.Service/Get"}) {
    ClientContext ctx;
    ctx.set_timeout(5s);
    ctx.set_wait_for_ready(true);  // no matter: the route decides
    BlockingClientStream stream = channel.open_blocking(method, ctx);
    stream.writes_done();
    absl::Status status = stream.finish();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << method << " " << status;
    EXPECT_NE(status.message().find(method[1] == 'f' ? "does not forward" : "no route matches"),
              std::string::npos)
        << status;
  }
}

// gRFC A27 through a channel (the scripted control plane, no Go peer needed): priority 0 has two
// localities of weights 3:1, priority 1 one more; calls split 3:1 over priority 0's, and once
// both of its servers are gone, fail-fast calls go on, none failing, on priority 1's.
TEST(XdsEndpoints, PrioritiesAndWeightedLocalitiesThroughAChannel) {
  std::optional<Backend> a(std::in_place), b(std::in_place);
  Backend c;
  envoy::config::endpoint::v3::ClusterLoadAssignment cla;
  cla.set_cluster_name("c");
  auto add_locality = [&cla](std::uint32_t priority, std::uint32_t weight, int port) {
    auto* locality = cla.add_endpoints();
    locality->set_priority(priority);
    locality->mutable_load_balancing_weight()->set_value(weight);
    auto* address = locality->add_lb_endpoints()->mutable_endpoint()->mutable_address();
    address->mutable_socket_address()->set_address("127.0.0.1");
    address->mutable_socket_address()->set_port_value(port);
  };
  add_locality(0, 3, a->port());
  add_locality(0, 1, b->port());
  add_locality(1, 1, c.port());
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (!first_of_its_type(request)) return {};
    if (request.type_url() == kEds) return {{response(kEds, "1", "e1", {pack(cla)})}, {}};
    return good_chain(request, 0);
  });
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(cp.port()), fast_options());
  ASSERT_TRUE(resolver.ok());
  ChannelOptions options;
  options.resolver = *resolver;
  Channel channel("xds:///svc", options);
  testing::Echo::BlockingStub stub(channel);
  auto call = [&](bool wait_for_ready) {
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(5s);
    ctx.set_wait_for_ready(wait_for_ready);
    return stub.Echo(ctx, request, response);
  };
  // Until both localities' connections are ready.
  for (int i = 0; i < 200 && (a->calls() == 0 || b->calls() == 0); ++i) {
    ASSERT_TRUE(call(true).ok()) << i;
    if (a->calls() == 0 || b->calls() == 0) std::this_thread::sleep_for(10ms);
  }
  const int a0 = a->calls(), b0 = b->calls();
  for (int i = 0; i < 800; ++i) ASSERT_TRUE(call(true).ok()) << i;
  // 3:1 of 800: within 5 standard deviations (12.2) of 600 / 200; priority 1 takes nothing.
  EXPECT_NEAR(a->calls() - a0, 600, 60);
  EXPECT_NEAR(b->calls() - b0, 200, 60);
  EXPECT_EQ(c.calls(), 0);
  // Priority 0's servers go: its endpoints fail (connections refused), priority 1 takes over.
  a.reset();
  b.reset();
  std::this_thread::sleep_for(200ms);  // the channel sees the GOAWAYs
  for (int i = 0; i < 50; ++i) {
    absl::Status status = call(/*wait_for_ready=*/false);
    ASSERT_TRUE(status.ok()) << i << " " << status;
  }
  EXPECT_EQ(c.calls(), 50);
}

// gRFC A31 and A44: what a route sets for its calls besides their cluster.
google::protobuf::Duration duration_of(std::int64_t seconds, std::int32_t nanos = 0) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

envoy::config::listener::v3::Listener listener_with_max_stream_duration(
    const google::protobuf::Duration& max) {
  envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager hcm;
  hcm.mutable_rds()->set_route_config_name("route");
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  *hcm.mutable_common_http_protocol_options()->mutable_max_stream_duration() = max;
  auto l = listener("svc", "route");
  l.mutable_api_listener()->mutable_api_listener()->PackFrom(hcm);
  return l;
}

TEST(XdsRouteSettings, MaxStreamDurationTakesGrpcTimeoutHeaderMaxFirstAndIsBounded) {
  using Route = envoy::config::route::v3::Route;
  auto decoded = [](const std::function<void(Route&)>& edit) {
    return decoded_host(one_route(edit));
  };
  auto msd = [](Route& r) { return r.mutable_route()->mutable_max_stream_duration(); };
  // Unset: nothing (the listener's default applies).
  EXPECT_EQ(decoded([](Route&) {})->routes[0].max_stream_duration, std::nullopt);
  EXPECT_EQ(decoded([&](Route& r) { msd(r); })->routes[0].max_stream_duration, std::nullopt);
  // max_stream_duration alone.
  EXPECT_EQ(decoded([&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(5); })
                ->routes[0]
                .max_stream_duration,
            5000ms);
  // grpc_timeout_header_max, when present, wins, even at 0 (no limit).
  EXPECT_EQ(decoded([&](Route& r) {
              *msd(r)->mutable_max_stream_duration() = duration_of(5);
              *msd(r)->mutable_grpc_timeout_header_max() = duration_of(2);
            })
                ->routes[0]
                .max_stream_duration,
            2000ms);
  EXPECT_EQ(decoded([&](Route& r) {
              *msd(r)->mutable_max_stream_duration() = duration_of(5);
              *msd(r)->mutable_grpc_timeout_header_max() = duration_of(0);
            })
                ->routes[0]
                .max_stream_duration,
            0ms);
  // A part of a millisecond counts as one; the protobuf maximum (10,000 years) is taken whole.
  EXPECT_EQ(decoded([&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(0, 1); })
                ->routes[0]
                .max_stream_duration,
            1ms);
  EXPECT_EQ(decoded([&](Route& r) {
              *msd(r)->mutable_max_stream_duration() = duration_of(315576000000, 999999999);
            })
                ->routes[0]
                .max_stream_duration,
            std::chrono::milliseconds(315576000000000 + 1000));
  // Out of the Duration's range: NACKed, naming the field.
  auto nack = [&](const google::protobuf::Duration& d, bool header_max = false) {
    auto host = decoded([&](Route& r) {
      *(header_max ? msd(r)->mutable_grpc_timeout_header_max()
                   : msd(r)->mutable_max_stream_duration()) = d;
    });
    return host.ok() ? std::string() : std::string(host.status().message());
  };
  EXPECT_NE(nack(duration_of(-1)).find("max_stream_duration.max_stream_duration: seconds -1"),
            std::string::npos)
      << nack(duration_of(-1));
  EXPECT_NE(nack(duration_of(-1), true).find("grpc_timeout_header_max: seconds -1"),
            std::string::npos);
  EXPECT_NE(nack(duration_of(0, -1)).find("nanos -1"), std::string::npos);
  EXPECT_NE(nack(duration_of(0, 1000000000)).find("nanos 1000000000"), std::string::npos);
  EXPECT_NE(nack(duration_of(315576000001)).find("seconds 315576000001"), std::string::npos);
  EXPECT_NE(nack(duration_of(std::numeric_limits<std::int64_t>::max())).find("is not in"),
            std::string::npos);
  EXPECT_NE(nack(duration_of(std::numeric_limits<std::int64_t>::min())).find("is not in"),
            std::string::npos);
  // The listener's default: HttpConnectionManager.common_http_protocol_options, validated alike.
  xd::DecodedResource l =
      decode(xd::ResourceType::kListener, listener_with_max_stream_duration(duration_of(3)));
  ASSERT_TRUE(l.value.ok()) << l.value.status();
  EXPECT_EQ(std::get<xd::ListenerResource>(*l.value).max_stream_duration, 3000ms);
  l = decode(xd::ResourceType::kListener, listener_with_max_stream_duration(duration_of(-3)));
  ASSERT_FALSE(l.value.ok());
  EXPECT_NE(l.value.status().message().find("common_http_protocol_options.max_stream_duration"),
            std::string::npos);
  l = decode(xd::ResourceType::kListener, listener("svc", "route"));
  EXPECT_EQ(std::get<xd::ListenerResource>(*l.value).max_stream_duration, std::nullopt);
}

TEST(XdsRouteSettings, RetryPoliciesAreConvertedAsA44SaysAndAbsurdOnesNacked) {
  using RetryPolicy = envoy::config::route::v3::RetryPolicy;
  auto with_policy = [](const std::function<void(RetryPolicy&)>& edit) {
    return decoded_host(
        one_route([&](auto& r) { edit(*r.mutable_route()->mutable_retry_policy()); }));
  };
  auto policy = [&](const std::function<void(RetryPolicy&)>& edit) {
    absl::StatusOr<xd::VirtualHost> host = with_policy(edit);
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? host->routes[0].retry_policy.value_or(xd::RouteRetryPolicy{})
                     : xd::RouteRetryPolicy{};
  };
  auto nack = [&](const std::function<void(RetryPolicy&)>& edit) {
    absl::StatusOr<xd::VirtualHost> host = with_policy(edit);
    return host.ok() ? std::string() : std::string(host.status().message());
  };
  using Code = absl::StatusCode;
  // retry_on: the five gRPC conditions, any other ignored; trimmed, any case, each once.
  xd::RouteRetryPolicy all = policy([](RetryPolicy& p) {
    p.set_retry_on(
        "cancelled,deadline-exceeded,internal,resource-exhausted,unavailable,5xx,gateway-error");
  });
  EXPECT_EQ(all.retry_on,
            (std::vector<Code>{Code::kCancelled, Code::kDeadlineExceeded, Code::kInternal,
                               Code::kResourceExhausted, Code::kUnavailable}));
  EXPECT_EQ(
      policy([](RetryPolicy& p) { p.set_retry_on(" Unavailable ,bogus,unavailable,"); }).retry_on,
      std::vector<Code>{Code::kUnavailable});
  EXPECT_TRUE(policy([](RetryPolicy& p) { p.set_retry_on("5xx,reset"); }).retry_on.empty());
  // The defaults: one retry (two attempts), 25 ms base and 250 ms max back-off.
  xd::RouteRetryPolicy defaults = policy([](RetryPolicy&) {});
  EXPECT_EQ(defaults.max_attempts, 2);
  EXPECT_EQ(defaults.base_interval, 25ms);
  EXPECT_EQ(defaults.max_interval, 250ms);
  // num_retries: attempts = num_retries + 1, capped at 5; 2^32-1 does not wrap; 0 is NACKed.
  EXPECT_EQ(policy([](RetryPolicy& p) { p.mutable_num_retries()->set_value(3); }).max_attempts, 4);
  EXPECT_EQ(policy([](RetryPolicy& p) { p.mutable_num_retries()->set_value(4); }).max_attempts, 5);
  EXPECT_EQ(
      policy([](RetryPolicy& p) { p.mutable_num_retries()->set_value(4294967295u); }).max_attempts,
      5);
  EXPECT_NE(nack([](RetryPolicy& p) {
              p.mutable_num_retries()->set_value(0);
            }).find("retry_policy: num_retries must be at least 1"),
            std::string::npos);
  // retry_back_off: base_interval required and over 0, max_interval 10 x base by default.
  auto backoff = [](std::optional<google::protobuf::Duration> base,
                    std::optional<google::protobuf::Duration> max) {
    return [=](RetryPolicy& p) {
      auto* b = p.mutable_retry_back_off();
      if (base) *b->mutable_base_interval() = *base;
      if (max) *b->mutable_max_interval() = *max;
    };
  };
  xd::RouteRetryPolicy tenfold = policy(backoff(duration_of(0, 100000000), std::nullopt));
  EXPECT_EQ(tenfold.base_interval, 100ms);
  EXPECT_EQ(tenfold.max_interval, 1000ms);
  xd::RouteRetryPolicy both = policy(backoff(duration_of(1), duration_of(3)));
  EXPECT_EQ(both.base_interval, 1000ms);
  EXPECT_EQ(both.max_interval, 3000ms);
  // Under a millisecond counts as one (A44); max equal to base is allowed.
  xd::RouteRetryPolicy tiny = policy(backoff(duration_of(0, 1), duration_of(0, 1)));
  EXPECT_EQ(tiny.base_interval, 1ms);
  EXPECT_EQ(tiny.max_interval, 1ms);
  EXPECT_NE(nack(backoff(std::nullopt, duration_of(1))).find("base_interval is required"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(0), std::nullopt)).find("base_interval must be over 0"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(1), duration_of(0))).find("max_interval must be over 0"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(2), duration_of(1))).find("max_interval is under base"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(0, 2), duration_of(0, 1))).find("max_interval is under"),
            std::string::npos);  // compared before rounding to milliseconds
  EXPECT_NE(nack(backoff(duration_of(-1), std::nullopt)).find("base_interval: seconds -1"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(1), duration_of(-5))).find("max_interval: seconds -5"),
            std::string::npos);
  EXPECT_NE(nack(backoff(duration_of(std::numeric_limits<std::int64_t>::max()), std::nullopt))
                .find("is not in"),
            std::string::npos);
  // The largest base_interval: its tenfold default max fits (no overflow).
  xd::RouteRetryPolicy huge = policy(backoff(duration_of(315576000000), std::nullopt));
  EXPECT_EQ(huge.max_interval, std::chrono::milliseconds(3155760000000000));
  // The virtual host's policy applies to its routes that have none, and is validated too.
  auto rc = route_config("r", "c");
  auto* own = rc.mutable_virtual_hosts(0)->add_routes();
  own->mutable_match()->set_prefix("/own");
  own->mutable_route()->set_cluster("c");
  own->mutable_route()->mutable_retry_policy()->set_retry_on("5xx");  // no gRPC condition
  rc.mutable_virtual_hosts(0)->mutable_retry_policy()->set_retry_on("internal");
  rc.mutable_virtual_hosts(0)->mutable_retry_policy()->mutable_num_retries()->set_value(2);
  absl::StatusOr<xd::VirtualHost> host = decoded_host(rc);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(host->routes[0].retry_policy.has_value());
  EXPECT_EQ(host->routes[0].retry_policy->retry_on, std::vector<Code>{Code::kInternal});
  EXPECT_EQ(host->routes[0].retry_policy->max_attempts, 3);
  ASSERT_TRUE(host->routes[1].retry_policy.has_value());  // its own: no retries, not the host's
  EXPECT_TRUE(host->routes[1].retry_policy->retry_on.empty());
  rc.mutable_virtual_hosts(0)->mutable_retry_policy()->mutable_num_retries()->set_value(0);
  host = decoded_host(rc);
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("virtual_hosts[0].retry_policy: num_retries"),
            std::string::npos)
      << host.status();
}

// A control plane for the route-settings scenarios: listener "svc" (with hcm_max as its
// HttpConnectionManager's default max_stream_duration, if set) -> RDS "route" (rc) -> clusters
// "ca" and "cb" at ports a and b.
class RoutedControlPlane {
 public:
  RoutedControlPlane(envoy::config::route::v3::RouteConfiguration rc, int a, int b,
                     std::optional<google::protobuf::Duration> hcm_max = std::nullopt)
      : cp_([rc = std::move(rc), a, b, hcm_max](const DiscoveryRequest& request, int) -> Reply {
          if (!first_of_its_type(request)) return {};
          if (request.type_url() == kLds) {
            return {{response(kLds, "1", "l1",
                              {pack(hcm_max ? listener_with_max_stream_duration(*hcm_max)
                                            : listener("svc", "route"))})},
                    {}};
          }
          if (request.type_url() == kRds) return {{response(kRds, "1", "r1", {pack(rc)})}, {}};
          if (request.type_url() == kCds) {
            return {{response(kCds, "1", "c1", {pack(eds_cluster("ca")), pack(eds_cluster("cb"))})},
                    {}};
          }
          return {{response(kEds, "1", "e1", {pack(endpoints("ca", a)), pack(endpoints("cb", b))})},
                  {}};
        }) {}
  // A channel to "svc" through it, with options (their resolver set here).
  std::unique_ptr<Channel> channel(ChannelOptions options = {}) {
    absl::StatusOr<std::shared_ptr<Resolver>> resolver =
        xds::make_resolver("xds:///svc", bootstrap_for(cp_.port()), fast_options());
    EXPECT_TRUE(resolver.ok()) << resolver.status();
    options.resolver = *resolver;
    return std::make_unique<Channel>("xds:///svc", options);
  }

 private:
  FakeControlPlane cp_;
};

// An AttemptEcho server (support/attempt_echo.h).
using testing::AttemptBackend;

absl::Status echo_on(Channel& channel, std::chrono::milliseconds timeout = 10s,
                     const std::string& call_id = "") {
  testing::Echo::BlockingStub stub(channel);
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(timeout);
  ctx.set_wait_for_ready(true);
  if (!call_id.empty()) ctx.add_metadata("x-call-id", call_id);
  return stub.Echo(ctx, request, response);
}

// A route to cluster "ca" for every call, edited by edit.
envoy::config::route::v3::RouteConfiguration route_to_ca(
    const std::function<void(envoy::config::route::v3::Route&)>& edit = {}) {
  auto rc = route_config("route", "ca");
  if (edit) edit(*rc.mutable_virtual_hosts(0)->mutable_routes(0));
  return rc;
}

// gRFC A31: every attempt of a call goes to the cluster its route chose first (any endpoint of
// it); before, each retry picked its cluster again, here from a 50/50 split.
TEST(XdsRouteSettings, EveryAttemptOfACallGoesToTheClusterChosenFirst) {
  AttemptBackend a, b;
  a.service().fail_attempts = 1;
  b.service().fail_attempts = 1;
  auto rc = route_to_ca([](auto& r) {
    auto* wc = r.mutable_route()->mutable_weighted_clusters();
    for (const char* name : {"ca", "cb"}) {
      auto* c = wc->add_clusters();
      c->set_name(name);
      c->mutable_weight()->set_value(50);
    }
  });
  RoutedControlPlane cp(rc, a.port(), b.port());
  // The retries come from the channel's own policy here (the route has none).
  ChannelOptions options;
  options.method_config.retry_policy.emplace();
  options.method_config.retry_policy->max_attempts = 2;
  options.method_config.retry_policy->initial_backoff = 1ms;
  options.method_config.retry_policy->max_backoff = 1ms;
  auto channel = cp.channel(options);
  constexpr int kCalls = 60;
  for (int i = 0; i < kCalls; ++i) {
    absl::Status status = echo_on(*channel, 10s, absl::StrCat("call-", i));
    ASSERT_TRUE(status.ok()) << i << " " << status;
  }
  // Each call's two attempts met one backend; both took some calls.
  const auto by_a = a.service().attempts_by_call(), by_b = b.service().attempts_by_call();
  for (const auto& [id, n] : by_a) EXPECT_EQ(n, 2) << id << " also went to b";
  for (const auto& [id, n] : by_b) EXPECT_EQ(n, 2) << id << " also went to a";
  EXPECT_EQ(by_a.size() + by_b.size(), static_cast<std::size_t>(kCalls));
  EXPECT_GT(by_a.size(), 5u);
  EXPECT_GT(by_b.size(), 5u);
}

// gRFC A44 through a channel: the route's retry policy (or its virtual host's) retries the
// call's attempts that fail with UNAVAILABLE; without one they fail; a route's policy replaces
// its virtual host's and the channel's own.
TEST(XdsRouteSettings, TheRoutesRetryPolicyRetriesAndReplacesTheOthers) {
  AttemptBackend a, b;
  using RetryPolicy = envoy::config::route::v3::RetryPolicy;
  auto retrying = [](const std::string& retry_on, std::uint32_t retries) {
    return [=](RetryPolicy& p) {
      p.set_retry_on(retry_on);
      p.mutable_num_retries()->set_value(retries);
      *p.mutable_retry_back_off()->mutable_base_interval() = duration_of(0, 1000000);
    };
  };
  struct Case {
    const char* name;
    std::function<void(envoy::config::route::v3::RouteConfiguration&)> edit;
    int fail_attempts;
    bool channel_policy;  // the channel's own: 5 attempts on UNAVAILABLE
    absl::StatusCode want;
    int want_attempts;
  };
  auto on_route = [](std::function<void(RetryPolicy&)> edit) {
    return [=](envoy::config::route::v3::RouteConfiguration& rc) {
      edit(
          *rc.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_route()->mutable_retry_policy());
    };
  };
  auto on_host = [](std::function<void(RetryPolicy&)> edit) {
    return [=](envoy::config::route::v3::RouteConfiguration& rc) {
      edit(*rc.mutable_virtual_hosts(0)->mutable_retry_policy());
    };
  };
  const std::vector<Case> cases = {
      {"route: unavailable, 2 retries", on_route(retrying("unavailable", 2)), 2, false,
       absl::StatusCode::kOk, 3},
      {"no policy", {}, 1, false, absl::StatusCode::kUnavailable, 1},
      {"the virtual host's", on_host(retrying("unavailable", 1)), 1, false, absl::StatusCode::kOk,
       2},
      {"the route's (no gRPC condition) over the host's",
       [&](auto& rc) {
         on_host(retrying("unavailable", 3))(rc);
         on_route(retrying("5xx,gateway-error", 3))(rc);
       },
       1, false, absl::StatusCode::kUnavailable, 1},
      {"the route's (internal) over the channel's", on_route(retrying("internal", 3)), 1, true,
       absl::StatusCode::kUnavailable, 1},
      {"the channel's without a route policy", {}, 1, true, absl::StatusCode::kOk, 2},
      {"num_retries 2^32-1: 5 attempts", on_route(retrying("unavailable", 4294967295u)), 10, false,
       absl::StatusCode::kUnavailable, 5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto rc = route_to_ca();
    if (c.edit) c.edit(rc);
    RoutedControlPlane cp(rc, a.port(), b.port());
    ChannelOptions options;
    if (c.channel_policy) {
      options.method_config.retry_policy.emplace();
      options.method_config.retry_policy->max_attempts = 5;
      options.method_config.retry_policy->initial_backoff = 1ms;
      options.method_config.retry_policy->max_backoff = 1ms;
    }
    auto channel = cp.channel(options);
    a.service().fail_attempts = c.fail_attempts;
    const int before = a.service().attempts();
    absl::Status status = echo_on(*channel);
    EXPECT_EQ(status.code(), c.want) << status;
    EXPECT_EQ(a.service().attempts() - before, c.want_attempts);
  }
  EXPECT_EQ(b.service().attempts(), 0);
}

// gRFC A31 through a channel: the route's max_stream_duration (or grpc_timeout_header_max, or
// the listener's default) shortens a call's deadline: a slow call fails DEADLINE_EXCEEDED.
TEST(XdsRouteSettings, MaxStreamDurationEndsSlowCallsWithDeadlineExceeded) {
  AttemptBackend a, b;
  a.service().delay_ms = 400;
  using Route = envoy::config::route::v3::Route;
  auto msd = [](Route& r) { return r.mutable_route()->mutable_max_stream_duration(); };
  struct Case {
    const char* name;
    std::function<void(Route&)> edit;
    std::optional<google::protobuf::Duration> listener_default;
    std::chrono::milliseconds call_timeout;
    absl::StatusCode want;
  };
  const std::vector<Case> cases = {
      {"route 100 ms",
       [&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(0, 100000000); },
       std::nullopt, 10s, absl::StatusCode::kDeadlineExceeded},
      {"grpc_timeout_header_max 100 ms over 10 s",
       [&](Route& r) {
         *msd(r)->mutable_max_stream_duration() = duration_of(10);
         *msd(r)->mutable_grpc_timeout_header_max() = duration_of(0, 100000000);
       },
       std::nullopt, 10s, absl::StatusCode::kDeadlineExceeded},
      {"grpc_timeout_header_max 0: no limit",
       [&](Route& r) {
         *msd(r)->mutable_max_stream_duration() = duration_of(0, 100000000);
         *msd(r)->mutable_grpc_timeout_header_max() = duration_of(0);
       },
       duration_of(0, 100000000), 10s, absl::StatusCode::kOk},
      {"the listener's 100 ms",
       {},
       duration_of(0, 100000000),
       10s,
       absl::StatusCode::kDeadlineExceeded},
      {"route 0 over the listener's",
       [&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(0); },
       duration_of(0, 100000000), 10s, absl::StatusCode::kOk},
      {"route 10,000 years",
       [&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(315576000000); },
       std::nullopt, 10s, absl::StatusCode::kOk},
      {"the application's shorter deadline",
       [&](Route& r) { *msd(r)->mutable_max_stream_duration() = duration_of(10); }, std::nullopt,
       100ms, absl::StatusCode::kDeadlineExceeded},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RoutedControlPlane cp(route_to_ca(c.edit), a.port(), b.port(), c.listener_default);
    auto channel = cp.channel();
    ASSERT_TRUE(echo_on(*channel, 10s).ok() || c.want != absl::StatusCode::kOk);
    // Without the limit the call would succeed once the backend's 400 ms are over.
    absl::Status status = echo_on(*channel, c.call_timeout);
    EXPECT_EQ(status.code(), c.want) << status;
  }
}

// An xDS channel's streams start as retriable ones (their route may have a retry policy) and
// commit at once when it has none: then raw messages go through as on any channel.
TEST(XdsRouteSettings, RawMessagesGoThroughOnARouteWithoutARetryPolicy) {
  AttemptBackend a, b;
  RoutedControlPlane cp(route_to_ca(), a.port(), b.port());
  auto channel = cp.channel();
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(true);
  ClientStream stream =
      channel->open("/ferry.testing.Echo/Echo", RpcKind::kUnary, ctx, asio::use_future).get();
  testing::EchoRequest request;
  request.set_payload("raw bytes");
  const std::string bytes = request.SerializeAsString();
  SliceChain message;
  message.append_copy(bytes.data(), bytes.size());
  absl::Status written = stream.write_raw(message, asio::use_future).get();
  EXPECT_TRUE(written.ok()) << written;
  stream.writes_done(asio::use_future).get();
  SliceChain answer;
  EXPECT_TRUE(stream.read_raw(answer, asio::use_future).get());
  absl::Status status = stream.finish(asio::use_future).get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(a.service().attempts(), 1);
}

// A retry whose cluster has left the configuration meanwhile fails with UNAVAILABLE (gRFC A31:
// the call keeps its cluster; ferry drops a cluster's connections with the configuration, where
// gRPC keeps them until the cluster's calls end), rather than going to another cluster.
TEST(XdsRouteSettings, ARetryWhoseClusterLeftTheConfigurationFailsWithUnavailable) {
  AttemptBackend a, b;
  a.service().fail_attempts = 1;
  a.service().pushback_ms = 1000;  // the retry waits 1 s: the update comes in between
  auto routes = [](int version) {
    auto rc = route_config("route", version == 1 ? "ca" : "cb");
    if (version == 1) {  // cb named too (subscribed from the start), for other calls
      auto* other = rc.mutable_virtual_hosts(0)->add_routes();
      *other = rc.virtual_hosts(0).routes(0);
      other->mutable_route()->set_cluster("cb");
      rc.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_match()->set_prefix(
          "/ferry.testing.Echo/");
    }
    return rc;
  };
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (request.type_url() == kEds && !first_of_its_type(request) &&
        request.version_info() == "1" && !request.has_error_detail()) {
      // The ACK of the endpoints: the channel has its configuration, and its call has started.
      // Routes without ca come 300 ms later.
      std::this_thread::sleep_for(300ms);
      return {{response(kRds, "2", "r2", {pack(routes(2))})}, {}};
    }
    if (!first_of_its_type(request)) return {};
    if (request.type_url() == kLds)
      return {{response(kLds, "1", "l1", {pack(listener("svc", "route"))})}, {}};
    if (request.type_url() == kRds) return {{response(kRds, "1", "r1", {pack(routes(1))})}, {}};
    if (request.type_url() == kCds) {
      return {{response(kCds, "1", "c1", {pack(eds_cluster("ca")), pack(eds_cluster("cb"))})}, {}};
    }
    return {{response(kEds, "1", "e1",
                      {pack(endpoints("ca", a.port())), pack(endpoints("cb", b.port()))})},
            {}};
  });
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(cp.port()), fast_options());
  ASSERT_TRUE(resolver.ok());
  ChannelOptions options;
  options.resolver = *resolver;
  options.method_config.retry_policy.emplace();
  options.method_config.retry_policy->max_attempts = 2;
  Channel channel("xds:///svc", options);
  absl::Status status = echo_on(channel);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("left the configuration"), std::string::npos) << status;
  EXPECT_EQ(a.service().attempts(), 1);
  EXPECT_EQ(b.service().attempts(), 0);
  // Later calls take the new routes: to cb.
  EXPECT_TRUE(echo_on(channel).ok());
  EXPECT_EQ(b.service().attempts(), 1);
}

// A stream on an xDS channel is retried by its route's policy too (its kept request sent again),
// to the same cluster.
TEST(XdsRouteSettings, AStreamIsRetriedByItsRoutesPolicy) {
  AttemptBackend a, b;
  a.service().fail_attempts = 1;
  auto rc = route_to_ca(
      [](auto& r) { r.mutable_route()->mutable_retry_policy()->set_retry_on("unavailable"); });
  RoutedControlPlane cp(rc, a.port(), b.port());
  auto channel = cp.channel();
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(true);
  ClientStream stream =
      channel->open("/ferry.testing.Echo/Echo", RpcKind::kUnary, ctx, asio::use_future).get();
  testing::EchoRequest request;
  request.set_payload("again");
  absl::Status written = stream.write_last(request, asio::use_future).get();
  EXPECT_TRUE(written.ok()) << written;
  testing::EchoResponse response;
  EXPECT_TRUE(stream.read(response, asio::use_future).get());
  absl::Status status = stream.finish(asio::use_future).get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.payload(), "again");
  EXPECT_EQ(a.service().attempts(), 2);
  EXPECT_EQ(b.service().attempts(), 0);
}

// gRFC A32 and A50 (src/xds/cluster_policy.cc): a Cluster's circuit_breakers and
// outlier_detection, their defaults, and hostile values NACKed or clamped.
absl::StatusOr<::ferry::detail::ClusterPolicy> policy_of(
    const envoy::config::cluster::v3::Cluster& cluster) {
  xd::DecodedResource decoded = xd::decode_resource(xd::ResourceType::kCluster, pack(cluster));
  if (!decoded.value.ok()) return decoded.value.status();
  return std::get<xd::ClusterResource>(*decoded.value).policy;
}

TEST(XdsClusterPolicy, MaxRequestsComesFromTheDefaultPriorityThreshold) {
  auto c = eds_cluster("c");
  EXPECT_EQ(policy_of(c)->max_requests, 1024u);  // A32's default
  EXPECT_FALSE(policy_of(c)->outlier_detection.has_value());
  auto* high = c.mutable_circuit_breakers()->add_thresholds();
  high->set_priority(envoy::config::core::v3::HIGH);
  high->mutable_max_requests()->set_value(3);
  EXPECT_EQ(policy_of(c)->max_requests, 1024u);  // HIGH is not ferry's priority
  auto* def = c.mutable_circuit_breakers()->add_thresholds();
  EXPECT_EQ(policy_of(c)->max_requests, 1024u);  // DEFAULT without max_requests
  def->mutable_max_requests()->set_value(7);
  EXPECT_EQ(policy_of(c)->max_requests, 7u);
  def->mutable_max_requests()->set_value(0);  // every call fails, as in grpc-go
  EXPECT_EQ(policy_of(c)->max_requests, 0u);
  def->mutable_max_requests()->set_value(4294967295u);
  EXPECT_EQ(policy_of(c)->max_requests, 4294967295u);
}

TEST(XdsClusterPolicy, OutlierDetectionDefaultsAndWhichAlgorithmsRun) {
  auto c = eds_cluster("c");
  c.mutable_outlier_detection();
  absl::StatusOr<::ferry::detail::ClusterPolicy> p = policy_of(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->outlier_detection.has_value());
  const ::ferry::detail::OutlierDetectionConfig& od = *p->outlier_detection;
  EXPECT_EQ(od.interval, 10s);
  EXPECT_EQ(od.base_ejection_time, 30s);
  EXPECT_EQ(od.max_ejection_time, 300s);
  EXPECT_EQ(od.max_ejection_percent, 10u);
  // A50: success rate on unless enforcing_success_rate is 0; failure percentage only with a
  // non-zero enforcing_failure_percentage.
  ASSERT_TRUE(od.success_rate.has_value());
  EXPECT_EQ(od.success_rate->stdev_factor, 1900u);
  EXPECT_EQ(od.success_rate->enforcement_percentage, 100u);
  EXPECT_EQ(od.success_rate->minimum_hosts, 5u);
  EXPECT_EQ(od.success_rate->request_volume, 100u);
  EXPECT_FALSE(od.failure_percentage.has_value());
  auto* o = c.mutable_outlier_detection();
  o->mutable_enforcing_success_rate()->set_value(0);
  o->mutable_enforcing_failure_percentage()->set_value(100);
  o->mutable_failure_percentage_minimum_hosts()->set_value(3);
  o->mutable_interval()->set_nanos(500000000);
  o->mutable_base_ejection_time()->set_seconds(2);
  o->mutable_max_ejection_percent()->set_value(34);
  p = policy_of(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->outlier_detection->success_rate.has_value());
  ASSERT_TRUE(p->outlier_detection->failure_percentage.has_value());
  EXPECT_EQ(p->outlier_detection->failure_percentage->threshold, 85u);
  EXPECT_EQ(p->outlier_detection->failure_percentage->minimum_hosts, 3u);
  EXPECT_EQ(p->outlier_detection->failure_percentage->request_volume, 50u);
  EXPECT_EQ(p->outlier_detection->interval, 500ms);
  EXPECT_EQ(p->outlier_detection->base_ejection_time, 2s);
  EXPECT_EQ(p->outlier_detection->max_ejection_percent, 34u);
}

TEST(XdsClusterPolicy, OutOfRangeOutlierDetectionValuesAreNackedAndHugeOnesClamped) {
  using Cluster = envoy::config::cluster::v3::Cluster;
  struct Case {
    std::string field;
    std::function<void(envoy::config::cluster::v3::OutlierDetection&)> set;
  };
  const std::vector<Case> cases = {
      {"max_ejection_percent", [](auto& o) { o.mutable_max_ejection_percent()->set_value(101); }},
      {"enforcing_success_rate",
       [](auto& o) { o.mutable_enforcing_success_rate()->set_value(4294967295u); }},
      {"failure_percentage_threshold",
       [](auto& o) { o.mutable_failure_percentage_threshold()->set_value(101); }},
      {"enforcing_failure_percentage",
       [](auto& o) { o.mutable_enforcing_failure_percentage()->set_value(200); }},
      {"interval", [](auto& o) { o.mutable_interval()->set_seconds(-1); }},
      {"base_ejection_time", [](auto& o) { o.mutable_base_ejection_time()->set_nanos(-5); }},
      {"max_ejection_time", [](auto& o) { o.mutable_max_ejection_time()->set_nanos(1000000000); }},
      {"interval", [](auto& o) { o.mutable_interval()->set_seconds(315576000001); }},
      {"base_ejection_time",
       [](auto& o) { o.mutable_base_ejection_time()->set_seconds(INT64_MIN); }},
  };
  for (const Case& c : cases) {
    Cluster cluster = eds_cluster("c");
    c.set(*cluster.mutable_outlier_detection());
    absl::StatusOr<::ferry::detail::ClusterPolicy> p = policy_of(cluster);
    ASSERT_FALSE(p.ok()) << c.field;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(p.status().message(), "outlier_detection." + c.field))
        << p.status();
  }
  // Durations at the Duration's own bound are taken, capped where the clock could overflow.
  Cluster cluster = eds_cluster("c");
  auto* o = cluster.mutable_outlier_detection();
  o->mutable_interval()->set_seconds(315576000000);
  o->mutable_interval()->set_nanos(999999999);
  o->mutable_base_ejection_time()->set_seconds(315576000000);
  o->mutable_max_ejection_time()->set_seconds(315576000000);
  o->mutable_max_ejection_percent()->set_value(100);
  absl::StatusOr<::ferry::detail::ClusterPolicy> p = policy_of(cluster);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->outlier_detection->interval, ::ferry::detail::kMaxOutlierDuration);
  EXPECT_EQ(p->outlier_detection->base_ejection_time, ::ferry::detail::kMaxOutlierDuration);
  // A zero interval is taken, and the detector's timer clamps it (outlier_detection_test).
  o->mutable_interval()->set_seconds(0);
  o->mutable_interval()->set_nanos(0);
  p = policy_of(cluster);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->outlier_detection->interval, 0ms);
}

// gRFC A50 under A27 through a channel (the scripted control plane): priority 0's only endpoint
// fails every call; outlier detection ejects it, which makes priority 0 TRANSIENT_FAILURE as
// gRPC's ejected subchannels do, so priority 1 (created only then) takes the calls, fail-fast
// ones included, and priority 0's endpoint gets none while ejected.
TEST(XdsOutlierDetection, AnEjectedPriorityFailsOverToTheNext) {
  AttemptBackend a, b;
  a.service().fail_attempts = 1 << 30;  // every call fails
  envoy::config::endpoint::v3::ClusterLoadAssignment cla;
  cla.set_cluster_name("c");
  for (auto [priority, port] : {std::pair{0u, a.port()}, std::pair{1u, b.port()}}) {
    auto* locality = cla.add_endpoints();
    locality->set_priority(priority);
    locality->mutable_load_balancing_weight()->set_value(1);
    auto* address = locality->add_lb_endpoints()->mutable_endpoint()->mutable_address();
    address->mutable_socket_address()->set_address("127.0.0.1");
    address->mutable_socket_address()->set_port_value(port);
  }
  envoy::config::cluster::v3::Cluster cluster = eds_cluster("c");
  auto* o = cluster.mutable_outlier_detection();
  o->mutable_interval()->set_nanos(100000000);  // 100 ms
  o->mutable_base_ejection_time()->set_seconds(30);
  o->mutable_max_ejection_percent()->set_value(100);
  o->mutable_enforcing_success_rate()->set_value(0);
  o->mutable_enforcing_failure_percentage()->set_value(100);
  o->mutable_failure_percentage_threshold()->set_value(50);
  o->mutable_failure_percentage_minimum_hosts()->set_value(1);
  o->mutable_failure_percentage_request_volume()->set_value(5);
  FakeControlPlane cp([&](const DiscoveryRequest& request, int) -> Reply {
    if (!first_of_its_type(request)) return {};
    if (request.type_url() == kCds) return {{response(kCds, "1", "c1", {pack(cluster)})}, {}};
    if (request.type_url() == kEds) return {{response(kEds, "1", "e1", {pack(cla)})}, {}};
    return good_chain(request, 0);
  });
  absl::StatusOr<std::shared_ptr<Resolver>> resolver =
      xds::make_resolver("xds:///svc", bootstrap_for(cp.port()), fast_options());
  ASSERT_TRUE(resolver.ok());
  ChannelOptions options;
  options.resolver = *resolver;
  Channel channel("xds:///svc", options);
  testing::Echo::BlockingStub stub(channel);
  auto call = [&](bool wait_for_ready) {
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(5s);
    ctx.set_wait_for_ready(wait_for_ready);
    return stub.Echo(ctx, request, response);
  };
  // Priority 0 serves (and fails) the calls until its endpoint is ejected.
  EXPECT_EQ(call(true).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.service().attempts(), 0);  // lazy: priority 1 not even connected
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (b.service().attempts() == 0 && std::chrono::steady_clock::now() < deadline) {
    (void)call(true);
    std::this_thread::sleep_for(5ms);
  }
  // Without A50 under A27 (an ejected endpoint left out of the picker, its priority still READY)
  // the calls would find no endpoint and never reach priority 1.
  ASSERT_GT(b.service().attempts(), 0)
      << "no call reached priority 1 (not ejected, or no failover)";
  // Ejected for 30 s: every call, fail-fast ones too, goes to priority 1 and succeeds.
  const int failed = a.service().attempts();
  for (int i = 0; i < 40; ++i) {
    absl::Status status = call(/*wait_for_ready=*/false);
    ASSERT_TRUE(status.ok()) << i << " " << status;
  }
  EXPECT_EQ(a.service().attempts(), failed);
}

}  // namespace
}  // namespace ferry::xds_client_test

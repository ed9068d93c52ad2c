// libFuzzer target: the xDS resources a control plane sends (src/xds/resources.h: Listener,
// RouteConfiguration, Cluster, ClusterLoadAssignment), decoded from bytes and validated as gRFC
// A27/A28 say. The first byte picks the type (low two bits) and whether the resource comes in an
// envoy.service.discovery.v3.Resource wrapper (bit 2); the rest is the resource's serialized
// bytes. A refusal is INVALID_ARGUMENT; an accepted resource holds the invariants the client
// and the call path rely on (bounds, weights, contiguous priorities), and a call is routed
// through an accepted route configuration; the same bytes decode the same way twice.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ferry/metadata.h"
#include "fuzz_check.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "xds/resources.h"

namespace xd = ferry::xds::detail;

namespace {

void check_route_config(const xd::RouteConfig& config) {
  for (const xd::VirtualHost& host : config.virtual_hosts) {
    FUZZ_CHECK(host.routes.size() <= xd::kMaxRoutesPerVirtualHost);
    std::size_t matchers = 0;
    for (const xd::Route& route : host.routes) {
      FUZZ_CHECK(route.headers.size() <= xd::kMaxHeaderMatchersPerRoute);
      matchers += route.headers.size();
      FUZZ_CHECK(route.weighted_clusters.size() <= xd::kMaxWeightedClustersPerRoute);
      std::uint64_t total = 0;
      for (const auto& [name, weight] : route.weighted_clusters) {
        FUZZ_CHECK(weight > 0);
        total += weight;
      }
      if (!route.weighted_clusters.empty()) {
        FUZZ_CHECK(total == route.total_weight && total > 0);
      }
      FUZZ_CHECK(!route.fraction_per_million.has_value() || *route.fraction_per_million <= 1000000);
      for (const xd::HeaderMatcher& m : route.headers) {
        for (char c : m.name) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));  // lowercased
        if (m.kind == xd::HeaderMatcher::Kind::kRange) FUZZ_CHECK(m.range_start <= m.range_end);
      }
    }
    FUZZ_CHECK(matchers <= xd::kMaxHeaderMatchersPerVirtualHost);
  }
  // A call routed through it, as the channel would: no crash, an index in range, a weighted
  // cluster drawn in range.
  ferry::Metadata metadata;
  metadata.add("x-tier", "gold");
  metadata.add("x-tier", "silver");
  metadata.add("x-n", "42");
  xd::RouteRandom random{7};
  for (std::string_view authority : {"svc", "a.b.example.com", ""}) {
    const xd::VirtualHost* host = xd::find_virtual_host(config, authority);
    if (host == nullptr) continue;
    for (std::string_view path : {"/svc.A/Get", "/", ""}) {
      const int i = xd::match_route(*host, path, metadata, random);
      FUZZ_CHECK(i >= -1 && i < static_cast<int>(host->routes.size()));
      if (i >= 0 && !host->routes[i].weighted_clusters.empty()) {
        FUZZ_CHECK(xd::pick_weighted(host->routes[i], random) <
                   host->routes[i].weighted_clusters.size());
      }
    }
  }
}

void check_resource(const xd::Resource& resource) {
  if (const auto* listener = std::get_if<xd::ListenerResource>(&resource)) {
    FUZZ_CHECK(listener->rds_name.empty() != !listener->inline_routes.has_value());
    if (listener->inline_routes.has_value()) check_route_config(*listener->inline_routes);
  } else if (const auto* routes = std::get_if<xd::RouteConfig>(&resource)) {
    check_route_config(*routes);
  } else if (const auto* endpoints = std::get_if<xd::EndpointsResource>(&resource)) {
    for (const auto& priority : endpoints->priorities) {
      std::uint64_t total = 0;
      for (const auto& locality : priority) {
        FUZZ_CHECK(locality.weight > 0);
        total += locality.weight;
      }
      FUZZ_CHECK(total <= UINT32_MAX);
    }
    (void)xd::addresses_to_use(*endpoints);
  }
}

}  // namespace

// protobuf logs each string field that is not UTF-8 as it parses: a line per input here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto type = static_cast<xd::ResourceType>(data[0] & 3);
  const bool wrapped = (data[0] & 4) != 0;
  google::protobuf::Any any;
  any.set_type_url(std::string(xd::type_url(type)));
  any.set_value(reinterpret_cast<const char*>(data + 1), size - 1);
  if (wrapped) {
    envoy::service::discovery::v3::Resource wrapper;
    *wrapper.mutable_resource() = any;
    wrapper.set_name("wrapped");
    any.set_type_url("type.googleapis.com/envoy.service.discovery.v3.Resource");
    any.set_value(wrapper.SerializeAsString());
  }
  xd::DecodedResource decoded = xd::decode_resource(type, any);
  xd::DecodedResource again = xd::decode_resource(type, any);
  FUZZ_CHECK(decoded.name == again.name);
  FUZZ_CHECK(decoded.value.ok() == again.value.ok());
  if (!decoded.value.ok()) {
    FUZZ_CHECK(decoded.value.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(decoded.value.status() == again.value.status());
    return 0;
  }
  FUZZ_CHECK(decoded.value->index() == static_cast<std::size_t>(type));
  check_resource(*decoded.value);
  return 0;
}

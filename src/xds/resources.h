// The xDS resources ferry's ADS client reads (ferry::xds, private): Listener, RouteConfiguration,
// Cluster and ClusterLoadAssignment, decoded from the control plane's google.protobuf.Any and
// validated as gRFC A27 says, into the few fields the client uses. A resource that fails
// validation is an INVALID_ARGUMENT naming the field, which the client NACKs; nothing here can
// crash on any input (the protos come from the network).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/resolver.h"

namespace google::protobuf {
class Any;
}

namespace ferry::xds::detail {

// The four resource types of gRFC A27, in the order a listener leads to endpoints.
enum class ResourceType { kListener = 0, kRouteConfig = 1, kCluster = 2, kEndpoints = 3 };
inline constexpr int kResourceTypes = 4;
inline constexpr std::array<ResourceType, kResourceTypes> kAllResourceTypes = {
    ResourceType::kListener, ResourceType::kRouteConfig, ResourceType::kCluster,
    ResourceType::kEndpoints};

std::string_view type_url(ResourceType type);
// "lds", "rds", "cds", "eds".
std::string_view short_name(ResourceType type);
std::optional<ResourceType> type_of_url(std::string_view url);

struct Route {
  enum class Match { kPrefix, kPath, kRegex };
  Match match = Match::kPrefix;
  std::string pattern;
  bool case_sensitive = true;
  bool has_header_or_fraction_matchers = false;
  // The action: one cluster, weighted clusters, or none (a non-forwarding action).
  std::string cluster;
  std::vector<std::pair<std::string, std::uint32_t>> weighted_clusters;
  bool forwards() const { return !cluster.empty() || !weighted_clusters.empty(); }
};

struct VirtualHost {
  std::vector<std::string> domains;
  std::vector<Route> routes;
};

struct RouteConfig {
  std::vector<VirtualHost> virtual_hosts;
  friend bool operator==(const RouteConfig&, const RouteConfig&) = default;
};
inline bool operator==(const Route& a, const Route& b) {
  return a.match == b.match && a.pattern == b.pattern && a.case_sensitive == b.case_sensitive &&
         a.has_header_or_fraction_matchers == b.has_header_or_fraction_matchers &&
         a.cluster == b.cluster && a.weighted_clusters == b.weighted_clusters;
}
inline bool operator==(const VirtualHost& a, const VirtualHost& b) {
  return a.domains == b.domains && a.routes == b.routes;
}

struct ListenerResource {
  std::string rds_name;                      // the RouteConfiguration to fetch, or
  std::optional<RouteConfig> inline_routes;  // the routes the listener carries itself
};

struct ClusterResource {
  std::string eds_service_name;  // the ClusterLoadAssignment's name (the cluster's if unset)
};

struct EndpointLocality {
  std::uint32_t weight = 0;
  std::vector<Address> addresses;
};

struct EndpointsResource {
  // priorities[p]: the localities of priority p, each with a non-zero weight (A27: a locality
  // without one is ignored). Priorities are contiguous from 0.
  std::vector<std::vector<EndpointLocality>> priorities;
};

using Resource = std::variant<ListenerResource, RouteConfig, ClusterResource, EndpointsResource>;

struct DecodedResource {
  std::string name;                // empty when not even the name could be read
  absl::StatusOr<Resource> value;  // INVALID_ARGUMENT: why the resource is NACKed
};

// Decodes resource (of the response's type; an envoy.service.discovery.v3.Resource wrapper is
// unwrapped) and validates it.
DecodedResource decode_resource(ResourceType type, const google::protobuf::Any& resource);

// gRFC A27's virtual host choice: the most specific domain matching authority (exact, then the
// longest suffix wildcard "*.x", then the longest prefix wildcard "x.*", then "*"); null if none.
const VirtualHost* find_virtual_host(const RouteConfig& config, std::string_view authority);

// The addresses a channel spreads its calls over: those of the lowest priority that has any.
std::vector<Address> addresses_to_use(const EndpointsResource& endpoints);

}  // namespace ferry::xds::detail

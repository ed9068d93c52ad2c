// The xDS resources ferry's ADS client reads (ferry::xds, private): Listener, RouteConfiguration,
// Cluster and ClusterLoadAssignment, decoded from the control plane's google.protobuf.Any and
// validated as gRFC A27 says, into the few fields the client uses. A resource that fails
// validation is an INVALID_ARGUMENT naming the field, which the client NACKs; nothing here can
// crash on any input (the protos come from the network).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/outlier_detection.h"
#include "common/splitmix.h"
#include "ferry/metadata.h"
#include "ferry/resolver.h"

namespace google::protobuf {
class Any;
}
namespace envoy::config::cluster::v3 {
class Cluster;
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

// gRFC A28's header matcher: one header of the call's metadata (its values joined with ","),
// "-bin" headers as if absent, content-type as "application/grpc".
struct HeaderMatcher {
  enum class Kind { kExact, kPrefix, kSuffix, kContains, kPresent, kRange };
  std::string name;  // lowercase
  Kind kind = Kind::kExact;
  std::string value;                            // exact, prefix, suffix, contains
  bool ignore_case = false;                     // string_match's ignore_case
  bool present = true;                          // kPresent: whether the header must be there
  std::int64_t range_start = 0, range_end = 0;  // kRange: [start, end), base 10
  bool invert = false;
  friend bool operator==(const HeaderMatcher&, const HeaderMatcher&) = default;
};

// gRFC A44's retry policy: Envoy's RetryPolicy as gRPC reads it (its other fields ignored).
struct RouteRetryPolicy {
  // retry_on's gRPC conditions (cancelled, deadline-exceeded, internal, resource-exhausted,
  // unavailable), each once; the others are ignored. Empty: the route's calls are not retried
  // (and its virtual host's policy does not apply either, as in gRPC).
  std::vector<absl::StatusCode> retry_on;
  int max_attempts = 2;  // num_retries + 1 (num_retries defaults to 1), at most 5 as in gRPC
  // retry_back_off: base_interval (the first back-off's bound, doubled per retry) and
  // max_interval (10 x base_interval when unset); 25 ms and 250 ms without retry_back_off.
  // Each over 0; a part of a millisecond counts as one.
  std::chrono::milliseconds base_interval{25};
  std::chrono::milliseconds max_interval{250};
  friend bool operator==(const RouteRetryPolicy&, const RouteRetryPolicy&) = default;
};

struct Route {
  // safe_regex path matchers are NACKed: ferry has no RE2 (docs/xds.md).
  enum class Match { kPrefix, kPath };
  Match match = Match::kPrefix;
  std::string pattern;
  bool case_sensitive = true;
  std::vector<HeaderMatcher> headers;
  // runtime_fraction's default_value, per million (capped at 1,000,000); absent: always.
  std::optional<std::uint32_t> fraction_per_million;
  // The action: one cluster, weighted clusters, or none (a non-forwarding action).
  std::string cluster;
  std::vector<std::pair<std::string, std::uint32_t>> weighted_clusters;  // weights > 0
  std::uint32_t total_weight = 0;  // of weighted_clusters: > 0, within 32 bits
  // gRFC A31: the longest a call of the route may take (its deadline is shortened to it):
  // RouteAction.max_stream_duration's grpc_timeout_header_max when set, else its
  // max_stream_duration. Zero: no limit; unset: the listener's default
  // (ListenerResource::max_stream_duration).
  std::optional<std::chrono::milliseconds> max_stream_duration;
  // gRFC A44: the route's retry_policy, else its virtual host's; unset: none from xDS.
  std::optional<RouteRetryPolicy> retry_policy;
  bool forwards() const { return !cluster.empty() || !weighted_clusters.empty(); }
  friend bool operator==(const Route&, const Route&) = default;
};

struct VirtualHost {
  std::vector<std::string> domains;
  std::vector<Route> routes;
  friend bool operator==(const VirtualHost&, const VirtualHost&) = default;
};

struct RouteConfig {
  std::vector<VirtualHost> virtual_hosts;
  friend bool operator==(const RouteConfig&, const RouteConfig&) = default;
};

// Bounds on what a route configuration may ask of every call (the matching is linear in the
// routes and their header matchers) and of a channel (a connection set per cluster): beyond
// them the resource is NACKed.
inline constexpr std::size_t kMaxRoutesPerVirtualHost = 1000;
inline constexpr std::size_t kMaxHeaderMatchersPerRoute = 32;
// Header matchers in all a virtual host's routes: each scans the call's metadata, so this, not
// routes x matchers per route, bounds a call's cost (a control plane's 1,000 routes of 32
// matchers, each passing but the last, cost 1.5 ms per call without it).
inline constexpr std::size_t kMaxHeaderMatchersPerVirtualHost = 256;
inline constexpr std::size_t kMaxWeightedClustersPerRoute = 256;
inline constexpr std::size_t kMaxClustersPerVirtualHost = 256;

struct ListenerResource {
  std::string rds_name;                      // the RouteConfiguration to fetch, or
  std::optional<RouteConfig> inline_routes;  // the routes the listener carries itself
  // gRFC A31: the HttpConnectionManager's common_http_protocol_options.max_stream_duration, the
  // default for routes that set none.
  std::optional<std::chrono::milliseconds> max_stream_duration;
};

struct ClusterResource {
  std::string eds_service_name;  // the ClusterLoadAssignment's name (the cluster's if unset)
  ::ferry::detail::ClusterPolicy policy;  // gRFC A32's max_requests, A50's outlier detection
};

// gRFC A32's circuit_breakers (the DEFAULT priority's max_requests) and A50's
// outlier_detection, validated as A50 says (percentages over 100, invalid durations:
// INVALID_ARGUMENT, the cluster NACKed). src/xds/cluster_policy.cc.
absl::StatusOr<::ferry::detail::ClusterPolicy> decode_cluster_policy(
    const envoy::config::cluster::v3::Cluster& cluster);

struct EndpointLocality {
  std::uint32_t weight = 0;
  std::vector<Address> addresses;
  friend bool operator==(const EndpointLocality&, const EndpointLocality&) = default;
};

struct EndpointsResource {
  // priorities[p]: the localities of priority p, each with a non-zero weight (A27: a locality
  // without one is ignored). Priorities are contiguous from 0.
  std::vector<std::vector<EndpointLocality>> priorities;
  friend bool operator==(const EndpointsResource&, const EndpointsResource&) = default;
};

// Bounds on a ClusterLoadAssignment (beyond them it is NACKed), the same as a channel's priority
// policy keeps to (client/priority_policy.h): a channel connects to every endpoint of the
// priorities it reaches, chooses a priority in time linear in their count on each change, and
// rebuilds a priority's picker in time linear in its endpoints.
inline constexpr std::size_t kMaxLocalitiesPerCluster = 10000;
inline constexpr std::size_t kMaxEndpointsPerCluster = 10000;
inline constexpr std::size_t kMaxPrioritiesPerCluster = 1000;

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

// gRFC A28's per-call route choice, used on the call path (no allocation but a header repeated
// in the call's metadata, joined in a reused thread-local buffer).
// The random source for runtime fractions and weighted clusters; seeded by the caller (a fixed
// seed in tests).
using RouteRandom = ::ferry::detail::SplitMix64;
// The index of the first route of host that matches a call to path (its :path, "/service/method")
// with metadata, or -1 when none does.
int match_route(const VirtualHost& host, std::string_view path, const Metadata& metadata,
                RouteRandom& random);
bool route_matches(const Route& route, std::string_view path, const Metadata& metadata,
                   RouteRandom& random);
// Which of route's weighted_clusters (not empty) a call goes to, by weight.
std::size_t pick_weighted(const Route& route, RouteRandom& random);

// The addresses of the lowest priority that has any (none: the cluster has no healthy endpoint).
std::vector<Address> addresses_to_use(const EndpointsResource& endpoints);

}  // namespace ferry::xds::detail

// Per-call routing (client layer, private): how a resolver that knows several clusters (xDS,
// gRFC A28) has its channel pick one for each call. Such a resolver implements RoutingResolver
// beside Resolver; the channel then asks it for a RoutingConfig instead of addresses, keeps a
// connection set (subchannels and a priority policy, client/priority_policy.h) per cluster, and
// before each call asks the config's CallRouter which cluster takes it (grpc-go's config
// selector). Channels over any other resolver never see this: their hot path is the single
// picker's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "asio/any_io_executor.hpp"
#include "asio/awaitable.hpp"
#include "client/outlier_detection.h"
#include "ferry/client_context.h"
#include "ferry/resolver.h"
#include "ferry/retry.h"

namespace ferry::detail {

// What a route sets for its calls on top of the channel's MethodConfig (gRFC A31, A44).
struct RouteCallConfig {
  // A31: the call's deadline becomes min(its own, now + timeout) when its route is chosen;
  // unset or zero: no limit (the channel's MethodConfig timeout, if any, still applies).
  std::optional<std::chrono::milliseconds> timeout;
  // A44: in place of the channel's MethodConfig retry policy for the call when set; one with no
  // retryable codes (or one attempt) means no retries.
  std::optional<RetryPolicy> retry_policy;
};

// A router's choice for a call.
struct RouteChoice {
  int cluster = -1;                         // the index in RoutingConfig::clusters, or -1
  const RouteCallConfig* config = nullptr;  // the route's settings (the router's); may be null
};

// Chooses a call's route and cluster. Immutable once handed over; called on the channel's
// thread, once per call (gRFC A31: a call's retries keep its first choice). It must not
// allocate on the common path.
class CallRouter {
 public:
  virtual ~CallRouter() = default;
  // The cluster that takes a call of method (its :path) with context's metadata and the
  // route's settings, or cluster -1 with error set (UNAVAILABLE: no route matches, or the route
  // does not forward): the call fails with it.
  virtual RouteChoice route(std::string_view method, const ClientContext& context,
                            absl::Status& error) const = 0;
};

// A call's route on a routing resolver's channel, chosen once (by its first attempt, or when a
// waiting call first finds a configuration) and kept by the call's later attempts, which go to
// the same cluster (any of its endpoints) with the same settings, as gRFC A31 says. Owned by
// the call (a unary call's frame, a retried stream), on the channel's thread.
struct CallRoute {
  std::shared_ptr<const CallRouter> router;  // the router that chose; null: not chosen yet
  const RouteCallConfig* config = nullptr;   // the route's settings, kept alive by router
  std::uint64_t cluster_id = 0;              // the channel's id of the cluster's connection set
  std::size_t cluster_index = 0;             // where that set was (a hint: checked by id)
  absl::Status error;                        // no route takes the call: why (it fails with it)
};

// One locality of a cluster's priority (gRFC A27): its load_balancing_weight and endpoints.
struct RoutedLocality {
  std::uint32_t weight = 1;
  std::vector<Address> addresses;
  friend bool operator==(const RoutedLocality&, const RoutedLocality&) = default;
};

struct RoutedCluster {
  std::string name;  // a connection set is kept across updates by its name
  // The cluster's endpoints, or why it has none (its calls fail with it, UNAVAILABLE).
  absl::StatusOr<std::vector<Address>> addresses;
  // gRFC A27's endpoints, when the resolver knows them (client/priority_policy.h): priorities[p]
  // the localities of priority p, 0 first. Empty: `addresses` are one priority of one locality.
  std::vector<std::vector<RoutedLocality>> priorities = {};
  ClusterPolicy policy = {};  // gRFC A32's limit, A50's outlier detection
};

struct RoutingConfig {
  std::vector<RoutedCluster> clusters;
  std::shared_ptr<const CallRouter> router;  // never null
  // gRFC A27's priority policy: how long a priority may stay CONNECTING before the next one is
  // tried (gRPC's 10 s), and how long a priority below the one in use keeps its connections
  // (gRPC's child retention, 15 minutes).
  std::chrono::milliseconds failover_timeout = std::chrono::seconds(10);
  std::chrono::milliseconds retention_timeout = std::chrono::minutes(15);
};

// Implemented beside Resolver by resolvers that route calls; Resolver::watch tells the channel
// of changes as for any resolver.
class RoutingResolver {
 public:
  virtual ~RoutingResolver() = default;
  // As Resolver::resolve, for the whole configuration: UNAVAILABLE fails every call.
  virtual asio::awaitable<absl::StatusOr<RoutingConfig>> resolve_routes(
      asio::any_io_executor executor) = 0;
};

}  // namespace ferry::detail

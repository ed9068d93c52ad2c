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
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "asio/any_io_executor.hpp"
#include "asio/awaitable.hpp"
#include "ferry/client_context.h"
#include "ferry/resolver.h"

namespace ferry::detail {

// Chooses a call's cluster. Immutable once handed over; called on the channel's thread, once per
// call attempt (and again when a waiting call re-picks after a change). It must not allocate on
// the common path.
class CallRouter {
 public:
  virtual ~CallRouter() = default;
  // The index in RoutingConfig::clusters of the cluster that takes a call of method (its :path)
  // with context's metadata, or -1 with error set (UNAVAILABLE: no route matches, or the route
  // does not forward): the call fails with it.
  virtual int route(std::string_view method, const ClientContext& context,
                    absl::Status& error) const = 0;
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

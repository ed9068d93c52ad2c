// Per-call routing (client layer, private): how a resolver that knows several clusters (xDS,
// gRFC A28) has its channel pick one for each call. Such a resolver implements RoutingResolver
// beside Resolver; the channel then asks it for a RoutingConfig instead of addresses, keeps a
// connection set (subchannels and a round_robin policy) per cluster, and before each call asks
// the config's CallRouter which cluster takes it (grpc-go's config selector). Channels over any
// other resolver never see this: their hot path is the single picker's.
#pragma once

#include <cstddef>
#include <memory>
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

struct RoutedCluster {
  std::string name;  // a connection set is kept across updates by its name
  // The cluster's endpoints, or why it has none (its calls fail with it, UNAVAILABLE).
  absl::StatusOr<std::vector<Address>> addresses;
  ClusterPolicy policy;  // gRFC A32's limit, A50's outlier detection
};

struct RoutingConfig {
  std::vector<RoutedCluster> clusters;
  std::shared_ptr<const CallRouter> router;  // never null
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

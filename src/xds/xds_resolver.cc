// xds:/// targets (ferry/xds.h): a Resolver over the shared ADS client's watch of one listener.
// The client's thread hands each new result to the resolver's state, made into the channel's
// routing configuration (client/call_router.h: a connection set per cluster, and a router that
// matches each call against the virtual host's routes, gRFC A28); the channel's thread reads it
// in resolve_routes(), which waits for the first one, and is told of the later ones through the
// callback the channel gave watch().
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "client/call_router.h"
#include "client/priority_policy.h"
#include "common/strings.h"
#include "ferry/xds.h"
#include "xds/xds_client.h"

namespace ferry::xds {
namespace {

using ::ferry::detail::to_absl;
using RoutingResult = absl::StatusOr<::ferry::detail::RoutingConfig>;

// gRFC A28's choice for each call: the first route of the virtual host that matches the call's
// :path and metadata, then its cluster or one of its weighted clusters by weight. Immutable;
// made on the xDS client's thread once per configuration, used on the channel's per call.
class XdsRouter final : public ::ferry::detail::CallRouter {
 public:
  // clusters: the configuration's, in the order the channel gets them. max_stream_duration:
  // the listener's default (gRFC A31).
  XdsRouter(detail::VirtualHost host, const std::vector<std::string>& clusters,
            std::optional<std::chrono::milliseconds> max_stream_duration)
      : host_(std::move(host)) {
    auto index_of = [&clusters](const std::string& name) {
      return static_cast<int>(std::lower_bound(clusters.begin(), clusters.end(), name) -
                              clusters.begin());
    };
    for (const detail::Route& route : host_.routes) {
      std::vector<int> indices;
      if (!route.cluster.empty()) indices.push_back(index_of(route.cluster));
      for (const auto& [name, weight] : route.weighted_clusters) {
        indices.push_back(index_of(name));
      }
      targets_.push_back(std::move(indices));
      configs_.push_back(call_config_of(route, max_stream_duration));
    }
  }

  ::ferry::detail::RouteChoice route(std::string_view method, const ClientContext& context,
                                     absl::Status& error) const override {
    thread_local detail::RouteRandom random{
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() ^
                                   reinterpret_cast<std::uintptr_t>(&error))};
    const int r = detail::match_route(host_, method, context.metadata(), random);
    if (r < 0) {
      error = absl::UnavailableError(absl::StrCat("xDS: no route matches ", to_absl(method)));
      return {};
    }
    const detail::Route& route = host_.routes[r];
    const std::vector<int>& targets = targets_[r];
    if (targets.empty()) {
      error = absl::UnavailableError(absl::StrCat("xDS: the route for ", to_absl(method),
                                                  " does not forward (a non-route action)"));
      return {};
    }
    const ::ferry::detail::RouteCallConfig* config = configs_[r] ? &*configs_[r] : nullptr;
    if (route.weighted_clusters.empty()) return {targets[0], config};
    return {targets[detail::pick_weighted(route, random)], config};
  }

 private:
  // What a route sets for its calls: gRFC A31's timeout (the route's max_stream_duration, else
  // the listener's; zero or neither: none) and A44's retry policy (a route whose retry_on has no
  // gRPC condition keeps one without codes: no retries, the virtual host's not taken either).
  static std::optional<::ferry::detail::RouteCallConfig> call_config_of(
      const detail::Route& route, std::optional<std::chrono::milliseconds> listener_default) {
    ::ferry::detail::RouteCallConfig config;
    const auto timeout = route.max_stream_duration ? route.max_stream_duration : listener_default;
    if (timeout && timeout->count() > 0) config.timeout = timeout;
    if (route.retry_policy) {
      const detail::RouteRetryPolicy& xds = *route.retry_policy;
      RetryPolicy policy;
      policy.max_attempts = xds.max_attempts;
      policy.initial_backoff = xds.base_interval;
      policy.max_backoff = xds.max_interval;
      policy.backoff_multiplier = 2;  // A44
      policy.retryable_status_codes = xds.retry_on;
      config.retry_policy = std::move(policy);
    }
    if (!config.timeout && !config.retry_policy) return std::nullopt;
    return config;
  }

  detail::VirtualHost host_;
  std::vector<std::vector<int>> targets_;  // per route: its clusters' indices
  // Per route: its settings, when it has any (pointed to by the calls that take it).
  std::vector<std::optional<::ferry::detail::RouteCallConfig>> configs_;
};

static_assert(detail::kMaxLocalitiesPerCluster == ::ferry::detail::kMaxLocalitiesPerCluster &&
                  detail::kMaxEndpointsPerCluster == ::ferry::detail::kMaxEndpointsPerCluster &&
                  detail::kMaxPrioritiesPerCluster == ::ferry::detail::kMaxPrioritiesPerCluster,
              "what ferry::xds NACKs is what a channel's priority policy takes");

// A cluster's endpoints as its channel's priority policy takes them (gRFC A27), and all its
// addresses.
::ferry::detail::RoutedCluster routed_cluster(const std::string& name,
                                              const absl::StatusOr<detail::EndpointsResource>& e) {
  if (!e.ok()) return {name, e.status()};
  ::ferry::detail::RoutedCluster out{name, std::vector<Address>()};
  std::vector<Address> all;
  for (const auto& priority : e->priorities) {
    std::vector<::ferry::detail::RoutedLocality> localities;
    localities.reserve(priority.size());
    for (const detail::EndpointLocality& locality : priority) {
      localities.push_back({locality.weight, locality.addresses});
      all.insert(all.end(), locality.addresses.begin(), locality.addresses.end());
    }
    out.priorities.push_back(std::move(localities));
  }
  out.addresses = std::move(all);
  return out;
}

RoutingResult routing_of(const detail::WatchResult& result, const XdsClientOptions& options) {
  if (!result.ok()) return result.status();
  ::ferry::detail::RoutingConfig config;
  std::vector<std::string> names;
  for (const auto& [name, endpoints] : result->clusters) {
    names.push_back(name);
    ::ferry::detail::RoutedCluster cluster = routed_cluster(name, endpoints);
    for (const auto& [policy_name, policy] : result->cluster_policies) {
      if (policy_name == name) cluster.policy = policy;  // else A32's default: no CDS resource
    }
    config.clusters.push_back(std::move(cluster));
  }
  config.router =
      std::make_shared<XdsRouter>(result->virtual_host, names, result->max_stream_duration);
  config.failover_timeout = options.priority_failover_timeout;
  config.retention_timeout = options.priority_retention_timeout;
  return config;
}

struct ResolverState {
  std::mutex mutex;
  std::optional<RoutingResult> latest;
  std::function<void()> changed;  // the channel's; empty once it closed
  // resolve() calls waiting for the first result: each is woken on its own executor.
  std::vector<std::shared_ptr<asio::steady_timer>> waiters;
};

class XdsResolver final : public Resolver, public ::ferry::detail::RoutingResolver {
 public:
  XdsResolver(std::shared_ptr<detail::XdsClient> client, std::string listener,
              const XdsClientOptions& options)
      : client_(std::move(client)), state_(std::make_shared<ResolverState>()) {
    id_ = client_->watch(std::move(listener), [weak = std::weak_ptr<ResolverState>(state_),
                                               options](const detail::WatchResult& result) {
      auto state = weak.lock();
      if (state == nullptr) return;
      std::function<void()> changed;
      {
        std::lock_guard lock(state->mutex);
        state->latest = routing_of(result, options);
        for (auto& timer : state->waiters) {
          asio::post(timer->get_executor(), [timer] { timer->cancel(); });
        }
        state->waiters.clear();
        changed = state->changed;
      }
      if (changed) changed();
    });
  }
  ~XdsResolver() override { client_->unwatch(id_); }

  // A channel routes through resolve_routes(); addresses alone cannot say which call goes where.
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    co_return absl::UnimplementedError("xDS: the configuration is a routing one (resolve_routes)");
  }

  asio::awaitable<RoutingResult> resolve_routes(asio::any_io_executor executor) override {
    auto timer = std::make_shared<asio::steady_timer>(executor);
    {
      std::lock_guard lock(state_->mutex);
      if (state_->latest.has_value()) co_return *state_->latest;
      timer->expires_at(asio::steady_timer::time_point::max());
      state_->waiters.push_back(timer);
    }
    asio::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    std::lock_guard lock(state_->mutex);
    std::erase(state_->waiters, timer);
    if (state_->latest.has_value()) co_return *state_->latest;
    co_return absl::UnavailableError("xDS: no configuration yet");
  }

  void watch(std::function<void()> changed) override {
    std::lock_guard lock(state_->mutex);
    state_->changed = std::move(changed);
  }

  std::string_view load_balancing_policy() const override { return "round_robin"; }

 private:
  std::shared_ptr<detail::XdsClient> client_;
  std::shared_ptr<ResolverState> state_;
  std::uint64_t id_ = 0;
};

// A resolver whose every resolution fails with why the target cannot be followed (a bad
// bootstrap), so that a channel made with it fails its calls with that, never crashes.
class FailingResolver final : public Resolver {
 public:
  explicit FailingResolver(absl::Status status) : status_(std::move(status)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    co_return status_;
  }

 private:
  absl::Status status_;
};

// "xds:///name" -> name; gRFC A47's "xds://authority/name" is refused.
absl::StatusOr<std::string> listener_of(std::string_view target) {
  constexpr std::string_view kPrefix = "xds:///";
  if (!target.starts_with(kPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("xDS target '", to_absl(target.substr(0, 200)),
                                                   "' is not xds:///name (an authority, gRFC A47's "
                                                   "federation, is not supported)"));
  }
  std::string_view name = target.substr(kPrefix.size());
  if (name.empty()) return absl::InvalidArgumentError("xDS target 'xds:///' names no listener");
  return std::string(name);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Resolver>> make_resolver(std::string_view target,
                                                        const Bootstrap& bootstrap,
                                                        const XdsClientOptions& options) {
  absl::StatusOr<std::string> listener = listener_of(target);
  if (!listener.ok()) return listener.status();
  if (bootstrap.xds_servers.empty()) {
    return absl::InvalidArgumentError("xds bootstrap: no xds_servers");
  }
  return std::make_shared<XdsResolver>(detail::XdsClient::shared(bootstrap, options),
                                       *std::move(listener), options);
}

void register_resolver() {
  register_resolver_scheme(
      "xds", [](std::string_view target) -> absl::StatusOr<std::shared_ptr<Resolver>> {
        absl::StatusOr<std::string> listener = listener_of(target);
        if (!listener.ok()) return listener.status();
        absl::StatusOr<Bootstrap> bootstrap = load_bootstrap();
        if (!bootstrap.ok()) {
          return std::make_shared<FailingResolver>(absl::UnavailableError(
              absl::StrCat("xDS target '", to_absl(target), "': ", bootstrap.status().message())));
        }
        return make_resolver(target, *bootstrap);
      });
}

}  // namespace ferry::xds

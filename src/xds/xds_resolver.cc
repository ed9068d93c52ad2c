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
  // clusters: the configuration's, in the order the channel gets them.
  XdsRouter(detail::VirtualHost host, const std::vector<std::string>& clusters)
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
    }
  }

  int route(std::string_view method, const ClientContext& context,
            absl::Status& error) const override {
    thread_local detail::RouteRandom random{
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() ^
                                   reinterpret_cast<std::uintptr_t>(&error))};
    const int r = detail::match_route(host_, method, context.metadata(), random);
    if (r < 0) {
      error = absl::UnavailableError(absl::StrCat("xDS: no route matches ", to_absl(method)));
      return -1;
    }
    const detail::Route& route = host_.routes[r];
    const std::vector<int>& targets = targets_[r];
    if (targets.empty()) {
      error = absl::UnavailableError(absl::StrCat("xDS: the route for ", to_absl(method),
                                                  " does not forward (a non-route action)"));
      return -1;
    }
    if (route.weighted_clusters.empty()) return targets[0];
    return targets[detail::pick_weighted(route, random)];
  }

 private:
  detail::VirtualHost host_;
  std::vector<std::vector<int>> targets_;  // per route: its clusters' indices
};

RoutingResult routing_of(const detail::WatchResult& result) {
  if (!result.ok()) return result.status();
  ::ferry::detail::RoutingConfig config;
  std::vector<std::string> names;
  for (const auto& [name, addresses] : result->clusters) {
    names.push_back(name);
    ::ferry::detail::ClusterPolicy cluster_policy;  // A32's default without a CDS resource
    for (const auto& [policy_name, policy] : result->cluster_policies) {
      if (policy_name == name) cluster_policy = policy;
    }
    config.clusters.push_back({name, addresses, std::move(cluster_policy)});
  }
  config.router = std::make_shared<XdsRouter>(result->virtual_host, names);
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
  XdsResolver(std::shared_ptr<detail::XdsClient> client, std::string listener)
      : client_(std::move(client)), state_(std::make_shared<ResolverState>()) {
    id_ = client_->watch(std::move(listener), [weak = std::weak_ptr<ResolverState>(state_)](
                                                  const detail::WatchResult& result) {
      auto state = weak.lock();
      if (state == nullptr) return;
      std::function<void()> changed;
      {
        std::lock_guard lock(state->mutex);
        state->latest = routing_of(result);
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
                                       *std::move(listener));
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

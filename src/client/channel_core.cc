// Implementation of src/client/channel_core.h.
#include "client/channel_core.h"

#include <algorithm>
#include <exception>
#include <random>

#include "absl/strings/str_cat.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "client/client_call.h"
#include "client/target.h"
#include "client/target_resolver.h"
#include "common/strings.h"
#include "ferry/client_interceptor.h"

namespace ferry::detail {

ChannelCore::ChannelCore(asio::io_context::executor_type executor, std::string target,
                         ChannelOptions options)
    : executor_(executor),
      target_string_(std::move(target)),
      canonical_target_(detail::canonical_target(target_string_)),
      options_(std::move(options)),
      resolve_backoff_(options_.backoff),
      resolve_timer_(executor),
      refresh_timer_(executor),
      throttle_(options_.retry_throttling),
      changed_(executor) {
  for (const auto& interceptor : options_.interceptors) {
    interceptors_use_duration_ = interceptors_use_duration_ || interceptor->uses_duration();
  }
  absl::StatusOr<ResolvedTarget> resolved = resolver_for_target(target_string_);
  auto settings = std::make_shared<SubchannelSettings>();
  if (resolved.ok()) {
    if (options_.authority.empty()) options_.authority = resolved->authority;
    settings->tls_host = resolved->tls_host;
    resolver_ = std::move(resolved->resolver);
  } else if (options_.resolver == nullptr) {
    // A target that does not parse: UNAVAILABLE, as gRPC's channels fail; one ferry cannot
    // serve (a chosen DNS server) keeps its UNIMPLEMENTED.
    target_error_ = resolved.status().code() == absl::StatusCode::kUnimplemented
                        ? resolved.status()
                        : absl::UnavailableError(resolved.status().message());
  }
  if (options_.resolver != nullptr) {
    // A user's resolver: the target only names the service (the default :authority).
    resolver_ = options_.resolver;
    if (options_.authority.empty()) {
      // "scheme:///name" (xds:///name given its resolver): the name; else the whole target.
      const std::size_t path = target_string_.find(":///");
      options_.authority =
          path != std::string::npos ? target_string_.substr(path + 4) : target_string_;
    }
    if (settings->tls_host.empty()) settings->tls_host = options_.authority;
  }
  settings->options = options_;
  settings->target = canonical_target_;
  settings_ = std::move(settings);
  has_method_configs_ = !options_.method_configs.empty() || !options_.method_config.empty();
  // A resolver that routes each call to a cluster (xDS, client/call_router.h).
  routing_ = dynamic_cast<RoutingResolver*>(resolver_.get());
  if (resolver_ != nullptr) {
    // A resolver may call for a policy (xDS clusters: round_robin).
    const std::string_view policy = resolver_->load_balancing_policy();
    if (policy == "round_robin") options_.load_balancing = LoadBalancingPolicy::kRoundRobin;
    if (policy == "pick_first") options_.load_balancing = LoadBalancingPolicy::kPickFirst;
  }
  policy_ = options_.load_balancing == LoadBalancingPolicy::kRoundRobin ? make_round_robin(*this)
                                                                        : make_pick_first(*this);
}

ChannelCore::~ChannelCore() {
  for (const auto& s : subchannels_) s->shutdown(/*graceful=*/false);
  for (const auto& set : clusters_) set->policy->shutdown(/*graceful=*/false);
}

ChannelCore::ClusterSet::ClusterSet(ChannelCore& owner, std::string cluster_name)
    : core(owner),
      name(std::move(cluster_name)),
      id(owner.next_cluster_id_++),
      policy(std::make_unique<PriorityPolicy>(owner.executor_, *this)),
      detector_timer(owner.executor_) {}

void ChannelCore::set_state(ConnectivityState state) {
  if (state_.load(std::memory_order_relaxed) == ConnectivityState::kShutdown) return;
  state_.store(state, std::memory_order_release);
}

void ChannelCore::update_picker(Picker picker, ConnectivityState state, absl::Status error) {
  if (closed_) return;
  // The old picker may hold the last reference to a connection whose close is what brought us
  // here (a stream's on_closed inside Connection::close): it goes once this stack has unwound.
  std::swap(picker_, picker);
  asio::post(executor_, [old = std::move(picker)] {});
  if (state == ConnectivityState::kTransientFailure) error_ = std::move(error);
  set_state(state);
  changed_.notify_all();
}

void ChannelCore::on_subchannel_state(Subchannel* subchannel, ConnectivityState state) {
  if (closed_) return;
  // A lost or failing connection may mean the addresses changed: ask the resolver again (at a
  // bounded rate).
  if (state == ConnectivityState::kIdle || state == ConnectivityState::kTransientFailure) {
    request_resolution();
  }
  policy_->on_subchannel_state(subchannel, state);
  // A waiting call may now find an address to try (pick_first went IDLE).
  if (waiting_calls_ > 0 && state_.load(std::memory_order_relaxed) == ConnectivityState::kIdle) {
    policy_->exit_idle();
  }
}

void ChannelCore::exit_idle() {
  if (closed_ || !target_error_.ok()) return;
  if (!resolved_once_) {
    if (state() == ConnectivityState::kIdle) {
      set_state(ConnectivityState::kConnecting);
      changed_.notify_all();
    }
    connect_requested_ = true;
    request_resolution();
    return;
  }
  if (router_ != nullptr) {
    for (const auto& set : clusters_) set->policy->exit_idle();
    return;
  }
  policy_->exit_idle();
}

void ChannelCore::request_resolution() {
  if (closed_ || resolver_ == nullptr) return;
  if (resolving_) {
    resolve_again_ = resolved_once_;
    return;
  }
  resolving_ = true;
  if (!watching_resolver_) {
    // A resolver told of changes says so through this (ferry/resolver.h), from its thread.
    watching_resolver_ = true;
    resolver_->watch([weak = weak_from_this(), executor = executor_] {
      asio::post(executor, [weak] {
        if (auto self = weak.lock()) self->on_resolver_changed();
      });
    });
  }
  const auto not_before = resolved_once_ ? last_resolution_ + options_.min_resolve_interval
                                         : std::chrono::steady_clock::time_point{};
  asio::co_spawn(executor_, resolve(shared_from_this(), not_before), asio::detached);
}

void ChannelCore::on_resolver_changed() {
  if (closed_ || resolver_ == nullptr) return;
  if (resolving_) {
    // After this resolution, or now if it is waiting out a back-off or the interval.
    resolve_again_ = true;
    resolve_now_ = true;
    resolve_timer_.cancel();
    return;
  }
  resolving_ = true;
  asio::co_spawn(executor_, resolve(shared_from_this(), {}), asio::detached);
}

asio::awaitable<void> ChannelCore::resolve(std::shared_ptr<ChannelCore> /*keeps it alive*/,
                                           std::chrono::steady_clock::time_point not_before) {
  while (true) {
    if (std::chrono::steady_clock::now() < not_before) {
      resolve_timer_.expires_at(not_before);
      asio::error_code ec;
      co_await resolve_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    if (closed_) break;
    resolve_again_ = false;
    // This coroutine is spawned detached: an exception (an application's resolver may throw)
    // would be dropped and leave resolving_ set for ever, so it counts as a failed resolution.
    absl::StatusOr<std::vector<Address>> addresses;
    absl::StatusOr<RoutingConfig> routes;  // from a routing resolver, instead
    try {
      if (routing_ != nullptr) {
        routes = co_await routing_->resolve_routes(executor_);
        addresses = routes.ok() ? absl::StatusOr<std::vector<Address>>(std::vector<Address>())
                                : routes.status();
      } else {
        addresses = co_await resolver_->resolve(executor_);
      }
    } catch (const std::exception& e) {
      addresses = absl::UnavailableError(absl::StrCat("the resolver threw: ", e.what()));
    }
    if (closed_) break;
    last_resolution_ = std::chrono::steady_clock::now();
    if (routing_ == nullptr && addresses.ok() && addresses->empty()) {
      addresses = absl::UnavailableError("the resolver returned no address");
    }
    if (addresses.ok()) {
      resolve_backoff_.reset();
      resolved_once_ = true;
      if (routing_ != nullptr) {
        apply_routes(*std::move(routes));
      } else {
        apply_addresses(*std::move(addresses));
      }
      schedule_refresh();
      if (!resolve_again_) break;
      not_before = std::exchange(resolve_now_, false)
                       ? std::chrono::steady_clock::time_point{}
                       : last_resolution_ + options_.min_resolve_interval;
      continue;
    }
    // Failed: with no address yet, the channel is in TRANSIENT_FAILURE; retry with back-off.
    if (subchannels_.empty() && router_ == nullptr) {
      error_ = addresses.status();
      set_state(ConnectivityState::kTransientFailure);
      changed_.notify_all();
    }
    not_before = std::exchange(resolve_now_, false) ? std::chrono::steady_clock::time_point{}
                                                    : last_resolution_ + resolve_backoff_.next();
  }
  resolving_ = false;
}

std::vector<std::shared_ptr<Subchannel>> ChannelCore::subchannels_for(
    std::vector<Address> addresses, std::vector<std::shared_ptr<Subchannel>>& current,
    SubchannelListener* listener) {
  std::vector<std::shared_ptr<Subchannel>> next;
  next.reserve(addresses.size());
  for (Address& a : addresses) {
    auto same = [&a](const std::shared_ptr<Subchannel>& s) { return s->address() == a; };
    if (std::any_of(next.begin(), next.end(), same)) continue;  // listed twice
    auto kept = std::find_if(current.begin(), current.end(), same);
    if (kept != current.end()) {
      next.push_back(std::move(*kept));
      current.erase(kept);
    } else {
      next.push_back(std::make_shared<Subchannel>(executor_, std::move(a), settings_, listener));
    }
  }
  return next;
}

void ChannelCore::apply_addresses(std::vector<Address> addresses) {
  std::vector<std::shared_ptr<Subchannel>> next =
      subchannels_for(std::move(addresses), subchannels_, this);
  std::vector<std::shared_ptr<Subchannel>> gone = std::exchange(subchannels_, std::move(next));
  policy_->update(subchannels_);
  for (const auto& s : gone) s->shutdown(/*graceful=*/true);  // its calls finish
  if (waiting_calls_ > 0 || std::exchange(connect_requested_, false)) policy_->exit_idle();
}

void ChannelCore::apply_routes(RoutingConfig config) {
  applying_routes_ = true;
  std::vector<std::unique_ptr<ClusterSet>> next;
  next.reserve(config.clusters.size());
  for (RoutedCluster& cluster : config.clusters) {
    auto kept = std::find_if(clusters_.begin(), clusters_.end(), [&](const auto& set) {
      return set != nullptr && set->name == cluster.name;
    });
    std::unique_ptr<ClusterSet> set = kept != clusters_.end()
                                          ? std::move(*kept)
                                          : std::make_unique<ClusterSet>(*this, cluster.name);
    set->unavailable = cluster.addresses.status();
    set->cluster_policy = std::move(cluster.policy);
    std::vector<std::vector<RoutedLocality>> priorities;
    if (cluster.addresses.ok()) {
      // gRFC A50: one detector over the cluster's endpoints, of every priority; made or
      // changed before the policy's update, whose pickers leave the ejected ones out.
      apply_outlier_detection(*set, *cluster.addresses);
      priorities = std::move(cluster.priorities);
      if (priorities.empty() && !cluster.addresses->empty()) {
        priorities.push_back({RoutedLocality{1, *std::move(cluster.addresses)}});
      }
    } else {
      apply_outlier_detection(*set, {});
    }
    set->policy->update(std::move(priorities), {config.failover_timeout, config.retention_timeout});
    next.push_back(std::move(set));
  }
  // The clusters no route names any more: their calls finish, their connections go.
  std::vector<std::unique_ptr<ClusterSet>> dropped;
  for (auto& set : clusters_) {
    if (set == nullptr) continue;
    set->detector_timer.cancel();
    set->policy->shutdown(/*graceful=*/true);  // its calls finish
    dropped.push_back(std::move(set));
  }
  if (!dropped.empty()) asio::post(executor_, [old = std::move(dropped)] {});
  clusters_ = std::move(next);
  router_ = std::move(config.router);
  applying_routes_ = false;
  aggregate_cluster_states();
  changed_.notify_all();
  if (waiting_calls_ > 0 || std::exchange(connect_requested_, false)) {
    for (const auto& set : clusters_) set->policy->exit_idle();
  }
}

void ChannelCore::on_cluster_subchannel_state(ClusterSet& set, Subchannel* subchannel,
                                              ConnectivityState state) {
  if (closed_) return;
  if (state == ConnectivityState::kIdle || state == ConnectivityState::kTransientFailure) {
    request_resolution();
  }
  set.policy->on_subchannel_state(subchannel, state);
  if (waiting_calls_ > 0 && set.state == ConnectivityState::kIdle) set.policy->exit_idle();
}

void ChannelCore::on_cluster_picker(ClusterSet& set, LocalityPicker picker, ConnectivityState state,
                                    absl::Status error) {
  if (closed_) return;
  std::swap(set.picker, picker);
  asio::post(executor_, [old = std::move(picker)] {});
  set.state = state;
  if (state == ConnectivityState::kTransientFailure) {
    set.error = set.unavailable.ok() ? std::move(error) : set.unavailable;
  }
  if (applying_routes_) return;  // apply_routes aggregates once it is done
  aggregate_cluster_states();
  changed_.notify_all();
}

void ChannelCore::apply_outlier_detection(ClusterSet& set, const std::vector<Address>& addresses) {
  const std::optional<OutlierDetectionConfig>& config = set.cluster_policy.outlier_detection;
  if (!config.has_value()) {
    if (set.detector != nullptr) {
      set.detector.reset();
      set.detector_timer.cancel();
    }
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (set.detector == nullptr) {
    set.detector = std::make_unique<OutlierDetector>(*config);
    set.detector->set_addresses(addresses);
    set.detector_timer_start = now;
    arm_detector_timer(set, set.detector->interval());
    return;
  }
  const std::chrono::milliseconds old_interval = set.detector->interval();
  set.detector->set_config(*config);
  set.detector->set_addresses(addresses);
  if (set.detector->interval() != old_interval) {
    // A50: a new interval counts from the running timer's start (at once if that has passed).
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - set.detector_timer_start);
    arm_detector_timer(set,
                       std::max(std::chrono::milliseconds(0), set.detector->interval() - elapsed));
  }
}

void ChannelCore::arm_detector_timer(ClusterSet& set, std::chrono::milliseconds wait) {
  set.detector_timer.expires_after(wait);  // replaces a pending wait
  set.detector_timer.async_wait(
      [weak = weak_from_this(), target = &set](const asio::error_code& ec) {
        if (ec) return;
        auto self = weak.lock();
        if (self == nullptr || self->closed_) return;
        // The set may have been dropped since the timer fired (its wait already queued).
        const bool current = std::any_of(self->clusters_.begin(), self->clusters_.end(),
                                         [target](const auto& set) { return set.get() == target; });
        if (current) self->on_detector_timer(*target);
      });
}

void ChannelCore::on_detector_timer(ClusterSet& set) {
  if (set.detector == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  set.detector_timer_start = now;
  thread_local std::mt19937 engine(static_cast<unsigned>(now.time_since_epoch().count() ^
                                                         reinterpret_cast<std::uintptr_t>(&set)));
  const bool changed = set.detector->run_interval(now, [] {
    return static_cast<std::uint32_t>(std::uniform_int_distribution<std::uint32_t>(0, 99)(engine));
  });
  // The policy's pickers leave the ejected endpoints out, and a priority whose endpoints are all
  // ejected fails over (PriorityPolicy::refresh_ejections); its new picker is published through
  // on_cluster_picker.
  if (changed) set.policy->refresh_ejections();
  arm_detector_timer(set, set.detector->interval());
}

void ChannelCore::aggregate_cluster_states() {
  bool ready = false, connecting = false, idle = false;
  const absl::Status* failure = nullptr;
  for (const auto& set : clusters_) {
    ready |= set->state == ConnectivityState::kReady;
    connecting |= set->state == ConnectivityState::kConnecting;
    idle |= set->state == ConnectivityState::kIdle;
    if (set->state == ConnectivityState::kTransientFailure && failure == nullptr) {
      failure = &set->error;
    }
  }
  if (ready) {
    set_state(ConnectivityState::kReady);
  } else if (connecting) {
    set_state(ConnectivityState::kConnecting);
  } else if (idle) {
    set_state(ConnectivityState::kIdle);
  } else {
    error_ = failure != nullptr ? *failure : absl::UnavailableError("xDS: no route forwards calls");
    set_state(ConnectivityState::kTransientFailure);
  }
}

bool ChannelCore::choose_route(std::string_view method, ClientContext& context, CallRoute& route) {
  const RouteChoice choice = router_->route(method, context, route.error);
  if (choice.cluster < 0) {
    if (route.error.ok()) route.error = absl::UnavailableError("no route takes the call");
    return false;
  }
  if (static_cast<std::size_t>(choice.cluster) >= clusters_.size()) {
    route.error = absl::InternalError("the router chose a cluster it did not list");
    return false;
  }
  route.router = router_;  // keeps choice.config alive for the call's later attempts
  route.config = choice.config;
  route.cluster_index = static_cast<std::size_t>(choice.cluster);
  route.cluster_id = clusters_[route.cluster_index]->id;
  // gRFC A31: the route's max_stream_duration shortens the call's deadline, never lengthens it.
  if (choice.config != nullptr && choice.config->timeout.has_value()) {
    shorten_deadline(context, *choice.config->timeout);
  }
  return true;
}

ChannelCore::ClusterSet* ChannelCore::cluster_of(CallRoute& route) const {
  // The set stays at its index until the configuration changes; after, it is found by its id
  // (a set kept across updates by its name keeps its id), or is gone.
  if (route.cluster_index < clusters_.size() &&
      clusters_[route.cluster_index]->id == route.cluster_id) {
    return clusters_[route.cluster_index].get();
  }
  for (std::size_t i = 0; i < clusters_.size(); ++i) {
    if (clusters_[i]->id == route.cluster_id) {
      route.cluster_index = i;
      return clusters_[i].get();
    }
  }
  return nullptr;
}

Ref<ClientCall> ChannelCore::try_start_routed(std::string_view method, const MethodConfig* config,
                                              ClientContext& context, int previous_attempts,
                                              bool unary, CallRoute* route) {
  CallRoute own;  // a caller that keeps no route: chosen for this attempt alone
  if (route == nullptr) route = &own;
  if (!route->error.ok()) return {};  // start_call fails it, saying why
  if (route->router == nullptr && !choose_route(method, context, *route)) return {};
  ClusterSet* set = cluster_of(*route);
  if (set == nullptr) return {};    // its cluster is gone: start_call fails it
  if (over_limit(*set)) return {};  // start_call fails it (gRFC A32)
  const std::shared_ptr<ChannelConnection>* conn = set->picker.pick();
  if (conn == nullptr || !(*conn)->connection->accepts_new_streams()) return {};
  return start_call_on(*conn, method, config, context, previous_attempts, unary, set);
}

void ChannelCore::schedule_refresh() {
  if (options_.resolve_period.count() <= 0 || closed_) return;
  refresh_timer_.expires_after(options_.resolve_period);  // replaces a pending one
  refresh_timer_.async_wait([weak = weak_from_this()](const asio::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->request_resolution();
  });
}

asio::awaitable<void> ChannelCore::wait_for_change(std::chrono::steady_clock::time_point deadline) {
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    co_await changed_.wait();
    co_return;
  }
  asio::steady_timer timer(executor_, deadline);
  timer.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->changed_.notify_all();
  });
  co_await changed_.wait();
}

asio::awaitable<Ref<ClientCall>> ChannelCore::start_call(std::string_view method,
                                                         ClientContext& context,
                                                         int previous_attempts, bool unary,
                                                         CallRoute* route) {
  CallRoute own;  // a caller that keeps no route: chosen for this attempt alone
  if (route == nullptr) route = &own;
  if (Ref<ClientCall> call = try_start_call(method, context, previous_attempts, unary, route)) {
    co_return call;
  }
  const MethodConfig* config = nullptr;  // try_start_call applied it to context already
  if (has_method_configs_) config = &method_config_for(method);
  auto self = shared_from_this();
  ++waiting_calls_;
  absl::Status failure;
  bool waited = false;
  while (true) {
    if (closed_) {
      failure = absl::CancelledError("the channel is closed");
      break;
    }
    if (!target_error_.ok()) {
      failure = target_error_;
      break;
    }
    ConnectivityState s = state();
    const absl::Status* error = &error_;
    ClusterSet* set = nullptr;
    if (router_ != nullptr) {
      // A routing resolver's channel: the call's route and cluster, chosen once, on the first
      // pass with a configuration, and kept by its later passes and attempts (gRFC A31).
      if (!route->error.ok() ||
          (route->router == nullptr && !choose_route(method, context, *route))) {
        failure = route->error;
        break;
      }
      set = cluster_of(*route);
      if (set == nullptr) {
        // A31: a call whose cluster is deleted fails with UNAVAILABLE (gRPC keeps the cluster
        // until its calls end; ferry's connection set went with the configuration).
        failure = absl::UnavailableError("xDS: the call's cluster left the configuration");
        break;
      }
      if (over_limit(*set)) {
        // gRFC A32: over the cluster's max_requests a call fails at once (grpc-go's words).
        failure = absl::UnavailableError(
            absl::StrCat("xDS: max requests ", set->cluster_policy.max_requests,
                         " exceeded on cluster '", set->name, "' (circuit breaking)"));
        break;
      }
      s = set->state;
      error = &set->error;
    }
    if (const std::shared_ptr<ChannelConnection>* conn =
            set != nullptr ? set->picker.pick() : picker_.pick()) {
      if ((*conn)->connection->accepts_new_streams()) {
        --waiting_calls_;
        co_return start_call_on(*conn, method, config, context, previous_attempts, unary, set);
      }
      if ((*conn)->owner != nullptr) (*conn)->owner->drop_connection();
      continue;
    }
    if (s == ConnectivityState::kTransientFailure && !context.wait_for_ready()) {
      failure = error->ok() ? absl::UnavailableError("no connection") : *error;
      break;
    }
    if (context.deadline() <= std::chrono::steady_clock::now()) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "deadline exceeded while waiting for a connection (channel ",
          to_absl(connectivity_state_name(s)), error->ok() ? "" : ": ", error->message(), ")"));
      break;
    }
    if (set != nullptr) {
      if (s == ConnectivityState::kIdle) {
        set->policy->exit_idle();
        if (set->state != s) continue;  // as below
      }
    } else if (s == ConnectivityState::kIdle || !resolved_once_) {
      exit_idle();
      // What exit_idle set off may have changed the state before this call waits (a connection
      // attempt that fails without suspending: TRANSIENT_FAILURE at once), and that change's
      // wake-up has passed: look again rather than wait for the next one.
      if (state() != s) continue;
    }
    co_await wait_for_change(context.deadline());
    waited = true;
    // A cancellation through the awaiting operation's slot (Channel::call with a bound slot,
    // the losing side of `||`) ends the wait; the call fails with CANCELLED. Awaiting the next
    // wait_for_change would throw instead (asio, once the coroutine is cancelled), and that
    // exception escaped the non-awaitable tokens' completion and terminated the program.
    asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
    if (cancellation.cancelled() != asio::cancellation_type::none) {
      failure = absl::CancelledError("the call was cancelled while waiting for a connection");
      break;
    }
  }
  --waiting_calls_;
  if (!waited) {
    // A call that fails fast (no connection, the channel closed) fails without suspending, and
    // the caller's coroutine goes on inline: one on this executor that retries in a loop would
    // then never let it run the timers that reconnect (back-off) or re-resolve, and would spin
    // on UNAVAILABLE forever (the soak found it). One turn of the loop per such call.
    asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
    if (cancellation.cancelled() == asio::cancellation_type::none) {
      co_await asio::post(executor_, asio::use_awaitable);
    }
  }
  co_return Ref<ClientCall>::adopt(new ClientCall(executor_, &context, std::move(failure)));
}

Ref<ClientCall> ChannelCore::start_call_on(const std::shared_ptr<ChannelConnection>& conn,
                                           std::string_view method, const MethodConfig* config,
                                           ClientContext& context, int previous_attempts,
                                           bool unary, ClusterSet* cluster) {
  CallLimits limits = options_;
  if (config != nullptr) limits = message_limits(*config, options_);
  auto call =
      Ref<ClientCall>::adopt(new ClientCall(conn, conn->connection.get(), &conn->deadlines,
                                            &context, limits, options_.max_header_list_size));
  if (cluster != nullptr) call->count_in(cluster->counts, conn->call_counts);
  call->start(method, options_.authority, options_.user_agent, previous_attempts,
              CallProtocol{options_.protocol, options_.codec, unary});
  return call;
}

std::optional<std::chrono::milliseconds> ChannelCore::retry_after(
    std::string_view method, const absl::Status& status, bool committed, int attempts_made,
    std::int64_t pushback_ms, int& backoff_step, std::chrono::steady_clock::time_point deadline,
    const CallRoute* route) {
  const RetryPolicy* policy = retry_policy_for(method, route);
  if (policy == nullptr || !is_retryable(*policy, status)) return std::nullopt;
  // gRFC A6: every failure with a retryable status takes a token first, whatever decides the
  // call's fate after (committed, the last attempt, the server's pushback), as gRPC C++ records
  // it. Taken only when a retry followed, a call's final failure cost nothing, and the throttle
  // engaged late or never.
  if (throttle_.enabled() && !throttle_.on_retryable_failure()) return std::nullopt;
  if (!should_retry(*policy, status, committed, attempts_made)) return std::nullopt;
  if (pushback_ms == kStopRetrying) return std::nullopt;
  std::chrono::milliseconds wait;
  if (pushback_ms >= 0) {
    wait = std::chrono::milliseconds(pushback_ms);
    backoff_step = 0;  // the retry design: back-off starts over after a pushback
  } else {
    thread_local std::mt19937 engine(
        static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
    const double draw = std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    wait = retry_delay(*policy, ++backoff_step, draw);
  }
  // Compared in milliseconds: now + wait could overflow the clock's nanoseconds for a policy's
  // huge back-off (an xDS route's may reach 3e15 ms), and deadline may be the clock's max.
  const auto now = std::chrono::steady_clock::now();
  if (deadline <= now || wait >= std::chrono::ceil<std::chrono::milliseconds>(deadline - now)) {
    return std::nullopt;
  }
  return wait;
}

const RetryPolicy* ChannelCore::retry_policy_for(std::string_view method,
                                                 const CallRoute* route) const {
  if (route != nullptr && route->config != nullptr && route->config->retry_policy.has_value()) {
    const RetryPolicy& policy = *route->config->retry_policy;
    return policy.max_attempts > 1 && !policy.retryable_status_codes.empty() ? &policy : nullptr;
  }
  return retry_policy_of(method_config_for(method));
}

asio::awaitable<bool> ChannelCore::wait_for_state_change(
    ConnectivityState last_observed, std::chrono::steady_clock::time_point deadline) {
  auto self = shared_from_this();
  while (state() == last_observed) {
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    co_await wait_for_change(deadline);
  }
  co_return true;
}

asio::awaitable<void> ChannelCore::backoff(asio::steady_timer& timer,
                                           std::chrono::milliseconds wait) {
  if (closed_) co_return;
  // Filed for close() while the wait lasts, whichever way it ends (a destroyed frame too).
  struct Filed {
    std::vector<asio::steady_timer*>& timers;
    asio::steady_timer* timer;
    ~Filed() { std::erase(timers, timer); }
  } filed{backoff_timers_, &timer};
  backoff_timers_.push_back(&timer);
  timer.expires_after(wait);
  asio::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

void ChannelCore::close() {
  closed_ = true;
  for (asio::steady_timer* t : backoff_timers_) t->cancel();
  picker_ = Picker();
  state_.store(ConnectivityState::kShutdown, std::memory_order_release);
  for (const auto& s : subchannels_) s->shutdown(/*graceful=*/false);
  subchannels_.clear();
  for (const auto& set : clusters_) {
    set->detector_timer.cancel();
    set->picker = LocalityPicker();
    set->policy->shutdown(/*graceful=*/false);
  }
  resolve_timer_.cancel();
  refresh_timer_.cancel();
  if (watching_resolver_) resolver_->watch(nullptr);
  changed_.notify_all();
}

}  // namespace ferry::detail

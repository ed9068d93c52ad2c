// A channel's connection management (client layer, private): the resolver that turns the target
// into addresses, one subchannel per address (client/subchannel.h), the load-balancing policy
// over them (client/load_balancer.h) and the picker it publishes. Calls start here: on the hot
// path a pick from the READY connections; when none is READY they wait for one (resolving and
// connecting as the policy says), or fail fast in TRANSIENT_FAILURE unless wait_for_ready.
// Everything runs on the channel's executor but state(), which any thread may read.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "call/event.h"
#include "client/backoff.h"
#include "client/call_router.h"
#include "client/load_balancer.h"
#include "client/method_config.h"
#include "client/priority_policy.h"
#include "client/retry.h"
#include "client/subchannel.h"
#include "common/ref.h"
#include "ferry/channel.h"

namespace ferry::detail {

class ChannelLoop;
class ClientCall;

class ChannelCore : public std::enable_shared_from_this<ChannelCore>,
                    public SubchannelListener,
                    public LoadBalancerHelper {
 public:
  ChannelCore(asio::io_context::executor_type executor, std::string target, ChannelOptions options);
  ~ChannelCore() override;

  const asio::io_context::executor_type& executor() const { return executor_; }
  // The channel's own loop (Channel(target)), which its streams keep; null on the caller's.
  void set_loop(std::shared_ptr<ChannelLoop> loop) { loop_ = std::move(loop); }
  const std::shared_ptr<ChannelLoop>& loop() const { return loop_; }

  // Starts a call, held by the returned reference. A call that
  // cannot get a connection is returned over, with its status (UNAVAILABLE, DEADLINE_EXCEEDED,
  // CANCELLED once the channel is closed).
  // previous_attempts: a retry's count of earlier attempts (client/retry.h). The method's
  // MethodConfig (timeout, wait_for_ready) is applied to context first. unary: a unary call
  // (which the Connect protocol sends unenveloped). route: the call's route on a routing
  // resolver's channel (client/call_router.h), chosen by its first attempt and kept by the
  // others, which the call owns across its attempts; null: chosen for this attempt alone.
  asio::awaitable<Ref<ClientCall>> start_call(std::string_view method, ClientContext& context,
                                              int previous_attempts = 0, bool unary = false,
                                              CallRoute* route = nullptr);
  // start_call without suspending, when the picker has a connection (the usual case); else
  // null. Spares a call the frame of start_call.
  Ref<ClientCall> try_start_call(std::string_view method, ClientContext& context,
                                 int previous_attempts = 0, bool unary = false,
                                 CallRoute* route = nullptr) {
    const MethodConfig* config = nullptr;  // looked up once per call, only when there are any
    if (has_method_configs_) {
      config = &method_config_for(method);
      apply_method_config(*config, context);
    }
    if (closed_) return {};
    const std::shared_ptr<ChannelConnection>* conn = picker_.pick();
    if (conn == nullptr) [[unlikely]] {
      // A routing resolver's channel has no picker of its own but one per cluster: only it
      // gets here, so the other channels' hot path stays the single picker's.
      if (router_ == nullptr) return {};
      return try_start_routed(method, config, context, previous_attempts, unary, route);
    }
    if (!(*conn)->connection->accepts_new_streams()) return {};
    return start_call_on(*conn, method, config, context, previous_attempts, unary);
  }

  // The channel's client interceptors (ChannelOptions::interceptors); usually none.
  const std::vector<std::shared_ptr<ClientInterceptor>>& interceptors() const {
    return options_.interceptors;
  }
  // Whether any of them reads durations (ClientInterceptor::uses_duration): when none does,
  // the chain reads no clock for a call.
  bool interceptors_use_duration() const { return interceptors_use_duration_; }
  // The target as gRFC A66 labels a channel's metrics (grpc.target; client/target.h).
  const std::string& canonical_target() const { return canonical_target_; }

  // After an attempt of method failed with status (attempts_made so far, this one included):
  // how long to wait before the next attempt, or nullopt when the call ends with this status
  // (no policy, not retryable, committed, throttled, the server's pushback says stop, or the
  // deadline would pass first). pushback_ms: the attempt's grpc-retry-pushback-ms
  // (client/retry.h); a value replaces the back-off and restarts it (backoff_step, the call's
  // count of back-off waits so far, kept by the caller from 0). A failure with a retryable
  // status takes a throttle token first, whatever follows (gRFC A6). route: the call's (its
  // route's retry policy replaces the method's, gRFC A44), or null.
  std::optional<std::chrono::milliseconds> retry_after(
      std::string_view method, const absl::Status& status, bool committed, int attempts_made,
      std::int64_t pushback_ms, int& backoff_step, std::chrono::steady_clock::time_point deadline,
      const CallRoute* route = nullptr);
  // The retry policy of a call of method with route (null: none chosen): its route's when the
  // route sets one (gRFC A44), else the method's; null when the call is not retried.
  const RetryPolicy* retry_policy_for(std::string_view method, const CallRoute* route) const;
  // Whether a streaming call of method may be retried by a policy (client/retrying_stream.h):
  // on a routing resolver's channel, whenever its route may say so (the stream commits at once
  // when its route turns out to have no policy).
  bool retries_streams(std::string_view method) const {
    return routing_ != nullptr || retry_policy_of(method_config_for(method)) != nullptr;
  }
  std::size_t retry_buffer_per_call() const { return options_.retry_buffer_per_call; }
  // A call succeeded: refills the retry throttle when there is one.
  void on_call_succeeded() {
    if (throttle_.enabled()) throttle_.on_success();
  }

  // The channel's state; from any thread.
  ConnectivityState state() const { return state_.load(std::memory_order_acquire); }
  // An IDLE channel starts resolving and connecting.
  void exit_idle();
  // Waits until the state is not last_observed (true) or deadline passes (false).
  asio::awaitable<bool> wait_for_state_change(ConnectivityState last_observed,
                                              std::chrono::steady_clock::time_point deadline);

  // A retry's back-off (unary_call, RetryingStream): waits wait on timer, which the caller owns
  // (and may cancel to end the wait early). The channel's close() ends it too: a call waiting
  // to retry then goes on at once and fails with CANCELLED, rather than waiting on a loop that
  // stops about a second after close (a blocking caller hung there, and its frame kept the core
  // alive). Returns at once on a closed channel.
  asio::awaitable<void> backoff(asio::steady_timer& timer, std::chrono::milliseconds wait);

  // Closes every connection; calls still running fail, later ones fail with CANCELLED (those
  // waiting in a retry's back-off included).
  void close();

 private:
  // One cluster of a routing resolver (client/call_router.h): its own subchannels, priority
  // policy (gRFC A27: priorities, weighted localities, round_robin; client/priority_policy.h) and
  // picker, kept across updates by its name.
  struct ClusterSet final : SubchannelListener, PriorityPolicyHelper {
    ClusterSet(ChannelCore& core, std::string name);
    void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) override {
      core.on_cluster_subchannel_state(*this, subchannel, state);
    }
    std::shared_ptr<Subchannel> make_subchannel(Address address) override {
      return std::make_shared<Subchannel>(core.executor_, std::move(address), core.settings_, this);
    }
    void update_picker(LocalityPicker next, ConnectivityState next_state,
                       absl::Status error) override {
      core.on_cluster_picker(*this, std::move(next), next_state, std::move(error));
    }
    bool ejected(const Subchannel& subchannel) const override {
      return detector != nullptr && detector->ejected(subchannel.address());
    }
    void on_ready_connection(const Subchannel& subchannel, ChannelConnection& conn) override {
      const std::shared_ptr<EndpointCallCounts>* counts =
          detector != nullptr ? detector->counts_for(subchannel.address()) : nullptr;
      conn.call_counts = counts != nullptr ? *counts : nullptr;
    }
    ChannelCore& core;
    std::string name;
    std::uint64_t id = 0;      // unique in the channel: a call's route finds its set by it
    absl::Status unavailable;  // the cluster has no endpoints: why (its calls fail with it)
    std::unique_ptr<PriorityPolicy> policy;  // owns the cluster's subchannels
    LocalityPicker picker;
    ConnectivityState state = ConnectivityState::kIdle;
    absl::Status error;  // in TRANSIENT_FAILURE: why
    // gRFC A32 and A50 (client/outlier_detection.h): the cluster's limit, its calls in flight,
    // and with outlier detection the detector (over the endpoints of all its priorities; the
    // policy's pickers leave the ejected ones out) and its interval timer.
    ClusterPolicy cluster_policy;
    std::shared_ptr<ClusterCallCounts> counts = std::make_shared<ClusterCallCounts>();
    std::unique_ptr<OutlierDetector> detector;
    asio::steady_timer detector_timer;
    std::chrono::steady_clock::time_point detector_timer_start{};
  };
  // The cluster's circuit breaker is open (gRFC A32): the UNAVAILABLE a new call fails with.
  static bool over_limit(const ClusterSet& set) {
    return set.counts->in_flight.load(std::memory_order_relaxed) >= set.cluster_policy.max_requests;
  }
  // A50: the cluster's outlier detection follows its policy's config (made, changed, dropped).
  void apply_outlier_detection(ClusterSet& set, const std::vector<Address>& addresses);
  void arm_detector_timer(ClusterSet& set, std::chrono::milliseconds wait);
  void on_detector_timer(ClusterSet& set);
  Ref<ClientCall> try_start_routed(std::string_view method, const MethodConfig* config,
                                   ClientContext& context, int previous_attempts, bool unary,
                                   CallRoute* route);
  // Chooses the route and cluster of a call of method (router_ set) and applies the route's
  // timeout to context; false when no route takes the call (route.error says why).
  bool choose_route(std::string_view method, ClientContext& context, CallRoute& route);
  // The connection set of route's cluster (chosen); null when it left the configuration.
  ClusterSet* cluster_of(CallRoute& route) const;
  void apply_routes(RoutingConfig config);
  void on_cluster_subchannel_state(ClusterSet& set, Subchannel* subchannel,
                                   ConnectivityState state);
  void on_cluster_picker(ClusterSet& set, LocalityPicker picker, ConnectivityState state,
                         absl::Status error);
  // The channel's state from its clusters': READY if any is, else CONNECTING, IDLE, or
  // TRANSIENT_FAILURE.
  void aggregate_cluster_states();
  // The subchannels for addresses: those of current that stay (moved out of it), new ones made
  // with listener.
  std::vector<std::shared_ptr<Subchannel>> subchannels_for(
      std::vector<Address> addresses, std::vector<std::shared_ptr<Subchannel>>& current,
      SubchannelListener* listener);

  std::shared_ptr<ChannelLoop> loop_;
  void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) override;
  void update_picker(Picker picker, ConnectivityState state, absl::Status error) override;

  // The settings for method's calls (ChannelOptions::method_configs).
  const MethodConfig& method_config_for(std::string_view method) const {
    return find_method_config(options_.method_configs, options_.method_config, method);
  }
  // config: the method's settings, null when the channel has none (the channel's limits apply).
  // cluster: a routed call's (counted in its calls in flight, gRFC A32/A50).
  Ref<ClientCall> start_call_on(const std::shared_ptr<ChannelConnection>& conn,
                                std::string_view method, const MethodConfig* config,
                                ClientContext& context, int previous_attempts, bool unary,
                                ClusterSet* cluster = nullptr);
  // Suspends until the picker or state changes, or deadline passes (spurious wake-ups allowed).
  asio::awaitable<void> wait_for_change(std::chrono::steady_clock::time_point deadline);
  // Resolves now, or as soon as min_resolve_interval allows; one resolution at a time.
  void request_resolution();
  // The resolver has news (Resolver::watch): resolves at once.
  void on_resolver_changed();
  asio::awaitable<void> resolve(std::shared_ptr<ChannelCore> self,
                                std::chrono::steady_clock::time_point not_before);
  void apply_addresses(std::vector<Address> addresses);
  // Arms the next periodic re-resolution (ChannelOptions::resolve_period), if any.
  void schedule_refresh();
  void set_state(ConnectivityState state);

  asio::io_context::executor_type executor_;
  std::string target_string_;
  std::string canonical_target_;
  ChannelOptions options_;
  bool interceptors_use_duration_ = false;
  absl::Status target_error_;  // the target does not parse: every call fails with it
  std::shared_ptr<Resolver> resolver_;
  RoutingResolver* routing_ = nullptr;  // resolver_, when it routes calls per cluster
  // Set by the routing resolver's first configuration: picks each call's cluster.
  std::shared_ptr<const CallRouter> router_;
  std::vector<std::unique_ptr<ClusterSet>> clusters_;  // in the router's order
  std::uint64_t next_cluster_id_ = 1;
  bool applying_routes_ = false;
  std::shared_ptr<const SubchannelSettings> settings_;
  std::unique_ptr<LoadBalancer> policy_;
  std::vector<std::shared_ptr<Subchannel>> subchannels_;
  Picker picker_;
  std::atomic<ConnectivityState> state_{ConnectivityState::kIdle};
  absl::Status error_;  // why the channel is in TRANSIENT_FAILURE
  bool resolved_once_ = false;
  bool resolving_ = false;
  bool resolve_again_ = false;      // a request came during a resolution
  bool resolve_now_ = false;        // ... from the resolver itself: without waiting
  bool watching_resolver_ = false;  // resolver_->watch() was called
  std::chrono::steady_clock::time_point last_resolution_{};
  Backoff resolve_backoff_;           // between failed resolutions
  asio::steady_timer resolve_timer_;  // the wait before the next resolution
  asio::steady_timer refresh_timer_;  // the periodic re-resolution's
  int waiting_calls_ = 0;
  bool connect_requested_ = false;  // exit_idle() before the first resolution
  bool closed_ = false;
  bool has_method_configs_ = false;  // options_ holds a MethodConfig: look it up per call
  RetryThrottle throttle_;
  Signal changed_;  // the picker or the state changed: waiting calls and watchers re-check
  // The timers of the back-off waits in progress (backoff()), which close() cancels.
  std::vector<asio::steady_timer*> backoff_timers_;
};

}  // namespace ferry::detail

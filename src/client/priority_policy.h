// gRFC A27's endpoint picking for one cluster of a routed channel (client layer, private), as
// gRPC's priority -> weighted_target -> round_robin policies do it: the cluster's priorities are
// tried in order, each created only when reached (lazily: no connection to a lower priority
// while a higher one serves); a priority is used while it is READY, or CONNECTING within the
// failover timer; one whose endpoints all fail (TRANSIENT_FAILURE) or that is still connecting
// when its timer fires hands over to the next; a higher priority that becomes READY again takes
// the calls back, and the lower ones keep their connections for the retention time, then close
// them. Within the priority in use a call draws a locality by weight, then round robin over its
// READY endpoints (client/locality_picker.h), less those outlier detection ejected (gRFC A50,
// PriorityPolicyHelper::ejected). Everything runs on the channel's executor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "client/call_router.h"
#include "client/locality_picker.h"
#include "client/subchannel.h"
#include "ferry/connectivity.h"

namespace ferry::detail {

// What the priority policy knows of one priority when it chooses (gRPC's ChoosePriority).
struct PriorityChildView {
  bool exists = false;  // created (a priority is created when the choice first reaches it)
  ConnectivityState state = ConnectivityState::kConnecting;
  bool failover_pending = false;  // its failover timer runs
};
struct PriorityChoice {
  std::size_t priority = 0;
  bool create = false;            // the priority must be created first, then chosen again
  bool deactivate_lower = false;  // chosen READY: the lower priorities start their retention
};
// gRPC's choice over children (not empty), in priority order: the first that is not yet created
// (create it), READY or IDLE (deactivate_lower), or CONNECTING with its failover timer pending;
// else the first CONNECTING one; else the last.
PriorityChoice choose_priority(std::span<const PriorityChildView> children);

// The cluster's channel side: makes its subchannels, takes its pickers.
class PriorityPolicyHelper {
 public:
  virtual ~PriorityPolicyHelper() = default;
  // A subchannel for address reporting to the cluster's listener (which hands the reports to
  // PriorityPolicy::on_subchannel_state).
  virtual std::shared_ptr<Subchannel> make_subchannel(Address address) = 0;
  // The priority in use's picker and state (error: why, in TRANSIENT_FAILURE).
  virtual void update_picker(LocalityPicker picker, ConnectivityState state,
                             absl::Status error) = 0;
  // gRFC A50: whether outlier detection ejected the subchannel's endpoint. An ejected endpoint
  // counts as TRANSIENT_FAILURE, as gRPC's ejected subchannels report to the policy under them:
  // it is left out of its locality's round robin, a locality with only ejected READY endpoints
  // takes no call, and a priority with no READY endpoint left is not READY (it fails over to the
  // next). The helper tells the policy of changes (PriorityPolicy::refresh_ejections).
  virtual bool ejected(const Subchannel& subchannel) const {
    (void)subchannel;
    return false;
  }
  // A READY, not ejected subchannel's connection is going into a picker (the helper marks where
  // its calls' outcomes count, gRFC A50).
  virtual void on_ready_connection(const Subchannel& subchannel, ChannelConnection& conn) {
    (void)subchannel;
    (void)conn;
  }
};

// Bounds on what a cluster's endpoints may cost (a hostile control plane's 10,000 localities or
// priorities): the resolver keeps within them (ferry::xds NACKs beyond); update() drops what is
// over them, so that a choice (linear in the priorities) and a picker's build (linear in the
// priority's endpoints) stay bounded whatever the resolver.
inline constexpr std::size_t kMaxPrioritiesPerCluster = 1000;
inline constexpr std::size_t kMaxLocalitiesPerCluster = 10000;
inline constexpr std::size_t kMaxEndpointsPerCluster = 10000;

class PriorityPolicy {
 public:
  struct Timeouts {
    std::chrono::milliseconds failover = std::chrono::seconds(10);
    std::chrono::milliseconds retention = std::chrono::minutes(15);
  };

  PriorityPolicy(asio::io_context::executor_type executor, PriorityPolicyHelper& helper);
  ~PriorityPolicy();  // shuts the subchannels down (not gracefully), if shutdown() was not called
  PriorityPolicy(const PriorityPolicy&) = delete;
  PriorityPolicy& operator=(const PriorityPolicy&) = delete;

  // The cluster's new endpoints (priorities[p]: priority p's localities; empty: none, the
  // helper is told TRANSIENT_FAILURE). Created priorities keep their state and the subchannels
  // of addresses that stay (an address listed twice counts at its first place only); the others
  // are created when the choice reaches them.
  void update(std::vector<std::vector<RoutedLocality>> priorities, Timeouts timeouts);
  // One of its subchannels changed state.
  void on_subchannel_state(Subchannel* subchannel, ConnectivityState state);
  // The helper's ejections changed (gRFC A50): the created priorities' states are read again,
  // the choice made again, and a new picker published.
  void refresh_ejections();
  // A call waits: IDLE subchannels of the created priorities connect.
  void exit_idle();
  // Every subchannel shut down (graceful: their calls finish), timers stopped; no more pickers.
  void shutdown(bool graceful);

  // The priority in use (-1 before any), and how many are created: for tests.
  int current_priority() const { return current_; }
  std::size_t created_priorities() const;

 private:
  struct Child;
  void create_child(std::size_t priority);
  // Reads the child's state from its subchannels' and runs gRPC's failover-timer rules on a
  // change; true when it changed.
  bool refresh_state(const std::shared_ptr<Child>& child);
  void start_failover_timer(const std::shared_ptr<Child>& child);
  void start_retention_timer(std::size_t priority);
  void destroy_child(std::size_t priority, bool graceful);
  void choose();
  void publish();

  asio::io_context::executor_type executor_;
  PriorityPolicyHelper& helper_;
  Timeouts timeouts_;
  std::vector<std::vector<RoutedLocality>> config_;
  std::vector<std::shared_ptr<Child>> children_;              // per priority; null until created
  std::unordered_map<const Subchannel*, std::size_t> owner_;  // subchannel -> its priority
  int current_ = -1;
  bool updating_ = false;  // subchannel reports during update()/creation are read after it
  bool shut_down_ = false;
  std::uint64_t seed_;            // of the pickers' draws
  std::uint64_t next_timer_ = 0;  // ids that tell a timer's current wait from a stale one
};

}  // namespace ferry::detail

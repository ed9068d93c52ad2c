// Load-balancing policies (client layer, private), after gRPC's load-balancing document: a
// policy decides which of the resolved addresses' subchannels to connect and publishes a Picker
// over the READY ones; every call picks a connection from it. pick_first (pick_first.cc) sticks
// to the first address that connects; round_robin (round_robin.cc) spreads calls over all READY
// ones. Everything runs on the channel's executor.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "client/subchannel.h"
#include "ferry/channel.h"
#include "ferry/connectivity.h"

namespace ferry::detail {

// The call's hot path: one connection out of the READY ones, in turn. No allocation; a size
// test, an index and a wrap.
class Picker {
 public:
  Picker() = default;
  explicit Picker(std::vector<std::shared_ptr<ChannelConnection>> ready)
      : ready_(std::move(ready)) {}

  // Null when no connection is READY.
  const std::shared_ptr<ChannelConnection>* pick() {
    const std::size_t n = ready_.size();
    if (n <= 1) return n == 0 ? nullptr : &ready_[0];
    const std::size_t i = next_;
    next_ = i + 1 == n ? 0 : i + 1;
    return &ready_[i];
  }
  bool empty() const { return ready_.empty(); }
  const std::vector<std::shared_ptr<ChannelConnection>>& connections() const { return ready_; }

 private:
  std::vector<std::shared_ptr<ChannelConnection>> ready_;
  std::size_t next_ = 0;
};

// What a policy reports to its channel.
class LoadBalancerHelper {
 public:
  virtual ~LoadBalancerHelper() = default;
  // A new picker and the channel's state (error: why, in TRANSIENT_FAILURE).
  virtual void update_picker(Picker picker, ConnectivityState state, absl::Status error) = 0;
};

class LoadBalancer {
 public:
  virtual ~LoadBalancer() = default;
  // The resolver's latest addresses, as subchannels (kept ones keep their state).
  virtual void update(const std::vector<std::shared_ptr<Subchannel>>& subchannels) = 0;
  // One of them changed state.
  virtual void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) = 0;
  // A call is waiting (or the user asked to connect): connect as the policy does.
  virtual void exit_idle() = 0;
};

std::unique_ptr<LoadBalancer> make_pick_first(LoadBalancerHelper& helper);
std::unique_ptr<LoadBalancer> make_round_robin(LoadBalancerHelper& helper);

}  // namespace ferry::detail

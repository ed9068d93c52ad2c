// The round_robin policy (src/client/load_balancer.h): keeps a connection to every address and
// sends the calls to the READY ones in turn. A subchannel that loses its connection (GOAWAY,
// loss) leaves the picker at once and reconnects, with back-off while it keeps failing. The
// channel is READY while any is, CONNECTING while any may still become so, else
// TRANSIENT_FAILURE.
#include "client/load_balancer.h"

namespace ferry::detail {
namespace {

class RoundRobin final : public LoadBalancer {
 public:
  explicit RoundRobin(LoadBalancerHelper& helper) : helper_(helper) {}

  void update(const std::vector<std::shared_ptr<Subchannel>>& subchannels) override {
    list_ = subchannels;
    for (const auto& s : list_) {
      s->set_reconnect(true);
      s->connect();  // IDLE ones only
    }
    publish();
  }

  void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) override {
    if (state == ConnectivityState::kIdle) subchannel->connect();  // reconnects at once
    publish();
  }

  void exit_idle() override {
    for (const auto& s : list_) s->connect();
  }

 private:
  void publish() {
    std::vector<std::shared_ptr<ChannelConnection>> ready;
    bool connecting = false;
    absl::Status error = absl::UnavailableError("no addresses");
    for (const auto& s : list_) {
      switch (s->state()) {
        case ConnectivityState::kReady:
          ready.push_back(s->connection());
          break;
        case ConnectivityState::kIdle:
        case ConnectivityState::kConnecting:
          connecting = true;
          break;
        default:
          error = s->last_error();
          break;
      }
    }
    const ConnectivityState state = !ready.empty() ? ConnectivityState::kReady
                                    : connecting   ? ConnectivityState::kConnecting
                                                   : ConnectivityState::kTransientFailure;
    helper_.update_picker(Picker(std::move(ready)), state,
                          state == ConnectivityState::kTransientFailure ? error : absl::OkStatus());
  }

  LoadBalancerHelper& helper_;
  std::vector<std::shared_ptr<Subchannel>> list_;
};

}  // namespace

std::unique_ptr<LoadBalancer> make_round_robin(LoadBalancerHelper& helper) {
  return std::make_unique<RoundRobin>(helper);
}

}  // namespace ferry::detail

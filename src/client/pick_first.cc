// The pick_first policy (src/client/load_balancer.h): tries the addresses in order until one
// connects and sends every call there; when that connection goes (GOAWAY, loss) the channel is
// IDLE and the next call starts over from the first address. Once every address failed the
// channel is in TRANSIENT_FAILURE and each subchannel retries after its own back-off; the first
// to connect is picked.
#include <algorithm>

#include "client/load_balancer.h"

namespace ferry::detail {
namespace {

class PickFirst final : public LoadBalancer {
 public:
  explicit PickFirst(LoadBalancerHelper& helper) : helper_(helper) {}

  void update(const std::vector<std::shared_ptr<Subchannel>>& subchannels) override {
    list_ = subchannels;
    const bool kept =
        selected_ != nullptr && std::any_of(list_.begin(), list_.end(),
                                            [this](const auto& s) { return s.get() == selected_; });
    if (!kept) selected_ = nullptr;
    if (selected_ == nullptr) {
      // A READY one of the new list wins at once; else start over if we were trying.
      for (const auto& s : list_) {
        if (s->state() == ConnectivityState::kReady) {
          select(s.get());
          return;
        }
      }
      if (trying_ >= 0 || failed_) {
        trying_ = -1;
        failed_ = false;
        try_from(0);
      } else {
        publish_idle();
      }
    }
  }

  void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) override {
    if (subchannel == selected_) {
      if (state == ConnectivityState::kReady) return;
      selected_ = nullptr;  // lost or draining: IDLE until a call comes
      publish_idle();
      return;
    }
    if (state == ConnectivityState::kReady) {
      if (selected_ == nullptr) select(subchannel);
      return;
    }
    if (state == ConnectivityState::kTransientFailure && trying_ >= 0 &&
        static_cast<std::size_t>(trying_) < list_.size() && list_[trying_].get() == subchannel) {
      try_from(trying_ + 1);
    }
  }

  void exit_idle() override {
    if (selected_ != nullptr || trying_ >= 0 || failed_) return;
    try_from(0);
  }

 private:
  // Connects the first address at or after i that is not failing; past the end: TRANSIENT_FAILURE
  // (the failed ones go on retrying after their back-off).
  void try_from(std::size_t i) {
    for (; i < list_.size(); ++i) {
      Subchannel* s = list_[i].get();
      s->set_reconnect(true);
      if (s->state() == ConnectivityState::kReady) {
        select(s);
        return;
      }
      if (s->state() == ConnectivityState::kIdle || s->state() == ConnectivityState::kConnecting) {
        trying_ = static_cast<int>(i);
        s->connect();
        if (selected_ == nullptr && trying_ == static_cast<int>(i)) {
          helper_.update_picker(Picker(), ConnectivityState::kConnecting, absl::OkStatus());
        }
        return;
      }
    }
    trying_ = -1;
    failed_ = true;
    absl::Status error =
        list_.empty() ? absl::UnavailableError("no addresses") : list_.back()->last_error();
    helper_.update_picker(Picker(), ConnectivityState::kTransientFailure, std::move(error));
  }

  void select(Subchannel* s) {
    selected_ = s;
    trying_ = -1;
    failed_ = false;
    for (const auto& other : list_) {
      if (other.get() != s) other->set_reconnect(false);  // one connection is enough
    }
    helper_.update_picker(Picker({s->connection()}), ConnectivityState::kReady, absl::OkStatus());
  }

  void publish_idle() {
    trying_ = -1;
    failed_ = false;
    helper_.update_picker(Picker(), ConnectivityState::kIdle, absl::OkStatus());
  }

  LoadBalancerHelper& helper_;
  std::vector<std::shared_ptr<Subchannel>> list_;
  Subchannel* selected_ = nullptr;
  int trying_ = -1;      // the index being tried, -1 when none
  bool failed_ = false;  // every address failed; waiting for one to come back
};

}  // namespace

std::unique_ptr<LoadBalancer> make_pick_first(LoadBalancerHelper& helper) {
  return std::make_unique<PickFirst>(helper);
}

}  // namespace ferry::detail

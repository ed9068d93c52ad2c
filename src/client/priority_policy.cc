// Implementation of src/client/priority_policy.h.
#include "client/priority_policy.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry::detail {

PriorityChoice choose_priority(std::span<const PriorityChildView> children) {
  for (std::size_t p = 0; p < children.size(); ++p) {
    const PriorityChildView& c = children[p];
    if (!c.exists) return {p, /*create=*/true, false};
    if (c.state == ConnectivityState::kReady || c.state == ConnectivityState::kIdle) {
      return {p, false, /*deactivate_lower=*/true};
    }
    // Not READY: given the failover timer's time to get there, else the next priority.
    if (c.failover_pending) return {p, false, false};
  }
  for (std::size_t p = 0; p < children.size(); ++p) {
    if (children[p].state == ConnectivityState::kConnecting) return {p, false, false};
  }
  return {children.size() - 1, false, false};
}

struct PriorityPolicy::Child {
  explicit Child(const asio::io_context::executor_type& executor)
      : failover_timer(executor), retention_timer(executor) {}
  struct Locality {
    std::uint32_t weight = 0;
    std::vector<std::shared_ptr<Subchannel>> subchannels;
  };
  std::vector<Locality> localities;
  // The child's state as weighted_target over round_robin reports it: READY when an endpoint is,
  // else TRANSIENT_FAILURE once all have failed (sticky until one is READY, as gRPC's
  // round_robin: endpoints retrying after their back-off do not make it CONNECTING again), else
  // CONNECTING.
  ConnectivityState state = ConnectivityState::kConnecting;
  absl::Status error;
  bool failed = false;
  // gRPC's priority policy: a CONNECTING child gets a failover timer only when it was READY or
  // IDLE since it last failed, so a failing one retrying never takes the calls back.
  bool seen_ready_since_failure = true;
  bool failover_pending = false;
  std::uint64_t failover_id = 0;
  bool deactivated = false;
  std::uint64_t retention_id = 0;
  asio::steady_timer failover_timer;
  asio::steady_timer retention_timer;
};

PriorityPolicy::PriorityPolicy(asio::io_context::executor_type executor,
                               PriorityPolicyHelper& helper)
    : executor_(executor),
      helper_(helper),
      seed_(
          static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          reinterpret_cast<std::uintptr_t>(this)) {}

PriorityPolicy::~PriorityPolicy() { shutdown(/*graceful=*/false); }

std::size_t PriorityPolicy::created_priorities() const {
  std::size_t n = 0;
  for (const auto& c : children_) n += c != nullptr;
  return n;
}

void PriorityPolicy::update(std::vector<std::vector<RoutedLocality>> priorities,
                            Timeouts timeouts) {
  if (shut_down_) return;
  timeouts_ = timeouts;
  // Within the bounds, each address at its first place only.
  config_.clear();
  std::map<std::string, bool> listed;
  std::size_t localities = 0, endpoints = 0;
  for (auto& priority : priorities) {
    if (config_.size() == kMaxPrioritiesPerCluster) break;
    std::vector<RoutedLocality> kept;
    for (RoutedLocality& locality : priority) {
      if (localities == kMaxLocalitiesPerCluster) break;
      ++localities;
      RoutedLocality out;
      out.weight = locality.weight;
      for (Address& a : locality.addresses) {
        if (endpoints == kMaxEndpointsPerCluster) break;
        if (!listed.emplace(a.to_string(), true).second) continue;
        ++endpoints;
        out.addresses.push_back(std::move(a));
      }
      kept.push_back(std::move(out));
    }
    if (kept.empty()) break;  // priorities stay contiguous
    config_.push_back(std::move(kept));
  }

  // The created priorities that stay are rebuilt, keeping the subchannels of addresses that
  // stay (wherever they were); the rest go.
  updating_ = true;
  std::map<std::string, std::shared_ptr<Subchannel>> pool;
  for (const auto& child : children_) {
    if (child == nullptr) continue;
    for (auto& locality : child->localities) {
      for (auto& s : locality.subchannels) pool.emplace(s->address().to_string(), std::move(s));
    }
    child->localities.clear();
  }
  while (children_.size() > config_.size()) {
    if (children_.back() != nullptr) {
      children_.back()->failover_timer.cancel();
      children_.back()->retention_timer.cancel();
    }
    children_.pop_back();
  }
  children_.resize(config_.size());
  owner_.clear();
  std::vector<std::shared_ptr<Subchannel>> created;
  for (std::size_t p = 0; p < children_.size(); ++p) {
    if (children_[p] == nullptr) continue;
    for (const RoutedLocality& locality : config_[p]) {
      Child::Locality out;
      out.weight = locality.weight;
      for (const Address& a : locality.addresses) {
        auto kept = pool.find(a.to_string());
        if (kept != pool.end()) {
          out.subchannels.push_back(std::move(kept->second));
          pool.erase(kept);
        } else {
          out.subchannels.push_back(helper_.make_subchannel(a));
          created.push_back(out.subchannels.back());
        }
        owner_[out.subchannels.back().get()] = p;
      }
      children_[p]->localities.push_back(std::move(out));
    }
  }
  for (const auto& [address, s] : pool) s->shutdown(/*graceful=*/true);  // its calls finish
  for (const auto& s : created) {
    s->set_reconnect(true);
    s->connect();
  }
  updating_ = false;
  if (current_ >= static_cast<int>(children_.size())) current_ = -1;
  for (const auto& child : children_) {
    if (child != nullptr) refresh_state(child);
  }
  choose();
}

void PriorityPolicy::create_child(std::size_t priority) {
  auto child = std::make_shared<Child>(executor_);
  updating_ = true;
  std::vector<std::shared_ptr<Subchannel>> created;
  for (const RoutedLocality& locality : config_[priority]) {
    Child::Locality out;
    out.weight = locality.weight;
    for (const Address& a : locality.addresses) {
      out.subchannels.push_back(helper_.make_subchannel(a));
      created.push_back(out.subchannels.back());
      owner_[out.subchannels.back().get()] = priority;
    }
    child->localities.push_back(std::move(out));
  }
  children_[priority] = child;
  // gRPC: a new child is CONNECTING with its failover timer running.
  start_failover_timer(child);
  for (const auto& s : created) {
    s->set_reconnect(true);
    s->connect();
  }
  updating_ = false;
  refresh_state(child);
}

bool PriorityPolicy::refresh_state(const std::shared_ptr<Child>& shared) {
  Child& child = *shared;
  bool ready = false, connecting = false, any = false, ejected = false;
  const absl::Status* failure = nullptr;
  for (const auto& locality : child.localities) {
    for (const auto& s : locality.subchannels) {
      any = true;
      switch (s->state()) {
        case ConnectivityState::kReady:
          // gRFC A50: an ejected endpoint is TRANSIENT_FAILURE to its priority.
          if (helper_.ejected(*s)) {
            ejected = true;
          } else {
            ready = true;
          }
          break;
        case ConnectivityState::kIdle:
        case ConnectivityState::kConnecting:
          connecting = true;
          break;
        default:
          if (failure == nullptr && !s->last_error().ok()) failure = &s->last_error();
          break;
      }
    }
  }
  ConnectivityState next;
  if (ready) {
    child.failed = false;
    next = ConnectivityState::kReady;
  } else if (!any) {
    child.failed = true;
    child.error = absl::UnavailableError("xDS: no healthy endpoint in this priority");
    next = ConnectivityState::kTransientFailure;
  } else if (!connecting || child.failed) {
    if (!child.failed || failure != nullptr) {
      if (failure != nullptr) {
        child.error = *failure;
      } else if (ejected) {
        child.error =
            absl::UnavailableError("xDS: every connected endpoint is ejected (outlier detection)");
      } else {
        child.error = absl::UnavailableError("every endpoint failed to connect");
      }
    }
    child.failed = true;
    next = ConnectivityState::kTransientFailure;
  } else {
    next = ConnectivityState::kConnecting;
  }
  if (next == child.state) return false;
  child.state = next;
  switch (next) {
    case ConnectivityState::kConnecting:
      if (child.seen_ready_since_failure && !child.failover_pending) start_failover_timer(shared);
      break;
    case ConnectivityState::kReady:
      child.seen_ready_since_failure = true;
      child.failover_pending = false;
      ++child.failover_id;
      child.failover_timer.cancel();
      break;
    default:
      child.seen_ready_since_failure = false;
      child.failover_pending = false;
      ++child.failover_id;
      child.failover_timer.cancel();
      break;
  }
  return true;
}

void PriorityPolicy::start_failover_timer(const std::shared_ptr<Child>& shared) {
  Child& child = *shared;
  child.failover_pending = true;
  const std::uint64_t id = child.failover_id = ++next_timer_;
  child.failover_timer.expires_after(timeouts_.failover);
  // Stale waits (cancelled, or fired before a newer start) see another id and do nothing; the
  // weak reference covers the child's and the policy's end (a child's timers go with it).
  child.failover_timer.async_wait(
      [this, weak = std::weak_ptr<Child>(shared), id](const asio::error_code&) {
        auto c = weak.lock();
        if (c == nullptr || c->failover_id != id || shut_down_) return;
        // Still not READY within the timer: as gRPC, the child counts as failing.
        c->failover_pending = false;
        c->seen_ready_since_failure = false;
        choose();
      });
}

void PriorityPolicy::start_retention_timer(std::size_t priority) {
  const std::shared_ptr<Child>& child = children_[priority];
  child->deactivated = true;
  const std::uint64_t id = child->retention_id = ++next_timer_;
  child->retention_timer.expires_after(timeouts_.retention);
  child->retention_timer.async_wait(
      [this, weak = std::weak_ptr<Child>(child), id, priority](const asio::error_code&) {
        auto c = weak.lock();
        if (c == nullptr || c->retention_id != id || !c->deactivated || shut_down_) return;
        if (priority >= children_.size() || children_[priority] != c) return;
        destroy_child(priority, /*graceful=*/true);
      });
}

void PriorityPolicy::destroy_child(std::size_t priority, bool graceful) {
  std::shared_ptr<Child> child = std::move(children_[priority]);
  child->failover_timer.cancel();
  child->retention_timer.cancel();
  for (const auto& locality : child->localities) {
    for (const auto& s : locality.subchannels) {
      owner_.erase(s.get());
      s->shutdown(graceful);
    }
  }
}

void PriorityPolicy::on_subchannel_state(Subchannel* subchannel, ConnectivityState state) {
  if (updating_ || shut_down_) return;  // read once the update or creation is done
  auto owner = owner_.find(subchannel);
  if (owner == owner_.end()) return;
  const std::size_t priority = owner->second;
  // round_robin: a lost connection is reconnected at once (the report of that comes first).
  if (state == ConnectivityState::kIdle) subchannel->connect();
  if (priority >= children_.size() || children_[priority] == nullptr) return;
  if (refresh_state(children_[priority])) {
    choose();
  } else if (static_cast<int>(priority) == current_) {
    publish();  // the same state, another set of READY endpoints
  }
}

void PriorityPolicy::refresh_ejections() {
  if (shut_down_) return;
  bool changed = false;
  for (const auto& child : children_) {
    if (child != nullptr) changed |= refresh_state(child);
  }
  if (changed) {
    choose();
  } else {
    publish();  // the same states, another set of endpoints taking calls
  }
}

void PriorityPolicy::exit_idle() {
  if (shut_down_) return;
  for (const auto& child : children_) {
    if (child == nullptr) continue;
    for (const auto& locality : child->localities) {
      for (const auto& s : locality.subchannels) s->connect();  // IDLE ones only
    }
  }
}

void PriorityPolicy::shutdown(bool graceful) {
  if (shut_down_) return;
  shut_down_ = true;
  for (std::size_t p = 0; p < children_.size(); ++p) {
    if (children_[p] != nullptr) destroy_child(p, graceful);
  }
  children_.clear();
  owner_.clear();
}

void PriorityPolicy::choose() {
  if (config_.empty()) {
    current_ = -1;
    helper_.update_picker(LocalityPicker(), ConnectivityState::kTransientFailure,
                          absl::UnavailableError("xDS: the cluster has no endpoints"));
    return;
  }
  // Each pass creates at most one priority: at most one pass per priority, plus the last.
  std::vector<PriorityChildView> views(children_.size());
  while (true) {
    for (std::size_t p = 0; p < children_.size(); ++p) {
      const Child* c = children_[p].get();
      views[p] = c == nullptr ? PriorityChildView{}
                              : PriorityChildView{true, c->state, c->failover_pending};
    }
    const PriorityChoice choice = choose_priority(views);
    if (choice.create) {
      create_child(choice.priority);
      continue;
    }
    // Up to the priority chosen, each is in use again (gRPC reactivates the children it passes).
    for (std::size_t p = 0; p <= choice.priority; ++p) {
      Child* c = children_[p].get();
      if (c != nullptr && c->deactivated) {
        c->deactivated = false;
        ++c->retention_id;
        c->retention_timer.cancel();
      }
    }
    if (choice.deactivate_lower) {
      for (std::size_t p = choice.priority + 1; p < children_.size(); ++p) {
        if (children_[p] != nullptr && !children_[p]->deactivated) start_retention_timer(p);
      }
    }
    current_ = static_cast<int>(choice.priority);
    break;
  }
  publish();
}

void PriorityPolicy::publish() {
  if (current_ < 0 || shut_down_) return;
  const Child& child = *children_[current_];
  std::vector<LocalityPicker::Locality> localities;
  localities.reserve(child.localities.size());
  for (const auto& locality : child.localities) {
    LocalityPicker::Locality out;
    out.weight = locality.weight;
    for (const auto& s : locality.subchannels) {
      if (s->state() != ConnectivityState::kReady || helper_.ejected(*s)) continue;  // gRFC A50
      out.ready.push_back(s->connection());
      helper_.on_ready_connection(*s, *out.ready.back());
    }
    if (out.weight > 0 && !out.ready.empty()) localities.push_back(std::move(out));
  }
  // A seed per picker (the last one's draws leave no trace in the next).
  seed_ = seed_ * 6364136223846793005ULL + 1442695040888963407ULL;
  helper_.update_picker(
      LocalityPicker(std::move(localities), seed_), child.state,
      child.state == ConnectivityState::kTransientFailure ? child.error : absl::OkStatus());
}

}  // namespace ferry::detail

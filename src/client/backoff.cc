// Implementation of src/client/backoff.h, and connectivity_state_name (ferry/connectivity.h).
#include "client/backoff.h"

#include <algorithm>
#include <random>

namespace ferry {

std::string_view connectivity_state_name(ConnectivityState state) {
  switch (state) {
    case ConnectivityState::kIdle:
      return "IDLE";
    case ConnectivityState::kConnecting:
      return "CONNECTING";
    case ConnectivityState::kReady:
      return "READY";
    case ConnectivityState::kTransientFailure:
      return "TRANSIENT_FAILURE";
    case ConnectivityState::kShutdown:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

namespace detail {
namespace {

double thread_uniform() {
  thread_local std::mt19937 engine(
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace

Backoff::Backoff(const BackoffOptions& options, std::function<double()> uniform)
    : options_(options), uniform_(uniform ? std::move(uniform) : thread_uniform) {}

std::chrono::milliseconds Backoff::next() {
  using Ms = std::chrono::duration<double, std::milli>;
  const Ms max(options_.max);
  if (current_.count() <= 0) {
    // The spec's first retry waits exactly initial: the jitter applies from the second on.
    current_ = std::min(Ms(options_.initial), max);
    return std::chrono::duration_cast<std::chrono::milliseconds>(current_);
  }
  current_ = std::min(current_ * options_.multiplier, max);
  const double spread = (uniform_() * 2.0 - 1.0) * options_.jitter;  // in [-jitter, jitter)
  const Ms jittered = std::max(Ms(0), current_ * (1.0 + spread));
  return std::chrono::duration_cast<std::chrono::milliseconds>(jittered);
}

}  // namespace detail
}  // namespace ferry

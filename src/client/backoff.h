// The connection back-off calculator (client layer, private): the delays of gRPC's
// connection-backoff.md from BackoffOptions, with the random source injected so that tests can
// check the sequence exactly. A subchannel holds one per address; not thread-safe.
#pragma once

#include <chrono>
#include <functional>

#include "ferry/connectivity.h"

namespace ferry::detail {

class Backoff {
 public:
  // uniform: draws from [0, 1); null uses a per-thread std::mt19937 seeded from the clock.
  explicit Backoff(const BackoffOptions& options, std::function<double()> uniform = nullptr);

  // The delay from the start of the attempt that just failed to the start of the next: initial
  // for the first failure, then min(previous * multiplier, max) spread by +-jitter (never below
  // zero). The unjittered delay grows on; the jitter does not accumulate.
  std::chrono::milliseconds next();
  // After a connection became READY: the next failure starts from initial again.
  void reset() { current_ = std::chrono::milliseconds::zero(); }

 private:
  BackoffOptions options_;
  std::function<double()> uniform_;
  std::chrono::duration<double, std::milli> current_{0};
};

}  // namespace ferry::detail

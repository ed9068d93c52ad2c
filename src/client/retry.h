// Retry decisions for calls (client layer, private; the policies are ferry/retry.h's): which
// policy a method has, whether a finished attempt is retried, how long to wait first, and the
// channel's retry throttle. Only consulted once an attempt failed: a successful call pays at most
// the throttle's token refill, and only when throttling is on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/method_config.h"
#include "ferry/retry.h"

namespace ferry::detail {

// The retry policy of a method's settings (client/method_config.h finds them); null when retries
// are off for it (no policy, or one attempt).
const RetryPolicy* retry_policy_of(const MethodConfig& config);

// Whether status is a failure that policy retries (gRFC A6: such failures, and only they, count
// against the retry throttle, whatever else decides the call's fate).
bool is_retryable(const RetryPolicy& policy, const absl::Status& status);

// Whether an attempt that ended with status may be followed by another: a retryable status, a call
// not committed, attempts made (so far, the failed one included) below the policy's maximum.
bool should_retry(const RetryPolicy& policy, const absl::Status& status, bool committed,
                  int attempts_made);

// The wait before retry n (n >= 1): uniform in [0, min(initial * multiplier^(n-1), max)).
// uniform: draws from [0, 1).
std::chrono::milliseconds retry_delay(const RetryPolicy& policy, int n, double uniform);

// The server's grpc-retry-pushback-ms trailer, as a ClientCall keeps it: kNoPushback when absent;
// kStopRetrying when negative or not a decimal number (the retry design reads both as "do not
// retry"); else the milliseconds to wait before the next attempt, in place of the back-off.
constexpr std::int64_t kNoPushback = -1;
constexpr std::int64_t kStopRetrying = -2;
std::int64_t parse_retry_pushback(std::string_view value);

// The channel's token bucket (RetryThrottling). On the channel's executor.
class RetryThrottle {
 public:
  // max_tokens is held to [0, 1000] and token_ratio to [0.001, max_tokens] (gRFC A6's ranges;
  // apply_service_config refuses values outside them): 1e10 thousandths overflowed an int, and
  // a ratio under 0.001 was zero thousandths, never refilling the bucket.
  explicit RetryThrottle(const RetryThrottling& options)
      : max_(std::clamp(options.max_tokens, 0, 1000) * 1000),
        ratio_(ratio_thousandths(options.token_ratio, max_)),
        tokens_(max_) {}
  bool enabled() const { return max_ > 0; }
  // An attempt failed with a retryable status; true when a retry is still allowed.
  bool on_retryable_failure() {
    tokens_ = tokens_ >= 1000 ? tokens_ - 1000 : 0;
    return tokens_ > max_ / 2;
  }
  void on_success() { tokens_ = tokens_ + ratio_ > max_ ? max_ : tokens_ + ratio_; }

 private:
  static int ratio_thousandths(double ratio, int max) {
    if (!(ratio > 0)) return 0;  // NaN too
    // Truncated to three decimals as gRPC C++ does; the tiny margin keeps 1.001 (1000.99999...
    // thousandths as a double) at 1001.
    const double thousandths = std::floor(std::min(ratio * 1000 + 1e-6, static_cast<double>(max)));
    return std::max(1, static_cast<int>(thousandths));
  }
  // In thousandths of a token, as gRPC keeps them (the ratio has three decimals).
  int max_;
  int ratio_;
  int tokens_;
};

}  // namespace ferry::detail

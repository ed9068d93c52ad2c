// Implementation of src/client/retry.h.
#include "client/retry.h"

#include <algorithm>
#include <cmath>

namespace ferry::detail {

const RetryPolicy* retry_policy_of(const MethodConfig& config) {
  const std::optional<RetryPolicy>& policy = config.retry_policy;
  return policy && policy->max_attempts > 1 ? &*policy : nullptr;
}

bool is_retryable(const RetryPolicy& policy, const absl::Status& status) {
  const auto& codes = policy.retryable_status_codes;
  return !status.ok() && std::find(codes.begin(), codes.end(), status.code()) != codes.end();
}

bool should_retry(const RetryPolicy& policy, const absl::Status& status, bool committed,
                  int attempts_made) {
  if (committed) return false;
  if (attempts_made >= std::min(policy.max_attempts, 5)) return false;
  return is_retryable(policy, status);
}

std::chrono::milliseconds retry_delay(const RetryPolicy& policy, int n, double uniform) {
  const double initial = static_cast<double>(policy.initial_backoff.count());
  const double cap = static_cast<double>(policy.max_backoff.count());
  const double ceiling = std::min(initial * std::pow(policy.backoff_multiplier, n - 1), cap);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, ceiling * uniform)));
}

std::int64_t parse_retry_pushback(std::string_view value) {
  // More than 10 digits (over 115 days) is past any deadline: read as "stop".
  if (value.empty() || value.size() > 10) return kStopRetrying;
  std::int64_t ms = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return kStopRetrying;  // '-' included: negative means stop
    ms = ms * 10 + (c - '0');
  }
  return ms;
}

}  // namespace ferry::detail

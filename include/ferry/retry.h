// ferry/retry.h: retries of failed calls (client layer, public), after gRPC's retry design (A6):
// a policy per method says how many attempts a call may make, which statuses are worth another
// attempt and how long to wait between them; a channel-wide throttle stops retries while most
// calls fail. Independent of these, a call the server never processed (REFUSED_STREAM, or above
// a GOAWAY's last stream id) is always retried transparently.
#pragma once

#include <chrono>
#include <vector>

#include "absl/status/status.h"

namespace ferry {

// A method's retry policy (service config's retryPolicy). A unary call's request is the caller's
// until the call completes, so retrying it buffers nothing; a streaming call keeps copies of
// its request messages (ChannelOptions::retry_buffer_per_call) to send them again. An attempt
// is retried only while the call is not committed: no response headers or messages came (a
// Trailers-Only response does not commit), the kept messages fit the buffer, and the deadline
// leaves room for the wait. A server's grpc-retry-pushback-ms trailer replaces the wait (and
// restarts the back-off); a negative or malformed one ends the retries. Retries send
// grpc-previous-rpc-attempts. Calls through client interceptors: unary ones only.
struct RetryPolicy {
  // Attempts in all, the first included: 1 (the default) turns retries off; at most 5 (gRPC's
  // cap; more is treated as 5).
  int max_attempts = 1;
  // The n-th retry waits a random time in [0, min(initial_backoff * multiplier^(n-1),
  // max_backoff)).
  std::chrono::milliseconds initial_backoff = std::chrono::milliseconds(100);
  std::chrono::milliseconds max_backoff = std::chrono::seconds(1);
  double backoff_multiplier = 2.0;
  // The statuses an attempt may end with to be retried.
  std::vector<absl::StatusCode> retryable_status_codes = {absl::StatusCode::kUnavailable};
};

// Retry throttling (service config's retryThrottling): the channel holds max_tokens tokens; every
// attempt that fails with a retryable status takes one, every success gives back token_ratio;
// retries are made only while more than half remain. max_tokens 0 (the default) turns it off;
// more than 1000 counts as 1000. token_ratio is kept in thousandths (truncated; a positive ratio
// under 0.001 counts as 0.001, one over max_tokens as max_tokens).
struct RetryThrottling {
  int max_tokens = 0;
  double token_ratio = 0.1;
};

}  // namespace ferry

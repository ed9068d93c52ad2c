// ferry/service_config.h: gRPC service configs (client layer, public): the JSON document of
// gRPC's service-config design, applied to a channel's options. The parts ferry implements are
// read: the load-balancing policy, per method the retry policy, timeout, waitForReady and message
// limits, and retry throttling.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "ferry/channel.h"

namespace ferry {

// Applies json to options:
//   "loadBalancingConfig": [{"round_robin": {}}, ...]  the first policy ferry knows
//                                                      (pick_first, round_robin) wins
//   "loadBalancingPolicy": "round_robin"               the older form, when the above is absent
//   "methodConfig": [{"name": [{"service": "pkg.Svc", "method": "M"}],
//                     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s",
//                                     "maxBackoff": "1s", "backoffMultiplier": 2,
//                                     "retryableStatusCodes": ["UNAVAILABLE"]},
//                     "timeout": "1.5s", "waitForReady": true,
//                     "maxRequestMessageBytes": 1048576, "maxResponseMessageBytes": 4194304}]
//       a name without method applies to the service, an empty name ({}) to every method; the
//       most specific entry applies whole (a field it lacks is unset, not inherited); each entry
//       lands in ChannelOptions::method_configs, or method_config for the empty name
//       (ferry/method_config.h); a name listed twice (or two empty names) refuses the config
//   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
// Other fields (hedgingPolicy, healthCheckConfig) are ignored. INVALID_ARGUMENT, saying why, for
// text that is not strict JSON or a field of the wrong shape or range (as gRPC validates them);
// options are then left as they were. Any thread; not the hot path.
[[nodiscard]] absl::Status apply_service_config(std::string_view json, ChannelOptions& options);

}  // namespace ferry

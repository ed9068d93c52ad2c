// What a route sets for its calls besides where they go (ferry::xds, private): gRFC A31's
// max_stream_duration (the route's, or its listener's HttpConnectionManager default) and gRFC
// A44's retry policy, decoded from the control plane's protos and validated as those gRFCs say.
// Every value comes from the network: each rule is checked before a number is used, and nothing
// here can overflow on any input.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "xds/resources.h"

namespace envoy::config::route::v3 {
class RetryPolicy;
class RouteAction;
}  // namespace envoy::config::route::v3
namespace google::protobuf {
class Duration;
}

namespace ferry::xds::detail {

// A google.protobuf.Duration as gRPC's xDS client validates one: seconds in [0, 315576000000]
// (the protobuf range, 10,000 years, negative refused) and nanos in [0, 999999999], else
// INVALID_ARGUMENT naming where; in milliseconds, a part of one counting as a whole one (so a
// positive duration never becomes zero). The largest is 3.2e14 ms: no int64 overflow.
absl::StatusOr<std::chrono::milliseconds> decode_xds_duration(const google::protobuf::Duration& d,
                                                              const std::string& where);

// gRFC A31: RouteAction.max_stream_duration's grpc_timeout_header_max when present (then its
// max_stream_duration is ignored), else its max_stream_duration; nullopt when neither is set
// (the listener's default applies). Zero means no limit.
absl::StatusOr<std::optional<std::chrono::milliseconds>> decode_route_max_stream_duration(
    const envoy::config::route::v3::RouteAction& action, const std::string& where);

// gRFC A44's conversion and validation of Envoy's RetryPolicy: retry_on's gRPC conditions (the
// others ignored); num_retries at least 1 (default 1), max attempts num_retries + 1 capped at 5;
// retry_back_off optional (25 ms / 250 ms), its base_interval required, both intervals over 0
// and max_interval (default 10 x base_interval) not under base_interval. A policy breaking a
// rule is INVALID_ARGUMENT naming the field: the resource is NACKed.
absl::StatusOr<RouteRetryPolicy> decode_route_retry_policy(
    const envoy::config::route::v3::RetryPolicy& policy, const std::string& where);

}  // namespace ferry::xds::detail

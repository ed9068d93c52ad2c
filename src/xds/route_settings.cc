// Implementation of src/xds/route_settings.h: gRFC A31's and A44's rules, each at its check.
#include "xds/route_settings.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "envoy/config/route/v3/route_components.pb.h"
#include "google/protobuf/duration.pb.h"

namespace ferry::xds::detail {
namespace {

// google.protobuf.Duration's range (duration.proto): about 10,000 years.
constexpr std::int64_t kMaxDurationSeconds = 315576000000;
constexpr std::int32_t kMaxDurationNanos = 999999999;

absl::Status invalid_route_setting(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Whether a <= b, for durations decode_xds_duration accepted (compared before rounding).
bool duration_not_after(const google::protobuf::Duration& a, const google::protobuf::Duration& b) {
  return a.seconds() < b.seconds() || (a.seconds() == b.seconds() && a.nanos() <= b.nanos());
}

}  // namespace

absl::StatusOr<std::chrono::milliseconds> decode_xds_duration(const google::protobuf::Duration& d,
                                                              const std::string& where) {
  if (d.seconds() < 0 || d.seconds() > kMaxDurationSeconds) {
    return invalid_route_setting(
        where, absl::StrCat("seconds ", d.seconds(), " is not in [0, ", kMaxDurationSeconds, "]"));
  }
  if (d.nanos() < 0 || d.nanos() > kMaxDurationNanos) {
    return invalid_route_setting(
        where, absl::StrCat("nanos ", d.nanos(), " is not in [0, ", kMaxDurationNanos, "]"));
  }
  // At most 315576000000 * 1000 + 1000: far inside int64.
  return std::chrono::milliseconds(d.seconds() * 1000 + (d.nanos() + 999'999) / 1'000'000);
}

absl::StatusOr<std::optional<std::chrono::milliseconds>> decode_route_max_stream_duration(
    const envoy::config::route::v3::RouteAction& action, const std::string& where) {
  if (!action.has_max_stream_duration()) return std::nullopt;
  const auto& limits = action.max_stream_duration();
  // A31: grpc_timeout_header_max, when present, replaces max_stream_duration (0: no limit).
  if (limits.has_grpc_timeout_header_max()) {
    absl::StatusOr<std::chrono::milliseconds> max =
        decode_xds_duration(limits.grpc_timeout_header_max(),
                            absl::StrCat(where, ".max_stream_duration.grpc_timeout_header_max"));
    if (!max.ok()) return max.status();
    return std::optional<std::chrono::milliseconds>(*max);
  }
  if (limits.has_max_stream_duration()) {
    absl::StatusOr<std::chrono::milliseconds> max =
        decode_xds_duration(limits.max_stream_duration(),
                            absl::StrCat(where, ".max_stream_duration.max_stream_duration"));
    if (!max.ok()) return max.status();
    return std::optional<std::chrono::milliseconds>(*max);
  }
  return std::nullopt;
}

absl::StatusOr<RouteRetryPolicy> decode_route_retry_policy(
    const envoy::config::route::v3::RetryPolicy& policy, const std::string& where) {
  RouteRetryPolicy out;
  // A44: only x-envoy-retry-grpc-on's conditions become retryable codes; any other is ignored.
  // Read as grpc-go does: comma-separated, blanks around each trimmed, any case.
  for (absl::string_view condition : absl::StrSplit(policy.retry_on(), ',')) {
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(condition));
    absl::StatusCode code;
    if (name == "cancelled") {
      code = absl::StatusCode::kCancelled;
    } else if (name == "deadline-exceeded") {
      code = absl::StatusCode::kDeadlineExceeded;
    } else if (name == "internal") {
      code = absl::StatusCode::kInternal;
    } else if (name == "resource-exhausted") {
      code = absl::StatusCode::kResourceExhausted;
    } else if (name == "unavailable") {
      code = absl::StatusCode::kUnavailable;
    } else {
      continue;
    }
    if (std::find(out.retry_on.begin(), out.retry_on.end(), code) == out.retry_on.end()) {
      out.retry_on.push_back(code);
    }
  }
  // A44: num_retries defaults to 1 and must not be under 1; max attempts = num_retries + 1,
  // over 5 read as 5 (A6). Capped before adding: 2^32-1 + 1 would wrap a uint32.
  if (policy.has_num_retries()) {
    const std::uint32_t retries = policy.num_retries().value();
    if (retries == 0) return invalid_route_setting(where, "num_retries must be at least 1");
    out.max_attempts = static_cast<int>(std::min<std::uint32_t>(retries, 4)) + 1;
  }
  // A44: retry_back_off is optional (25 ms / 250 ms); in it base_interval is required, both
  // intervals must be over 0 (under a millisecond counts as one), max_interval defaults to
  // 10 x base_interval and may not be under it.
  if (policy.has_retry_back_off()) {
    const auto& backoff = policy.retry_back_off();
    const std::string at = absl::StrCat(where, ".retry_back_off");
    if (!backoff.has_base_interval()) {
      return invalid_route_setting(at, "base_interval is required");
    }
    absl::StatusOr<std::chrono::milliseconds> base =
        decode_xds_duration(backoff.base_interval(), absl::StrCat(at, ".base_interval"));
    if (!base.ok()) return base.status();
    if (base->count() == 0) return invalid_route_setting(at, "base_interval must be over 0");
    out.base_interval = *base;
    out.max_interval = *base * 10;  // at most 3.2e15 ms: no overflow
    if (backoff.has_max_interval()) {
      absl::StatusOr<std::chrono::milliseconds> max =
          decode_xds_duration(backoff.max_interval(), absl::StrCat(at, ".max_interval"));
      if (!max.ok()) return max.status();
      if (max->count() == 0) return invalid_route_setting(at, "max_interval must be over 0");
      if (!duration_not_after(backoff.base_interval(), backoff.max_interval())) {
        return invalid_route_setting(at, "max_interval is under base_interval");
      }
      out.max_interval = *max;
    }
  }
  return out;
}

}  // namespace ferry::xds::detail

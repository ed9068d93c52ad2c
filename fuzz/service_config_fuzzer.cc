// libFuzzer target: gRPC service configs (ferry/service_config.h, client layer) as a resolver or
// a control plane could send them, fed arbitrary text: a refusal is INVALID_ARGUMENT and leaves
// the options as they were; an accepted config holds only values in the ranges gRPC allows
// (timeouts > 0, 2 to 5 attempts, back-offs > 0, throttling within gRFC A6's bounds), and
// applying it again gives the same options.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ferry/service_config.h"
#include "fuzz_check.h"

namespace {

using ferry::ChannelOptions;
using ferry::MethodConfig;

void check_method(const MethodConfig& c) {
  if (c.timeout) FUZZ_CHECK(c.timeout->count() > 0);
  if (c.retry_policy) {
    const ferry::RetryPolicy& p = *c.retry_policy;
    FUZZ_CHECK(p.max_attempts >= 2 && p.max_attempts <= 5);
    FUZZ_CHECK(p.initial_backoff.count() > 0 && p.max_backoff.count() > 0);
    FUZZ_CHECK(p.backoff_multiplier > 0 && std::isfinite(p.backoff_multiplier));
    FUZZ_CHECK(!p.retryable_status_codes.empty());
    for (absl::StatusCode code : p.retryable_status_codes) {
      FUZZ_CHECK(static_cast<int>(code) >= 1 && static_cast<int>(code) <= 16);
    }
  }
  if (c.max_request_message_bytes) FUZZ_CHECK(*c.max_request_message_bytes <= 0xFFFFFFFFu);
  if (c.max_response_message_bytes) FUZZ_CHECK(*c.max_response_message_bytes <= 0xFFFFFFFFu);
}

// Options with a mark in each field a config can set, to see a refusal leave them alone.
ChannelOptions marked() {
  ChannelOptions o;
  o.retry_throttling.max_tokens = 7;
  o.retry_throttling.token_ratio = 0.25;
  o.method_config.timeout = std::chrono::milliseconds(12345);
  o.method_configs["/mark.S/"].wait_for_ready = true;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ChannelOptions options = marked();
  const absl::Status s = ferry::apply_service_config(text, options);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(options.retry_throttling.max_tokens == 7);
    FUZZ_CHECK(options.retry_throttling.token_ratio == 0.25);
    FUZZ_CHECK(options.method_config.timeout == std::chrono::milliseconds(12345));
    FUZZ_CHECK(options.method_configs.size() == 1);
    return 0;
  }
  const ferry::RetryThrottling& t = options.retry_throttling;
  if (t.max_tokens != 7 || t.token_ratio != 0.25) {
    FUZZ_CHECK(t.max_tokens >= 1 && t.max_tokens <= 1000);
    FUZZ_CHECK(t.token_ratio >= 0.001 && t.token_ratio <= 1000);
  }
  check_method(options.method_config);
  for (const auto& [name, config] : options.method_configs) {
    FUZZ_CHECK(name.size() >= 3 && name.front() == '/' && name.find('/', 1) != std::string::npos);
    check_method(config);
  }
  ChannelOptions again = marked();
  FUZZ_CHECK(ferry::apply_service_config(text, again).ok());
  FUZZ_CHECK(again.method_configs.size() == options.method_configs.size());
  FUZZ_CHECK(again.load_balancing == options.load_balancing);
  FUZZ_CHECK(again.retry_throttling.max_tokens == t.max_tokens);
  return 0;
}

// Service configs (ferry/service_config.h) and the strict JSON reader under them
// (src/client/json.h): the fields ferry applies land in ChannelOptions, malformed JSON and
// fields of the wrong shape are refused with INVALID_ARGUMENT and leave the options alone.
#include "ferry/service_config.h"

#include <gtest/gtest.h>
#include <langinfo.h>
#include <locale.h>

#include <cstdlib>
#include <string>

#include "client/json.h"
#include "support/sanitized.h"

// LeakSanitizer's switches, null without it (weak: this file builds with and without it).
extern "C" void __lsan_disable() __attribute__((weak));
extern "C" void __lsan_enable() __attribute__((weak));

namespace ferry::service_config_test {
namespace {

using namespace std::chrono_literals;

TEST(Json, ReadsTheGrammarStrictly) {
  auto v =
      detail::parse_json(R"( {"a": [1, -2.5e1, true, false, null, "x\u00e9\ud83d\ude00\n"]} )");
  ASSERT_TRUE(v.ok()) << v.status();
  const detail::JsonValue* a = v->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 6u);
  EXPECT_EQ(a->array[1].number, -25);
  EXPECT_EQ(a->array[5].string, "x\xC3\xA9\xF0\x9F\x98\x80\n");
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\":1,}", "{\"a\":1 \"b\":2}", "01", "1.", "-", "\"\\x\"", "\"a\nb\"",
        "{\"a\":1,\"a\":2}", "// c\n{}", "{} x", "\"\\ud800\"", "tru", "[1 2]"}) {
    EXPECT_FALSE(detail::parse_json(bad).ok()) << bad;
  }
  EXPECT_FALSE(detail::parse_json(std::string(100, '[') + std::string(100, ']')).ok());
  EXPECT_TRUE(detail::parse_json(std::string(20, '[') + std::string(20, ']')).ok());
}

// A locale whose decimal separator is a comma, or null: an installed one, else de_DE.UTF-8
// made by localedef (Debian's locales package has its sources) in the test's temporary directory.
// strtod obeys the calling thread's LC_NUMERIC (uselocale, else setlocale's), so the test sets it
// with uselocale for its own thread only.
locale_t comma_decimal_locale() {
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"}) {
    if (locale_t l = newlocale(LC_ALL_MASK, name, locale_t{})) return l;
  }
  const std::string dir = ::testing::TempDir() + "ferry_locales";
  const std::string make = "mkdir -p '" + dir + "' && localedef -i de_DE -f UTF-8 '" + dir +
                           "/de_DE.UTF-8' >/dev/null 2>&1";
  [[maybe_unused]] const int made = std::system(make.c_str());  // warnings exit non-zero
  ::setenv("LOCPATH", dir.c_str(), 1);
  // glibc keeps the path list it splits LOCPATH into for the life of the process: not a leak of
  // the code under test, so LeakSanitizer (when it runs) is told to look away.
  if (__lsan_disable != nullptr) __lsan_disable();
  locale_t l = newlocale(LC_ALL_MASK, "de_DE.UTF-8", locale_t{});
  if (__lsan_enable != nullptr) __lsan_enable();
  ::unsetenv("LOCPATH");
  return l;
}

// Numbers read the same whatever the locale: under de_DE, strtod read "1.5" as 1 (and stopped at
// the '.'), so a backoffMultiplier of 1.5 became 1 and a tokenRatio of 0.5 was refused as 0.
TEST(Json, NumbersIgnoreTheLocale) {
  locale_t comma = comma_decimal_locale();
  if (comma == nullptr) {
    GTEST_SKIP() << "no comma-decimal locale installed (de_DE.UTF-8) and localedef could not "
                    "make one: install Debian's locales package";
  }
  ASSERT_STREQ(nl_langinfo_l(RADIXCHAR, comma), ",");
  const locale_t previous = uselocale(comma);
  absl::StatusOr<detail::JsonValue> v = detail::parse_json("[1.5, 0.5, -2.5e-1, 1e2]");
  ChannelOptions options;
  const absl::Status applied = apply_service_config(R"({
    "methodConfig": [{"name": [{}],
                      "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s",
                                      "maxBackoff": "1s", "backoffMultiplier": 1.5,
                                      "retryableStatusCodes": ["UNAVAILABLE"]}}],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}})",
                                                    options);
  uselocale(previous);
  freelocale(comma);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->array.size(), 4u);
  EXPECT_EQ(v->array[0].number, 1.5);
  EXPECT_EQ(v->array[1].number, 0.5);
  EXPECT_EQ(v->array[2].number, -0.25);
  EXPECT_EQ(v->array[3].number, 100);
  ASSERT_TRUE(applied.ok()) << applied;
  ASSERT_TRUE(options.method_config.retry_policy.has_value());
  EXPECT_EQ(options.method_config.retry_policy->backoff_multiplier, 1.5);
  EXPECT_EQ(options.retry_throttling.token_ratio, 0.5);
}

// Numbers a double cannot hold are refused, not read as infinity.
TEST(Json, NumbersOutOfRangeAreRefused) {
  EXPECT_FALSE(detail::parse_json("1e400").ok());
  EXPECT_FALSE(detail::parse_json("[-1e999]").ok());
  EXPECT_EQ(detail::parse_json("1.7976931348623157e308")->number, 1.7976931348623157e308);
}

TEST(ServiceConfig, AppliesPolicyRetriesAndThrottling) {
  ChannelOptions options;
  ASSERT_TRUE(apply_service_config(R"({
    "loadBalancingConfig": [{"grpclb": {}}, {"round_robin": {}}, {"pick_first": {}}],
    "methodConfig": [
      {"name": [{"service": "pkg.Echo", "method": "Call"}, {"service": "pkg.Other"}],
       "timeout": "1s",
       "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.25s", "maxBackoff": "2s",
                       "backoffMultiplier": 1.5,
                       "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED", 10]}},
      {"name": [{}],
       "retryPolicy": {"maxAttempts": 9, "initialBackoff": "1s", "maxBackoff": "1s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
  })",
                                   options)
                  .ok());
  EXPECT_EQ(options.load_balancing, LoadBalancingPolicy::kRoundRobin);
  ASSERT_EQ(options.method_configs.count("/pkg.Echo/Call"), 1u);
  ASSERT_EQ(options.method_configs.count("/pkg.Other/"), 1u);
  ASSERT_TRUE(options.method_configs["/pkg.Echo/Call"].retry_policy.has_value());
  const RetryPolicy& p = *options.method_configs["/pkg.Echo/Call"].retry_policy;
  EXPECT_EQ(p.max_attempts, 4);
  EXPECT_EQ(p.initial_backoff, 250ms);
  EXPECT_EQ(p.max_backoff, 2000ms);
  EXPECT_EQ(p.backoff_multiplier, 1.5);
  EXPECT_EQ(p.retryable_status_codes,
            (std::vector<absl::StatusCode>{absl::StatusCode::kUnavailable,
                                           absl::StatusCode::kResourceExhausted,
                                           absl::StatusCode::kAborted}));
  ASSERT_TRUE(options.method_config.retry_policy.has_value());
  EXPECT_EQ(options.method_config.retry_policy->max_attempts, 5);  // gRPC's cap
  EXPECT_EQ(options.retry_throttling.max_tokens, 10);

  ChannelOptions older;
  ASSERT_TRUE(apply_service_config(R"({"loadBalancingPolicy": "round_robin"})", older).ok());
  EXPECT_EQ(older.load_balancing, LoadBalancingPolicy::kRoundRobin);
}

TEST(ServiceConfig, RefusesWrongShapesAndLeavesOptionsAlone) {
  for (const char* bad : {
           R"([])",
           R"({"loadBalancingConfig": {"round_robin": {}}})",
           R"({"loadBalancingConfig": [{"weird": {}}]})",
           R"({"loadBalancingPolicy": "weird"})",
           R"({"methodConfig": [{"name": [{"method": "M"}], "retryPolicy": {"maxAttempts": 2,
               "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
               "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
           R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 1,
               "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
               "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
           R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
               "initialBackoff": "1", "maxBackoff": "1s", "backoffMultiplier": 2,
               "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
           R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
               "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
               "retryableStatusCodes": []}}]})",
           R"({"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2,
               "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
               "retryableStatusCodes": ["NOPE"]}}]})",
           R"({"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}})",
           R"({"retryThrottling": {"maxTokens": 10}})",
           R"({"methodConfig": [{"name": [{}], "timeout": 1}]})",
           R"({"methodConfig": [{"name": [{}], "timeout": "-1s"}]})",
           R"({"methodConfig": [{"name": [{}], "timeout": "1m"}]})",
           R"({"methodConfig": [{"name": [{}], "waitForReady": "yes"}]})",
           R"({"methodConfig": [{"name": [{}], "maxRequestMessageBytes": -1}]})",
           R"({"methodConfig": [{"name": [{}], "maxResponseMessageBytes": 4294967296}]})",
           R"({"methodConfig": [{"name": [{}], "maxResponseMessageBytes": 1.5}]})",
           R"({"methodConfig": [{"name": [{}], "maxResponseMessageBytes": "1k"}]})",
       }) {
    ChannelOptions options;
    const absl::Status s = apply_service_config(bad, options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(options.load_balancing, LoadBalancingPolicy::kPickFirst) << bad;
    EXPECT_EQ(options.retry_throttling.max_tokens, 0) << bad;
    EXPECT_TRUE(options.method_configs.empty()) << bad;
    EXPECT_TRUE(options.method_config.empty()) << bad;
  }
}

TEST(ServiceConfig, AppliesTimeoutAndWaitForReadyPerMethod) {
  ChannelOptions options;
  ASSERT_TRUE(apply_service_config(R"({"methodConfig": [
      {"name": [{"service": "pkg.Echo", "method": "Call"}], "timeout": "1.5s",
       "waitForReady": true},
      {"name": [{"service": "pkg.Echo"}], "waitForReady": false,
       "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
      {"name": [{}], "timeout": "0.25s"}]})",
                                   options)
                  .ok());
  ASSERT_EQ(options.method_configs.count("/pkg.Echo/Call"), 1u);
  const MethodConfig& call = options.method_configs["/pkg.Echo/Call"];
  EXPECT_EQ(call.timeout, std::optional<std::chrono::milliseconds>(1500ms));
  EXPECT_EQ(call.wait_for_ready, std::optional<bool>(true));
  const MethodConfig& service = options.method_configs["/pkg.Echo/"];
  EXPECT_FALSE(service.timeout.has_value());  // not inherited from the default entry
  EXPECT_EQ(service.wait_for_ready, std::optional<bool>(false));
  EXPECT_EQ(options.method_config.timeout, std::optional<std::chrono::milliseconds>(250ms));
  EXPECT_FALSE(options.method_config.wait_for_ready.has_value());
  // Each entry is whole: /pkg.Echo/Call has no retry policy although its service has one.
  EXPECT_FALSE(options.method_configs["/pkg.Echo/Call"].retry_policy.has_value());
  EXPECT_EQ(options.method_configs["/pkg.Echo/"].retry_policy->max_attempts, 3);
}

// Timeouts follow gRPC: zero is none (it was a deadline of now), and a positive one under a
// millisecond rounds up to one (it rounded down to zero, a deadline of now too); back-offs
// under a millisecond are > 0 as the retry design requires (they were refused).
TEST(ServiceConfig, ZeroTimeoutIsNoneAndPartsOfAMillisecondRoundUp) {
  for (const char* zero : {"0s", "0.000000000s", "0.0s"}) {
    ChannelOptions options;
    const std::string json =
        std::string(R"({"methodConfig": [{"name": [{}], "timeout": ")") + zero + R"("}]})";
    ASSERT_TRUE(apply_service_config(json, options).ok()) << zero;
    EXPECT_FALSE(options.method_config.timeout.has_value()) << zero;
  }
  ChannelOptions options;
  ASSERT_TRUE(apply_service_config(R"({"methodConfig": [
      {"name": [{"service": "a.S"}], "timeout": "0.0005s"},
      {"name": [{"service": "b.S"}], "timeout": "0.000000001s"},
      {"name": [{"service": "c.S"}], "timeout": "1.0015s",
       "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.0001s", "maxBackoff": "0.0009s",
                       "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
                                   options)
                  .ok());
  EXPECT_EQ(options.method_configs["/a.S/"].timeout, 1ms);
  EXPECT_EQ(options.method_configs["/b.S/"].timeout, 1ms);
  EXPECT_EQ(options.method_configs["/c.S/"].timeout, 1002ms);
  ASSERT_TRUE(options.method_configs["/c.S/"].retry_policy.has_value());
  EXPECT_EQ(options.method_configs["/c.S/"].retry_policy->initial_backoff, 1ms);
  EXPECT_EQ(options.method_configs["/c.S/"].retry_policy->max_backoff, 1ms);
}

// gRFC A6's ranges: maxTokens an integer in (0, 1000], tokenRatio > 0 with three decimal places
// (more are truncated, as gRPC C++ does), at most 1000. 0.0001 was accepted and never refilled
// the bucket; 1e10 was accepted and overflowed the throttle's int.
TEST(ServiceConfig, RetryThrottlingRanges) {
  auto throttling = [](std::string max, std::string ratio, ChannelOptions& options) {
    return apply_service_config(
        R"({"retryThrottling": {"maxTokens": )" + max + R"(, "tokenRatio": )" + ratio + "}}",
        options);
  };
  ChannelOptions options;
  ASSERT_TRUE(throttling("1000", "0.1234", options).ok());
  EXPECT_EQ(options.retry_throttling.max_tokens, 1000);
  EXPECT_EQ(options.retry_throttling.token_ratio, 0.123);
  ASSERT_TRUE(throttling("1", "1.001", options).ok());
  EXPECT_EQ(options.retry_throttling.token_ratio, 1.001);
  ASSERT_TRUE(throttling("10", "0.001", options).ok());
  EXPECT_EQ(options.retry_throttling.token_ratio, 0.001);
  ASSERT_TRUE(throttling("10", "1000", options).ok());
  for (auto [max, ratio] : {std::pair{"10", "0.0001"},
                            {"10", "0.0009"},
                            {"10", "1e10"},
                            {"10", "1000.5"},
                            {"10", "0"},
                            {"10", "-1"},
                            {"10", "\"0.5\""},
                            {"0", "0.1"},
                            {"1001", "0.1"},
                            {"2.5", "0.1"},
                            {"-1", "0.1"},
                            {"\"10\"", "0.1"},
                            {"1e10", "0.1"}}) {
    ChannelOptions before;
    const absl::Status s = throttling(max, ratio, before);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << max << " " << ratio;
    EXPECT_NE(s.message().find("retryThrottling"), std::string_view::npos) << s;
    EXPECT_EQ(before.retry_throttling.max_tokens, 0) << max << " " << ratio;
  }
}

// A name appears once in a service config (gRPC's rule): a second entry for it refuses the
// config, in one entry's list or across entries (the last one silently won). The empty name
// too.
TEST(ServiceConfig, DuplicateMethodNamesAreRefused) {
  for (const char* json : {
           R"({"methodConfig": [{"name": [{"service": "a.S", "method": "M"},
                                         {"service": "a.S", "method": "M"}]}]})",
           R"({"methodConfig": [{"name": [{"service": "a.S"}], "timeout": "1s"},
                                {"name": [{"service": "a.S", "method": ""}]}]})",
           R"({"methodConfig": [{"name": [{}]}, {"name": [{"service": ""}]}]})"}) {
    ChannelOptions options;
    const absl::Status s = apply_service_config(json, options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_TRUE(options.method_configs.empty()) << json;
  }
  ChannelOptions options;
  EXPECT_TRUE(apply_service_config(R"({"methodConfig": [
      {"name": [{"service": "a.S"}, {"service": "a.S", "method": "M"}, {}]},
      {"name": [{"service": "b.S", "method": "M"}]}]})",
                                   options)
                  .ok());
  EXPECT_EQ(options.method_configs.size(), 3u);
}

// Big documents stay near-linear: 40,000 names (in one entry, and as 40,000 entries) and an
// object of 40,000 members are read whole, and a duplicate at the very end is still found.
// (The duplicate-member check once scanned the object per member: 0.9 s at 40,000.) No timing
// is asserted; the test's own few-seconds budget is the sanity check.
TEST(ServiceConfig, BigConfigsAreReadAndTheirDuplicatesFound) {
  // Quadratic reading (a linear duplicate check) takes minutes at 40,000 names, past the test's
  // timeout; under AddressSanitizer (about 20x slower here) 10,000 keep it to a second or so.
  const int kNames = ferry::testing::kSanitized ? 10'000 : 40'000;
  std::string names;
  std::string entries;
  std::string members;
  for (int i = 0; i < kNames; ++i) {
    const std::string svc = "pkg.S" + std::to_string(i);
    names += (i ? "," : "") + std::string(R"({"service": ")") + svc + R"(", "method": "M"})";
    entries += (i ? "," : "") + std::string(R"({"name": [{"service": ")") + svc +
               R"("}], "timeout": "1s"})";
    members += (i ? ",\"" : "\"") + svc + "\": " + std::to_string(i);
  }
  ChannelOptions one_entry;
  ASSERT_TRUE(
      apply_service_config(R"({"methodConfig": [{"name": [)" + names + "]}]}", one_entry).ok());
  EXPECT_EQ(one_entry.method_configs.size(), static_cast<std::size_t>(kNames));
  ChannelOptions many_entries;
  ASSERT_TRUE(apply_service_config(R"({"methodConfig": [)" + entries + "]}", many_entries).ok());
  EXPECT_EQ(many_entries.method_configs.size(), static_cast<std::size_t>(kNames));
  EXPECT_EQ(many_entries.method_configs["/pkg.S" + std::to_string(kNames - 1) + "/"].timeout, 1s);
  absl::StatusOr<detail::JsonValue> object = detail::parse_json("{" + members + "}");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->object.size(), static_cast<std::size_t>(kNames));

  ChannelOptions refused;
  EXPECT_FALSE(apply_service_config(R"({"methodConfig": [{"name": [)" + names +
                                        R"(, {"service": "pkg.S0", "method": "M"}]}]})",
                                    refused)
                   .ok());
  EXPECT_FALSE(
      apply_service_config(
          R"({"methodConfig": [)" + entries + R"(, {"name": [{"service": "pkg.S7"}]}]})", refused)
          .ok());
  EXPECT_TRUE(refused.method_configs.empty());
  const absl::StatusOr<detail::JsonValue> duplicate =
      detail::parse_json("{" + members + R"(, "pkg.S0": 0})");
  EXPECT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("duplicate member 'pkg.S0'"), std::string::npos)
      << duplicate.status();
}

TEST(ServiceConfig, AppliesMessageLimitsPerMethod) {
  ChannelOptions options;
  ASSERT_TRUE(apply_service_config(R"({"methodConfig": [
      {"name": [{"service": "pkg.Echo", "method": "Call"}], "maxRequestMessageBytes": 1024,
       "maxResponseMessageBytes": "2048"},
      {"name": [{}], "maxResponseMessageBytes": 0}]})",
                                   options)
                  .ok());
  const MethodConfig& call = options.method_configs["/pkg.Echo/Call"];
  EXPECT_EQ(call.max_request_message_bytes, std::optional<std::size_t>(1024));
  EXPECT_EQ(call.max_response_message_bytes, std::optional<std::size_t>(2048));
  EXPECT_FALSE(options.method_config.max_request_message_bytes.has_value());
  EXPECT_EQ(options.method_config.max_response_message_bytes, std::optional<std::size_t>(0));
  EXPECT_FALSE(options.method_config.empty());
}

}  // namespace
}  // namespace ferry::service_config_test

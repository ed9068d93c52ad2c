// Retry decisions (src/client/retry.h) as units: which policy applies to a method, when an
// attempt is retried, the delays' bounds with an injected draw, and the throttle's token bucket;
// then end to end: a unary call is retried by its method's policy, up to its maximum, the server
// sees grpc-previous-rpc-attempts on every retry (not on the first attempt), and the server's
// grpc-retry-pushback-ms replaces the back-off (a negative or malformed one stops the retries).
#include "client/retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/method_config.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.pb.h"

namespace ferry::retry_test {
namespace {

using namespace std::chrono_literals;
using detail::find_method_config;
using detail::retry_delay;
using detail::retry_policy_of;
using detail::should_retry;

RetryPolicy retries(int attempts) {
  RetryPolicy p;
  p.max_attempts = attempts;
  return p;
}

MethodConfig with_retries(int attempts) {
  MethodConfig c;
  c.retry_policy = retries(attempts);
  return c;
}

// The policy a call gets: its method's entry, else its service's, else the channel's default;
// the entry found applies whole (an entry without a policy means no retries).
TEST(Retry, PolicyLookupPrefersTheMethodThenTheService) {
  std::map<std::string, MethodConfig, std::less<>> per_method;
  auto policy = [&](const MethodConfig& fallback, std::string_view method) {
    return retry_policy_of(find_method_config(per_method, fallback, method));
  };
  EXPECT_EQ(policy(MethodConfig{}, "/a.S/M"), nullptr);  // off by default
  const MethodConfig fallback = with_retries(2);
  EXPECT_EQ(policy(fallback, "/a.S/M"), &*fallback.retry_policy);
  per_method["/a.S/"] = with_retries(3);
  per_method["/a.S/M"] = with_retries(4);
  per_method["/b.T/M"] = with_retries(1);  // explicitly off
  per_method["/d.V/"].timeout = 1s;        // an entry without a policy: no retries
  EXPECT_EQ(policy(fallback, "/a.S/M")->max_attempts, 4);
  EXPECT_EQ(policy(fallback, "/a.S/Other")->max_attempts, 3);
  EXPECT_EQ(policy(fallback, "/b.T/M"), nullptr);
  EXPECT_EQ(policy(fallback, "/c.U/M"), &*fallback.retry_policy);
  EXPECT_EQ(policy(fallback, "/d.V/M"), nullptr);
}

TEST(Retry, OnlyRetryableUncommittedAttemptsWithinTheMaximum) {
  const RetryPolicy p = retries(3);
  const absl::Status unavailable = absl::UnavailableError("x");
  EXPECT_TRUE(should_retry(p, unavailable, false, 1));
  EXPECT_TRUE(should_retry(p, unavailable, false, 2));
  EXPECT_FALSE(should_retry(p, unavailable, false, 3));
  EXPECT_FALSE(should_retry(p, unavailable, /*committed=*/true, 1));
  EXPECT_FALSE(should_retry(p, absl::InternalError("x"), false, 1));
  EXPECT_FALSE(should_retry(p, absl::OkStatus(), false, 1));
  EXPECT_FALSE(should_retry(retries(9), unavailable, false, 5));  // gRPC's cap of 5
}

TEST(Retry, DelaysStayBelowTheExponentialCeiling) {
  RetryPolicy p = retries(5);
  p.initial_backoff = 100ms;
  p.backoff_multiplier = 2;
  p.max_backoff = 350ms;
  EXPECT_EQ(retry_delay(p, 1, 0.0), 0ms);
  EXPECT_EQ(retry_delay(p, 1, 0.5), 50ms);
  EXPECT_EQ(retry_delay(p, 2, 0.5), 100ms);
  EXPECT_EQ(retry_delay(p, 3, 0.999), 349ms);  // min(400, 350)
  EXPECT_EQ(retry_delay(p, 4, 0.5), 175ms);
}

TEST(Retry, ThrottleStopsRetriesBelowHalfTheTokens) {
  detail::RetryThrottle throttle(RetryThrottling{.max_tokens = 10, .token_ratio = 0.5});
  ASSERT_TRUE(throttle.enabled());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(throttle.on_retryable_failure()) << i;  // 9..6 left
  EXPECT_FALSE(throttle.on_retryable_failure());      // 5: not more than half
  throttle.on_success();                              // 5.5
  EXPECT_FALSE(throttle.on_retryable_failure());      // 4.5
  for (int i = 0; i < 4; ++i) throttle.on_success();  // 6.5
  EXPECT_TRUE(throttle.on_retryable_failure());       // 5.5
  EXPECT_FALSE(detail::RetryThrottle(RetryThrottling{}).enabled());
}

// gRFC A6: every attempt that fails with a retryable status takes a token, the call's last one
// too. A method that always fails, two attempts per call, 10 tokens (retries while more than 5
// remain): calls 1 and 2 take two tokens each (10 -> 6), so call 3's first failure leaves 5 and
// it is not retried. Counting only the failures that were retried (one per call), calls 1 to 4
// were all retried: {2, 2, 2, 2} attempts.
TEST(Retry, ThrottleCountsEveryRetryableFailureTheLastAttemptsToo) {
  std::atomic<int> attempts{0};
  Service failing("ferry.testing.Failing");
  failing.add_unary<testing::EchoRequest, testing::EchoResponse>(
      "Call",
      [&](ServerContext&, const testing::EchoRequest&,
          testing::EchoResponse&) -> asio::awaitable<absl::Status> {
        attempts.fetch_add(1);
        co_return absl::UnavailableError("down");
      });
  ServerOptions server_options;
  server_options.num_threads = 1;
  Server server(server_options);
  server.add_service(failing);
  const int port = server.start("127.0.0.1", 0).value();
  ChannelOptions options;
  options.method_config.retry_policy = retries(2);
  options.method_config.retry_policy->initial_backoff = 1ms;
  options.retry_throttling = RetryThrottling{.max_tokens = 10, .token_ratio = 0.1};
  Channel channel("127.0.0.1:" + std::to_string(port), options);
  std::vector<int> per_call;
  for (int i = 0; i < 4; ++i) {
    attempts = 0;
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(5s);
    EXPECT_EQ(channel.call_blocking("/ferry.testing.Failing/Call", ctx, request, response).code(),
              absl::StatusCode::kUnavailable);
    per_call.push_back(attempts.load());
  }
  EXPECT_EQ(per_call, (std::vector<int>{2, 2, 1, 1}));
  server.shutdown(100ms);
}

// Options set in code are held to gRFC A6's ranges too: a ratio of 1e10 refills the bucket at
// once (it overflowed an int, emptying it), one under 0.001 counts as 0.001 (it never refilled).
TEST(Retry, ThrottleHoldsItsOptionsToTheirRanges) {
  detail::RetryThrottle huge(RetryThrottling{.max_tokens = 10, .token_ratio = 1e10});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(huge.on_retryable_failure()) << i;
  EXPECT_FALSE(huge.on_retryable_failure());  // 5 left
  huge.on_success();                          // full again
  EXPECT_TRUE(huge.on_retryable_failure());

  detail::RetryThrottle tiny(RetryThrottling{.max_tokens = 10, .token_ratio = 0.0001});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(tiny.on_retryable_failure()) << i;
  EXPECT_FALSE(tiny.on_retryable_failure());         // 5 left
  for (int i = 0; i < 2000; ++i) tiny.on_success();  // + 2 tokens
  EXPECT_TRUE(tiny.on_retryable_failure());          // 6 left

  detail::RetryThrottle many(RetryThrottling{.max_tokens = 1 << 30, .token_ratio = 0.1});
  EXPECT_TRUE(many.enabled());  // 1000 tokens, no overflow
  for (int i = 0; i < 499; ++i) EXPECT_TRUE(many.on_retryable_failure()) << i;
  EXPECT_FALSE(many.on_retryable_failure());
}

// A method that fails with UNAVAILABLE until its third attempt, recording the attempt header.
TEST(Retry, UnaryCallIsRetriedByItsPolicy) {
  std::atomic<int> calls{0};
  Service flaky("ferry.testing.Flaky");
  flaky.add_unary<testing::EchoRequest, testing::EchoResponse>(
      "Call",
      [&](ServerContext&, const testing::EchoRequest&,
          testing::EchoResponse&) -> asio::awaitable<absl::Status> {
        if (calls.fetch_add(1) < 2) co_return absl::UnavailableError("not yet");
        co_return absl::OkStatus();
      });
  ServerOptions server_options;
  server_options.num_threads = 1;
  Server server(server_options);
  server.add_service(flaky);
  const int port = server.start("127.0.0.1", 0).value();
  ChannelOptions options;
  options.method_configs["/ferry.testing.Flaky/"].retry_policy = retries(3);
  options.method_configs["/ferry.testing.Flaky/"].retry_policy->initial_backoff = 10ms;
  Channel channel("127.0.0.1:" + std::to_string(port), options);
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(5s);
  EXPECT_TRUE(channel.call_blocking("/ferry.testing.Flaky/Call", ctx, request, response).ok());
  EXPECT_EQ(calls.load(), 3);

  calls = 0;  // two attempts allowed: the second failure is the call's
  options.method_configs["/ferry.testing.Flaky/"].retry_policy->max_attempts = 2;
  Channel two("127.0.0.1:" + std::to_string(port), options);
  ClientContext ctx2;
  ctx2.set_timeout(5s);
  EXPECT_EQ(two.call_blocking("/ferry.testing.Flaky/Call", ctx2, request, response).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls.load(), 2);
  server.shutdown(100ms);
}

TEST(Retry, PushbackValuesParseAsTheRetryDesignSays) {
  EXPECT_EQ(detail::parse_retry_pushback("0"), 0);
  EXPECT_EQ(detail::parse_retry_pushback("250"), 250);
  EXPECT_EQ(detail::parse_retry_pushback("9999999999"), 9999999999);
  for (const char* stop : {"-1", "-250", "", "1.5", "abc", "12x", " 1", "99999999999"}) {
    EXPECT_EQ(detail::parse_retry_pushback(stop), detail::kStopRetrying) << stop;
  }
}

// A method that fails with UNAVAILABLE (and the trailer pushback, when set) until its third
// attempt, recording each attempt's grpc-previous-rpc-attempts and arrival time.
class FlakyServer {
 public:
  FlakyServer() : service_("ferry.testing.Flaky") {
    service_.add_unary<testing::EchoRequest, testing::EchoResponse>(
        "Call",
        [this](ServerContext& ctx, const testing::EchoRequest&,
               testing::EchoResponse&) -> asio::awaitable<absl::Status> {
          std::lock_guard lock(mu_);
          std::optional<std::string_view> header =
              ctx.client_metadata().get("grpc-previous-rpc-attempts");
          attempts_.push_back(header ? std::string(*header) : "(none)");
          times_.push_back(std::chrono::steady_clock::now());
          if (attempts_.size() < 3) {
            if (!pushback_.empty()) ctx.add_trailing_metadata("grpc-retry-pushback-ms", pushback_);
            co_return absl::UnavailableError("not yet");
          }
          co_return absl::OkStatus();
        });
    ServerOptions server_options;
    server_options.num_threads = 1;
    server_ = std::make_unique<Server>(server_options);
    server_->add_service(service_);
    port_ = server_->start("127.0.0.1", 0).value();
  }
  ~FlakyServer() { server_->shutdown(std::chrono::milliseconds(100)); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  void set_pushback(std::string value) { pushback_ = std::move(value); }
  std::vector<std::string> attempts() {
    std::lock_guard lock(mu_);
    return attempts_;
  }
  std::vector<std::chrono::steady_clock::time_point> times() {
    std::lock_guard lock(mu_);
    return times_;
  }

 private:
  Service service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::string pushback_;
  std::mutex mu_;
  std::vector<std::string> attempts_;
  std::vector<std::chrono::steady_clock::time_point> times_;
};

ChannelOptions flaky_retries(int attempts, std::chrono::milliseconds backoff) {
  ChannelOptions options;
  RetryPolicy& p = options.method_configs["/ferry.testing.Flaky/Call"].retry_policy.emplace();
  p = retries(attempts);
  p.initial_backoff = backoff;
  p.max_backoff = backoff;
  return options;
}

absl::Status call_flaky(Channel& channel) {
  testing::EchoRequest request;
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  return channel.call_blocking("/ferry.testing.Flaky/Call", ctx, request, response);
}

TEST(Retry, PreviousAttemptsHeaderCountsTheEarlierAttempts) {
  FlakyServer server;
  Channel channel(server.target(), flaky_retries(5, 5ms));
  EXPECT_TRUE(call_flaky(channel).ok());
  EXPECT_EQ(server.attempts(), (std::vector<std::string>{"(none)", "1", "2"}));
}

TEST(Retry, ServerPushbackReplacesTheBackoff) {
  FlakyServer server;
  server.set_pushback("300");
  // Without the pushback each retry would wait under 5 ms.
  Channel channel(server.target(), flaky_retries(5, 5ms));
  EXPECT_TRUE(call_flaky(channel).ok());
  const auto times = server.times();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_GE(times[1] - times[0], 300ms);
  EXPECT_GE(times[2] - times[1], 300ms);
  EXPECT_EQ(server.attempts(), (std::vector<std::string>{"(none)", "1", "2"}));
}

TEST(Retry, NegativeOrMalformedPushbackStopsRetrying) {
  for (const char* value : {"-1", "soon"}) {
    FlakyServer server;
    server.set_pushback(value);
    Channel channel(server.target(), flaky_retries(5, 5ms));
    EXPECT_EQ(call_flaky(channel).code(), absl::StatusCode::kUnavailable) << value;
    EXPECT_EQ(server.attempts().size(), 1u) << value;
  }
}

}  // namespace
}  // namespace ferry::retry_test

// A service config's per-method call defaults (ferry/method_config.h) on real calls: the
// method's timeout ends a slow call with DEADLINE_EXCEEDED while the call's own earlier deadline
// still wins, and waitForReady makes a call to an unreachable server wait for its deadline
// instead of failing fast, unless the call's context says otherwise.
#include <gtest/gtest.h>

#include "asio/ip/tcp.hpp"
#include "client/method_config.h"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/service_config.h"
#include "support/echo_service.h"

namespace ferry::service_config_call_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class EchoServer {
 public:
  EchoServer() {
    server_.add_service(service_);
    port_ = server_.start("127.0.0.1", 0).value();
  }
  ~EchoServer() { server_.shutdown(100ms); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  testing::EchoService service_;
  Server server_;
  int port_ = 0;
};

ChannelOptions configured(const char* json) {
  ChannelOptions options;
  EXPECT_TRUE(apply_service_config(json, options).ok()) << json;
  return options;
}

absl::Status slow_echo(Channel& channel, ClientContext& ctx, int delay_ms) {
  testing::EchoRequest request;
  request.set_delay_ms(delay_ms);
  testing::EchoResponse response;
  return channel.call_blocking("/ferry.testing.Echo/Echo", ctx, request, response);
}

TEST(MethodConfig, LookupPrefersTheMethodThenTheServiceThenTheDefault) {
  std::map<std::string, MethodConfig, std::less<>> per_method;
  MethodConfig fallback{.timeout = 1s, .wait_for_ready = std::nullopt};
  EXPECT_EQ(&detail::find_method_config(per_method, fallback, "/a.S/M"), &fallback);
  per_method["/a.S/"] = MethodConfig{.timeout = 2s, .wait_for_ready = std::nullopt};
  per_method["/a.S/M"] = MethodConfig{.wait_for_ready = true};
  EXPECT_EQ(detail::find_method_config(per_method, fallback, "/a.S/M").wait_for_ready, true);
  EXPECT_FALSE(detail::find_method_config(per_method, fallback, "/a.S/M").timeout);
  EXPECT_EQ(detail::find_method_config(per_method, fallback, "/a.S/N").timeout, 2s);
  EXPECT_EQ(detail::find_method_config(per_method, fallback, "/b.T/M").timeout, 1s);
}

TEST(MethodConfig, AppliedToTheContextTheEarlierDeadlineWins) {
  ClientContext none;
  detail::apply_method_config(MethodConfig{.timeout = 1s, .wait_for_ready = std::nullopt}, none);
  EXPECT_LE(none.deadline(), Clock::now() + 1s);
  EXPECT_GT(none.deadline(), Clock::now() + 500ms);

  ClientContext earlier;
  const auto own = Clock::now() + 100ms;
  earlier.set_deadline(own);
  detail::apply_method_config(MethodConfig{.timeout = 10s, .wait_for_ready = std::nullopt},
                              earlier);
  EXPECT_EQ(earlier.deadline(), own);

  // A zero timeout is none (gRPC's reading), not a deadline of now.
  ClientContext zero;
  const auto no_deadline = zero.deadline();
  detail::apply_method_config(MethodConfig{.timeout = 0s, .wait_for_ready = std::nullopt}, zero);
  EXPECT_EQ(zero.deadline(), no_deadline);

  ClientContext unset;
  detail::apply_method_config(MethodConfig{.wait_for_ready = true}, unset);
  EXPECT_TRUE(unset.wait_for_ready());
  ClientContext explicit_no;
  explicit_no.set_wait_for_ready(false);
  detail::apply_method_config(MethodConfig{.wait_for_ready = true}, explicit_no);
  EXPECT_FALSE(explicit_no.wait_for_ready());
}

TEST(MethodConfig, TimeoutEndsASlowCall) {
  EchoServer server;
  Channel channel(server.target(), configured(R"({"methodConfig": [
      {"name": [{"service": "ferry.testing.Echo", "method": "Echo"}], "timeout": "0.2s"}]})"));
  ClientContext ctx;  // no deadline of its own
  const auto start = Clock::now();
  EXPECT_EQ(slow_echo(channel, ctx, 3000).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(Clock::now() - start, 2500ms);
  ClientContext fast;
  EXPECT_TRUE(slow_echo(channel, fast, 0).ok());

  // The call's own, earlier deadline wins over the method's longer timeout.
  Channel lenient(server.target(), configured(R"({"methodConfig": [
      {"name": [{"service": "ferry.testing.Echo"}], "timeout": "30s"}]})"));
  ClientContext own;
  own.set_timeout(200ms);
  const auto own_deadline = own.deadline();
  EXPECT_EQ(slow_echo(lenient, own, 3000).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(own.deadline(), own_deadline);
}

// "timeout": "0s" is no timeout, as gRPC reads it: it made a deadline of now, failing every call
// at once with DEADLINE_EXCEEDED.
TEST(MethodConfig, ZeroTimeoutIsNoTimeout) {
  EchoServer server;
  Channel channel(server.target(), configured(R"({"methodConfig": [
      {"name": [{"service": "ferry.testing.Echo"}], "timeout": "0s"}]})"));
  ClientContext ctx;
  EXPECT_TRUE(slow_echo(channel, ctx, 50).ok());
}

// A port with nothing listening: connections are refused at once.
int closed_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

TEST(MethodConfig, WaitForReadyWaitsForTheDeadlineUnlessTheCallSaysNo) {
  const std::string target = "127.0.0.1:" + std::to_string(closed_port());
  Channel channel(target, configured(R"({"methodConfig": [
      {"name": [{"service": "ferry.testing.Echo"}], "waitForReady": true}]})"));
  ClientContext waits;
  waits.set_timeout(500ms);
  EXPECT_EQ(slow_echo(channel, waits, 0).code(), absl::StatusCode::kDeadlineExceeded);
  ClientContext fails_fast;
  fails_fast.set_timeout(5s);
  fails_fast.set_wait_for_ready(false);
  const auto start = Clock::now();
  EXPECT_EQ(slow_echo(channel, fails_fast, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, 4s);

  // Without the config the same call fails fast.
  Channel plain(target);
  ClientContext ctx;
  ctx.set_timeout(5s);
  EXPECT_EQ(slow_echo(plain, ctx, 0).code(), absl::StatusCode::kUnavailable);
}

// maxResponseMessageBytes and maxRequestMessageBytes limit that method's calls only: a larger
// response fails the call with RESOURCE_EXHAUSTED, a larger request fails before it is sent;
// the service's other methods keep the channel's limits.
TEST(MethodConfig, MessageLimitsApplyToTheirMethodOnly) {
  EchoServer server;
  Channel channel(server.target(), configured(R"({"methodConfig": [
      {"name": [{"service": "ferry.testing.Echo", "method": "Echo"}],
       "maxResponseMessageBytes": 1000, "maxRequestMessageBytes": 2000}]})"));
  auto echo = [&](const char* method, int request_bytes, int response_bytes) {
    testing::EchoRequest request;
    request.set_payload(std::string(request_bytes, 'q'));
    request.set_response_size(response_bytes);
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_timeout(5s);
    return channel.call_blocking(method, ctx, request, response);
  };
  EXPECT_TRUE(echo("/ferry.testing.Echo/Echo", 10, 900).ok());
  const absl::Status big_response = echo("/ferry.testing.Echo/Echo", 10, 1100);
  EXPECT_EQ(big_response.code(), absl::StatusCode::kResourceExhausted) << big_response;
  const absl::Status big_request = echo("/ferry.testing.Echo/Echo", 2100, 10);
  EXPECT_EQ(big_request.code(), absl::StatusCode::kResourceExhausted) << big_request;
  // Collect is another method of the service: the channel's limits (4 MiB) apply.
  testing::EchoRequest request;
  request.set_payload(std::string(100000, 'q'));
  testing::EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(5s);
  BlockingClientStream collect = channel.open_blocking("/ferry.testing.Echo/Collect", ctx);
  ASSERT_TRUE(collect.write(request).ok());
  ASSERT_TRUE(collect.finish_with_response(response).ok());
  EXPECT_EQ(response.received_bytes(), 100000);
}

}  // namespace
}  // namespace ferry::service_config_call_test

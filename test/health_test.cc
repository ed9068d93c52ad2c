// Tests of ferry/health.h through a ferry client: Check, Watch (first status, changes set from
// another thread, a client that cancels), and server shutdown turning watchers NOT_SERVING.
#include "ferry/health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ferry/channel.h"
#include "ferry/server.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.ferry.h"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthTest : public ::testing::Test {
 protected:
  HealthTest() {
    server_.add_service(health_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    channel_ = std::make_unique<Channel>("127.0.0.1:" + std::to_string(port.value_or(0)));
    stub_ = std::make_unique<Health::BlockingStub>(*channel_);
  }
  ~HealthTest() override {
    stub_.reset();
    channel_.reset();
    server_.shutdown(100ms);
  }

  absl::StatusOr<HealthCheckResponse::ServingStatus> check(const std::string& service) {
    ClientContext context;
    context.set_timeout(5s);
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    if (absl::Status s = stub_->Check(context, request, response); !s.ok()) return s;
    return response.status();
  }

  // Waits until f() holds, up to 5 s.
  template <class F>
  static bool eventually(F f) {
    for (int i = 0; i < 500 && !f(); ++i) std::this_thread::sleep_for(10ms);
    return f();
  }

  HealthService health_;
  Server server_{ServerOptions{.num_threads = 2}};
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Health::BlockingStub> stub_;
};

TEST_F(HealthTest, CheckAnswersTheStatusesSetAndNotFoundForOthers) {
  EXPECT_EQ(check("").value(), HealthCheckResponse::SERVING);  // the server starts SERVING
  EXPECT_EQ(check("pkg.Unknown").status().code(), absl::StatusCode::kNotFound);

  health_.set_status("pkg.Svc", ServingStatus::kNotServing);
  EXPECT_EQ(check("pkg.Svc").value(), HealthCheckResponse::NOT_SERVING);
  health_.set_status("pkg.Svc", ServingStatus::kServing);
  EXPECT_EQ(check("pkg.Svc").value(), HealthCheckResponse::SERVING);
  EXPECT_EQ(health_.status("pkg.Svc"), ServingStatus::kServing);

  health_.clear_status("pkg.Svc");
  EXPECT_EQ(check("pkg.Svc").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(health_.status("pkg.Svc"), ServingStatus::kServiceUnknown);
}

TEST_F(HealthTest, WatchSendsTheCurrentStatusThenEachChange) {
  ClientContext context;
  context.set_timeout(10s);
  HealthCheckRequest request;
  request.set_service("pkg.Later");
  BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);

  // Set from other threads than the watcher's.
  std::thread([this] { health_.set_status("pkg.Later", ServingStatus::kServing); }).join();
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  health_.set_status("pkg.Other", ServingStatus::kNotServing);  // not this watcher's service
  health_.set_status("pkg.Later", ServingStatus::kNotServing);
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);

  health_.clear_status("pkg.Later");
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
}

TEST_F(HealthTest, ManyWatchersOfOneServiceAllSeeAChange) {
  std::vector<std::unique_ptr<ClientContext>> contexts;
  std::vector<BlockingClientReader<HealthCheckResponse>> watches;
  HealthCheckRequest request;
  request.set_service("");
  HealthCheckResponse response;
  for (int i = 0; i < 8; ++i) {
    contexts.push_back(std::make_unique<ClientContext>());
    contexts.back()->set_timeout(10s);
    watches.push_back(stub_->Watch(*contexts.back(), request));
    ASSERT_TRUE(watches.back().read(response));
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  }
  health_.set_status("", ServingStatus::kNotServing);
  for (auto& watch : watches) {
    ASSERT_TRUE(watch.read(response));
    EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  }
}

TEST_F(HealthTest, AWatcherWhoseClientCancelsEnds) {
  {
    ClientContext context;
    HealthCheckRequest request;
    BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
    HealthCheckResponse response;
    ASSERT_TRUE(watch.read(response));
    EXPECT_EQ(health_.watch_count(), 1u);
    watch.cancel();
  }
  // The cancellation wakes the handler, which returns.
  EXPECT_TRUE(eventually([this] { return health_.watch_count() == 0; }));
}

// The cancellation itself wakes the handler (ServerContext::on_cancel), rather than a poll: each
// of several watchers, cancelled in turn, is gone well within the old poll's period (1 s, armed
// a few milliseconds before the cancel, so a polling watcher took ~1 s every time).
TEST_F(HealthTest, ACancelledWatchEndsWithoutWaitingForAPoll) {
  for (int i = 0; i < 3; ++i) {
    std::chrono::steady_clock::time_point cancelled;
    {
      ClientContext context;
      HealthCheckRequest request;
      BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
      HealthCheckResponse response;
      ASSERT_TRUE(watch.read(response));
      ASSERT_EQ(health_.watch_count(), 1u);
      cancelled = std::chrono::steady_clock::now();
      watch.cancel();
    }
    ASSERT_TRUE(eventually([this] { return health_.watch_count() == 0; }));
    EXPECT_LT(std::chrono::steady_clock::now() - cancelled, 500ms) << "watcher " << i;
  }
}

TEST_F(HealthTest, ShutdownTurnsEveryStatusNotServingAndEndsTheWatches) {
  health_.set_status("pkg.Svc", ServingStatus::kServing);
  ClientContext context;
  context.set_timeout(10s);
  HealthCheckRequest request;
  request.set_service("pkg.Svc");
  BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  const auto started = std::chrono::steady_clock::now();
  auto stopped = std::async(std::launch::async, [this] { server_.shutdown(5s); });
  ASSERT_TRUE(watch.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch.read(response));
  EXPECT_EQ(watch.finish().code(), absl::StatusCode::kUnavailable);
  stopped.get();
  EXPECT_EQ(health_.watch_count(), 0u);
  // The watch ended at once: shutdown did not have to wait out its grace period for it.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);

  EXPECT_EQ(health_.status(""), ServingStatus::kNotServing);
  EXPECT_EQ(health_.status("pkg.Svc"), ServingStatus::kNotServing);
  health_.set_status("pkg.Svc", ServingStatus::kServing);  // ignored from now on
  EXPECT_EQ(health_.status("pkg.Svc"), ServingStatus::kNotServing);
}

TEST(HealthDescriptor, TheServiceDescribesItself) {
  HealthService health;
  ASSERT_NE(health.descriptor(), nullptr);
  EXPECT_EQ(health.descriptor()->full_name(), "grpc.health.v1.Health");
  EXPECT_EQ(health.full_name(), "grpc.health.v1.Health");
  // A generated service base gets its descriptor from protoc-gen-ferry's code.
  Health::Service generated;
  ASSERT_NE(generated.descriptor(), nullptr);
  EXPECT_EQ(generated.descriptor(), health.descriptor());
  // A service built by name has none.
  EXPECT_EQ(Service("pkg.ByName").descriptor(), nullptr);
}

}  // namespace
}  // namespace ferry

// Tests of ferry/health.h through a ferry client: Check, Watch (first status, changes set from
// another thread, a client that cancels), server shutdown turning watchers NOT_SERVING, and what
// a hostile client can make it hold (long service names, many watchers on one connection).
#include "ferry/health.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/channel.h"
#include "ferry/server.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.ferry.h"

namespace ferry::health_test {
namespace {

using namespace std::chrono_literals;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthTest : public ::testing::Test {
 protected:
  explicit HealthTest(HealthServiceOptions options = {}) : health_(options) {
    server_.add_service(health_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    target_ = "127.0.0.1:" + std::to_string(port.value_or(0));
    channel_ = std::make_unique<Channel>(target_);
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
  std::string target_;
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

// Bytes the process has allocated from malloc and not freed (0 where a sanitizer's allocator
// keeps no such count).
std::size_t allocated_bytes() { return mallinfo2().uordblks; }

TEST_F(HealthTest, AServiceNameOverOneKibibyteIsRefused) {
  const std::string longest(1024, 'a');
  health_.set_status(longest, ServingStatus::kServing);
  EXPECT_EQ(check(longest).value(), HealthCheckResponse::SERVING);
  const std::string too_long(1025, 'a');
  EXPECT_EQ(check(too_long).status().code(), absl::StatusCode::kInvalidArgument);

  ClientContext context;
  context.set_timeout(5s);
  HealthCheckRequest request;
  request.set_service(too_long);
  BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
  HealthCheckResponse response;
  EXPECT_FALSE(watch.read(response));
  EXPECT_EQ(watch.finish().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(health_.watch_count(), 0u);
}

// The attack: Watch streams whose service names are megabytes long, held open. Each used to keep
// two copies of its name for as long as its connection lived (40 streams of 4 MB: +319 MB); now
// each is refused at once and nothing stays, while the client still holds its streams. The first
// round warms the pools and caches up; the second is measured.
TEST_F(HealthTest, ManyWatchersWithLongNamesHoldNothing) {
  constexpr int kStreams = 40;
  constexpr std::size_t kNameSize = std::size_t{2} << 20;
  std::size_t before = 0;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) before = allocated_bytes();
    std::vector<std::unique_ptr<ClientContext>> contexts;
    std::vector<BlockingClientReader<HealthCheckResponse>> watches;
    for (int i = 0; i < kStreams; ++i) {
      HealthCheckRequest request;
      request.set_service(std::string(kNameSize, static_cast<char>('a' + i % 26)));
      contexts.push_back(std::make_unique<ClientContext>());
      contexts.back()->set_timeout(20s);
      watches.push_back(stub_->Watch(*contexts.back(), request));
    }
    HealthCheckResponse response;
    for (auto& watch : watches) EXPECT_FALSE(watch.read(response));
    EXPECT_EQ(health_.watch_count(), 0u);
    if (round == 1) {
      // 40 × 2 MB names were held twice over: 160 MB; now nothing but the calls' own state.
      const std::size_t after = allocated_bytes();
      EXPECT_LT(after, before + kNameSize * 4)
          << "grew by " << (static_cast<double>(after) - before) / 1e6 << " MB";
    }
    for (auto& watch : watches) {
      EXPECT_EQ(watch.finish().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

// The most one connection can make the service hold with the defaults: 100 watchers of names
// 1 KiB long, each kept once; the 101st is refused. What they hold in all (the calls' own state
// included) stays within a few MB.
TEST_F(HealthTest, TheDefaultCapBoundsWhatAConnectionsWatchersHold) {
  const std::size_t before = allocated_bytes();
  std::vector<std::unique_ptr<ClientContext>> contexts;
  std::vector<BlockingClientReader<HealthCheckResponse>> watches;
  HealthCheckResponse response;
  for (int i = 0; i < 100; ++i) {
    HealthCheckRequest request;
    request.set_service(std::to_string(i) + std::string(1020, 'n'));
    contexts.push_back(std::make_unique<ClientContext>());
    contexts.back()->set_timeout(20s);
    watches.push_back(stub_->Watch(*contexts.back(), request));
    ASSERT_TRUE(watches.back().read(response)) << i;
  }
  EXPECT_EQ(health_.watch_count(), 100u);
  const std::size_t after = allocated_bytes();
  EXPECT_LT(after, before + (std::size_t{8} << 20))
      << "grew by " << (static_cast<double>(after) - before) / 1e6 << " MB";

  ClientContext context;
  context.set_timeout(5s);
  HealthCheckRequest request;
  request.set_service("one more");
  BlockingClientReader<HealthCheckResponse> extra = stub_->Watch(context, request);
  EXPECT_FALSE(extra.read(response));
  EXPECT_EQ(extra.finish().code(), absl::StatusCode::kResourceExhausted);
  for (auto& watch : watches) watch.cancel();
  EXPECT_TRUE(eventually([this] { return health_.watch_count() == 0; }));
}

class HealthCapTest : public HealthTest {
 protected:
  HealthCapTest() : HealthTest(HealthServiceOptions{.max_watchers_per_connection = 3}) {}

  BlockingClientReader<HealthCheckResponse> watch(Health::BlockingStub& stub,
                                                  ClientContext& context) {
    context.set_timeout(10s);
    HealthCheckRequest request;
    request.set_service("pkg.Svc");
    return stub.Watch(context, request);
  }
};

TEST_F(HealthCapTest, AConnectionMayHoldSoManyWatchersAndNoMore) {
  HealthCheckResponse response;
  std::vector<std::unique_ptr<ClientContext>> contexts;
  std::vector<BlockingClientReader<HealthCheckResponse>> watches;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<ClientContext>());
    watches.push_back(watch(*stub_, *contexts.back()));
    ASSERT_TRUE(watches.back().read(response));
  }
  {
    ClientContext context;
    BlockingClientReader<HealthCheckResponse> extra = watch(*stub_, context);
    EXPECT_FALSE(extra.read(response));
    const absl::Status status = extra.finish();
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  }
  EXPECT_EQ(health_.watch_count(), 3u);

  // Another connection has a cap of its own.
  Channel other(target_);
  Health::BlockingStub other_stub(other);
  ClientContext other_context;
  BlockingClientReader<HealthCheckResponse> elsewhere = watch(other_stub, other_context);
  ASSERT_TRUE(elsewhere.read(response));
  EXPECT_EQ(health_.watch_count(), 4u);

  // A watcher that ends makes room for another.
  watches.front().cancel();
  ASSERT_TRUE(eventually([this] { return health_.watch_count() == 3; }));
  ClientContext again_context;
  BlockingClientReader<HealthCheckResponse> again = watch(*stub_, again_context);
  ASSERT_TRUE(again.read(response));

  // Each watcher still sees its changes.
  health_.set_status("pkg.Svc", ServingStatus::kServing);
  ASSERT_TRUE(again.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(elsewhere.read(response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  for (std::size_t i = 1; i < watches.size(); ++i) {
    ASSERT_TRUE(watches[i].read(response));
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  }
}

// Check and Watch from many threads at once, while statuses change: every answer is one of the
// statuses set, each watcher sees its own service's last status, and every watcher leaves.
TEST_F(HealthTest, CheckAndWatchFromManyThreads) {
  constexpr int kServices = 4;
  auto name = [](int i) { return "pkg.Svc" + std::to_string(i); };
  for (int i = 0; i < kServices; ++i) health_.set_status(name(i), ServingStatus::kServing);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {  // checkers
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        absl::StatusOr<HealthCheckResponse::ServingStatus> s = check(name(t % kServices));
        if (!s.ok() ||
            (*s != HealthCheckResponse::SERVING && *s != HealthCheckResponse::NOT_SERVING)) {
          ++bad;
        }
      }
    });
  }
  for (int t = 0; t < 4; ++t) {  // watchers that come and go
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        ClientContext context;
        context.set_timeout(10s);
        HealthCheckRequest request;
        request.set_service(name(t));
        BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
        HealthCheckResponse response;
        if (!watch.read(response)) ++bad;
        watch.cancel();
      }
    });
  }
  std::thread setter([&] {
    for (int i = 0; i < 400; ++i) {
      health_.set_status(name(i % kServices),
                         i % 2 == 0 ? ServingStatus::kNotServing : ServingStatus::kServing);
    }
  });
  setter.join();
  for (std::size_t t = 4; t < threads.size(); ++t) threads[t].join();
  stop = true;
  for (int t = 0; t < 4; ++t) threads[t].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(eventually([this] { return health_.watch_count() == 0; }));

  // A last watcher of each service sees the status set last, set after it joined.
  ClientContext context;
  context.set_timeout(10s);
  HealthCheckRequest request;
  request.set_service(name(1));
  BlockingClientReader<HealthCheckResponse> watch = stub_->Watch(context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch.read(response));
  std::thread([this, &name] { health_.set_status(name(1), ServingStatus::kNotServing); }).join();
  while (response.status() != HealthCheckResponse::NOT_SERVING) ASSERT_TRUE(watch.read(response));
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
}  // namespace ferry::health_test

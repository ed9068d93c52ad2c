// Concurrency stress: one channel and one server driven from many threads at once, with
// cancellations, deadlines, shutdown, reconnects, resolver updates and certificate rotation racing
// the calls. Each test is bounded in count and time and checks what must hold whatever the
// interleaving (every call ends with an expected status, no call is lost, nothing hangs); the
// ThreadSanitizer tier (scripts/test.sh) runs them to find the data races they provoke.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "asio/bind_cancellation_slot.hpp"
#include "asio/cancellation_signal.hpp"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/post.hpp"
#include "asio/thread_pool.hpp"
#include "asio/use_future.hpp"
#include "ferry/blocking_stream.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/offload.h"
#include "ferry/resolver.h"
#include "ferry/server.h"
#include "ferry/service.h"
#include "ferry/testing/echo.ferry.h"
#include "ferry/tls.h"
#include "support/echo_service.h"
#include "support/wait.h"

namespace ferry::thread_stress_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;

// A server of the Echo service on n I/O threads.
struct EchoServer {
  explicit EchoServer(int threads,
                      std::vector<std::shared_ptr<ServerInterceptor>> interceptors = {},
                      std::shared_ptr<ServerCredentials> credentials = nullptr)
      : server(options(threads, std::move(interceptors), std::move(credentials))) {
    server.add_service(service);
    port = server.start("127.0.0.1", 0).value();
  }
  static ServerOptions options(int threads,
                               std::vector<std::shared_ptr<ServerInterceptor>> interceptors,
                               std::shared_ptr<ServerCredentials> credentials) {
    ServerOptions o;
    o.num_threads = threads;
    o.interceptors = std::move(interceptors);
    o.credentials = std::move(credentials);
    return o;
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }

  testing::EchoService service;
  Server server;
  int port = 0;
};

// Runs body(i) on n threads and joins them; a thread still running after limit fails the test
// and ends the program (a hang is what these tests look for).
template <class Body>
void on_threads(int n, Body body, std::chrono::seconds limit = 60s) {
  std::vector<std::thread> threads;
  std::atomic<int> done{0};
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      body(i);
      done.fetch_add(1);
    });
  }
  if (!testing::eventually([&] { return done.load() == n; }, limit)) {
    ADD_FAILURE() << n - done.load() << " of " << n << " threads still running after "
                  << limit.count() << " s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  for (auto& t : threads) t.join();
}

// One Channel shared by 8 threads: unary calls, unary calls whose deadline passes while the
// server waits, bidi streams, and streams cancelled from a thread of their own.
TEST(ThreadStress, OneChannelSharedByEightThreads) {
  EchoServer server(2);
  Channel channel(server.target());
  testing::Echo::BlockingStub stub(channel);
  constexpr int kThreads = 8;
  constexpr int kRounds = 12;
  std::atomic<int> ok{0}, deadline_exceeded{0}, cancelled{0}, unexpected{0};
  std::mutex mutex;
  std::string first_unexpected;
  auto note = [&](const absl::Status& s, absl::StatusCode want, std::atomic<int>& count) {
    if (s.code() == want) {
      count.fetch_add(1);
      return;
    }
    unexpected.fetch_add(1);
    std::lock_guard lock(mutex);
    if (first_unexpected.empty()) first_unexpected = s.ToString();
  };
  on_threads(kThreads, [&](int t) {
    for (int round = 0; round < kRounds; ++round) {
      {
        ClientContext ctx;
        ctx.set_timeout(20s);
        EchoRequest request;
        EchoResponse response;
        request.set_payload("thread " + std::to_string(t));
        absl::Status s = stub.Echo(ctx, request, response);
        if (s.ok() && response.payload() != request.payload()) s = absl::DataLossError("mixed");
        note(s, absl::StatusCode::kOk, ok);
      }
      {
        ClientContext ctx;
        ctx.set_timeout(5ms);
        EchoRequest request;
        request.set_delay_ms(2000);
        EchoResponse response;
        note(stub.Echo(ctx, request, response), absl::StatusCode::kDeadlineExceeded,
             deadline_exceeded);
      }
      {
        ClientContext ctx;
        ctx.set_timeout(20s);
        auto chat = stub.Chat(ctx);
        EchoRequest request;
        EchoResponse response;
        absl::Status s;
        for (int i = 0; i < 3 && s.ok(); ++i) {
          request.set_payload(std::to_string(t * 1000 + i));
          s = chat.write(request);
          if (s.ok() && !chat.read(response)) s = absl::DataLossError("no response");
          if (s.ok() && response.payload() != request.payload()) s = absl::DataLossError("mixed");
        }
        chat.writes_done();
        absl::Status finished = chat.finish();
        note(s.ok() ? finished : s, absl::StatusCode::kOk, ok);
      }
      {
        ClientContext ctx;
        ctx.set_timeout(20s);
        auto chat = stub.Chat(ctx);
        EchoRequest request;
        request.set_payload("to be cancelled");
        (void)chat.write(request);
        std::thread canceller([&chat] { chat.cancel(); });
        canceller.join();
        note(chat.finish(), absl::StatusCode::kCancelled, cancelled);
      }
    }
  });
  EXPECT_EQ(unexpected.load(), 0) << first_unexpected;
  EXPECT_EQ(ok.load(), 2 * kThreads * kRounds);
  EXPECT_EQ(deadline_exceeded.load(), kThreads * kRounds);
  EXPECT_EQ(cancelled.load(), kThreads * kRounds);
}

// Counts what it sees, from the server's I/O threads.
class CountingInterceptor final : public ServerInterceptor {
 public:
  asio::awaitable<absl::Status> on_start(ServerContext&, const CallInfo&) override {
    started.fetch_add(1);
    return ready_status();
  }
  void on_finish(ServerContext&, const CallInfo&, const CallOutcome&) override {
    finished.fetch_add(1);
  }
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
};

// A server on 3 I/O threads whose handlers offload to a pool and complete from there, with an
// interceptor; 4 client threads, each with a channel of its own (so the calls spread over the
// server's threads).
TEST(ThreadStress, OffloadingHandlersOnAThreeThreadServerWithInterceptors) {
  asio::thread_pool pool(3);
  Service offloading("ferry.testing.Offloading");
  offloading.add_unary<EchoRequest, EchoResponse>(
      "Call",
      [&pool](ServerContext& ctx, const EchoRequest& request,
              EchoResponse& response) -> asio::awaitable<absl::Status> {
        auto twice = [payload = request.payload()] { return payload + payload; };  // named: GCC 12
        std::string doubled = co_await offload(pool, twice);
        if (ctx.is_cancelled()) co_return absl::CancelledError("cancelled");
        response.set_payload(std::move(doubled));
        co_return absl::OkStatus();
      });
  auto counting = std::make_shared<CountingInterceptor>();
  ServerOptions options;
  options.num_threads = 3;
  options.interceptors = {counting};
  Server server(options);
  server.add_service(offloading);
  const int port = server.start("127.0.0.1", 0).value();
  constexpr int kThreads = 4;
  constexpr int kCalls = 40;
  std::atomic<int> ok{0};
  on_threads(kThreads, [&](int t) {
    Channel channel("127.0.0.1:" + std::to_string(port));
    for (int i = 0; i < kCalls; ++i) {
      ClientContext ctx;
      ctx.set_timeout(20s);
      EchoRequest request;
      request.set_payload(std::to_string(t) + ":" + std::to_string(i));
      EchoResponse response;
      if (channel.call_blocking("/ferry.testing.Offloading/Call", ctx, request, response).ok() &&
          response.payload() == request.payload() + request.payload()) {
        ok.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(ok.load(), kThreads * kCalls);
  EXPECT_EQ(counting->started.load(), kThreads * kCalls);
  server.shutdown(1s);
  EXPECT_EQ(counting->finished.load(), kThreads * kCalls);
}

// Blocking stubs on 4 threads and coroutines awaiting the same channel from 3 io_contexts of
// their own (each call hops to the channel's thread and back).
TEST(ThreadStress, BlockingAndAwaitingCallersFromManyExecutors) {
  EchoServer server(2);
  Channel channel(server.target());
  constexpr int kCalls = 30;
  std::atomic<int> ok{0};
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<std::future<int>> awaited;
  for (int i = 0; i < 3; ++i) {
    ios.push_back(std::make_unique<asio::io_context>(1));
    awaited.push_back(asio::co_spawn(
        *ios.back(),
        [&channel, i]() -> asio::awaitable<int> {
          testing::Echo::Stub stub(channel);
          int good = 0;
          for (int c = 0; c < kCalls; ++c) {
            ClientContext ctx;
            ctx.set_timeout(20s);
            EchoRequest request;
            request.set_payload("io " + std::to_string(i));
            EchoResponse response;
            absl::Status s = co_await stub.Echo(ctx, request, response);
            if (s.ok() && response.payload() == request.payload()) ++good;
          }
          co_return good;
        },
        asio::use_future));
  }
  std::vector<std::thread> runners;
  for (auto& io : ios) runners.emplace_back([&io] { io->run(); });
  on_threads(4, [&](int t) {
    testing::Echo::BlockingStub stub(channel);
    for (int c = 0; c < kCalls; ++c) {
      ClientContext ctx;
      ctx.set_timeout(20s);
      EchoRequest request;
      request.set_payload("blocking " + std::to_string(t));
      EchoResponse response;
      if (stub.Echo(ctx, request, response).ok() && response.payload() == request.payload()) {
        ok.fetch_add(1);
      }
    }
  });
  for (auto& f : awaited) {
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
    ok.fetch_add(f.get());
  }
  for (auto& r : runners) r.join();
  EXPECT_EQ(ok.load(), 7 * kCalls);
}

// Server::shutdown while every client thread has calls in flight, and channels destroyed with
// their calls in flight: every call completes, with a status, within the bound.
TEST(ThreadStress, ShutdownAndChannelDestructionWithCallsInFlight) {
  auto server = std::make_unique<EchoServer>(2);
  const std::string target = server->target();
  constexpr int kThreads = 6;
  constexpr int kCallsPerChannel = 16;
  std::atomic<int> completed{0}, started{0};
  std::atomic<bool> shutdown_begun{false};
  std::thread stopper([&] {
    EXPECT_TRUE(testing::eventually([&] { return started.load() == kThreads * kCallsPerChannel; }));
    shutdown_begun = true;
    server->server.shutdown(50ms);
  });
  on_threads(kThreads, [&](int t) {
    // Each thread: a channel whose calls (200 ms on the server) are all in flight when the
    // channel goes, then blocking calls racing the shutdown.
    {
      auto channel = std::make_unique<Channel>(target);
      std::vector<std::unique_ptr<ClientContext>> contexts;
      std::vector<std::unique_ptr<EchoRequest>> requests;
      std::vector<std::unique_ptr<EchoResponse>> responses;
      for (int i = 0; i < kCallsPerChannel; ++i) {
        contexts.push_back(std::make_unique<ClientContext>());
        contexts.back()->set_timeout(30s);
        requests.push_back(std::make_unique<EchoRequest>());
        requests.back()->set_delay_ms(t % 2 == 0 ? 200 : 0);
        responses.push_back(std::make_unique<EchoResponse>());
        channel->call(testing::echo_methods::kEcho, *contexts.back(), *requests.back(),
                      *responses.back(), [&](absl::Status) { completed.fetch_add(1); });
        started.fetch_add(1);
      }
      if (t % 3 == 0) std::this_thread::sleep_for(10ms);
      channel.reset();  // its calls still in flight fail; each completion still runs
    }
    Channel channel(target);
    testing::Echo::BlockingStub stub(channel);
    while (!shutdown_begun.load()) {
      ClientContext ctx;
      ctx.set_timeout(20s);
      EchoRequest request;
      EchoResponse response;
      (void)stub.Echo(ctx, request, response);
    }
    for (int i = 0; i < 5; ++i) {  // after: each ends with a status (UNAVAILABLE), no hang
      ClientContext ctx;
      ctx.set_timeout(20s);
      EchoRequest request;
      EchoResponse response;
      (void)stub.Echo(ctx, request, response);
    }
  });
  stopper.join();
  EXPECT_TRUE(
      testing::eventually([&] { return completed.load() == kThreads * kCallsPerChannel; }, 20s))
      << completed.load();
  server.reset();
}

// A resolver whose answer the test changes while calls run.
class SwitchingResolver final : public Resolver {
 public:
  void set(std::vector<Address> addresses) {
    std::lock_guard lock(mutex_);
    addresses_ = std::move(addresses);
  }
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    std::vector<Address> now;
    {
      std::lock_guard lock(mutex_);
      now = addresses_;
    }
    resolutions_.fetch_add(1);
    co_return now;
  }
  int resolutions() const { return resolutions_.load(); }

 private:
  std::mutex mutex_;
  std::vector<Address> addresses_;
  std::atomic<int> resolutions_{0};
};

Address loopback(int port) {
  Address a;
  a.tcp = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                  static_cast<unsigned short>(port));
  return a;
}

// round_robin over a resolver that changes its answer every few ms, while one of the servers is
// shut down (its connections lost, reconnects failing) and calls run on 4 threads: every call
// ends OK or UNAVAILABLE, and once only the living server is listed the calls succeed again.
TEST(ThreadStress, ReconnectsAndResolverUpdatesRacingCalls) {
  EchoServer a(1), b(1);
  auto resolver = std::make_shared<SwitchingResolver>();
  resolver->set({loopback(a.port), loopback(b.port)});
  ChannelOptions options;
  options.resolver = resolver;
  options.load_balancing = LoadBalancingPolicy::kRoundRobin;
  options.resolve_period = 5ms;
  options.min_resolve_interval = 1ms;
  Channel channel("stress", options);
  testing::Echo::BlockingStub stub(channel);
  std::atomic<bool> stop{false}, churned{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::thread churn([&] {
    for (int i = 0; i < 40 && !stop.load(); ++i) {
      if (i % 2 == 0) {
        resolver->set({loopback(b.port), loopback(a.port)});
      } else {
        resolver->set({loopback(a.port), loopback(b.port)});
      }
      if (i == 20) a.server.shutdown(0ms);
      std::this_thread::sleep_for(5ms);
    }
    resolver->set({loopback(b.port)});
    churned = true;
  });
  std::atomic<int> calls{0};
  on_threads(4, [&](int) {
    // Calls for as long as the churn lasts (about 40 x 5 ms), at least 20 each.
    for (int i = 0; i < 20 || (!churned.load() && i < 5000); ++i) {
      calls.fetch_add(1);
      ClientContext ctx;
      ctx.set_timeout(10s);
      EchoRequest request;
      EchoResponse response;
      const absl::Status s = stub.Echo(ctx, request, response);
      if (s.ok()) {
        ok.fetch_add(1);
      } else if (s.code() == absl::StatusCode::kUnavailable) {
        unavailable.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    }
  });
  stop = true;
  churn.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + unavailable.load(), calls.load());
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(resolver->resolutions(), 1);
  // Only b is listed now: calls succeed (wait_for_ready across the last re-resolution).
  ClientContext ctx;
  ctx.set_timeout(10s);
  ctx.set_wait_for_ready(true);
  EchoRequest request;
  EchoResponse response;
  EXPECT_TRUE(stub.Echo(ctx, request, response).ok());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The server's certificate rotated 20 times while 4 threads make calls, each on a new channel
// (a new TLS handshake) and on one shared channel (an established connection): the clients trust
// both CAs, so every call succeeds.
TEST(ThreadStress, CertificateRotationDuringCalls) {
  const std::string certs = FERRY_TEST_CERTS;
  auto cert = [&](const char* name) { return Pem::file(certs + "/" + name); };
  auto creds = ServerCredentials::create(
      {.certificate_chain = cert("server.pem"), .private_key = cert("server.key")});
  ASSERT_TRUE(creds.ok()) << creds.status();
  EchoServer server(2, {}, *creds);
  ChannelOptions options;
  auto channel_creds = ChannelCredentials::create(
      {.root_certificates =
           Pem::content(read_file(certs + "/ca.pem") + read_file(certs + "/other_ca.pem")),
       .server_name_override = "localhost"});
  ASSERT_TRUE(channel_creds.ok()) << channel_creds.status();
  options.credentials = *channel_creds;
  Channel shared(server.target(), options);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::mutex mutex;
  std::string first_failure;
  std::thread rotator([&] {
    for (int i = 0; i < 20 && !stop.load(); ++i) {
      const bool other = i % 2 == 0;
      EXPECT_TRUE(
          (*creds)
              ->update({.certificate_chain = cert(other ? "other_server.pem" : "server.pem"),
                        .private_key = cert(other ? "other_server.key" : "server.key")})
              .ok());
      std::this_thread::sleep_for(5ms);
    }
  });
  on_threads(4, [&](int t) {
    for (int i = 0; i < 10; ++i) {
      for (Channel* channel : {&shared, static_cast<Channel*>(nullptr)}) {
        std::unique_ptr<Channel> fresh;
        if (channel == nullptr) {
          fresh = std::make_unique<Channel>(server.target(), options);
          channel = fresh.get();
        }
        testing::Echo::BlockingStub stub(*channel);
        ClientContext ctx;
        ctx.set_timeout(20s);
        EchoRequest request;
        request.set_payload(std::to_string(t));
        EchoResponse response;
        const absl::Status s = stub.Echo(ctx, request, response);
        if (s.ok() && response.payload() == request.payload()) {
          ok.fetch_add(1);
        } else {
          failed.fetch_add(1);
          std::lock_guard lock(mutex);
          if (first_failure.empty()) first_failure = s.ToString();
        }
      }
    }
  });
  stop = true;
  rotator.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_EQ(ok.load(), 4 * 10 * 2);
}

}  // namespace
}  // namespace ferry::thread_stress_test

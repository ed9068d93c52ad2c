// Loopback tests of server and client interceptors (ferry/interceptor.h) on all four call
// kinds: the order of the hooks, rejection before the handler (token authentication), metadata
// added by interceptors, and the outcome they observe (status, message counts).
#include "ferry/interceptor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/slice_chain.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::interceptor_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

// What the hooks did, in order, from any thread.
class Log {
 public:
  void add(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  // The outcome the named interceptor last saw.
  CallOutcome outcome(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return outcomes_.at(name);
  }
  void set_outcome(const std::string& name, const CallOutcome& outcome) {
    std::lock_guard lock(mutex_);
    outcomes_[name] = outcome;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
  std::map<std::string, CallOutcome> outcomes_;
};

// Records its hooks; adds "x-<name>" to the response headers and "x-<name>-status" (the code
// it observed) to the trailers.
class RecordingServerInterceptor : public ServerInterceptor {
 public:
  RecordingServerInterceptor(std::string name, Log* log) : name_(std::move(name)), log_(log) {}
  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo& call) override {
    const bool loopback_peer = ctx.peer().rfind("ipv4:127.0.0.1:", 0) == 0;
    log_->add(absl::StrCat(name_, ".start ", std::string(call.method), " kind=",
                           static_cast<int>(call.kind), " peer=", loopback_peer ? "ok" : "?"));
    ctx.add_initial_metadata("x-" + name_, "seen");
    co_return absl::OkStatus();
  }
  void on_finish(ServerContext& ctx, const CallInfo&, const CallOutcome& outcome) override {
    log_->set_outcome(name_, outcome);  // first: a test that sees the line reads the outcome
    log_->add(name_ + ".finish");
    ctx.add_trailing_metadata("x-" + name_ + "-status",
                              std::to_string(static_cast<int>(outcome.status.code())));
  }

 private:
  std::string name_;
  Log* log_;
};

// Token authentication: UNAUTHENTICATED unless "authorization: Bearer secret".
class TokenAuthInterceptor : public ServerInterceptor {
 public:
  explicit TokenAuthInterceptor(Log* log) : log_(log) {}
  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo&) override {
    log_->add("auth.start");
    if (ctx.client_metadata().get("authorization") != "Bearer secret") {
      co_return absl::UnauthenticatedError("missing or wrong token");
    }
    co_return absl::OkStatus();
  }
  void on_finish(ServerContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->add(absl::StrCat("auth.finish ", static_cast<int>(outcome.status.code())));
  }

 private:
  Log* log_;
};

class RecordingClientInterceptor : public ClientInterceptor {
 public:
  RecordingClientInterceptor(std::string name, Log* log) : name_(std::move(name)), log_(log) {}
  asio::awaitable<absl::Status> on_start(ClientContext& ctx, const CallInfo& call) override {
    log_->add(absl::StrCat(name_, ".start ", std::string(call.method),
                           " kind=", static_cast<int>(call.kind)));
    ctx.add_metadata("x-client-" + name_, "1");
    co_return absl::OkStatus();
  }
  void on_finish(ClientContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->set_outcome(name_, outcome);  // first: a test that sees the line reads the outcome
    log_->add(name_ + ".finish");
  }

 private:
  std::string name_;
  Log* log_;
};

// Adds the token when the application set none.
class ClientTokenInterceptor : public ClientInterceptor {
 public:
  asio::awaitable<absl::Status> on_start(ClientContext& ctx, const CallInfo&) override {
    if (!ctx.metadata().get("authorization")) ctx.add_metadata("authorization", "Bearer secret");
    co_return absl::OkStatus();
  }
};

// One call of the given kind, ending with status_code (0: OK) when non-zero. Requests carry
// ctx's metadata; returns the call's status.
struct CallResult {
  absl::Status status;
  int responses = 0;
};

CallResult make_call(Loopback& loop, RpcKind kind, ClientContext& ctx, int status_code = 0) {
  return loop.run([&]() -> asio::awaitable<CallResult> {
    CallResult result;
    EchoRequest request;
    request.set_payload("hi");
    EchoResponse response;
    switch (kind) {
      case RpcKind::kUnary:
        request.set_status_code(status_code);
        result.status = co_await loop.stub().Echo(ctx, request, response);
        result.responses = result.status.ok() ? 1 : 0;
        break;
      case RpcKind::kClientStreaming: {
        ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
        for (int i = 0; i < 3; ++i) {
          if (i == 2) request.set_status_code(status_code);
          (void)co_await writer.write(request);
        }
        result.status = co_await writer.finish(response);
        result.responses = result.status.ok() ? 1 : 0;
        break;
      }
      case RpcKind::kServerStreaming: {
        request.set_response_count(4);
        request.set_status_code(status_code);
        ClientReader<EchoResponse> reader = co_await loop.stub().Expand(ctx, request);
        while (co_await reader.read(response)) ++result.responses;
        result.status = co_await reader.finish();
        break;
      }
      case RpcKind::kBidiStreaming: {
        ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
        for (int i = 0; i < 2; ++i) {
          if (!(co_await stream.write(request)).ok()) break;
          if (co_await stream.read(response)) ++result.responses;
        }
        if (status_code != 0) {
          request.set_status_code(status_code);
          (void)co_await stream.write(request);
        }
        co_await stream.writes_done();
        while (co_await stream.read(response)) ++result.responses;
        result.status = co_await stream.finish();
        break;
      }
    }
    co_return result;
  });
}

// Messages each side sends and receives in make_call's OK calls: {client sent, server sent}.
std::pair<std::size_t, std::size_t> expected_counts(RpcKind kind) {
  switch (kind) {
    case RpcKind::kUnary:
      return {1, 1};
    case RpcKind::kClientStreaming:
      return {3, 1};
    case RpcKind::kServerStreaming:
      return {1, 4};
    case RpcKind::kBidiStreaming:
      return {2, 2};
  }
  return {0, 0};
}

std::string path_of(RpcKind kind) {
  switch (kind) {
    case RpcKind::kUnary:
      return "/ferry.testing.Echo/Echo";
    case RpcKind::kClientStreaming:
      return "/ferry.testing.Echo/Collect";
    case RpcKind::kServerStreaming:
      return "/ferry.testing.Echo/Expand";
    case RpcKind::kBidiStreaming:
      return "/ferry.testing.Echo/Chat";
  }
  return "";
}

class InterceptorKinds : public ::testing::TestWithParam<RpcKind> {};

TEST_P(InterceptorKinds, ServerHooksRunInOrderAroundTheHandlerAndSeeTheOutcome) {
  const RpcKind kind = GetParam();
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<RecordingServerInterceptor>("a", &log),
                          std::make_shared<RecordingServerInterceptor>("b", &log)};
  Loopback loop(options);
  ClientContext ctx;
  CallResult result = make_call(loop, kind, ctx);
  ASSERT_TRUE(result.status.ok()) << result.status;

  const std::string start_suffix =
      absl::StrCat(" ", path_of(kind), " kind=", static_cast<int>(kind), " peer=ok");
  EXPECT_EQ(log.lines(),
            (std::vector<std::string>{"a.start" + start_suffix, "b.start" + start_suffix,
                                      "b.finish", "a.finish"}));
  const CallOutcome outcome = log.outcome("a");
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  const auto [client_sent, server_sent] = expected_counts(kind);
  EXPECT_EQ(outcome.messages_received, client_sent);
  EXPECT_EQ(outcome.messages_sent, server_sent);
  EXPECT_GT(outcome.duration.count(), 0);
  // Metadata the interceptors added: headers from on_start, trailers from on_finish.
  EXPECT_EQ(ctx.initial_metadata().get("x-a"), "seen");
  EXPECT_EQ(ctx.initial_metadata().get("x-b"), "seen");
  EXPECT_EQ(ctx.trailing_metadata().get("x-a-status"), "0");
  EXPECT_EQ(ctx.trailing_metadata().get("x-b-status"), "0");
}

TEST_P(InterceptorKinds, ServerRejectionStopsTheChainBeforeTheHandler) {
  const RpcKind kind = GetParam();
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<TokenAuthInterceptor>(&log),
                          std::make_shared<RecordingServerInterceptor>("after", &log)};
  Loopback loop(options);

  ClientContext no_token;
  CallResult rejected = make_call(loop, kind, no_token);
  EXPECT_EQ(rejected.status.code(), absl::StatusCode::kUnauthenticated) << rejected.status;
  EXPECT_EQ(rejected.status.message(), "missing or wrong token");
  EXPECT_EQ(rejected.responses, 0);
  EXPECT_EQ(loop.probe().started.load(), 0);  // the handler never ran
  EXPECT_EQ(log.lines(), (std::vector<std::string>{"auth.start", "auth.finish 16"}));

  ClientContext with_token;
  with_token.add_metadata("authorization", "Bearer secret");
  CallResult accepted = make_call(loop, kind, with_token);
  EXPECT_TRUE(accepted.status.ok()) << accepted.status;
  EXPECT_EQ(loop.probe().started.load(), 1);
}

TEST_P(InterceptorKinds, ServerObservesTheHandlersStatus) {
  const RpcKind kind = GetParam();
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<RecordingServerInterceptor>("a", &log)};
  Loopback loop(options);
  ClientContext ctx;
  CallResult result = make_call(loop, kind, ctx, /*status_code=*/5);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kNotFound) << result.status;
  EXPECT_EQ(log.outcome("a").status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ctx.trailing_metadata().get("x-a-status"), "5");
}

TEST_P(InterceptorKinds, ClientHooksRunInOrderAddMetadataAndSeeTheOutcome) {
  const RpcKind kind = GetParam();
  Log server_log;
  Log client_log;
  ServerOptions server_options;
  // The server admits only calls carrying the token the client interceptor adds.
  server_options.interceptors = {std::make_shared<TokenAuthInterceptor>(&server_log)};
  ChannelOptions channel_options;
  channel_options.interceptors = {std::make_shared<RecordingClientInterceptor>("a", &client_log),
                                  std::make_shared<ClientTokenInterceptor>(),
                                  std::make_shared<RecordingClientInterceptor>("b", &client_log)};
  Loopback loop(server_options, channel_options);
  ClientContext ctx;
  ctx.add_metadata("initial-echo", "back");  // the Echo handlers copy initial-* to the headers
  CallResult result = make_call(loop, kind, ctx);
  ASSERT_TRUE(result.status.ok()) << result.status;
  // The stubs say which kind each call is: a client-streaming call is not reported as bidi.
  const std::string start_suffix =
      absl::StrCat(" ", path_of(kind), " kind=", static_cast<int>(kind));
  EXPECT_EQ(client_log.lines(),
            (std::vector<std::string>{"a.start" + start_suffix, "b.start" + start_suffix,
                                      "b.finish", "a.finish"}));
  const CallOutcome outcome = client_log.outcome("b");
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  const auto [client_sent, server_sent] = expected_counts(kind);
  EXPECT_EQ(outcome.messages_sent, client_sent);
  EXPECT_EQ(outcome.messages_received, server_sent);
  EXPECT_EQ(ctx.initial_metadata().get("initial-echo"), "back");
  EXPECT_EQ(ctx.metadata().get("x-client-a"), "1");
}

TEST_P(InterceptorKinds, ClientObservesTheServersStatus) {
  const RpcKind kind = GetParam();
  Log log;
  ChannelOptions channel_options;
  channel_options.interceptors = {std::make_shared<RecordingClientInterceptor>("a", &log)};
  Loopback loop({}, channel_options);
  ClientContext ctx;
  CallResult result = make_call(loop, kind, ctx, /*status_code=*/5);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kNotFound) << result.status;
  EXPECT_EQ(log.outcome("a").status.code(), absl::StatusCode::kNotFound);
}

TEST_P(InterceptorKinds, ClientRejectionSendsNothing) {
  const RpcKind kind = GetParam();
  // Refuses calls whose context carries "refuse".
  class Refuse : public ClientInterceptor {
    asio::awaitable<absl::Status> on_start(ClientContext& ctx, const CallInfo&) override {
      if (ctx.metadata().get("refuse")) co_return absl::PermissionDeniedError("refused");
      co_return absl::OkStatus();
    }
  };
  Log log;
  ChannelOptions channel_options;
  channel_options.interceptors = {std::make_shared<RecordingClientInterceptor>("a", &log),
                                  std::make_shared<Refuse>(),
                                  std::make_shared<RecordingClientInterceptor>("never", &log)};
  Loopback loop({}, channel_options);
  ClientContext ctx;
  ctx.add_metadata("refuse", "1");
  CallResult result = make_call(loop, kind, ctx);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kPermissionDenied) << result.status;
  EXPECT_EQ(result.responses, 0);
  EXPECT_EQ(
      log.lines(),
      (std::vector<std::string>{
          absl::StrCat("a.start ", path_of(kind), " kind=", static_cast<int>(kind)), "a.finish"}));
  EXPECT_EQ(log.outcome("a").status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(log.outcome("a").messages_sent, 0u);
  // Nothing reached the server.
  EXPECT_EQ(loop.probe().started.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, InterceptorKinds,
                         ::testing::Values(RpcKind::kUnary, RpcKind::kClientStreaming,
                                           RpcKind::kServerStreaming, RpcKind::kBidiStreaming),
                         [](const ::testing::TestParamInfo<RpcKind>& info) {
                           switch (info.param) {
                             case RpcKind::kUnary:
                               return std::string("Unary");
                             case RpcKind::kClientStreaming:
                               return std::string("ClientStreaming");
                             case RpcKind::kServerStreaming:
                               return std::string("ServerStreaming");
                             case RpcKind::kBidiStreaming:
                               return std::string("Bidi");
                           }
                           return std::string("?");
                         });

// Garbage handlers that have returned (their status is queued on the connection by then).
std::atomic<int> garbage_sent{0};

// Handlers whose answers the client must turn into an error itself: a response that does not
// parse (raw bytes that are no EchoResponse), and OK with no response where one is due.
Service make_bad_answers() {
  Service bad("ferry.testing.Bad");
  bad.add_server_streaming<EchoRequest, EchoResponse>(
      "Garbage",
      [](ServerContext& ctx, const EchoRequest&,
         ServerWriter<EchoResponse>& writer) -> asio::awaitable<absl::Status> {
        static const char kNotAMessage[] = "\xff\xff\xff";  // a truncated varint tag
        SliceChain message;
        message.append(Slice::external(kNotAMessage, 3, nullptr));
        if (absl::Status s = co_await writer.write_raw(message); !s.ok()) co_return s;
        ctx.add_trailing_metadata("x-sent", "1");
        garbage_sent.fetch_add(1);
        co_return absl::OkStatus();
      });
  bad.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Silent",
      [](ServerContext&,
         ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        while (co_await stream.read(request)) {
        }
        co_return absl::OkStatus();
      });
  return bad;
}

// The bad answers served beside Echo, to a channel with one RecordingClientInterceptor "a".
struct BadAnswersObserved {
  static ChannelOptions observed_by(Log* log) {
    ChannelOptions options;
    options.interceptors = {std::make_shared<RecordingClientInterceptor>("a", log)};
    return options;
  }
  Log log;
  Service bad = make_bad_answers();
  Loopback loop{{}, observed_by(&log), &bad};
};

// Waits on the client's loop until the Garbage handler has returned (its status is then queued
// on the connection), then makes a unary call on the same connection: once its answer is in,
// so is the status queued before it.
asio::awaitable<void> wait_for_garbage_status(Loopback& loop, int before) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < 1000 && garbage_sent.load() == before; ++i) {
    timer.expires_after(1ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  ClientContext ping;
  EchoRequest request;
  EchoResponse response;
  EXPECT_TRUE((co_await loop.stub().Echo(ping, request, response)).ok());
}

// The server's OK arrives before the application reads the response, which then fails to
// parse: the application gets INTERNAL, and so must the interceptor (it was told OK).
TEST(Interceptors, ClientObservesAResponseThatFailsToParse) {
  BadAnswersObserved observed;
  Loopback& loop = observed.loop;
  ClientContext ctx;
  const int before = garbage_sent.load();
  absl::Status status = loop.run([&]() -> asio::awaitable<absl::Status> {
    const EchoRequest request;
    ClientReader<EchoResponse> reader(
        co_await loop.channel().open("/ferry.testing.Bad/Garbage", ctx, request));
    co_await wait_for_garbage_status(loop, before);
    EchoResponse response;
    EXPECT_FALSE(co_await reader.read(response));
    co_return co_await reader.finish();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  ASSERT_EQ(observed.log.lines().size(), 4u);  // the ping's start and finish too
  EXPECT_EQ(observed.log.outcome("a").status, status);
}

// OK without the one response a client-streaming call is due: the application gets
// UNIMPLEMENTED (a cardinality violation), and so does the interceptor.
TEST(Interceptors, ClientObservesAMissingResponse) {
  BadAnswersObserved observed;
  Loopback& loop = observed.loop;
  ClientContext ctx;
  absl::Status status = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer(
        co_await loop.channel().open("/ferry.testing.Bad/Silent", RpcKind::kClientStreaming, ctx));
    const EchoRequest request;
    (void)co_await writer.write(request);
    EchoResponse response;
    co_return co_await writer.finish(response);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  ASSERT_EQ(observed.log.lines().size(), 2u);
  EXPECT_EQ(observed.log.outcome("a").status, status);
}

// The deadline ends the call while the handler waits: the interceptor sees DEADLINE_EXCEEDED,
// not what the handler returned afterwards. The client's loop is frozen past the deadline, so
// that only the server's timer can end the call (the client's would race it with a CANCEL).
TEST(Interceptors, ServerSeesTheDeadlineAsTheOutcome) {
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<RecordingServerInterceptor>("a", &log)};
  Loopback loop(options);
  ClientContext ctx;
  ctx.set_timeout(100ms);
  EchoRequest request;
  request.set_delay_ms(5000);
  EchoResponse response;
  absl::Status status;
  bool done = false;
  loop.channel().call(testing::echo_methods::kEcho, ctx, request, response, [&](absl::Status s) {
    status = s;
    done = true;
  });
  ASSERT_TRUE(loop.wait_until([&] { return loop.probe().started.load() == 1; }));
  // The client's loop does not run meanwhile: the server ends the call.
  ASSERT_TRUE(testing::eventually([&] { return log.lines().size() >= 2; }));
  ASSERT_EQ(log.lines().size(), 2u);
  EXPECT_EQ(log.outcome("a").status.code(), absl::StatusCode::kDeadlineExceeded)
      << log.outcome("a").status;
  EXPECT_GT(log.outcome("a").duration, 50ms);
  ASSERT_TRUE(loop.wait_until([&] { return done; }));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

// A handler that ends its call itself (ServerContext::finish) and then returns another status:
// the client gets the first, and the interceptors see what the client got, not the return.
TEST(Interceptors, ServerSeesTheStatusThatWentToTheClient) {
  Service finishes("ferry.testing.Finishes");
  finishes.add_unary<EchoRequest, EchoResponse>(
      "Early",
      [](ServerContext& ctx, const EchoRequest&, EchoResponse&) -> asio::awaitable<absl::Status> {
        ctx.finish(absl::NotFoundError("ended early"));
        co_return absl::OkStatus();
      });
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<RecordingServerInterceptor>("a", &log)};
  Loopback loop(options, {}, &finishes);
  ClientContext ctx;
  absl::Status status = loop.run([&]() -> asio::awaitable<absl::Status> {
    const EchoRequest request;
    EchoResponse response;
    co_return co_await loop.channel().call("/ferry.testing.Finishes/Early", ctx, request, response);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  ASSERT_TRUE(loop.wait_until([&] { return log.lines().size() == 2; }));
  EXPECT_EQ(log.outcome("a").status.code(), absl::StatusCode::kNotFound) << log.outcome("a").status;
}

// An interceptor that throws ends the call with UNKNOWN; the handler does not run.
TEST(Interceptors, ServerInterceptorThatThrowsFailsTheCall) {
  class Throws : public ServerInterceptor {
    asio::awaitable<absl::Status> on_start(ServerContext&, const CallInfo&) override {
      throw std::runtime_error("boom");
      co_return absl::OkStatus();
    }
  };
  ServerOptions options;
  options.interceptors = {std::make_shared<Throws>()};
  Loopback loop(options);
  ClientContext ctx;
  CallResult result = make_call(loop, RpcKind::kUnary, ctx);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnknown) << result.status;
  EXPECT_EQ(loop.probe().started.load(), 0);
}

// start_now (ferry/server_interceptor.h): a decision made without a coroutine replaces
// on_start, which never runs; its rejection stops the chain as on_start's would; an interceptor
// whose start_now says nothing (std::nullopt) has its on_start awaited, in order with the others.
class StartNowServerInterceptor : public ServerInterceptor {
 public:
  StartNowServerInterceptor(std::string name, Log* log, bool decides)
      : name_(std::move(name)), log_(log), decides_(decides) {}
  std::optional<absl::Status> start_now(ServerContext& ctx, const CallInfo&) override {
    log_->add(name_ + ".start_now");
    if (!decides_) return std::nullopt;
    if (ctx.client_metadata().get("authorization") != "Bearer secret") {
      return absl::UnauthenticatedError("missing or wrong token");
    }
    return absl::OkStatus();
  }
  asio::awaitable<absl::Status> on_start(ServerContext&, const CallInfo&) override {
    log_->add(name_ + ".on_start");
    co_return absl::OkStatus();
  }
  void on_finish(ServerContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->add(absl::StrCat(name_, ".finish ", static_cast<int>(outcome.status.code())));
  }

 private:
  std::string name_;
  Log* log_;
  bool decides_;
};

TEST(Interceptors, ServerStartNowDecidesInsteadOfOnStart) {
  Log log;
  ServerOptions options;
  options.interceptors = {std::make_shared<StartNowServerInterceptor>("now", &log, true),
                          std::make_shared<StartNowServerInterceptor>("later", &log, false),
                          std::make_shared<RecordingServerInterceptor>("co", &log)};
  Loopback loop(options);
  {
    ClientContext ctx;
    ctx.add_metadata("authorization", "Bearer secret");
    CallResult result = make_call(loop, RpcKind::kUnary, ctx);
    EXPECT_TRUE(result.status.ok()) << result.status;
    ASSERT_TRUE(loop.wait_until([&] { return log.lines().size() == 7; }));
    EXPECT_EQ(log.lines(),
              (std::vector<std::string>{"now.start_now", "later.start_now", "later.on_start",
                                        "co.start /ferry.testing.Echo/Echo kind=0 peer=ok",
                                        "co.finish", "later.finish 0", "now.finish 0"}));
  }
  {
    ClientContext ctx;  // no token: start_now rejects, the rest of the chain and the handler
    CallResult result = make_call(loop, RpcKind::kUnary, ctx);  // never run
    EXPECT_EQ(result.status.code(), absl::StatusCode::kUnauthenticated) << result.status;
    ASSERT_TRUE(loop.wait_until([&] { return log.lines().size() == 9; }));
    const std::vector<std::string> lines = log.lines();
    EXPECT_EQ(std::vector<std::string>(lines.begin() + 7, lines.end()),
              (std::vector<std::string>{"now.start_now", "now.finish 16"}));
    EXPECT_EQ(loop.probe().started.load(), 1);
  }
}

class StartNowClientInterceptor : public ClientInterceptor {
 public:
  StartNowClientInterceptor(std::string name, Log* log, bool decides)
      : name_(std::move(name)), log_(log), decides_(decides) {}
  std::optional<absl::Status> start_now(ClientContext& ctx, const CallInfo&) override {
    log_->add(name_ + ".start_now");
    if (!decides_) return std::nullopt;
    if (!ctx.metadata().get("x-allowed")) return absl::PermissionDeniedError("not allowed");
    return absl::OkStatus();
  }
  asio::awaitable<absl::Status> on_start(ClientContext&, const CallInfo&) override {
    log_->add(name_ + ".on_start");
    co_return absl::OkStatus();
  }
  void on_finish(ClientContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->add(absl::StrCat(name_, ".finish ", static_cast<int>(outcome.status.code())));
  }

 private:
  std::string name_;
  Log* log_;
  bool decides_;
};

TEST(Interceptors, ClientStartNowDecidesInsteadOfOnStart) {
  for (RpcKind kind : {RpcKind::kUnary, RpcKind::kServerStreaming}) {
    Log log;
    ChannelOptions options;
    options.interceptors = {std::make_shared<StartNowClientInterceptor>("now", &log, true),
                            std::make_shared<StartNowClientInterceptor>("later", &log, false),
                            std::make_shared<StartNowClientInterceptor>("last", &log, true)};
    Loopback loop({}, options);
    {
      ClientContext ctx;
      ctx.add_metadata("x-allowed", "1");
      CallResult result = make_call(loop, kind, ctx);
      EXPECT_TRUE(result.status.ok()) << result.status;
      EXPECT_EQ(log.lines(),
                (std::vector<std::string>{"now.start_now", "later.start_now", "later.on_start",
                                          "last.start_now", "last.finish 0", "later.finish 0",
                                          "now.finish 0"}))
          << static_cast<int>(kind);
    }
    {
      ClientContext ctx;  // start_now rejects: nothing is sent
      CallResult result = make_call(loop, kind, ctx);
      EXPECT_EQ(result.status.code(), absl::StatusCode::kPermissionDenied) << result.status;
      const std::vector<std::string> lines = log.lines();
      ASSERT_EQ(lines.size(), 9u);
      EXPECT_EQ(lines[7], "now.start_now");
      EXPECT_EQ(lines[8], "now.finish 7");
      EXPECT_EQ(loop.probe().started.load(), 1) << static_cast<int>(kind);
    }
  }
}

// uses_duration: a chain none of whose interceptors reads durations reads no clock for them
// (duration and retry_delay are 0); one that does makes every interceptor see the call's.
class DurationServerInterceptor : public ServerInterceptor {
 public:
  DurationServerInterceptor(std::string name, Log* log, bool uses)
      : name_(std::move(name)), log_(log), uses_(uses) {}
  bool uses_duration() const override { return uses_; }
  void on_finish(ServerContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->set_outcome(name_, outcome);
    log_->add(name_ + ".finish");
  }

 private:
  std::string name_;
  Log* log_;
  bool uses_;
};

class DurationClientInterceptor : public ClientInterceptor {
 public:
  DurationClientInterceptor(std::string name, Log* log, bool uses)
      : name_(std::move(name)), log_(log), uses_(uses) {}
  bool uses_duration() const override { return uses_; }
  void on_attempt_end(ClientContext&, const CallInfo&, const CallOutcome& attempt) override {
    log_->set_outcome(name_ + ".attempt", attempt);
  }
  void on_finish(ClientContext&, const CallInfo&, const CallOutcome& outcome) override {
    log_->set_outcome(name_, outcome);
    log_->add(name_ + ".finish");
  }

 private:
  std::string name_;
  Log* log_;
  bool uses_;
};

TEST(Interceptors, DurationsAreTimedOnlyWhenAnInterceptorReadsThem) {
  for (bool any_uses : {false, true}) {
    Log log;
    ServerOptions server_options;
    server_options.interceptors = {std::make_shared<DurationServerInterceptor>("s", &log, false)};
    ChannelOptions channel_options;
    channel_options.interceptors = {std::make_shared<DurationClientInterceptor>("c", &log, false)};
    if (any_uses) {
      server_options.interceptors.push_back(
          std::make_shared<DurationServerInterceptor>("s2", &log, true));
      channel_options.interceptors.push_back(
          std::make_shared<DurationClientInterceptor>("c2", &log, true));
    }
    Loopback loop(server_options, channel_options);
    ClientContext ctx;
    CallResult result = make_call(loop, RpcKind::kUnary, ctx);
    ASSERT_TRUE(result.status.ok()) << result.status;
    const std::size_t lines = any_uses ? 4 : 2;
    ASSERT_TRUE(loop.wait_until([&] { return log.lines().size() == lines; }));
    for (const std::string name : {"s", "c", "c.attempt"}) {
      if (any_uses) {
        EXPECT_GT(log.outcome(name).duration.count(), 0) << name;
      } else {
        EXPECT_EQ(log.outcome(name).duration.count(), 0) << name;
      }
      EXPECT_EQ(log.outcome(name).messages_sent, 1u) << name;  // the rest is reported as ever
    }
  }
}

}  // namespace
}  // namespace ferry::interceptor_test

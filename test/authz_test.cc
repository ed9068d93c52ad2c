// Authorization policies enforced by a ferry server over mutual TLS (ferry/authz.h): a denied
// call ends with PERMISSION_DENIED before any handler or later interceptor runs, the decision
// and rule reach the later interceptors' hooks, a policy file is reloaded (a failed reload keeps
// the previous policy and says why), reloads race calls on several I/O threads, and the audit
// loggers (gRFC A59) log what the condition selects, the stdout logger as grpc-go writes it.
#include "ferry/authz.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/server.h"
#include "support/echo_service.h"
#include "support/wait.h"

namespace ferry::authz_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;

Pem cert(const std::string& name) { return Pem::file(FERRY_TEST_CERTS "/" + name); }

// What the interceptor after the policy saw of each call.
struct Observer : ServerInterceptor {
  std::mutex mutex;
  std::vector<std::string> started;   // "<method> <decision> <rule>"
  std::vector<std::string> finished;  // the same, with the status code
  static std::string describe(const ServerContext& ctx) {
    const CallAuthorization& a = ctx.authorization();
    const char* d = a.decision == CallAuthorization::Decision::kAllowed  ? "allowed"
                    : a.decision == CallAuthorization::Decision::kDenied ? "denied"
                                                                         : "none";
    return std::string(ctx.method()) + " " + d + " " + std::string(a.policy) + "/" +
           std::string(a.rule);
  }
  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo&) override {
    std::lock_guard lock(mutex);
    started.push_back(describe(ctx));
    return ready_status();
  }
  void on_finish(ServerContext& ctx, const CallInfo&, const CallOutcome& outcome) override {
    std::lock_guard lock(mutex);
    finished.push_back(describe(ctx) + " " + absl::StatusCodeToString(outcome.status.code()));
  }
};

class AuthzServer {
 public:
  explicit AuthzServer(std::shared_ptr<ServerInterceptor> authz,
                       std::shared_ptr<Observer> observer = nullptr, int threads = 2) {
    ServerOptions options;
    options.num_threads = threads;
    ServerTlsConfig tls{.certificate_chain = cert("server.pem"), .private_key = cert("server.key")};
    tls.client_ca = cert("ca.pem");
    tls.require_client_certificate = false;  // a client without one is unauthenticated
    auto creds = ServerCredentials::create(std::move(tls));
    EXPECT_TRUE(creds.ok()) << creds.status();
    options.credentials = *creds;
    options.interceptors.push_back(std::move(authz));
    if (observer != nullptr) options.interceptors.push_back(std::move(observer));
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    absl::StatusOr<int> port = server_->start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    port_ = port.ok() ? *port : 0;
  }
  ~AuthzServer() { server_->shutdown(std::chrono::milliseconds(100)); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int handlers_run() const { return probe_.started.load(); }

 private:
  testing::EchoProbe probe_;
  testing::EchoService service_{&probe_};
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

std::unique_ptr<Channel> channel(const AuthzServer& server, bool with_client_cert) {
  ChannelTlsConfig tls{.root_certificates = cert("ca.pem")};
  if (with_client_cert) {
    tls.certificate_chain = cert("client.pem");
    tls.private_key = cert("client.key");
  }
  auto creds = ChannelCredentials::create(std::move(tls));
  EXPECT_TRUE(creds.ok()) << creds.status();
  ChannelOptions options;
  options.credentials = *creds;
  return std::make_unique<Channel>(server.target(), options);
}

absl::Status echo(Channel& ch, const std::vector<std::pair<std::string, std::string>>& md = {}) {
  testing::Echo::BlockingStub stub(ch);
  EchoRequest request;
  request.set_payload("hi");
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  for (const auto& [k, v] : md) ctx.add_metadata(k, v);
  return stub.Echo(ctx, request, response);
}

absl::Status expand(Channel& ch) {  // a server-streaming call
  testing::Echo::BlockingStub stub(ch);
  EchoRequest request;
  request.set_response_count(3);
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  auto reader = stub.Expand(ctx, request);
  EchoResponse response;
  while (reader.read(response)) {
  }
  return reader.finish();
}

absl::Status chat(Channel& ch) {  // a bidirectional call
  testing::Echo::BlockingStub stub(ch);
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  auto stream = stub.Chat(ctx);
  EchoRequest request;
  request.set_payload("x");
  (void)stream.write(request);
  stream.writes_done();
  EchoResponse response;
  while (stream.read(response)) {
  }
  return stream.finish();
}

constexpr char kPolicy[] = R"({
  "name": "echo_policy",
  "deny_rules": [{"name": "no_chat", "request": {"paths": ["/ferry.testing.Echo/Chat"]}}],
  "allow_rules": [
    {"name": "client_echo", "source": {"principals": ["spiffe://ferry.test/ns/default/sa/client"]},
     "request": {"paths": ["/ferry.testing.Echo/Echo"]}},
    {"name": "teams", "request": {"paths": ["/ferry.testing.Echo/*"],
                                  "headers": [{"key": "x-team", "values": ["ops"]}]}}
  ]})";

TEST(Authz, DeniedCallsEndBeforeAnyHandlerOrLaterInterceptor) {
  auto authz = AuthorizationInterceptor::from_policy(kPolicy);
  ASSERT_TRUE(authz.ok()) << authz.status();
  auto observer = std::make_shared<Observer>();
  AuthzServer server(*authz, observer);
  auto known = channel(server, true);
  auto anonymous = channel(server, false);

  EXPECT_TRUE(echo(*known).ok());
  EXPECT_EQ(server.handlers_run(), 1);
  absl::Status s = echo(*anonymous);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(s.message(), "authz: unauthorized RPC request rejected");
  EXPECT_TRUE(echo(*anonymous, {{"x-team", "ops"}}).ok());                // the header rule
  EXPECT_EQ(expand(*known).code(), absl::StatusCode::kPermissionDenied);  // not /Echo, no header
  EXPECT_EQ(chat(*known).code(), absl::StatusCode::kPermissionDenied);    // the deny rule
  EXPECT_EQ(server.handlers_run(), 2);

  std::lock_guard lock(observer->mutex);
  // Only allowed calls reach the interceptor after the policy's on_start...
  EXPECT_EQ(observer->started, (std::vector<std::string>{
                                   "/ferry.testing.Echo/Echo allowed echo_policy/client_echo",
                                   "/ferry.testing.Echo/Echo allowed echo_policy/teams",
                               }));
  // ... and its on_finish runs for those only (the chain's rule), with the decision.
  EXPECT_EQ(observer->finished.size(), 2u);
  EXPECT_EQ(observer->finished[0], "/ferry.testing.Echo/Echo allowed echo_policy/client_echo OK");
  const AuthorizationStats stats = (*authz)->stats();
  EXPECT_EQ(stats.allowed, 2u);
  EXPECT_EQ(stats.denied, 3u);
}

// The policy's own on_finish sees its denial, since its on_start ran: an interceptor before it
// (metrics) sees the decision in on_finish too.
TEST(Authz, AnInterceptorBeforeThePolicySeesTheDecisionInOnFinish) {
  auto authz = AuthorizationInterceptor::from_policy(kPolicy);
  ASSERT_TRUE(authz.ok());
  auto observer = std::make_shared<Observer>();
  ServerOptions options;
  ServerTlsConfig tls{.certificate_chain = cert("server.pem"), .private_key = cert("server.key")};
  tls.client_ca = cert("ca.pem");
  options.credentials = *ServerCredentials::create(std::move(tls));
  options.interceptors = {observer, *authz};
  testing::EchoProbe probe;
  testing::EchoService service(&probe);
  Server server(options);
  server.add_service(service);
  auto port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  ChannelTlsConfig ctls{.root_certificates = cert("ca.pem"),
                        .certificate_chain = cert("client.pem"),
                        .private_key = cert("client.key")};
  ChannelOptions copts;
  copts.credentials = *ChannelCredentials::create(std::move(ctls));
  Channel ch("127.0.0.1:" + std::to_string(*port), copts);
  EXPECT_EQ(chat(ch).code(), absl::StatusCode::kPermissionDenied);
  server.shutdown(std::chrono::milliseconds(100));
  std::lock_guard lock(observer->mutex);
  EXPECT_EQ(observer->started, (std::vector<std::string>{"/ferry.testing.Echo/Chat none /"}));
  EXPECT_EQ(observer->finished,
            (std::vector<std::string>{"/ferry.testing.Echo/Chat denied echo_policy/no_chat "
                                      "PERMISSION_DENIED"}));
  EXPECT_EQ(probe.started.load(), 0);
}

class PolicyFile {
 public:
  PolicyFile() {
    path_ = std::filesystem::temp_directory_path() / ("ferry_authz_" + std::to_string(::getpid()) +
                                                      "_" + std::to_string(counter_++) + ".json");
  }
  ~PolicyFile() { std::filesystem::remove(path_); }
  // Replaces the file as an editor or a config push does: written beside it, renamed over it.
  void write(const std::string& text) const {
    const std::filesystem::path tmp = path_.string() + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, path_);
  }
  std::string path() const { return path_.string(); }

 private:
  static inline std::atomic<int> counter_{0};
  std::filesystem::path path_;
};

std::string allow_only(const std::string& name, const std::string& method) {
  return R"({"name":")" + name + R"(","allow_rules":[{"name":"only","request":{"paths":[")" +
         method + R"("]}}]})";
}

TEST(Authz, APolicyFileIsReloadedAndAFailedReloadKeepsThePreviousPolicy) {
  PolicyFile file;
  file.write(allow_only("v1", "/ferry.testing.Echo/Echo"));
  std::mutex mutex;
  std::vector<absl::Status> reloads;
  auto authz = AuthorizationInterceptor::from_file(file.path(), std::chrono::milliseconds(20), {},
                                                   [&](const absl::Status& s) {
                                                     std::lock_guard lock(mutex);
                                                     reloads.push_back(s);
                                                   });
  ASSERT_TRUE(authz.ok()) << authz.status();
  AuthzServer server(*authz);
  auto ch = channel(server, true);
  EXPECT_TRUE(echo(*ch).ok());
  EXPECT_EQ(expand(*ch).code(), absl::StatusCode::kPermissionDenied);

  // A new policy takes over at the next refresh.
  file.write(allow_only("v2", "/ferry.testing.Echo/Expand"));
  ASSERT_TRUE(testing::eventually([&] { return (*authz)->policy()->name() == "v2"; }));
  EXPECT_EQ(echo(*ch).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(expand(*ch).ok());
  EXPECT_EQ((*authz)->stats().reloads, 1u);

  // A policy that does not parse: v2 stays, the error names the field, reported once.
  file.write(
      R"({"name":"v3","allow_rules":[{"name":"r","request":{"headers":[{"key":"grpc-x","values":["v"]}]}}]})");
  ASSERT_TRUE(testing::eventually([&] { return (*authz)->stats().reload_failures == 1; }));
  const absl::Status error = (*authz)->last_reload_error();
  EXPECT_NE(error.message().find("unsupported \"key\" grpc-x"), std::string_view::npos) << error;
  EXPECT_NE(error.message().find(file.path()), std::string_view::npos) << error;
  EXPECT_EQ((*authz)->policy()->name(), "v2");
  EXPECT_TRUE(expand(*ch).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // several refreshes: one report
  EXPECT_EQ((*authz)->stats().reload_failures, 1u);

  // Neither does a file that went away, nor one cut short.
  std::filesystem::remove(file.path());
  ASSERT_TRUE(testing::eventually([&] { return (*authz)->stats().reload_failures >= 2; }));
  EXPECT_EQ((*authz)->last_reload_error().code(), absl::StatusCode::kNotFound);
  const std::string v4 = allow_only("v4", "/ferry.testing.Echo/Echo");
  file.write(v4.substr(0, v4.size() / 2));
  ASSERT_TRUE(testing::eventually([&] { return (*authz)->stats().reload_failures >= 3; }));
  EXPECT_EQ((*authz)->policy()->name(), "v2");
  EXPECT_TRUE(expand(*ch).ok());

  // Fixed: reloaded, and the error clears.
  file.write(v4);
  ASSERT_TRUE(testing::eventually([&] { return (*authz)->policy()->name() == "v4"; }));
  EXPECT_TRUE((*authz)->last_reload_error().ok());
  EXPECT_TRUE(echo(*ch).ok());
  // on_reload hears of v4 just after it takes over.
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mutex);
    return reloads.size() >= 5;
  }));
  std::lock_guard lock(mutex);
  EXPECT_TRUE(reloads.front().ok());  // v2
  EXPECT_TRUE(reloads.back().ok());   // v4
}

TEST(Authz, FromFileRefusesABadFirstPolicyAndBadArguments) {
  PolicyFile file;
  file.write(R"({"name":"p","allow_rules":[{"request":{}}]})");
  auto bad = AuthorizationInterceptor::from_file(file.path(), std::chrono::seconds(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"allow_rules\" 0: \"name\" is not present"),
            std::string_view::npos)
      << bad.status();
  EXPECT_EQ(AuthorizationInterceptor::from_file(file.path() + ".missing", std::chrono::seconds(1))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(AuthorizationInterceptor::from_file("", std::chrono::seconds(1)).ok());
  file.write(allow_only("p", "/a.B/C"));
  EXPECT_FALSE(AuthorizationInterceptor::from_file(file.path(), std::chrono::seconds(0)).ok());
  auto ok = AuthorizationInterceptor::from_file(file.path(), std::chrono::hours(1));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE((*ok)->reload_now().ok());
  // Neither a FIFO (reading it would block for ever) nor a directory nor a file over 4 MiB.
  const std::string fifo = file.path() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = AuthorizationInterceptor::from_file(fifo, std::chrono::seconds(1));
  std::filesystem::remove(fifo);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_NE(from_fifo.status().message().find("not a regular file"), std::string_view::npos);
  EXPECT_FALSE(AuthorizationInterceptor::from_file(std::filesystem::temp_directory_path().string(),
                                                   std::chrono::seconds(1))
                   .ok());
  file.write(std::string(AuthorizationPolicy::kMaxPolicyBytes + 1, ' '));
  auto huge = AuthorizationInterceptor::from_file(file.path(), std::chrono::seconds(1));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("over the limit"), std::string_view::npos);
  file.write(allow_only("p", "/a.B/C"));

  auto fixed = AuthorizationInterceptor::from_policy(allow_only("p", "/a.B/C"));
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)->reload_now().code(), absl::StatusCode::kFailedPrecondition);
}

// Reloads between two policies while four client threads call a three-thread server: every
// call gets the answer of one policy or the other, never anything else (ThreadSanitizer runs
// this too).
TEST(Authz, ReloadsRaceCallsOnSeveralIoThreads) {
  PolicyFile file;
  const std::string echo_only = allow_only("echo_only", "/ferry.testing.Echo/Echo");
  const std::string expand_only = allow_only("expand_only", "/ferry.testing.Echo/Expand");
  file.write(echo_only);
  auto authz = AuthorizationInterceptor::from_file(file.path(), std::chrono::hours(1));
  ASSERT_TRUE(authz.ok());
  AuthzServer server(*authz, nullptr, 3);
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      auto ch = channel(server, true);
      while (!stop.load()) {
        const absl::Status s = echo(*ch);
        if (!s.ok() && s.code() != absl::StatusCode::kPermissionDenied) wrong.fetch_add(1);
        calls.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    file.write(i % 2 == 0 ? expand_only : echo_only);
    EXPECT_TRUE((*authz)->reload_now().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(testing::eventually([&] { return calls.load() >= 100; }));
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ((*authz)->stats().reloads, 100u);
  const AuthorizationStats stats = (*authz)->stats();
  EXPECT_EQ(stats.allowed + stats.denied, static_cast<std::uint64_t>(calls.load()));
}

// ---- audit logging (gRFC A59) -----------------------------------------------------------------

struct RecordingLogger : AuditLogger {
  std::mutex mutex;
  std::vector<std::string> events;
  std::string config;
  void log(const AuditEvent& e) override {
    std::lock_guard lock(mutex);
    events.push_back(std::string(e.method) + "|" + std::string(e.principal) + "|" +
                     std::string(e.policy_name) + "|" + std::string(e.matched_rule) + "|" +
                     (e.authorized ? "true" : "false"));
  }
};

std::string audited_policy(const std::string& condition) {
  return R"({"name":"audited",
    "deny_rules":[{"name":"no_chat","request":{"paths":["/ferry.testing.Echo/Chat"]}}],
    "allow_rules":[{"name":"echo","request":{"paths":["/ferry.testing.Echo/Echo"]}}],
    "audit_logging_options":{"audit_condition":")" +
         condition + R"(","audit_loggers":[{"name":"recorder","config":{"level":2}}]}})";
}

TEST(AuthzAudit, TheConditionSelectsWhichDecisionsAreLogged) {
  const std::string allowed =
      "/ferry.testing.Echo/Echo|spiffe://ferry.test/ns/default/sa/client|audited|audited_echo|true";
  const std::string denied_by_rule =
      "/ferry.testing.Echo/Chat|spiffe://ferry.test/ns/default/sa/client|audited|audited_no_chat|"
      "false";
  const std::string denied_no_rule =
      "/ferry.testing.Echo/Expand|spiffe://ferry.test/ns/default/sa/client|audited||false";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"NONE", {}},
      {"ON_DENY", {denied_by_rule, denied_no_rule}},
      {"ON_ALLOW", {allowed}},
      {"ON_DENY_AND_ALLOW", {allowed, denied_by_rule, denied_no_rule}},
  };
  for (const auto& [condition, want] : cases) {
    auto logger = std::make_shared<RecordingLogger>();
    AuthorizationOptions options;
    options.audit_loggers["recorder"] =
        [&](std::string_view config) -> absl::StatusOr<std::shared_ptr<AuditLogger>> {
      logger->config = std::string(config);
      return logger;
    };
    auto authz = AuthorizationInterceptor::from_policy(audited_policy(condition), options);
    ASSERT_TRUE(authz.ok()) << authz.status();
    AuthzServer server(*authz);
    auto ch = channel(server, true);
    EXPECT_TRUE(echo(*ch).ok());
    EXPECT_EQ(chat(*ch).code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(expand(*ch).code(), absl::StatusCode::kPermissionDenied);
    std::lock_guard lock(logger->mutex);
    EXPECT_EQ(logger->events, want) << condition;
    EXPECT_EQ(logger->config, R"({"level":2})");
  }
}

TEST(AuthzAudit, ALoggerFactoryThatFailsFailsTheLoad) {
  AuthorizationOptions options;
  options.audit_loggers["recorder"] =
      [](std::string_view) -> absl::StatusOr<std::shared_ptr<AuditLogger>> {
    return absl::InvalidArgumentError("level must be a string");
  };
  auto authz = AuthorizationInterceptor::from_policy(audited_policy("ON_DENY"), options);
  ASSERT_FALSE(authz.ok());
  EXPECT_NE(authz.status().message().find("audit logger \"recorder\": level must be a string"),
            std::string_view::npos)
      << authz.status();
}

TEST(AuthzAudit, TheStdoutLoggerWritesGrpcGosJsonLines) {
  auto authz = AuthorizationInterceptor::from_policy(R"({"name":"p",
      "allow_rules":[{"name":"echo","request":{"paths":["/ferry.testing.Echo/Echo"]}}],
      "audit_logging_options":{"audit_condition":"ON_DENY_AND_ALLOW",
                               "audit_loggers":[{"name":"stdout_logger"}]}})");
  ASSERT_TRUE(authz.ok()) << authz.status();
  AuthzServer server(*authz);
  auto ch = channel(server, true);
  auto anonymous = channel(server, false);
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(echo(*ch).ok());
  EXPECT_EQ(expand(*anonymous).code(), absl::StatusCode::kPermissionDenied);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string::size_type nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  const std::string first = out.substr(0, nl);
  const std::string second = out.substr(nl + 1);
  const std::string prefix1 =
      R"({"grpc_audit_log":{"rpc_method":"/ferry.testing.Echo/Echo","principal":"spiffe://ferry.test/ns/default/sa/client","policy_name":"p","matched_rule":"p_echo","authorized":true,"timestamp":")";
  const std::string prefix2 =
      R"({"grpc_audit_log":{"rpc_method":"/ferry.testing.Echo/Expand","principal":"","policy_name":"p","matched_rule":"","authorized":false,"timestamp":")";
  EXPECT_EQ(first.substr(0, prefix1.size()), prefix1) << out;
  EXPECT_EQ(second.substr(0, prefix2.size()), prefix2) << out;
  // "2026-01-02T03:04:05.123456789Z"}}: RFC 3339 with nanoseconds, in UTC.
  const std::string stamp = first.substr(prefix1.size());
  EXPECT_EQ(stamp.substr(stamp.size() - 4), "Z\"}}") << stamp;
  EXPECT_EQ(stamp[4], '-');
  EXPECT_EQ(stamp[10], 'T');
  EXPECT_EQ(second.back(), '\n');
}

}  // namespace
}  // namespace ferry::authz_test

// The fault-injection suite (issue #26): ferry clients against ferry servers while the network
// and the servers fail. toxiproxy (tests Toxiproxy.*) stands between them and black-holes,
// resets, trickles or cuts the connections; servers are killed (SIGKILL, in a process of their
// own) and stopped gracefully under load; a resolver's answer changes under load. Each case opens
// with its promise, what gRPC specifies for that fault, and checks it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "faults/fault_service.h"
#include "faults/toxiproxy.h"
#include "ferry/buffer_pool.h"
#include "ferry/channel.h"
#include "ferry/resolver.h"
#include "ferry/server.h"
#include "support/wait.h"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::CallLedger;
using testing::ChildProcess;
using testing::EchoProbe;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::FaultService;
using testing::Toxiproxy;
using testing::echo_methods::kChat;
using testing::echo_methods::kCollect;
using testing::echo_methods::kEcho;
using testing::echo_methods::kExpand;

#define SKIP_WITHOUT_TOXIPROXY() \
  if (!Toxiproxy::installed())   \
  GTEST_SKIP() << Toxiproxy::binary() << " not installed (scripts/install_peers.sh installs it)"

// The channels' keepalive and back-off, short so that the suite stays short: a PING after 1 s
// without reading, the connection closed when its ACK takes 1 s more.
constexpr auto kKeepaliveTime = 1000ms;
constexpr auto kKeepaliveTimeout = 1000ms;
// ferry notices silence between keepalive time and 1.5 x keepalive time (connection_policy.h),
// then waits keepalive timeout for the ACK; 1 s more for a loaded 2-core machine.
constexpr auto kKeepaliveBound = kKeepaliveTime * 3 / 2 + kKeepaliveTimeout + 1000ms;
// How late past its deadline a call may complete on a loaded machine.
constexpr auto kDeadlineSlack = 250ms;

ChannelOptions fault_channel_options() {
  ChannelOptions options;
  options.keepalive.time = kKeepaliveTime;
  options.keepalive.timeout = kKeepaliveTimeout;
  options.connect_timeout = 1000ms;
  options.backoff.initial = 100ms;
  options.backoff.max = 500ms;
  options.min_resolve_interval = 100ms;
  return options;
}

std::string ipv4_target(const std::vector<int>& ports) {
  std::string target = "ipv4:";
  for (int port : ports) {
    if (target.size() > 5) target += ",";
    target += "127.0.0.1:" + std::to_string(port);
  }
  return target;
}

// A FaultService server in this process, on 127.0.0.1; it allows the channels' 1 s PINGs.
class Backend {
 public:
  Backend() : service_(&ledger_, &probe_) { start(0); }
  ~Backend() { stop(0ms); }

  void start(int port) {
    ServerOptions options;
    options.num_threads = 1;
    options.client_pings.min_interval = 100ms;
    options.client_pings.permit_without_calls = true;
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    absl::StatusOr<int> bound = server_->start("127.0.0.1", port);
    if (!bound.ok()) throw std::runtime_error(bound.status().ToString());
    port_ = *bound;
  }
  void stop(std::chrono::milliseconds grace) {
    if (server_ != nullptr) server_->shutdown(grace);
    server_.reset();
  }
  int port() const { return port_; }
  CallLedger& ledger() { return ledger_; }
  EchoProbe& probe() { return probe_; }
  // Every handler that started has returned: no coroutine left behind.
  bool handlers_done() const {
    return ledger_.finished.load() == ledger_.started.load() &&
           probe_.finished.load() == probe_.started.load();
  }

 private:
  CallLedger ledger_;
  EchoProbe probe_;
  FaultService service_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

// Runs a coroutine on the channel's own thread and waits for it from the test's.
template <class T>
T run_on(Channel& channel, asio::awaitable<T> op, std::chrono::milliseconds limit = 30s) {
  std::future<T> done = asio::co_spawn(channel.executor(), std::move(op), asio::use_future);
  if (done.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "run_on: not done within " << limit.count() << " ms";
    std::abort();  // the coroutine points into this frame: it must never resume after it
  }
  return done.get();
}

struct Outcome {
  absl::Status status;
  Clock::time_point start;
  Clock::time_point end;
  Clock::time_point deadline;
  std::string id;
};

// One unary Echo call whose payload is its id; a reply not echoing it is DATA_LOSS.
asio::awaitable<Outcome> echo(Channel& channel, std::string id, int delay_ms,
                              std::chrono::milliseconds timeout, bool wait_for_ready = false) {
  ClientContext ctx;
  ctx.set_timeout(timeout);
  if (wait_for_ready) ctx.set_wait_for_ready(true);
  EchoRequest request;
  request.set_payload(id);
  request.set_delay_ms(delay_ms);
  EchoResponse response;
  Outcome outcome;
  outcome.id = id;
  outcome.start = Clock::now();
  outcome.deadline = ctx.deadline();
  outcome.status = co_await channel.call(kEcho, ctx, request, response);
  outcome.end = Clock::now();
  if (outcome.status.ok() && response.payload() != id) {
    outcome.status = absl::DataLossError("reply does not echo " + id);
  }
  co_return outcome;
}

// Unary calls in a loop from `workers` coroutines on the channel's thread, each call with its
// own id (prefix-worker-n), until stop(). A failed call is followed by a 10 ms pause, so that a
// channel failing fast does not spin.
class UnaryLoad {
 public:
  struct Options {
    int workers = 4;
    int delay_ms = 10;
    std::chrono::milliseconds timeout = 5s;
    bool wait_for_ready = false;
  };

  UnaryLoad(Channel& channel, std::string prefix, Options options)
      : channel_(channel), prefix_(std::move(prefix)), options_(options) {
    running_ = options.workers;
    for (int w = 0; w < options.workers; ++w) {
      asio::co_spawn(channel.executor(), worker(w), asio::detached);
    }
  }
  ~UnaryLoad() { stop(); }

  // Stops starting calls and waits for those in flight (each ends by its deadline).
  void stop() {
    stop_ = true;
    if (!testing::eventually([&] { return running_.load() == 0; }, options_.timeout + 10s)) {
      ADD_FAILURE() << "UnaryLoad: calls still running long after their deadline";
      std::abort();
    }
  }
  std::vector<Outcome> outcomes() const {
    std::lock_guard lock(mutex_);
    return outcomes_;
  }
  int succeeded() const { return ok_.load(); }
  int failed() const { return failed_.load(); }
  // Succeeded calls that started at or after t.
  int succeeded_since(Clock::time_point t) const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count_if(outcomes_.begin(), outcomes_.end(),
                                          [&](auto& o) { return o.status.ok() && o.start >= t; }));
  }

 private:
  asio::awaitable<void> worker(int w) {
    asio::steady_timer pause(co_await asio::this_coro::executor);
    for (int n = 0; !stop_; ++n) {
      Outcome outcome = co_await echo(channel_, absl::StrCat(prefix_, "-", w, "-", n),
                                      options_.delay_ms, options_.timeout, options_.wait_for_ready);
      const bool ok = outcome.status.ok();
      {
        std::lock_guard lock(mutex_);
        outcomes_.push_back(std::move(outcome));
      }
      if (ok) {
        ok_.fetch_add(1);
      } else {
        failed_.fetch_add(1);
        pause.expires_after(10ms);
        co_await pause.async_wait(asio::use_awaitable);
      }
    }
    running_.fetch_sub(1);
  }

  Channel& channel_;
  std::string prefix_;
  Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<int> ok_{0};
  std::atomic<int> failed_{0};
  mutable std::mutex mutex_;
  std::vector<Outcome> outcomes_;
};

// No call completed later than its deadline (plus scheduling slack).
void expect_deadlines_kept(const std::vector<Outcome>& outcomes) {
  for (const Outcome& o : outcomes) {
    EXPECT_LE(o.end, o.deadline + kDeadlineSlack)
        << o.id << " outlived its deadline by "
        << std::chrono::duration_cast<std::chrono::milliseconds>(o.end - o.deadline).count()
        << " ms: " << o.status;
  }
}

// Black-holes a proxy both ways: toxiproxy's timeout toxic with timeout 0 drops every byte and
// closes nothing, as a dead link or a crashed host does.
void black_hole(Toxiproxy& proxy, const std::string& name) {
  proxy.add_toxic(name, "hole-up", "timeout", "upstream", {{"timeout", 0}});
  proxy.add_toxic(name, "hole-down", "timeout", "downstream", {{"timeout", 0}});
}
void restore(Toxiproxy& proxy, const std::string& name) {
  proxy.remove_toxic(name, "hole-up");
  proxy.remove_toxic(name, "hole-down");
}

long ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// The calls that failed after a link went black (at holed) failed UNAVAILABLE, and each had
// started before settled (the keepalive bound): none started later failed.
void expect_only_unavailable_before(const std::vector<Outcome>& outcomes, Clock::time_point holed,
                                    Clock::time_point settled) {
  for (const Outcome& o : outcomes) {
    if (o.status.ok()) continue;
    EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable) << o.id << ": " << o.status;
    EXPECT_LT(o.start, settled) << o.id << " failed, started " << ms(o.start - holed)
                                << " ms after the black hole: " << o.status;
  }
}

// Promise: a connection that silently stops passing bytes mid-call is detected by the client's
// keepalive within keepalive time (x 1.5, ferry's timer) + keepalive timeout; the call fails
// UNAVAILABLE (the server had received it: it is not sent again); calls made meanwhile end by
// their deadlines, with DEADLINE_EXCEEDED or UNAVAILABLE; once the link is back a new connection
// carries calls; the server's handler of the lost call ends (its connection closes).
TEST(Toxiproxy, BlackHoleMidCallIsDetectedByKeepalive) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backend;
  const int port = toxiproxy.create_proxy("hole", backend.port());
  Channel channel(ipv4_target({port}), fault_channel_options());
  ASSERT_TRUE(run_on(channel, echo(channel, "warm-up", 0, 5s)).status.ok());
  const std::set<std::string> peers_before = backend.ledger().peers();

  auto long_call =
      asio::co_spawn(channel.executor(), echo(channel, "long", 60'000, 20s), asio::use_future);
  ASSERT_TRUE(testing::eventually([&] { return backend.ledger().count("long") == 1; }));
  const Clock::time_point holed = Clock::now();
  black_hole(toxiproxy, "hole");

  UnaryLoad meanwhile(channel, "meanwhile", {.workers = 2, .delay_ms = 0, .timeout = 300ms});
  ASSERT_EQ(long_call.wait_for(kKeepaliveBound + 5s), std::future_status::ready);
  const Outcome lost = long_call.get();
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable) << lost.status;
  EXPECT_LE(lost.end - holed, kKeepaliveBound)
      << "detected after " << ms(lost.end - holed) << " ms";
  // Calls go on failing by their deadlines while the link is black: the next connection
  // attempt meets the hole too.
  const int failed_before = meanwhile.failed();
  ASSERT_TRUE(testing::eventually([&] { return meanwhile.failed() >= failed_before + 4; }));
  meanwhile.stop();
  for (const Outcome& o : meanwhile.outcomes()) {
    EXPECT_TRUE(o.status.code() == absl::StatusCode::kDeadlineExceeded ||
                o.status.code() == absl::StatusCode::kUnavailable)
        << o.id << ": " << o.status;
  }
  expect_deadlines_kept(meanwhile.outcomes());

  restore(toxiproxy, "hole");
  const Clock::time_point restored = Clock::now();
  const Outcome after = run_on(channel, echo(channel, "after", 0, 10s, /*wait_for_ready=*/true));
  EXPECT_TRUE(after.status.ok()) << after.status;
  // At most one more keepalive round (a connection opened into the hole) and the longest
  // back-off.
  EXPECT_LE(after.end - restored, kKeepaliveBound + 500ms + 1000ms);
  EXPECT_EQ(backend.ledger().count("long"), 1);
  std::set<std::string> peers_after = backend.ledger().peers();
  EXPECT_GT(peers_after.size(), peers_before.size()) << "no new connection reached the server";
  EXPECT_TRUE(testing::eventually([&] { return backend.handlers_done(); }))
      << backend.ledger().started << " handlers started, " << backend.ledger().finished
      << " returned";
}

// A server-streaming Expand call's reads: how many arrived, whether each was the next index at
// the right size, and the status. Sets `reached` after signal_after messages.
struct StreamResult {
  int received = 0;
  bool in_order = true;
  absl::Status status;
  Clock::time_point end;
};

asio::awaitable<StreamResult> read_expand(Channel& channel, int count, int size, int delay_ms,
                                          int signal_after, std::atomic<bool>& reached,
                                          std::chrono::milliseconds timeout) {
  ClientContext ctx;
  ctx.set_timeout(timeout);
  EchoRequest request;
  request.set_response_count(count);
  request.set_response_size(size);
  request.set_delay_ms(delay_ms);
  ClientStream stream = co_await channel.open(kExpand, ctx, request);
  StreamResult result;
  EchoResponse response;
  while (co_await stream.read(response)) {
    if (response.index() != result.received ||
        response.payload().size() != static_cast<std::size_t>(size)) {
      result.in_order = false;
    }
    ++result.received;
    if (result.received == signal_after) reached = true;
  }
  result.status = co_await stream.finish();
  result.end = Clock::now();
  co_return result;
}

// Promise: a connection reset (RST) mid-stream ends every call on it with UNAVAILABLE at once
// (not at a keepalive or a deadline): a stream after the messages that arrived, whole and in
// order; the unary calls the server had received are not sent again (no retry policy, and the
// server may have acted on them); the server's handlers of those calls all end; the next call
// goes over a new connection.
TEST(Toxiproxy, ResetMidStreamFailsItsCallsAndOnlyThem) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backend;
  const int port = toxiproxy.create_proxy("reset", backend.port());
  // toxiproxy gives a connection SO_LINGER 0, which makes its close an RST, only when a
  // reset_peer toxic exists as the connection opens: this one never fires (toxicity 0).
  toxiproxy.add_toxic("reset", "linger", "reset_peer", "downstream", {{"timeout", 0}}, 0.0);
  Channel channel(ipv4_target({port}), fault_channel_options());

  std::atomic<bool> streaming{false};
  auto stream =
      asio::co_spawn(channel.executor(), read_expand(channel, 100'000, 64, 2, 20, streaming, 20s),
                     asio::use_future);
  std::vector<std::future<Outcome>> pending;
  for (int i = 0; i < 3; ++i) {
    pending.push_back(asio::co_spawn(channel.executor(),
                                     echo(channel, absl::StrCat("pending-", i), 60'000, 20s),
                                     asio::use_future));
  }
  ASSERT_TRUE(testing::eventually(
      [&] { return streaming.load() && backend.ledger().started.load() == 3; }));
  const std::set<std::string> peers_before = backend.ledger().peers();
  const Clock::time_point reset_at = Clock::now();
  toxiproxy.add_toxic("reset", "reset", "reset_peer", "downstream", {{"timeout", 0}});

  ASSERT_EQ(stream.wait_for(10s), std::future_status::ready);
  const StreamResult streamed = stream.get();
  EXPECT_EQ(streamed.status.code(), absl::StatusCode::kUnavailable) << streamed.status;
  EXPECT_TRUE(streamed.in_order);
  EXPECT_GE(streamed.received, 20);
  EXPECT_LT(streamed.end - reset_at, 2s);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(pending[i].wait_for(10s), std::future_status::ready);
    const Outcome o = pending[i].get();
    EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable) << o.id << ": " << o.status;
    EXPECT_LT(o.end - reset_at, 2s) << o.id;
    EXPECT_EQ(backend.ledger().count(o.id), 1) << o.id;
  }
  toxiproxy.remove_toxic("reset", "reset");
  const Outcome after = run_on(channel, echo(channel, "after", 0, 10s, /*wait_for_ready=*/true));
  EXPECT_TRUE(after.status.ok()) << after.status;
  EXPECT_GT(backend.ledger().peers().size(), peers_before.size());
  EXPECT_TRUE(testing::eventually([&] { return backend.handlers_done(); }))
      << backend.ledger().started << " unary handlers started, " << backend.ledger().finished
      << " returned; " << backend.probe().started << " streaming, " << backend.probe().finished
      << " returned";
}

// fault_server (FERRY_FAULT_SERVER) in a process of its own, so that it can be SIGKILLed; the ids
// of the calls it received go to a log file that outlives it.
class ServerProcess {
 public:
  explicit ServerProcess(std::string log) : log_(std::move(log)) {
    std::remove(log_.c_str());
    start(0);
  }

  // Starts it on port (0: a free one). The port of a killed server may still be held for a
  // moment: a failed start is retried.
  void start(int port) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      process_.emplace(std::vector<std::string>{FERRY_FAULT_SERVER,
                                                "--port=" + std::to_string(port), "--log=" + log_},
                       /*capture_stdout=*/true);
      std::optional<std::string> line = process_->read_line(10s);
      if (line && line->rfind("port ", 0) == 0) {
        port_ = std::stoi(line->substr(5));
        return;
      }
      process_.reset();
      std::this_thread::sleep_for(20ms);  // a pause between attempts to bind, nothing to wait on
    }
    throw std::runtime_error("fault_server did not start");
  }
  void kill() { process_->stop(SIGKILL); }
  int port() const { return port_; }
  // How often each call id reached a handler, over every run of the server.
  std::map<std::string, int> received() const {
    std::map<std::string, int> counts;
    std::ifstream in(log_);
    for (std::string id; std::getline(in, id);) ++counts[id];
    return counts;
  }

 private:
  std::string log_;
  std::optional<ChildProcess> process_;
  int port_ = 0;
};

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(::testing::TempDir(), "ferry_fault_", ::getpid(), "_", info->name(), "_",
                      name);
}

// Promise: when the server process dies (SIGKILL) under load, the calls it had received fail
// UNAVAILABLE and are not sent again (it may have acted on them); calls started while it is down
// wait (wait_for_ready) and succeed once it is back on the same port, within the back-off bound;
// every call ends OK or UNAVAILABLE by its deadline; no call reaches a server twice.
TEST(Process, ServerKilledAndRestartedOnTheSamePort) {
  ServerProcess server(temp_path("calls.log"));
  const int port = server.port();
  Channel channel(ipv4_target({port}), fault_channel_options());
  constexpr int kWorkers = 6;
  UnaryLoad load(channel, "k",
                 {.workers = kWorkers, .delay_ms = 20, .timeout = 10s, .wait_for_ready = true});
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded() >= 30; }));
  server.kill();
  ASSERT_TRUE(testing::eventually([&] { return channel.state() != ConnectivityState::kReady; }));
  const int succeeded_while_up = load.succeeded();
  server.start(port);
  const Clock::time_point restarted = Clock::now();
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded() >= succeeded_while_up + 30; }));
  load.stop();

  const std::vector<Outcome> outcomes = load.outcomes();
  const std::map<std::string, int> received = server.received();
  int unavailable = 0;
  Clock::time_point first_success_after = Clock::time_point::max();
  for (const Outcome& o : outcomes) {
    auto it = received.find(o.id);
    const int times = it == received.end() ? 0 : it->second;
    EXPECT_LE(times, 1) << o.id << " reached the server " << times << " times";
    if (o.status.ok()) {
      EXPECT_EQ(times, 1) << o.id << " succeeded without reaching the server";
      if (o.end > restarted) first_success_after = std::min(first_success_after, o.end);
    } else {
      EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable) << o.id << ": " << o.status;
      ++unavailable;
    }
  }
  // Only the calls in flight when it died may fail; the others waited for it.
  EXPECT_LE(unavailable, kWorkers);
  // The channel was backing off (at most 500 ms) when the server came back.
  EXPECT_LE(first_success_after - restarted, 500ms + 1000ms);
  expect_deadlines_kept(outcomes);
}

// Promise: a server stopped gracefully under load (GOAWAY, then grace for the calls in flight)
// costs no call when another address remains: the calls it received finish there; those it never
// received (sent as its GOAWAY went out, above its last stream id) are retried transparently on
// the other server; no call runs twice.
TEST(Process, GracefulStopUnderLoadLosesNoCallAndRunsNoneTwice) {
  Backend first;
  Backend second;
  Channel channel(ipv4_target({first.port(), second.port()}), fault_channel_options());
  UnaryLoad load(channel, "g", {.workers = 8, .delay_ms = 10, .timeout = 10s});
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded() >= 50; }));
  EXPECT_EQ(second.ledger().started, 0) << "pick_first uses the first address";
  first.stop(2s);
  const int succeeded_before = load.succeeded();
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded() >= succeeded_before + 50; }));
  load.stop();

  for (const Outcome& o : load.outcomes()) {
    EXPECT_TRUE(o.status.ok()) << o.id << ": " << o.status;
    EXPECT_EQ(first.ledger().count(o.id) + second.ledger().count(o.id), 1) << o.id;
  }
  EXPECT_GT(second.ledger().started, 0);
}

// A message of `size` bytes that differs with its index, to tell one message from another.
std::string pattern(int index, std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t j = 0; j < size; ++j) {
    bytes[j] = static_cast<char>((static_cast<std::size_t>(index) * 131 + j * 7) % 251);
  }
  return bytes;
}

asio::awaitable<void> write_patterns(ClientStream& stream, int count, std::size_t size,
                                     absl::Status& status, bool& done) {
  for (int i = 0; i < count && status.ok(); ++i) {
    EchoRequest request;
    request.set_payload(pattern(i, size));
    status = co_await stream.write(request);
  }
  if (status.ok()) co_await stream.writes_done();
  done = true;
}

// A Chat call that writes count messages of size bytes while reading their echoes; DATA_LOSS
// when an echo is not the next message, intact.
asio::awaitable<absl::Status> chat_patterns(Channel& channel, int count, std::size_t size,
                                            std::chrono::milliseconds timeout) {
  ClientContext ctx;
  ctx.set_timeout(timeout);
  ClientStream stream = co_await channel.open(kChat, ctx);
  absl::Status write_status;
  bool written = false;
  asio::co_spawn(channel.executor(), write_patterns(stream, count, size, write_status, written),
                 asio::detached);
  EchoResponse response;
  int received = 0;
  std::string problem;
  while (co_await stream.read(response)) {
    if (problem.empty() &&
        (response.index() != received || response.payload() != pattern(received, size))) {
      problem = absl::StrCat("echo ", received, " is not message ", received, " intact");
    }
    ++received;
  }
  absl::Status status = co_await stream.finish();
  co_await testing::until([&] { return written; }, timeout);
  if (!status.ok()) co_return status;
  if (!write_status.ok()) co_return write_status;
  if (!problem.empty()) co_return absl::DataLossError(problem);
  if (received != count) co_return absl::DataLossError(absl::StrCat(received, " echoes"));
  co_return absl::OkStatus();
}

struct Trickle {
  const char* name;
  const char* type;
  std::map<std::string, long> attributes;
};

// googletest and ctest name the case by this.
void PrintTo(const Trickle& trickle, std::ostream* out) { *out << trickle.name; }

class Trickling : public ::testing::TestWithParam<Trickle> {};

// Promise: over a link that trickles (little bandwidth, bytes in small slices, or 200 ms of
// latency each way), large messages both ways arrive intact and in order, and the call ends OK.
TEST_P(Trickling, LargeMessagesArriveIntactAndInOrder) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backend;
  const int port = toxiproxy.create_proxy("trickle", backend.port());
  for (const char* stream : {"upstream", "downstream"}) {
    toxiproxy.add_toxic("trickle", absl::StrCat(GetParam().name, "-", stream), GetParam().type,
                        stream, GetParam().attributes);
  }
  Channel channel(ipv4_target({port}), fault_channel_options());
  // 8 x 128 KiB each way: above the 64 KiB of a pooled block and of HTTP/2's first window.
  const absl::Status status = run_on(channel, chat_patterns(channel, 8, 128 * 1024, 30s), 40s);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(testing::eventually([&] { return backend.handlers_done(); }));
}

INSTANTIATE_TEST_SUITE_P(
    Toxiproxy, Trickling,
    ::testing::Values(Trickle{"bandwidth", "bandwidth", {{"rate", 2048}}},  // KB/s
                      Trickle{"slicer",
                              "slicer",  // bytes, and microseconds between slices
                              {{"average_size", 64}, {"size_variation", 48}, {"delay", 10}}},
                      Trickle{"latency", "latency", {{"latency", 200}, {"jitter", 20}}}),
    [](const auto& info) { return std::string(info.param.name); });

// The most pooled blocks in use at once (BufferPool: client and server share this process's
// pool) while it lives, sampled every 5 ms.
class PoolPeak {
 public:
  PoolPeak() : base_(BufferPool::instance().stats().blocks_in_use) {
    sampler_ = std::thread([this] {
      while (!stop_) {
        const std::int64_t now = BufferPool::instance().stats().blocks_in_use;
        peak_ = std::max(peak_.load(), now);
        std::this_thread::sleep_for(5ms);  // a sampling period, not a wait for something
      }
    });
  }
  ~PoolPeak() { stop(); }
  void stop() {
    stop_ = true;
    if (sampler_.joinable()) sampler_.join();
  }
  // Above what was in use when it started, in bytes.
  std::int64_t peak_bytes() const {
    return (peak_.load() - base_) * static_cast<std::int64_t>(BufferPool::kBlockSize);
  }

 private:
  const std::int64_t base_;
  std::atomic<std::int64_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread sampler_;
};

// What flow control lets a stream's two ends hold in pooled blocks over a slow link, whatever
// the message count: the receiver's stream window (ConnectionLimits::stream_window, 1 MiB) of
// DATA sent but not yet read, the sender's queue up to its high-water mark (256 KiB) plus the
// message being encoded (128 KiB), and a read block on each side; 3 MiB is that with room to
// spare, and half of what either test below moves (6 MiB).
constexpr std::int64_t kTrickleMemoryBound = 3 << 20;

// Promise: over a link slower than the sender (4 MB/s), a server stream of 6 MiB (48 x 128
// KiB) and a client stream of as much arrive whole, while the pooled memory of both ends
// together stays within what flow control allows (kTrickleMemoryBound), not the stream's size:
// the writer waits for the reader's window instead of queueing.
TEST(Toxiproxy, TrickleHoldsMemoryWithinFlowControlBounds) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backend;
  const int port = toxiproxy.create_proxy("slow", backend.port());
  for (const char* stream : {"upstream", "downstream"}) {
    toxiproxy.add_toxic("slow", absl::StrCat("bandwidth-", stream), "bandwidth", stream,
                        {{"rate", 4096}});
  }
  Channel channel(ipv4_target({port}), fault_channel_options());
  constexpr int kMessages = 48;
  constexpr int kSize = 128 * 1024;
  {
    PoolPeak peak;
    std::atomic<bool> unused{false};
    auto down = asio::co_spawn(channel.executor(),
                               read_expand(channel, kMessages, kSize, 0, -1, unused, 30s),
                               asio::use_future);
    const StreamResult result = down.get();
    peak.stop();
    EXPECT_TRUE(result.status.ok()) << result.status;
    EXPECT_EQ(result.received, kMessages);
    EXPECT_TRUE(result.in_order);
    EXPECT_LE(peak.peak_bytes(), kTrickleMemoryBound)
        << "server stream: peak " << peak.peak_bytes();
    std::printf("server stream of %d MiB over 4 MB/s: pooled memory peaked %.2f MiB above idle\n",
                kMessages * kSize >> 20, peak.peak_bytes() / 1048576.0);
  }
  {
    PoolPeak peak;
    auto up = asio::co_spawn(
        channel.executor(),
        [&]() -> asio::awaitable<absl::Status> {
          ClientContext ctx;
          ctx.set_timeout(30s);
          ClientStream stream = co_await channel.open(kCollect, RpcKind::kClientStreaming, ctx);
          stream.expect_single_response();
          EchoRequest part;
          part.set_payload(std::string(kSize, 'u'));
          for (int i = 0; i < kMessages; ++i) {
            if (absl::Status w = co_await stream.write(part); !w.ok()) co_return w;
          }
          EchoResponse response;
          absl::Status s = co_await stream.finish_with_response(response);
          if (s.ok() && response.received_bytes() != std::int64_t{kMessages} * kSize) {
            s = absl::DataLossError(absl::StrCat("the server got ", response.received_bytes()));
          }
          co_return s;
        },
        asio::use_future);
    const absl::Status status = up.get();
    peak.stop();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_LE(peak.peak_bytes(), kTrickleMemoryBound)
        << "client stream: peak " << peak.peak_bytes();
    std::printf("client stream of %d MiB over 4 MB/s: pooled memory peaked %.2f MiB above idle\n",
                kMessages * kSize >> 20, peak.peak_bytes() / 1048576.0);
  }
  EXPECT_TRUE(testing::eventually([&] { return backend.handlers_done(); }));
}

class CutAfter : public ::testing::TestWithParam<const char*> {};

// Promise: a connection cut after any of the first 200 bytes of a unary call, either way, ends
// the call promptly with UNAVAILABLE (the connection was lost before a complete response: gRPC's
// status for a transport failure), not at its deadline; neither end crashes, and the server's
// handlers all end.
TEST_P(CutAfter, EveryByteOfAUnaryCall) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backend;
  const int port = toxiproxy.create_proxy("cut", backend.port());
  toxiproxy.add_toxic("cut", "limit", "limit_data", GetParam(), {{"bytes", 0}});
  for (int n = 0; n < 200; ++n) {
    toxiproxy.update_toxic("cut", "limit", {{"bytes", n}});
    ASSERT_NE(toxiproxy.request("GET", "/proxies/cut/toxics/limit")
                  .second.find(absl::StrCat("\"bytes\":", n, "}")),
              std::string::npos);
    // A new channel, so that the call opens a new connection (the toxic counts per connection),
    // and a payload that makes the request and the response each longer than 200 bytes.
    Channel channel(ipv4_target({port}), fault_channel_options());
    const std::string id = absl::StrCat("cut-", n, "-", std::string(300, 'p'));
    const Outcome o = run_on(channel, echo(channel, id, 0, 5s));
    EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable)
        << "cut after " << n << " bytes " << GetParam() << ": " << o.status;
    EXPECT_LT(o.end - o.start, 2s) << "cut after " << n << " bytes " << GetParam();
  }
  toxiproxy.remove_toxic("cut", "limit");
  Channel channel(ipv4_target({port}), fault_channel_options());
  EXPECT_TRUE(run_on(channel, echo(channel, "whole", 0, 5s)).status.ok());
  EXPECT_TRUE(testing::eventually([&] { return backend.handlers_done(); }));
}

INSTANTIATE_TEST_SUITE_P(Toxiproxy, CutAfter, ::testing::Values("upstream", "downstream"),
                         [](const auto& info) { return std::string(info.param); });

// Promise (round_robin): when one of three backends' links goes black, only calls on that link
// fail (UNAVAILABLE, within the keepalive bound); calls started after the bound all succeed on
// the other two; once the link is back, calls reach that backend again within a connect attempt
// and the longest back-off.
TEST(Toxiproxy, RoundRobinMovesAwayFromABlackHoleAndBack) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend backends[3];
  std::vector<int> ports;
  for (int i = 0; i < 3; ++i) {
    ports.push_back(toxiproxy.create_proxy(absl::StrCat("rr", i), backends[i].port()));
  }
  ChannelOptions options = fault_channel_options();
  options.load_balancing = LoadBalancingPolicy::kRoundRobin;
  Channel channel(ipv4_target(ports), options);
  UnaryLoad load(channel, "rr", {.workers = 6, .delay_ms = 20, .timeout = 5s});
  ASSERT_TRUE(testing::eventually([&] {
    return std::all_of(std::begin(backends), std::end(backends),
                       [](Backend& b) { return b.ledger().started.load() >= 10; });
  }));

  black_hole(toxiproxy, "rr1");
  const Clock::time_point holed = Clock::now();
  const Clock::time_point settled = holed + kKeepaliveBound;
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded_since(settled) >= 60; }, 20s));
  const int reached_before = backends[1].ledger().started.load();
  restore(toxiproxy, "rr1");
  const Clock::time_point restored = Clock::now();
  EXPECT_TRUE(testing::eventually(
      [&] { return backends[1].ledger().started.load() > reached_before; }, 1000ms + 500ms + 2s))
      << "calls do not come back to the restored backend";
  const Clock::duration back_after = Clock::now() - restored;
  load.stop();

  expect_only_unavailable_before(load.outcomes(), holed, settled);
  expect_deadlines_kept(load.outcomes());
  RecordProperty("back_after_ms", static_cast<int>(ms(back_after)));
}

// Promise (pick_first): when the link to the address in use goes black, the channel fails over
// to the next address within the keepalive bound; calls started after it all succeed there, and
// the calls that fail meanwhile fail UNAVAILABLE.
TEST(Toxiproxy, PickFirstFailsOverFromABlackHole) {
  SKIP_WITHOUT_TOXIPROXY();
  Toxiproxy toxiproxy;
  Backend first;
  Backend second;
  const int first_port = toxiproxy.create_proxy("pf0", first.port());
  const int second_port = toxiproxy.create_proxy("pf1", second.port());
  Channel channel(ipv4_target({first_port, second_port}), fault_channel_options());
  UnaryLoad load(channel, "pf", {.workers = 4, .delay_ms = 20, .timeout = 5s});
  ASSERT_TRUE(testing::eventually([&] { return first.ledger().started.load() >= 20; }));
  EXPECT_EQ(second.ledger().started, 0);

  black_hole(toxiproxy, "pf0");
  const Clock::time_point holed = Clock::now();
  const Clock::time_point settled = holed + kKeepaliveBound;
  ASSERT_TRUE(testing::eventually([&] { return load.succeeded_since(settled) >= 40; }, 20s));
  load.stop();
  EXPECT_GE(second.ledger().started, 40);
  expect_only_unavailable_before(load.outcomes(), holed, settled);
  expect_deadlines_kept(load.outcomes());
}

// A resolver whose answer the test replaces (a DNS name whose records change).
class SwitchableResolver : public Resolver {
 public:
  explicit SwitchableResolver(std::vector<Address> addresses) : addresses_(std::move(addresses)) {}
  void set(std::vector<Address> addresses) {
    std::lock_guard lock(mutex_);
    addresses_ = std::move(addresses);
  }
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    std::vector<Address> answer;
    {
      std::lock_guard lock(mutex_);
      answer = addresses_;
    }
    co_return answer;
  }

 private:
  std::mutex mutex_;
  std::vector<Address> addresses_;
};

Address loopback(int port) {
  Address address;
  address.tcp =
      asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), static_cast<unsigned short>(port));
  return address;
}

// Promise: when the resolver's answer replaces every address, new calls go to the new servers
// within the re-resolution period, none to the old ones after that, and the calls in flight on
// the old servers finish OK (their connections are let go, not cut under them).
TEST(Resolved, NewAddressesTakeNewCallsAndCallsInFlightFinish) {
  Backend old_backends[2];
  Backend new_backends[2];
  auto resolver = std::make_shared<SwitchableResolver>(
      std::vector<Address>{loopback(old_backends[0].port()), loopback(old_backends[1].port())});
  ChannelOptions options = fault_channel_options();
  options.load_balancing = LoadBalancingPolicy::kRoundRobin;
  options.resolver = resolver;
  options.resolve_period = 200ms;
  Channel channel("fault-test.invalid:50051", options);
  auto calls_to = [](Backend(&backends)[2]) {
    return backends[0].ledger().started.load() + backends[1].ledger().started.load();
  };

  std::vector<std::future<Outcome>> in_flight;
  for (int i = 0; i < 4; ++i) {
    in_flight.push_back(asio::co_spawn(
        channel.executor(), echo(channel, absl::StrCat("long-", i), 1500, 10s), asio::use_future));
  }
  ASSERT_TRUE(testing::eventually([&] { return calls_to(old_backends) == 4; }));
  resolver->set({loopback(new_backends[0].port()), loopback(new_backends[1].port())});
  const Clock::time_point switched = Clock::now();

  // Calls until one reaches a new server; then every call does.
  int n = 0;
  while (calls_to(new_backends) == 0 && Clock::now() - switched < 5s) {
    EXPECT_TRUE(run_on(channel, echo(channel, absl::StrCat("probe-", n++), 0, 5s)).status.ok());
  }
  EXPECT_LE(Clock::now() - switched, options.resolve_period + 1000ms)
      << "the new addresses took " << ms(Clock::now() - switched) << " ms to get a call";
  const int old_calls = calls_to(old_backends);
  // Round robin picks among the connections that are ready; under load the second new server's
  // may still be connecting, so call until both have served (bounded), then spread 20 calls.
  const Clock::time_point first_new = Clock::now();
  while ((new_backends[0].ledger().started == 0 || new_backends[1].ledger().started == 0) &&
         Clock::now() - first_new < 5s) {
    EXPECT_TRUE(run_on(channel, echo(channel, absl::StrCat("warm-", n++), 0, 5s)).status.ok());
  }
  ASSERT_GT(new_backends[0].ledger().started, 0) << "the first new server never got a call";
  ASSERT_GT(new_backends[1].ledger().started, 0) << "the second new server never got a call";
  const int before[2] = {new_backends[0].ledger().started.load(),
                         new_backends[1].ledger().started.load()};
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(run_on(channel, echo(channel, absl::StrCat("new-", i), 0, 5s)).status.ok());
  }
  EXPECT_EQ(calls_to(old_backends), old_calls) << "calls still go to the old addresses";
  EXPECT_GE(new_backends[0].ledger().started - before[0], 5);
  EXPECT_GE(new_backends[1].ledger().started - before[1], 5);
  for (auto& call : in_flight) {
    ASSERT_EQ(call.wait_for(10s), std::future_status::ready);
    const Outcome o = call.get();
    EXPECT_TRUE(o.status.ok()) << o.id << ": " << o.status;
  }
}

}  // namespace
}  // namespace ferry

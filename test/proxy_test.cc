// ferry through a real HTTP/2 reverse proxy: nghttpx (Debian's nghttp2-proxy) in cleartext
// HTTP/2 on both sides, in front of in-process ferry servers on 127.0.0.1. gRPC passes through
// (unary, server streaming, error statuses and trailing metadata intact), and a ferry channel
// with round_robin over two nghttpx front-ends spreads its calls over both. Skipped when
// /usr/sbin/nghttpx is not installed.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"

extern char** environ;

namespace ferry::proxy_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using namespace testing::echo_methods;

constexpr const char* kNghttpx = "/usr/sbin/nghttpx";

int free_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

bool accepts(int port) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  asio::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  return !ec;
}

// One nghttpx process: h2c front-end on 127.0.0.1:port, h2c to each backend port.
class Nghttpx {
 public:
  explicit Nghttpx(const std::vector<int>& backends) : port_(free_port()) {
    std::vector<std::string> args = {kNghttpx,
                                     "--conf=/dev/null",
                                     "--workers=1",
                                     "-f127.0.0.1," + std::to_string(port_) + ";no-tls",
                                     "--errorlog-file=/dev/null",
                                     "--accesslog-file=/dev/null",
                                     "--log-level=ERROR"};
    for (int b : backends) args.push_back("-b127.0.0.1," + std::to_string(b) + ";;proto=h2");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, kNghttpx, nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 100 && pid_ > 0 && !accepts(port_); ++i) std::this_thread::sleep_for(50ms);
  }
  ~Nghttpx() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  bool up() const { return pid_ > 0 && accepts(port_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  pid_t pid_ = -1;
};

struct Backend {
  Backend() : service(&probe) {
    ServerOptions options;
    options.num_threads = 1;
    server = std::make_unique<Server>(options);
    server->add_service(service);
    port = server->start("127.0.0.1", 0).value();
  }
  ~Backend() { server->shutdown(100ms); }
  testing::EchoProbe probe;
  testing::EchoService service;
  std::unique_ptr<Server> server;
  int port = 0;
};

class Proxy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kNghttpx, X_OK) != 0) GTEST_SKIP() << kNghttpx << " not installed (nghttp2-proxy)";
  }
};

TEST_F(Proxy, GrpcPassesThroughNghttpx) {
  Backend a, b;
  Nghttpx proxy({a.port, b.port});
  ASSERT_TRUE(proxy.up());
  Channel channel(proxy.address());
  EchoRequest request;
  request.set_payload("through the proxy");
  EchoResponse response;
  for (int i = 0; i < 100; ++i) {
    ClientContext ctx;
    ctx.set_timeout(5s);
    ASSERT_TRUE(channel.call_blocking(kEcho, ctx, request, response).ok());
    ASSERT_EQ(response.payload(), "through the proxy");
  }
  EXPECT_EQ(a.probe.started.load() + b.probe.started.load(), 100);

  // An error status and its message, and trailing metadata, come back through the trailers.
  EchoRequest failing;
  failing.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
  failing.set_status_message("no such thing");
  ClientContext ctx;
  ctx.set_timeout(5s);
  ctx.add_metadata("trailing-note", "kept");
  absl::Status s = channel.call_blocking(kEcho, ctx, failing, response);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(s.message(), "no such thing");

  ClientContext ok_ctx;
  ok_ctx.set_timeout(5s);
  ok_ctx.add_metadata("trailing-note", "kept");
  ASSERT_TRUE(channel.call_blocking(kEcho, ok_ctx, request, response).ok());
  bool found = false;
  for (const auto& [k, v] : ok_ctx.trailing_metadata())
    found |= k == "trailing-note" && v == "kept";
  EXPECT_TRUE(found) << "trailing metadata lost on the way";

  // Server streaming.
  EchoRequest expand;
  expand.set_response_count(20);
  expand.set_response_size(1000);
  ClientContext stream_ctx;
  stream_ctx.set_timeout(5s);
  BlockingClientStream stream = channel.open_blocking(kExpand, stream_ctx, expand);
  int n = 0;
  while (stream.read(response)) {
    EXPECT_EQ(response.payload().size(), 1000u);
    ++n;
  }
  EXPECT_TRUE(stream.finish().ok());
  EXPECT_EQ(n, 20);
}

TEST_F(Proxy, RoundRobinOverTwoNghttpxFrontEnds) {
  Backend a, b;
  Nghttpx front_a({a.port});
  Nghttpx front_b({b.port});
  ASSERT_TRUE(front_a.up() && front_b.up());
  ChannelOptions options;
  options.load_balancing = LoadBalancingPolicy::kRoundRobin;
  Channel channel("ipv4:" + front_a.address() + "," + front_b.address(), options);
  EchoRequest request;
  request.set_payload("x");
  EchoResponse response;
  // Once both front-ends are connected (each has passed a call on), calls alternate.
  for (auto until = std::chrono::steady_clock::now() + 10s;
       (a.probe.started.load() == 0 || b.probe.started.load() == 0) &&
       std::chrono::steady_clock::now() < until;) {
    ClientContext warm;
    warm.set_timeout(5s);
    ASSERT_TRUE(channel.call_blocking(kEcho, warm, request, response).ok());
  }
  ASSERT_TRUE(a.probe.started.load() > 0 && b.probe.started.load() > 0);
  const int a0 = a.probe.started.load(), b0 = b.probe.started.load();
  for (int i = 0; i < 200; ++i) {
    ClientContext ctx;
    ctx.set_timeout(5s);
    ASSERT_TRUE(channel.call_blocking(kEcho, ctx, request, response).ok());
  }
  EXPECT_EQ(a.probe.started.load() - a0, 100);
  EXPECT_EQ(b.probe.started.load() - b0, 100);
}

}  // namespace
}  // namespace ferry::proxy_test

// ferry's client over HTTP/1.1 (ChannelOptions::http_version = kHttp1): against a bare socket
// that reads the request's bytes and answers canned ones (the wire form: request line, host,
// content-length for a unary call, chunked for a stream; keep-alive, and a new connection once
// the server closes one), and against ferry's own server (which serves HTTP/1.1 on the same port)
// with every call kind the protocols allow over HTTP/1.1 and many calls at once. connectrpc's
// conformance suite runs the same client against connect-go's HTTP/1.1 server
// (conformance_client).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/read_until.hpp"
#include "asio/use_future.hpp"
#include "asio/write.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::http1_client_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
namespace echo_methods = testing::echo_methods;

ChannelOptions http1(ChannelProtocol protocol) {
  ChannelOptions options;
  options.protocol = protocol;
  options.http_version = ChannelHttpVersion::kHttp1;
  return options;
}

// A server of one thread that accepts connections one after another and answers each request
// on them with `answer` (a whole HTTP/1.1 response), recording every request's head and body;
// after `close_after` requests on a connection it closes it (its last answer says
// `connection: close`). From request `drop_from` on a
// connection (when set), it reads the request whole, records it and closes without an answer:
// a server that crashed or was stopped after running the call.
class CannedServer {
 public:
  CannedServer(std::string answer, int close_after, int drop_from = -1)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}),
        answer_(std::move(answer)),
        close_after_(close_after),
        drop_from_(drop_from) {
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    // A blocking accept() does not return when another thread closes the acceptor: a
    // connection wakes it.
    asio::io_context io;
    asio::ip::tcp::socket wake(io);
    asio::error_code ignored;
    wake.connect(acceptor_.local_endpoint(), ignored);
    wake.close(ignored);
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return connections_.load(); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      asio::ip::tcp::socket socket(io_);
      asio::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec) return;
      connections_.fetch_add(1);
      for (int i = 0; i < close_after_; ++i) {
        std::string buffer;
        const std::size_t head =
            asio::read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n", ec);
        if (ec) break;
        std::string request = buffer.substr(0, head);
        std::string body = buffer.substr(head);
        const std::size_t length_at = request.find("content-length: ");
        if (length_at != std::string::npos) {
          const std::size_t length = std::stoul(request.substr(length_at + 16));
          if (body.size() < length) {
            std::string rest(length - body.size(), '\0');
            asio::read(socket, asio::buffer(rest), ec);
            body += rest;
          }
        }
        {
          std::lock_guard lock(mutex_);
          requests_.push_back(request + body);
        }
        if (i == drop_from_) break;
        // The last answer on the connection says so (RFC 9112 §9.6), as a server that closes
        // after it must: without it the client may send its next call on the connection before
        // the close reaches it, and a call the server may have run is not sent twice (issue #40).
        std::string answer = answer_;
        if (i == close_after_ - 1) {
          answer.insert(answer.find("\r\n") + 2, "connection: close\r\n");
        }
        asio::write(socket, asio::buffer(answer), ec);
        if (ec) break;
      }
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::string answer_;
  int close_after_;
  int drop_from_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

std::string connect_unary_answer(const std::string& payload) {
  EchoResponse response;
  response.set_payload(payload);
  const std::string body = response.SerializeAsString();
  return "HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ntrailer-t: v\r\n"
         "content-length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Promise: a unary Connect call goes as one HTTP/1.1 request (request line, host, the body with
// its content-length), and its connection is kept for the next call.
TEST(Http1Client, UnaryIsOneRequestWithAContentLengthOnAKeptConnection) {
  CannedServer server(connect_unary_answer("canned"), /*close_after=*/100);
  Channel channel("127.0.0.1:" + std::to_string(server.port()), http1(ChannelProtocol::kConnect));
  for (int i = 0; i < 3; ++i) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    EchoRequest request;
    request.set_payload("hello " + std::to_string(i));
    EchoResponse response;
    const absl::Status s = channel.call_blocking(echo_methods::kEcho, ctx, request, response);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(response.payload(), "canned");
    EXPECT_EQ(ctx.trailing_metadata().get("t"), "v");
  }
  const std::vector<std::string> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EchoRequest first;
  first.set_payload("hello 0");
  const std::string body = first.SerializeAsString();
  const std::string& r = requests[0];
  EXPECT_TRUE(absl::StartsWith(r, "POST /ferry.testing.Echo/Echo HTTP/1.1\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "\r\nhost: 127.0.0.1:")) << r;
  EXPECT_TRUE(absl::StrContains(r, "\r\ncontent-type: application/proto\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "\r\ncontent-length: " + std::to_string(body.size()) + "\r\n"))
      << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n" + body)) << r;
  EXPECT_EQ(server.connections(), 1);  // kept alive
}

// Promise: when the server closes the connection after a response, the next call dials a new
// one and succeeds.
TEST(Http1Client, AClosedConnectionIsReplaced) {
  CannedServer server(connect_unary_answer("again"), /*close_after=*/1);
  Channel channel("127.0.0.1:" + std::to_string(server.port()), http1(ChannelProtocol::kConnect));
  for (int i = 0; i < 3; ++i) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    EchoResponse response;
    const absl::Status s = channel.call_blocking(echo_methods::kEcho, ctx, EchoRequest(), response);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
    EXPECT_EQ(response.payload(), "again");
  }
  EXPECT_EQ(server.connections(), 3);
}

// Issue #40, at most once: a call on a kept connection that the server reads whole and then
// closes without answering (it may have run it) is not sent again: it fails UNAVAILABLE, and the
// server saw it once. (Before: REFUSED_STREAM, retried on a new connection, OK, seen twice.)
TEST(Http1Client, ACallTheServerMayHaveRunIsNotSentTwice) {
  CannedServer server(connect_unary_answer("first"), /*close_after=*/100, /*drop_from=*/1);
  Channel channel("127.0.0.1:" + std::to_string(server.port()), http1(ChannelProtocol::kConnect));
  for (const char* payload : {"one", "two"}) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    EchoRequest request;
    request.set_payload(payload);
    EchoResponse response;
    const absl::Status s = channel.call_blocking(echo_methods::kEcho, ctx, request, response);
    if (std::string(payload) == "one") {
      ASSERT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    }
  }
  const std::vector<std::string> requests = server.requests();
  int twos = 0;
  for (const std::string& r : requests) twos += absl::StrContains(r, "two") ? 1 : 0;
  EXPECT_EQ(twos, 1) << "the dropped call reached the server once";
  EXPECT_EQ(requests.size(), 2u);
  EXPECT_EQ(server.connections(), 1);
}

// Issue #40: the same drop for a Connect GET (idempotent: the method has no side effects) is
// retried transparently, on a new connection, and succeeds.
TEST(Http1Client, AnIdempotentGetIsSentAgain) {
  CannedServer server(connect_unary_answer("got"), /*close_after=*/100, /*drop_from=*/1);
  Channel channel("127.0.0.1:" + std::to_string(server.port()), http1(ChannelProtocol::kConnect));
  for (int i = 0; i < 2; ++i) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    ctx.set_http_get(true);
    EchoResponse response;
    const absl::Status s = channel.call_blocking(echo_methods::kEcho, ctx, EchoRequest(), response);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
    EXPECT_EQ(response.payload(), "got");
  }
  const std::vector<std::string> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u) << "the second GET twice";
  EXPECT_TRUE(absl::StartsWith(requests[1], "GET ")) << requests[1];
  EXPECT_EQ(server.connections(), 2);
}

// Issue #40: a POST whose context says it is idempotent (the generated stub of a method with
// idempotency_level IDEMPOTENT or NO_SIDE_EFFECTS sets it) is sent again after the same drop,
// on a new connection, and succeeds; the generated Echo stub marks its calls so (echo.proto's
// Echo has no side effects).
TEST(Http1Client, AnIdempotentPostIsSentAgain) {
  CannedServer server(connect_unary_answer("got"), /*close_after=*/100, /*drop_from=*/1);
  Channel channel("127.0.0.1:" + std::to_string(server.port()), http1(ChannelProtocol::kConnect));
  testing::Echo::BlockingStub stub(channel);
  for (int i = 0; i < 2; ++i) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    EchoRequest request;
    request.set_payload("post " + std::to_string(i));
    EchoResponse response;
    const absl::Status s = stub.Echo(ctx, request, response);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
    EXPECT_TRUE(ctx.idempotent());
    EXPECT_EQ(response.payload(), "got");
  }
  const std::vector<std::string> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u) << "the second POST twice";
  EXPECT_TRUE(absl::StartsWith(requests[1], "POST ")) << requests[1];
  EXPECT_TRUE(absl::StrContains(requests[2], "post 1")) << requests[2];
  EXPECT_EQ(server.connections(), 2);
}

// Promise: with max_http1_connections = 1, calls made at once share the one connection, one
// after another. (The server here serves one connection at a time and keeps it: calls that
// dialed a second one would wait past their deadline.)
TEST(Http1Client, ConnectionLimitQueuesCalls) {
  CannedServer server(connect_unary_answer("queued"), /*close_after=*/100);
  ChannelOptions options = http1(ChannelProtocol::kConnect);
  options.max_http1_connections = 1;
  Channel channel("127.0.0.1:" + std::to_string(server.port()), options);
  constexpr int kCalls = 4;
  // Each call's request, context and response outlive it.
  std::vector<ClientContext> contexts(kCalls);
  std::vector<EchoRequest> requests(kCalls);
  std::vector<EchoResponse> responses(kCalls);
  std::vector<std::future<absl::Status>> calls;
  for (int i = 0; i < kCalls; ++i) {
    contexts[i].set_timeout(std::chrono::seconds(5));
    calls.push_back(channel.call(echo_methods::kEcho, contexts[i], requests[i], responses[i],
                                 asio::use_future));
  }
  for (int i = 0; i < kCalls; ++i) {
    const absl::Status s = calls[i].get();
    EXPECT_TRUE(s.ok()) << i << ": " << s;
    EXPECT_EQ(responses[i].payload(), "queued");
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests().size(), static_cast<std::size_t>(kCalls));
}

// Promise: gRPC itself cannot go over HTTP/1.1: UNIMPLEMENTED, saying what can.
TEST(Http1Client, GrpcNeedsHttp2) {
  Loopback loop({}, http1(ChannelProtocol::kGrpc));
  EchoResponse response;
  const absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    co_return co_await loop.stub().Echo(ctx, EchoRequest(), response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

class Http1Protocols : public ::testing::TestWithParam<ChannelProtocol> {};

INSTANTIATE_TEST_SUITE_P(Protocols, Http1Protocols,
                         ::testing::Values(ChannelProtocol::kConnect, ChannelProtocol::kGrpcWeb),
                         [](const auto& info) {
                           return info.param == ChannelProtocol::kConnect ? "connect" : "grpc_web";
                         });

// Promise: against ferry's own server over HTTP/1.1, every call kind HTTP/1.1 allows works:
// unary, server streaming, client streaming and bidi half-duplex (chunked request bodies), with
// metadata both ways and errors with their status.
TEST_P(Http1Protocols, EveryCallKindHalfDuplex) {
  Loopback loop({}, http1(GetParam()));
  ClientContext unary_ctx;
  unary_ctx.add_metadata("initial-a", "1");
  unary_ctx.add_metadata("trailing-b", "2");
  EchoRequest hello;
  hello.set_payload("over HTTP/1.1");
  EchoResponse echoed;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(unary_ctx, hello, echoed);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(echoed.payload(), "over HTTP/1.1");
  EXPECT_EQ(unary_ctx.initial_metadata().get("initial-a"), "1");
  EXPECT_EQ(unary_ctx.trailing_metadata().get("trailing-b"), "2");

  EchoRequest expand;
  expand.set_response_count(5);
  expand.set_response_size(70'000);  // more than a read block each
  int expanded = 0;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream = co_await loop.channel().open(echo_methods::kExpand, ctx, expand);
    EchoResponse r;
    while (co_await stream.read(r)) expanded += r.payload().size() == 70'000;
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(expanded, 5);

  EchoResponse collected;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream =
        co_await loop.channel().open(echo_methods::kCollect, RpcKind::kClientStreaming, ctx);
    stream.expect_single_response();
    EchoRequest part;
    part.set_payload(std::string(100'000, 'p'));
    for (int i = 0; i < 4; ++i) {
      if (absl::Status w = co_await stream.write(part); !w.ok()) co_return w;
    }
    co_return co_await stream.finish_with_response(collected);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(collected.received_messages(), 4);
  EXPECT_EQ(collected.received_bytes(), 400'000);

  int chatted = 0;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream =
        co_await loop.channel().open(echo_methods::kChat, RpcKind::kBidiStreaming, ctx);
    for (int i = 0; i < 3; ++i) {
      EchoRequest said;
      said.set_payload("turn " + std::to_string(i));
      if (absl::Status w = co_await stream.write(said); !w.ok()) co_return w;
    }
    co_await stream.writes_done();
    EchoResponse heard;
    while (co_await stream.read(heard)) chatted += absl::StartsWith(heard.payload(), "turn ");
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(chatted, 3);

  EchoRequest failing;
  failing.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
  failing.set_status_message("not here");
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    co_return co_await loop.stub().Echo(ctx, failing, echoed);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(s.message(), "not here");
}

// Promise: many calls at once each get a connection of their own (HTTP/1.1 carries one exchange
// at a time), and all complete.
TEST_P(Http1Protocols, ManyCallsAtOnce) {
  Loopback loop({}, http1(GetParam()));
  constexpr int kCalls = 40;
  int ok = 0;
  loop.run([&]() -> asio::awaitable<absl::Status> {
    std::atomic<int> done{0};
    auto executor = co_await asio::this_coro::executor;
    for (int i = 0; i < kCalls; ++i) {
      asio::co_spawn(
          executor,
          [&, i]() -> asio::awaitable<void> {
            ClientContext ctx;
            EchoRequest request;
            request.set_payload("call " + std::to_string(i));
            request.set_delay_ms(20);  // so that they overlap
            EchoResponse response;
            const absl::Status s = co_await loop.stub().Echo(ctx, request, response);
            if (s.ok() && response.payload() == request.payload()) ++ok;
            done.fetch_add(1);
          },
          asio::detached);
    }
    co_await testing::until([&] { return done.load() == kCalls; });
    co_return absl::OkStatus();
  });
  EXPECT_EQ(ok, kCalls);
}

}  // namespace
}  // namespace ferry::http1_client_test

// protoc-gen-ferry's output, used as users use it: a service implemented on the generated base,
// called through the generated awaitable and blocking stubs, over loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/io_context.hpp"
#include "asio/use_future.hpp"
#include "codegen/codegen_test.ferry.h"
#include "codegen/messages_only.ferry.h"
#include "codegen/no_package.ferry.h"
#include "ferry/server.h"

namespace ferry::codegen_test {
namespace {

using namespace std::chrono_literals;
using codegen_test::v1::Kinds;
using codegen_test::v1::Outer;
using codegen_test::v1::Total;
using codegen_test::v1::Unimplemented;
using Inner = codegen_test::v1::Outer_Inner;
using Empty = google::protobuf::Empty;

class KindsImpl final : public Kinds::Service {
 public:
  asio::awaitable<absl::Status> Unary(ServerContext&, const Inner& request,
                                      Outer& response) override {
    response.mutable_inner()->set_text("unary:" + request.text());
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> ClientStream(ServerContext&, ServerReader<Inner>& reader,
                                             Total& response) override {
    Inner inner;
    while (co_await reader.read(inner)) {
      response.set_messages(response.messages() + 1);
      response.mutable_joined()->append(inner.text());
    }
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> ServerStream(ServerContext&, const Inner& request,
                                             ServerWriter<Inner>& writer) override {
    Inner out;
    for (int i = 0; i < request.count(); ++i) {
      out.set_text(request.text() + std::to_string(i));
      if (absl::Status s = co_await writer.write(out); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> Bidi(ServerContext&,
                                     ServerReaderWriter<Inner, Inner>& stream) override {
    Inner inner;
    while (co_await stream.read(inner)) {
      inner.set_text("re:" + inner.text());
      if (absl::Status s = co_await stream.write(inner); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> Ping(ServerContext& ctx, const Empty&, Empty&) override {
    if (ctx.client_metadata().get("fail").has_value()) {
      co_return absl::FailedPreconditionError("asked to fail");
    }
    co_return absl::OkStatus();
  }
};

class ShoutImpl final : public Shout::Service {
 public:
  asio::awaitable<absl::Status> Say(ServerContext&, const Word& request, Word& response) override {
    response.set_text(request.text() + "!");
    co_return absl::OkStatus();
  }
};

TEST(Codegen, NamesAndKindsMatchTheProto) {
  EXPECT_EQ(Kinds::kServiceName, "ferry.codegen_test.v1.Kinds");
  EXPECT_EQ(Kinds::kUnaryPath, "/ferry.codegen_test.v1.Kinds/Unary");
  EXPECT_EQ(Kinds::kClientStreamPath, "/ferry.codegen_test.v1.Kinds/ClientStream");
  EXPECT_EQ(Shout::kSayPath, "/Shout/Say");
  KindsImpl kinds;
  EXPECT_EQ(kinds.full_name(), "ferry.codegen_test.v1.Kinds");
  std::vector<std::pair<std::string, RpcKind>> methods;
  for (const Method& m : kinds.methods()) methods.emplace_back(m.name, m.kind);
  const std::vector<std::pair<std::string, RpcKind>> want = {
      {"Unary", RpcKind::kUnary},
      {"ClientStream", RpcKind::kClientStreaming},
      {"ServerStream", RpcKind::kServerStreaming},
      {"Bidi", RpcKind::kBidiStreaming},
      {"Ping", RpcKind::kUnary}};
  EXPECT_EQ(methods, want);
  // A file without services still compiles (and declares nothing of ferry's).
  codegen_test::v1::Note note;
  note.set_text("messages only");
  EXPECT_EQ(note.text(), "messages only");
}

// Serves the generated services (and Echo) on loopback.
struct Served {
  KindsImpl kinds;
  Unimplemented::Service unimplemented;
  ShoutImpl shout;
  Server server{[] {
    ServerOptions o;
    o.num_threads = 1;
    return o;
  }()};
  int port = 0;

  Served() {
    server.add_service(kinds);
    server.add_service(unimplemented);
    server.add_service(shout);
    port = server.start("127.0.0.1", 0).value();
  }
  ~Served() { server.shutdown(1s); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

// A channel on the test thread's io_context. On the way out the loop runs on until the
// channel's close has finished (else the io_context would destroy its last handlers unrun and
// leak the connection).
struct ClientLoop {
  asio::io_context io{1};
  std::optional<Channel> channel;

  explicit ClientLoop(const std::string& target) { channel.emplace(io, target); }
  ~ClientLoop() {
    channel.reset();
    io.restart();
    io.run_for(2s);
  }
};

// Runs make() to completion on io.
template <class Make>
auto run(asio::io_context& io, Make make) {
  auto future = asio::co_spawn(io, make(), asio::use_future);
  io.restart();
  while (future.wait_for(0s) != std::future_status::ready) io.run_one_for(50ms);
  return future.get();
}

TEST(Codegen, AwaitableStubCallsEveryKind) {
  Served served;
  ClientLoop loop(served.target());
  asio::io_context& io = loop.io;
  Channel& channel = *loop.channel;
  Kinds::Stub stub(channel);

  Outer unary_reply = run(io, [&]() -> asio::awaitable<Outer> {
    ClientContext ctx;
    Inner request;
    request.set_text("hi");
    Outer reply;
    absl::Status s = co_await stub.Unary(ctx, request, reply);
    EXPECT_TRUE(s.ok()) << s;
    co_return reply;
  });
  EXPECT_EQ(unary_reply.inner().text(), "unary:hi");

  Total total = run(io, [&]() -> asio::awaitable<Total> {
    ClientContext ctx;
    ClientWriter<Inner> writer = co_await stub.ClientStream(ctx);
    Inner inner;
    for (const char* word : {"a", "b", "c"}) {
      inner.set_text(word);
      EXPECT_TRUE((co_await writer.write(inner)).ok());
    }
    Total reply;
    absl::Status s = co_await writer.finish(reply);
    EXPECT_TRUE(s.ok()) << s;
    co_return reply;
  });
  EXPECT_EQ(total.messages(), 3);
  EXPECT_EQ(total.joined(), "abc");

  std::vector<std::string> streamed = run(io, [&]() -> asio::awaitable<std::vector<std::string>> {
    ClientContext ctx;
    Inner request;
    request.set_text("n");
    request.set_count(4);
    ClientReader<Inner> reader = co_await stub.ServerStream(ctx, request);
    std::vector<std::string> got;
    Inner inner;
    while (co_await reader.read(inner)) got.push_back(inner.text());
    absl::Status s = co_await reader.finish();
    EXPECT_TRUE(s.ok()) << s;
    co_return got;
  });
  EXPECT_EQ(streamed, (std::vector<std::string>{"n0", "n1", "n2", "n3"}));

  std::vector<std::string> chat = run(io, [&]() -> asio::awaitable<std::vector<std::string>> {
    ClientContext ctx;
    ClientReaderWriter<Inner, Inner> stream = co_await stub.Bidi(ctx);
    std::vector<std::string> got;
    Inner inner;
    for (const char* word : {"x", "y"}) {
      inner.set_text(word);
      EXPECT_TRUE((co_await stream.write(inner)).ok());
      if (co_await stream.read(inner)) got.push_back(inner.text());
    }
    co_await stream.writes_done();
    EXPECT_FALSE(co_await stream.read(inner));
    absl::Status s = co_await stream.finish();
    EXPECT_TRUE(s.ok()) << s;
    co_return got;
  });
  EXPECT_EQ(chat, (std::vector<std::string>{"re:x", "re:y"}));

  absl::Status failed = run(io, [&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ctx.add_metadata("fail", "1");
    Empty request, reply;
    co_return co_await stub.Ping(ctx, request, reply);
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.message(), "asked to fail");

  std::string shouted = run(io, [&]() -> asio::awaitable<std::string> {
    Shout::Stub shout(channel);
    ClientContext ctx;
    Word request, reply;
    request.set_text("hey");
    absl::Status s = co_await shout.Say(ctx, request, reply);
    EXPECT_TRUE(s.ok()) << s;
    co_return reply.text();
  });
  EXPECT_EQ(shouted, "hey!");
}

TEST(Codegen, UnimplementedMethodsAnswerUnimplemented) {
  Served served;
  ClientLoop loop(served.target());
  asio::io_context& io = loop.io;
  Unimplemented::Stub stub(*loop.channel);
  std::vector<absl::Status> statuses = run(io, [&]() -> asio::awaitable<std::vector<absl::Status>> {
    std::vector<absl::Status> out;
    Empty request, reply;
    {
      ClientContext ctx;
      out.push_back(co_await stub.Unary(ctx, request, reply));
    }
    {
      ClientContext ctx;
      ClientWriter<Empty> writer = co_await stub.ClientStream(ctx);
      out.push_back(co_await writer.finish(reply));
    }
    {
      ClientContext ctx;
      ClientReader<Empty> reader = co_await stub.ServerStream(ctx, request);
      EXPECT_FALSE(co_await reader.read(reply));
      out.push_back(co_await reader.finish());
    }
    {
      ClientContext ctx;
      ClientReaderWriter<Empty, Empty> stream = co_await stub.Bidi(ctx);
      co_await stream.writes_done();
      EXPECT_FALSE(co_await stream.read(reply));
      out.push_back(co_await stream.finish());
    }
    co_return out;
  });
  ASSERT_EQ(statuses.size(), 4u);
  const char* methods[] = {"Unary", "ClientStream", "ServerStream", "Bidi"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnimplemented) << statuses[i];
    EXPECT_EQ(statuses[i].message(), std::string("ferry.codegen_test.v1.Unimplemented/") +
                                         methods[i] + " is not implemented");
  }
}

TEST(Codegen, BlockingStubCallsEveryKind) {
  Served served;
  Channel channel(served.target());  // its own I/O thread
  Kinds::BlockingStub stub(channel);

  Inner request;
  request.set_text("b");
  request.set_count(3);
  Outer reply;
  ClientContext unary_ctx;
  ASSERT_TRUE(stub.Unary(unary_ctx, request, reply).ok());
  EXPECT_EQ(reply.inner().text(), "unary:b");

  ClientContext writer_ctx;
  BlockingClientWriter<Inner> writer = stub.ClientStream(writer_ctx);
  for (const char* word : {"p", "q"}) {
    Inner inner;
    inner.set_text(word);
    ASSERT_TRUE(writer.write(inner).ok());
  }
  Total total;
  ASSERT_TRUE(writer.finish(total).ok());
  EXPECT_EQ(total.messages(), 2);
  EXPECT_EQ(total.joined(), "pq");

  ClientContext reader_ctx;
  BlockingClientReader<Inner> reader = stub.ServerStream(reader_ctx, request);
  std::vector<std::string> got;
  Inner inner;
  while (reader.read(inner)) got.push_back(inner.text());
  EXPECT_TRUE(reader.finish().ok());
  EXPECT_EQ(got, (std::vector<std::string>{"b0", "b1", "b2"}));

  ClientContext bidi_ctx;
  BlockingClientReaderWriter<Inner, Inner> stream = stub.Bidi(bidi_ctx);
  inner.set_text("z");
  ASSERT_TRUE(stream.write(inner).ok());
  ASSERT_TRUE(stream.read(inner));
  EXPECT_EQ(inner.text(), "re:z");
  stream.writes_done();
  EXPECT_FALSE(stream.read(inner));
  EXPECT_TRUE(stream.finish().ok());
}

TEST(Codegen, BlockingStreamCancelledByDroppingIt) {
  Served served;
  Channel channel(served.target());
  Kinds::BlockingStub stub(channel);
  {
    ClientContext ctx;
    BlockingClientReaderWriter<Inner, Inner> stream = stub.Bidi(ctx);
    Inner inner;
    inner.set_text("once");
    ASSERT_TRUE(stream.write(inner).ok());
    ASSERT_TRUE(stream.read(inner));
  }  // dropped unfinished: RST_STREAM, the server's handler ends
  for (int i = 0; i < 200 && served.server.active_calls() > 0; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(served.server.active_calls(), 0u);

  // cancel() ends the call with CANCELLED.
  ClientContext ctx;
  BlockingClientReaderWriter<Inner, Inner> stream = stub.Bidi(ctx);
  stream.cancel();
  Inner inner;
  EXPECT_FALSE(stream.read(inner));
  EXPECT_EQ(stream.finish().code(), absl::StatusCode::kCancelled);
}

TEST(Codegen, BlockingStreamOnTheChannelsOwnThreadFailsInsteadOfDeadlocking) {
  Served served;
  ClientLoop loop(served.target());
  asio::io_context& io = loop.io;
  Kinds::BlockingStub stub(*loop.channel);
  absl::Status status = run(io, [&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    BlockingClientReaderWriter<Inner, Inner> stream = stub.Bidi(ctx);  // on the channel's thread
    Inner inner;
    EXPECT_FALSE(stream.read(inner));
    co_return stream.write(inner);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

TEST(Codegen, ServerStreamingRequestOverTheSendLimitEndsTheCall) {
  Served served;
  ChannelOptions options;
  options.max_send_message_size = 16;
  Channel channel(served.target(), options);
  Kinds::BlockingStub stub(channel);
  Inner request;
  request.set_text(std::string(100, 'x'));
  request.set_count(1);
  ClientContext ctx;
  BlockingClientReader<Inner> reader = stub.ServerStream(ctx, request);
  Inner inner;
  EXPECT_FALSE(reader.read(inner));
  EXPECT_EQ(reader.finish().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ferry::codegen_test

// Loopback tests of streaming calls through the typed client wrappers: client streaming
// (Collect), server streaming (Expand), bidi ping-pong (Chat), errors mid-stream and metadata.
#include <gtest/gtest.h>

#include <string>

#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::streaming_call_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;

// --- client streaming --------------------------------------------------------------------------

TEST(ClientStreaming, CountsMessagesAndBytes) {
  Loopback loop;
  ClientContext ctx;
  EchoResponse response;
  constexpr int kMessages = 500;
  std::int64_t sent_bytes = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
    for (int i = 0; i < kMessages; ++i) {
      EchoRequest request;
      request.set_payload(std::string(static_cast<std::size_t>(i * 37 % 3000), 'c'));
      sent_bytes += static_cast<std::int64_t>(request.payload().size());
      if (absl::Status w = co_await writer.write(request); !w.ok()) co_return w;
    }
    co_return co_await writer.finish(response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), kMessages);
  EXPECT_EQ(response.received_bytes(), sent_bytes);
}

TEST(ClientStreaming, LargeMessagesAddUp) {
  Loopback loop;
  ClientContext ctx;
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
    EchoRequest request;
    request.set_payload(std::string(1 << 20, 'L'));  // 1 MiB: fills the stream window at once
    for (int i = 0; i < 8; ++i) {
      if (absl::Status w = co_await writer.write(request); !w.ok()) co_return w;
    }
    co_return co_await writer.finish(response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), 8);
  EXPECT_EQ(response.received_bytes(), 8 << 20);
}

TEST(ClientStreaming, ZeroMessages) {
  Loopback loop;
  ClientContext ctx;
  EchoResponse response;
  response.set_received_messages(-1);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
    co_return co_await writer.finish(response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), 0);
  EXPECT_EQ(response.received_bytes(), 0);
}

TEST(ClientStreaming, ServerErrorMidStreamReachesTheWriter) {
  Loopback loop;
  ClientContext ctx;
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(ctx);
    EchoRequest request;
    request.set_payload("x");
    for (int i = 0; i < 3; ++i) (void)co_await writer.write(request);
    request.set_status_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
    request.set_status_message("stop sending");
    (void)co_await writer.write(request);
    co_return co_await writer.finish(response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), "stop sending");
}

// --- server streaming --------------------------------------------------------------------------

class ServerStreamingSizes : public ::testing::TestWithParam<int> {};

TEST_P(ServerStreamingSizes, ResponsesArriveInOrderWithTheirSize) {
  ChannelOptions channel_options;
  channel_options.max_receive_message_size = 2 << 20;
  Loopback loop({}, channel_options);
  const int size = GetParam();
  const int count = size >= (1 << 20) ? 20 : 200;
  ClientContext ctx;
  EchoRequest request;
  request.set_response_size(size);
  request.set_response_count(count);
  int received = 0;
  bool in_order = true;
  bool sizes_right = true;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    if (absl::Status w = co_await stream.write_last(request); !w.ok()) co_return w;
    ClientReader<EchoResponse> reader(std::move(stream));
    EchoResponse response;
    while (co_await reader.read(response)) {
      if (response.index() != received) in_order = false;
      if (response.payload().size() != static_cast<std::size_t>(size) ||
          response.payload().find_first_not_of('r') != std::string::npos) {
        sizes_right = false;
      }
      ++received;
    }
    co_return co_await reader.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, count);
  EXPECT_TRUE(in_order);
  EXPECT_TRUE(sizes_right);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ServerStreamingSizes,
                         ::testing::Values(1, 100, 16384, 65536, 300000, 1 << 20));

TEST(ServerStreaming, ZeroResponses) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(0);
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    ClientReader<EchoResponse> reader(std::move(stream));
    EchoResponse response;
    while (co_await reader.read(response)) ++received;
    co_return co_await reader.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 0);
}

TEST(ServerStreaming, StatusAfterResponses) {
  Loopback loop;
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(5);
  request.set_status_code(static_cast<int>(absl::StatusCode::kDataLoss));
  request.set_status_message("after five");
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kExpand, ctx);
    (void)co_await stream.write_last(request);
    ClientReader<EchoResponse> reader(std::move(stream));
    EchoResponse response;
    while (co_await reader.read(response)) ++received;
    co_return co_await reader.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(s.message(), "after five");
  EXPECT_EQ(received, 5);
}

// --- bidi ---------------------------------------------------------------------------------------

TEST(BidiStreaming, PingPongAnswersEachRequestInOrder) {
  Loopback loop;
  ClientContext ctx;
  constexpr int kRounds = 1000;
  int good = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    for (int i = 0; i < kRounds; ++i) {
      EchoRequest request;
      request.set_payload("ping " + std::to_string(i));
      if (absl::Status w = co_await stream.write(request); !w.ok()) co_return w;
      EchoResponse response;
      if (!co_await stream.read(response)) break;
      if (response.payload() == request.payload() && response.index() == i) ++good;
    }
    co_await stream.writes_done();
    EchoResponse extra;
    if (co_await stream.read(extra)) co_return absl::InternalError("a response too many");
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(good, kRounds);
}

TEST(BidiStreaming, PipelinedWritesThenReads) {
  Loopback loop;
  ClientContext ctx;
  constexpr int kMessages = 300;
  int good = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    for (int i = 0; i < kMessages; ++i) {
      EchoRequest request;
      request.set_payload(std::string(static_cast<std::size_t>(i) * 10, 'p'));
      if (absl::Status w = co_await stream.write(request); !w.ok()) co_return w;
    }
    co_await stream.writes_done();
    EchoResponse response;
    while (co_await stream.read(response)) {
      if (response.index() == good &&
          response.payload().size() == static_cast<std::size_t>(good) * 10) {
        ++good;
      }
    }
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(good, kMessages);
}

TEST(BidiStreaming, StatusErrorMidStream) {
  Loopback loop;
  ClientContext ctx;
  int answered = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(ctx);
    EchoRequest request;
    EchoResponse response;
    for (int i = 0; i < 3; ++i) {
      request.set_payload("ok");
      (void)co_await stream.write(request);
      if (co_await stream.read(response)) ++answered;
    }
    request.set_status_code(static_cast<int>(absl::StatusCode::kAborted));
    request.set_status_message("aborted on request 4");
    (void)co_await stream.write(request);
    if (co_await stream.read(response)) ++answered;  // must not get a response
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(s.message(), "aborted on request 4");
  EXPECT_EQ(answered, 3);
  // The client never half-closed, yet the call must be over on the server too (RST_STREAM
  // NO_ERROR after the trailers), not left open until the connection goes.
  EXPECT_TRUE(loop.wait_until([&] { return loop.server().active_calls() == 0; }, 2s))
      << loop.server().active_calls() << " calls still open on the server";
}

TEST(BidiStreaming, ManyStreamsInSequenceOnOneChannel) {
  Loopback loop;
  int ok = loop.run([&]() -> asio::awaitable<int> {
    int n = 0;
    for (int call = 0; call < 100; ++call) {
      ClientContext ctx;
      ClientReaderWriter<EchoRequest, EchoResponse> stream(
          co_await loop.channel().open(kChat, ctx));
      bool good = true;
      for (int i = 0; i < 5; ++i) {
        EchoRequest request;
        request.set_payload(std::to_string(call * 100 + i));
        (void)co_await stream.write(request);
        EchoResponse response;
        if (!co_await stream.read(response) || response.payload() != request.payload()) {
          good = false;
        }
      }
      co_await stream.writes_done();
      if ((co_await stream.finish()).ok() && good) ++n;
    }
    co_return n;
  });
  EXPECT_EQ(ok, 100);
}

// --- metadata -----------------------------------------------------------------------------------

TEST(StreamingMetadata, EchoedOnEveryStreamingKind) {
  Loopback loop;
  const std::string binary("\x00\x01\xfe\xff bin", 8);
  auto fill = [&](ClientContext& ctx) {
    ctx.add_metadata("initial-text", "hello");
    ctx.add_metadata("initial-raw-bin", binary);
    ctx.add_metadata("trailing-text", "bye");
    ctx.add_metadata("trailing-raw-bin", binary + binary);
  };
  auto check = [&](const ClientContext& ctx, const char* kind) {
    EXPECT_EQ(ctx.initial_metadata().get("initial-text"), "hello") << kind;
    EXPECT_EQ(ctx.initial_metadata().get("initial-raw-bin"), binary) << kind;
    EXPECT_EQ(ctx.trailing_metadata().get("trailing-text"), "bye") << kind;
    EXPECT_EQ(ctx.trailing_metadata().get("trailing-raw-bin"), binary + binary) << kind;
    EXPECT_FALSE(ctx.initial_metadata().get("trailing-text").has_value()) << kind;
    EXPECT_FALSE(ctx.trailing_metadata().get("initial-text").has_value()) << kind;
  };
  ClientContext collect_ctx, expand_ctx, chat_ctx, empty_ctx;
  fill(collect_ctx);
  fill(expand_ctx);
  fill(chat_ctx);
  fill(empty_ctx);
  loop.run([&]() -> asio::awaitable<void> {
    {
      ClientWriter<EchoRequest> writer = co_await loop.stub().Collect(collect_ctx);
      EchoRequest request;
      (void)co_await writer.write(request);
      EchoResponse response;
      absl::Status s = co_await writer.finish(response);
      EXPECT_TRUE(s.ok()) << s;
    }
    {
      ClientStream stream = co_await loop.channel().open(kExpand, expand_ctx);
      EchoRequest request;
      request.set_response_count(3);
      (void)co_await stream.write_last(request);
      ClientReader<EchoResponse> reader(std::move(stream));
      EchoResponse response;
      while (co_await reader.read(response)) {
      }
      absl::Status s = co_await reader.finish();
      EXPECT_TRUE(s.ok()) << s;
    }
    {
      ClientReaderWriter<EchoRequest, EchoResponse> stream(
          co_await loop.channel().open(kChat, chat_ctx));
      EchoRequest request;
      (void)co_await stream.write(request);
      EchoResponse response;
      (void)co_await stream.read(response);
      co_await stream.writes_done();
      absl::Status s = co_await stream.finish();
      EXPECT_TRUE(s.ok()) << s;
    }
    {
      // No message at all: the initial metadata still comes in headers of its own, then the
      // trailers (a Trailers-Only block would make all of it trailing metadata).
      ClientReaderWriter<EchoRequest, EchoResponse> stream(
          co_await loop.channel().open(kChat, empty_ctx));
      co_await stream.writes_done();
      absl::Status s = co_await stream.finish();
      EXPECT_TRUE(s.ok()) << s;
    }
  });
  check(collect_ctx, "client streaming");
  check(expand_ctx, "server streaming");
  check(chat_ctx, "bidi");
  check(empty_ctx, "bidi with no message");
}

// gRPC's cardinality rule on a client-streaming call's response: a server that answers twice
// fails the call with UNIMPLEMENTED (ClientWriter expects one response), awaitable and blocking.
TEST(StreamingCall, SecondResponseToAClientStreamingCallIsUnimplemented) {
  Service twice("ferry.testing.Twice");
  twice.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Collect",
      [](ServerContext&,
         ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        while (co_await stream.read(request)) {
        }
        EchoResponse response;
        for (int i = 0; i < 2; ++i) {
          if (absl::Status s = co_await stream.write(response); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &twice);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientWriter<EchoRequest> writer(
        co_await loop.channel().open("/ferry.testing.Twice/Collect", ctx));
    EchoRequest request;
    (void)co_await writer.write(request);
    EchoResponse response;
    co_return co_await writer.finish(response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("cardinality"), absl::string_view::npos) << s;

  Channel blocking_channel(loop.target());
  ClientContext ctx;
  BlockingClientWriter<EchoRequest> writer(
      blocking_channel.open_blocking("/ferry.testing.Twice/Collect", ctx));
  EchoRequest request;
  (void)writer.write(request);
  EchoResponse response;
  absl::Status blocking = writer.finish(response);
  EXPECT_EQ(blocking.code(), absl::StatusCode::kUnimplemented) << blocking;
}

}  // namespace
}  // namespace ferry::streaming_call_test

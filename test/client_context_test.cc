// Who owns what a client call receives (ferry/client_context.h): the call keeps the server's
// metadata until the application takes it (a read, finish(), a unary call's completion), and a
// stream the application dropped never touches the ClientContext again, even through the
// interceptors' hooks that run after the drop.
#include "ferry/client_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::client_context_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

// A server-streaming call whose server echoes an initial and a trailing entry: the initial one
// is in the context once a response is read, the trailing one only once finish() took the
// status, even though it arrived with the end of the stream before.
TEST(ClientContext, ServerMetadataArrivesWhenTheApplicationTakesIt) {
  Loopback loop;
  ClientContext ctx;
  ctx.add_metadata("initial-a", "1");
  ctx.add_metadata("trailing-b", "2");
  absl::Status status = loop.run([&]() -> asio::awaitable<absl::Status> {
    EchoRequest request;
    request.set_response_count(2);
    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(ctx, request);
    EchoResponse response;
    EXPECT_TRUE(co_await reader.read(response));
    EXPECT_EQ(ctx.initial_metadata().get("initial-a"), "1");
    EXPECT_FALSE(ctx.trailing_metadata().get("trailing-b"));
    EXPECT_TRUE(co_await reader.read(response));
    EXPECT_FALSE(co_await reader.read(response));  // the trailers are in
    EXPECT_FALSE(ctx.trailing_metadata().get("trailing-b")) << "written before finish()";
    absl::Status finished = co_await reader.finish();
    EXPECT_EQ(ctx.trailing_metadata().get("trailing-b"), "2");
    EXPECT_EQ(ctx.initial_metadata().get("initial-a"), "1");
    co_return finished;
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A unary call's context holds both once the call returns.
TEST(ClientContext, UnaryCallLeavesTheServersMetadataInTheContext) {
  Loopback loop;
  ClientContext ctx;
  ctx.add_metadata("initial-a", "1");
  ctx.add_metadata("trailing-b", "2");
  absl::Status status = loop.run([&]() -> asio::awaitable<absl::Status> {
    EchoRequest request;
    EchoResponse response;
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ctx.initial_metadata().get("initial-a"), "1");
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-b"), "2");
}

// Records the context its on_finish hook was given, and what it held.
class FinishWitness : public ClientInterceptor {
 public:
  void on_finish(ClientContext& ctx, const CallInfo&, const CallOutcome& outcome) override {
    seen_context = &ctx;
    seen_metadata = std::string(ctx.metadata().get("x-app").value_or(""));
    seen_code = outcome.status.code();
    finished.store(true);
  }
  std::atomic<bool> finished{false};
  const ClientContext* seen_context = nullptr;
  std::string seen_metadata;
  absl::StatusCode seen_code = absl::StatusCode::kOk;
};

// The application drops an unfinished bidi stream and destroys its context at once. The drop is
// carried out later on the call's thread (it cancels the call, which tells the interceptor), so
// the hook must get a context of its own: not the destroyed one, and nothing may be written
// into the destroyed one's memory.
TEST(ClientContext, DroppedStreamNeverTouchesTheApplicationsContext) {
  auto witness = std::make_shared<FinishWitness>();
  ChannelOptions options;
  options.interceptors = {witness};
  Loopback loop({}, options);

  alignas(ClientContext) unsigned char storage[sizeof(ClientContext)];
  auto* ctx = new (storage) ClientContext;
  ctx->add_metadata("x-app", "mine");
  ctx->add_metadata("initial-a", "1");
  const bool read_one = loop.run([&]() -> asio::awaitable<bool> {
    bool got = false;
    {
      ClientReaderWriter<EchoRequest, EchoResponse> stream = co_await loop.stub().Chat(*ctx);
      EchoRequest request;
      request.set_payload("x");
      (void)co_await stream.write(request);
      EchoResponse response;
      got = co_await stream.read(response);
    }  // dropped, unfinished: its release is posted to this loop
    ctx->~ClientContext();
    std::memset(storage, 0xa5, sizeof(storage));
    co_return got;
  });
  ASSERT_TRUE(read_one);
  ASSERT_TRUE(loop.wait_until([&] { return witness->finished.load(); }));
  EXPECT_NE(witness->seen_context, reinterpret_cast<const ClientContext*>(storage));
  EXPECT_EQ(witness->seen_metadata, "mine");  // a copy of what the application had set
  EXPECT_EQ(witness->seen_code, absl::StatusCode::kCancelled);
  for (unsigned char byte : storage) ASSERT_EQ(byte, 0xa5) << "written after it was destroyed";
}

}  // namespace
}  // namespace ferry::client_context_test

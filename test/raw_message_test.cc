// Raw messages by reference through real calls over loopback TCP: a server streaming a large
// body it holds once (Slice::external) to typed and raw clients, a client uploading such a body
// to a raw reader, and the body's owner let go once the connection has written it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ferry/bytes_field.h"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/frame_decoder.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::raw_message_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;

constexpr std::string_view kDownload = "/ferry.testing.Raw/Download";
constexpr std::string_view kUpload = "/ferry.testing.Raw/Upload";

std::string pattern(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 31);
  return s;
}

// Raw/Download: response_count EchoResponses {index = i, payload = the body}, where the body
// is `body` (response_size is ignored), sent by reference. Raw/Upload: reads raw EchoRequests,
// cuts each payload out by reference and checks it equals `body`; answers with the counts.
class RawService : public Service {
 public:
  explicit RawService(std::shared_ptr<const std::string> body) : Service("ferry.testing.Raw") {
    add_method("Download", RpcKind::kServerStreaming,
               [body](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 EchoRequest request;
                 if (!ctx.take_request(request)) co_return absl::InternalError("no request");
                 SliceChain shared;
                 shared.append(Slice::external(body->data(), body->size(), body));
                 for (int i = 0; i < request.response_count(); ++i) {
                   EchoResponse rest;
                   rest.set_index(i);
                   SliceChain message;
                   if (absl::Status s = append_with_bytes_field(rest, 1, shared, message);
                       !s.ok()) {
                     co_return s;
                   }
                   if (absl::Status s = co_await ctx.write_raw(message); !s.ok()) co_return s;
                 }
                 co_return absl::OkStatus();
               });
    add_method("Upload", RpcKind::kClientStreaming,
               [body](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 EchoResponse response;
                 SliceChain message;
                 while (co_await ctx.read_raw(message)) {
                   SliceChain payload;
                   if (absl::Status s = take_bytes_field(message, 1, payload); !s.ok()) {
                     co_return s;
                   }
                   EchoRequest rest;
                   if (absl::Status s = parse_message(message, rest); !s.ok()) co_return s;
                   if (payload.to_string() != *body || rest.response_count() != 42) {
                     co_return absl::DataLossError("the body or the rest differs");
                   }
                   response.set_received_messages(response.received_messages() + 1);
                   response.set_received_bytes(response.received_bytes() +
                                               static_cast<std::int64_t>(payload.size()));
                 }
                 if (absl::Status s = ctx.queue_response(response); !s.ok()) co_return s;
                 co_return absl::OkStatus();
               });
  }
};

TEST(RawMessages, ServerSendsABodyByReferenceToATypedClient) {
  auto body = std::make_shared<const std::string>(pattern(1 << 20, 'a'));
  RawService raw(body);
  Loopback loop({}, {}, &raw);
  const long held_by_test_and_service = body.use_count();
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(6);
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kDownload, ctx, request);
    EchoResponse response;
    while (co_await stream.read(response)) {
      if (response.index() != received || response.payload() != *body) {
        co_return absl::DataLossError("response differs");
      }
      ++received;
    }
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 6);
  // Every reference the call and the connection took to the body is gone once it is over.
  EXPECT_TRUE(loop.wait_until([&] { return body.use_count() == held_by_test_and_service; }))
      << body.use_count();
}

TEST(RawMessages, ClientReadsTheBodyWithoutParsingIt) {
  auto body = std::make_shared<const std::string>(pattern(300000, 'k'));
  RawService raw(body);
  Loopback loop({}, {}, &raw);
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(3);
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kDownload, ctx, request);
    SliceChain message;
    while (co_await stream.read_raw(message)) {
      SliceChain payload;
      if (absl::Status t = take_bytes_field(message, 1, payload); !t.ok()) co_return t;
      EchoResponse rest;
      if (absl::Status p = parse_message(message, rest); !p.ok()) co_return p;
      // Received as slices of the read blocks: a 300 KB body spans several.
      if (payload.slice_count() < 2 || payload.to_string() != *body || rest.index() != received) {
        co_return absl::DataLossError("response differs");
      }
      ++received;
    }
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 3);
}

TEST(RawMessages, ClientUploadsABodyByReference) {
  auto body = std::make_shared<const std::string>(pattern((1 << 20) + 3, 'q'));
  std::weak_ptr<const std::string> watch;
  RawService raw(body);
  Loopback loop({}, {}, &raw);
  ClientContext ctx;
  EchoResponse response;
  auto owner = std::make_shared<std::string>(*body);  // the client's own copy, sent 4 times
  watch = owner;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kUpload, ctx);
    SliceChain shared;
    shared.append(Slice::external(owner->data(), owner->size(), owner));
    owner.reset();
    EchoRequest rest;
    rest.set_response_count(42);
    SliceChain message;
    if (absl::Status b = append_with_bytes_field(rest, 1, shared, message); !b.ok()) co_return b;
    for (int i = 0; i < 4; ++i) {
      if (absl::Status w = co_await stream.write_raw(message); !w.ok()) co_return w;
    }
    shared.clear();
    message.clear();
    co_return co_await stream.finish_with_response(response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), 4);
  EXPECT_EQ(response.received_bytes(), 4 * static_cast<std::int64_t>(body->size()));
  EXPECT_TRUE(loop.wait_until([&] { return watch.expired(); }));
}

TEST(RawMessages, RawWriteOverTheSendLimitFails) {
  auto body = std::make_shared<const std::string>(pattern(1000, 'z'));
  RawService raw(body);
  ChannelOptions options;
  options.max_send_message_size = 500;
  Loopback loop({}, options, &raw);
  ClientContext ctx;
  absl::Status written;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(kUpload, ctx);
    SliceChain message;
    message.append(Slice::external(body->data(), body->size(), body));
    written = co_await stream.write_raw(message);
    stream.cancel();
    co_return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(written.code(), absl::StatusCode::kResourceExhausted) << written;
}

}  // namespace
}  // namespace ferry::raw_message_test

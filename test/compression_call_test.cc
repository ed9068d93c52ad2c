// Loopback tests of gzip compression on calls of all four kinds: either side or both
// compressing, per-message opt-out, the negotiation rules (server compresses only for a client
// that accepts gzip; an unknown grpc-encoding is UNIMPLEMENTED with grpc-accept-encoding; a
// compressed flag without an encoding is INTERNAL), corrupt data, and the receive limit applied
// to the inflated size on both sides.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/channel.h"
#include "ferry/compression.h"
#include "ferry/frame.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/gzip_data.h"
#include "support/loopback.h"
#include "support/raw_call.h"

namespace ferry::compression_call_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::gzip_of_zeros;
using testing::Loopback;
using testing::RawCall;
using testing::zlib_gzip;

// The Gz service below reads these bits of EchoRequest.status_code (its only use here).
constexpr int kCompressResponses = 1;  // ctx.set_compression(kGzip) before the first response
constexpr int kAlternate = 2;          // every second response (odd index) with no_compression

constexpr std::string_view kUnary = "/ferry.testing.Gz/Unary";
constexpr std::string_view kCollect = "/ferry.testing.Gz/Collect";
constexpr std::string_view kExpand = "/ferry.testing.Gz/Expand";
constexpr std::string_view kChat = "/ferry.testing.Gz/Chat";

// One response: response_size zero bytes, or the request's payload echoed when that is 0.
void fill(const EchoRequest& request, EchoResponse& response) {
  if (request.response_size() > 0) {
    response.set_payload(std::string(static_cast<std::size_t>(request.response_size()), '\0'));
  } else {
    response.set_payload(request.payload());
  }
}

// Handlers that report how each request arrived:
//   Unary    response.index = 1 when the request arrived compressed.
//   Collect  received_messages = requests read; received_bytes = bit i set when request i
//            arrived compressed. Responds compressed when the first request asks.
//   Expand   response_count responses (index i), compressed and alternating as asked.
//   Chat     one response per request, index = 1 when that request arrived compressed;
//            compression as the first request asks.
Service make_gz_service() {
  Service service("ferry.testing.Gz");
  service.add_unary<EchoRequest, EchoResponse>(
      "Unary",
      [](ServerContext& ctx, const EchoRequest& request,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        if (request.status_code() & kCompressResponses) ctx.set_compression(Compression::kGzip);
        fill(request, response);
        response.set_index(ctx.last_message_compressed() ? 1 : 0);
        co_return absl::OkStatus();
      });
  service.add_client_streaming<EchoRequest, EchoResponse>(
      "Collect",
      [](ServerContext& ctx, ServerReader<EchoRequest>& reader,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        std::int64_t count = 0;
        std::int64_t mask = 0;
        while (co_await reader.read(request)) {
          if (count == 0 && (request.status_code() & kCompressResponses)) {
            ctx.set_compression(Compression::kGzip);
          }
          if (ctx.last_message_compressed()) mask |= std::int64_t{1} << count;
          ++count;
        }
        response.set_received_messages(static_cast<std::int32_t>(count));
        response.set_received_bytes(mask);
        co_return absl::OkStatus();
      });
  service.add_server_streaming<EchoRequest, EchoResponse>(
      "Expand",
      [](ServerContext& ctx, const EchoRequest& request,
         ServerWriter<EchoResponse>& writer) -> asio::awaitable<absl::Status> {
        if (request.status_code() & kCompressResponses) ctx.set_compression(Compression::kGzip);
        for (int i = 0; i < request.response_count(); ++i) {
          EchoResponse response;
          fill(request, response);
          response.set_index(i);
          WriteOptions options;
          options.no_compression = (request.status_code() & kAlternate) && i % 2 == 1;
          if (absl::Status s = co_await writer.write(response, options); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  service.add_bidi_streaming<EchoRequest, EchoResponse>(
      "Chat",
      [](ServerContext& ctx,
         ServerReaderWriter<EchoRequest, EchoResponse>& stream) -> asio::awaitable<absl::Status> {
        EchoRequest request;
        bool first = true;
        while (co_await stream.read(request)) {
          if (first && (request.status_code() & kCompressResponses)) {
            ctx.set_compression(Compression::kGzip);
          }
          first = false;
          EchoResponse response;
          fill(request, response);
          response.set_index(ctx.last_message_compressed() ? 1 : 0);
          if (absl::Status s = co_await stream.write(response); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  return service;
}

// A payload that compresses but not trivially.
std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7919) % 251 ^ (i >> 9));
  return s;
}

// A Length-Prefixed-Message around payload bytes, flag as given.
std::string frame(std::string_view payload, bool compressed) {
  std::string out(kFramePrefixSize, '\0');
  write_frame_prefix(reinterpret_cast<std::uint8_t*>(out.data()), compressed,
                     static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string serialized(const EchoRequest& request) { return request.SerializeAsString(); }

struct GzLoop {
  explicit GzLoop(ServerOptions server_options = {}, ChannelOptions channel_options = {})
      : service(make_gz_service()), loop(server_options, channel_options, &service) {}
  Service service;
  Loopback loop;
};

TEST(CompressionCall, UnaryEveryCombinationAndSize) {
  ServerOptions server_options;
  server_options.max_receive_message_size = 8 << 20;
  ChannelOptions channel_options;
  channel_options.max_receive_message_size = 8 << 20;
  GzLoop gz(server_options, channel_options);
  for (const std::size_t size : {0, 1, 1024, 64 * 1024 + 1, 1 << 20}) {
    for (const Compression client : {Compression::kIdentity, Compression::kGzip}) {
      for (const bool server_compresses : {false, true}) {
        SCOPED_TRACE(::testing::Message() << size << " bytes, client " << compression_name(client)
                                          << ", server compresses " << server_compresses);
        EchoRequest request;
        request.set_payload(pattern(size));
        request.set_status_code(server_compresses ? kCompressResponses : 0);
        EchoResponse response;
        ClientContext ctx;
        ctx.set_compression(client);
        absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
          co_return co_await gz.loop.channel().call(kUnary, ctx, request, response);
        });
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(response.payload(), request.payload());
        EXPECT_EQ(response.index(), client == Compression::kGzip ? 1 : 0);
        EXPECT_EQ(ctx.response_compressed(), server_compresses);
      }
    }
  }
}

TEST(CompressionCall, ClientStreamingPerMessageOptOut) {
  GzLoop gz;
  ClientContext ctx;
  ctx.set_compression(Compression::kGzip);
  EchoResponse response;
  absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientWriter<EchoRequest> writer(co_await gz.loop.channel().open(kCollect, ctx));
    for (int i = 0; i < 6; ++i) {
      EchoRequest request;
      request.set_payload(pattern(static_cast<std::size_t>(1000 * i)));
      request.set_status_code(kCompressResponses);
      WriteOptions options;
      options.no_compression = i % 2 == 1;
      if (absl::Status w = co_await writer.write(request, options); !w.ok()) co_return w;
    }
    co_return co_await writer.finish(response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.received_messages(), 6);
  EXPECT_EQ(response.received_bytes(), 0b010101);  // messages 0, 2, 4 compressed
  EXPECT_TRUE(ctx.response_compressed());
}

TEST(CompressionCall, ServerStreamingCompressedAndAlternating) {
  GzLoop gz;
  for (const int flags : {0, kCompressResponses, kCompressResponses | kAlternate}) {
    SCOPED_TRACE(::testing::Message() << "flags " << flags);
    ClientContext ctx;
    std::vector<bool> compressed;
    absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
      ClientStream stream = co_await gz.loop.channel().open(kExpand, ctx);
      EchoRequest request;
      request.set_response_count(5);
      request.set_response_size(70000);  // each response spans two blocks
      request.set_status_code(flags);
      (void)co_await stream.write_last(request);
      ClientReader<EchoResponse> reader(std::move(stream));
      EchoResponse response;
      while (co_await reader.read(response)) {
        if (response.payload() != std::string(70000, '\0')) {
          co_return absl::DataLossError("wrong payload");
        }
        compressed.push_back(reader.last_message_compressed());
      }
      co_return co_await reader.finish();
    });
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(compressed.size(), 5u);
    for (std::size_t i = 0; i < compressed.size(); ++i) {
      const bool want = (flags & kCompressResponses) && !((flags & kAlternate) && i % 2 == 1);
      EXPECT_EQ(compressed[i], want) << "response " << i;
    }
  }
}

TEST(CompressionCall, BidiBothSidesCompress) {
  GzLoop gz;
  ClientContext ctx;
  ctx.set_compression(Compression::kGzip);
  int exchanged = 0;
  absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientReaderWriter<EchoRequest, EchoResponse> stream(
        co_await gz.loop.channel().open(kChat, ctx));
    for (int i = 0; i < 10; ++i) {
      EchoRequest request;
      request.set_payload(pattern(static_cast<std::size_t>(i * 5000)));
      request.set_status_code(kCompressResponses);
      WriteOptions options;
      options.no_compression = i == 3;
      if (absl::Status w = co_await stream.write(request, options); !w.ok()) co_return w;
      EchoResponse response;
      if (!co_await stream.read(response)) break;
      if (response.payload() != request.payload()) co_return absl::DataLossError("payload");
      if (response.index() != (i == 3 ? 0 : 1)) co_return absl::DataLossError("request flag");
      if (!stream.last_message_compressed()) co_return absl::DataLossError("response flag");
      ++exchanged;
    }
    co_await stream.writes_done();
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(exchanged, 10);
}

TEST(CompressionCall, ServerUsesGzipOnlyWhenTheClientAcceptsIt) {
  GzLoop gz;
  EchoRequest request;
  request.set_response_size(1000);
  request.set_status_code(kCompressResponses);
  const std::string body = frame(serialized(request), false);
  struct Case {
    std::vector<std::pair<std::string, std::string>> headers;
    bool want_gzip;
  };
  const std::vector<Case> cases = {
      {{}, false},  // no grpc-accept-encoding at all
      {{{"grpc-accept-encoding", "identity"}}, false},
      {{{"grpc-accept-encoding", "identity, deflate"}}, false},
      {{{"grpc-accept-encoding", "gzip"}}, true},  // grpc-go's and grpc-java's form
      {{{"grpc-accept-encoding", "identity,deflate,gzip"}}, true},  // grpc++'s
  };
  for (const Case& c : cases) {
    RawCall call(gz.loop, kUnary, c.headers, body);
    const testing::RawResponse& r = call.wait();
    SCOPED_TRACE(c.headers.empty() ? "none" : c.headers[0].second);
    EXPECT_EQ(r.header("grpc-status"), "0");
    EXPECT_EQ(r.header("grpc-accept-encoding"), "identity,gzip");
    EXPECT_EQ(r.header("grpc-encoding"),
              c.want_gzip ? std::optional<std::string>("gzip") : std::nullopt);
    ASSERT_GE(r.data.size(), kFramePrefixSize);
    EXPECT_EQ(r.data[0], c.want_gzip ? 1 : 0);
    EXPECT_EQ(read_frame_length(reinterpret_cast<const std::uint8_t*>(r.data.data())),
              r.data.size() - kFramePrefixSize);
  }
}

TEST(CompressionCall, UnsupportedEncodingIsUnimplementedWithAcceptEncoding) {
  GzLoop gz;
  EchoRequest request;
  request.set_payload("abc");
  for (const char* encoding : {"snappy", "deflate"}) {
    RawCall call(gz.loop, kUnary, {{"grpc-encoding", encoding}}, frame(serialized(request), true));
    const testing::RawResponse& r = call.wait();
    EXPECT_EQ(r.header("grpc-status"), "12") << encoding;
    EXPECT_NE(r.header("grpc-message").value_or("").find(encoding), std::string::npos);
    EXPECT_EQ(r.header("grpc-accept-encoding"), "identity,gzip");
    EXPECT_EQ(r.header_blocks, 1);  // Trailers-Only
  }
}

TEST(CompressionCall, CompressedFlagWithoutEncodingIsInternal) {
  GzLoop gz;
  EchoRequest request;
  request.set_payload("abc");
  const std::string body = frame(zlib_gzip(serialized(request)), true);
  for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {}, {{"grpc-encoding", "identity"}}}) {
    RawCall call(gz.loop, kUnary, headers, body);
    EXPECT_EQ(call.wait().header("grpc-status"), "13");
  }
}

TEST(CompressionCall, RawGzipRequestIsAccepted) {
  // A compressed request as another implementation frames it: flag 1, zlib's gzip.
  GzLoop gz;
  EchoRequest request;
  request.set_payload(pattern(3000));
  RawCall call(gz.loop, kUnary, {{"grpc-encoding", "gzip"}},
               frame(zlib_gzip(serialized(request), 9), true));
  const testing::RawResponse& r = call.wait();
  ASSERT_EQ(r.header("grpc-status"), "0");
  ASSERT_GT(r.data.size(), kFramePrefixSize);
  EchoResponse response;
  ASSERT_TRUE(response.ParseFromString(r.data.substr(kFramePrefixSize)));
  EXPECT_EQ(response.payload(), request.payload());
  EXPECT_EQ(response.index(), 1);
}

TEST(CompressionCall, CorruptGzipIsInternal) {
  GzLoop gz;
  EchoRequest request;
  request.set_payload(pattern(3000));
  std::string gz_bytes = zlib_gzip(serialized(request));
  gz_bytes[gz_bytes.size() / 2] = static_cast<char>(gz_bytes[gz_bytes.size() / 2] ^ 0x40);
  for (const std::string& payload :
       {gz_bytes, std::string("not gzip at all"), gz_bytes.substr(0, gz_bytes.size() - 3)}) {
    RawCall call(gz.loop, kUnary, {{"grpc-encoding", "gzip"}}, frame(payload, true));
    EXPECT_EQ(call.wait().header("grpc-status"), "13");
  }
}

TEST(CompressionCall, DecompressionBombToTheServerIsResourceExhausted) {
  // ~100 KiB on the wire inflating to 100 MiB, against the default 4 MiB limit.
  GzLoop gz;
  RawCall call(gz.loop, kUnary, {{"grpc-encoding", "gzip"}},
               frame(gzip_of_zeros(100u << 20), true));
  const testing::RawResponse& r = call.wait();
  EXPECT_EQ(r.header("grpc-status"), "8");
  EXPECT_NE(r.header("grpc-message").value_or("").find("decompression"), std::string::npos);
}

TEST(CompressionCall, ServerLimitAppliesToTheInflatedRequest) {
  ServerOptions server_options;
  server_options.max_receive_message_size = 64 << 10;
  GzLoop gz(server_options);
  EchoRequest request;
  request.set_payload(std::string(1 << 20, '\0'));  // ~1 KiB compressed: small on the wire
  EchoResponse response;
  ClientContext ctx;
  ctx.set_compression(Compression::kGzip);
  absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await gz.loop.channel().call(kUnary, ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST(CompressionCall, ClientLimitAppliesToTheInflatedResponse) {
  ChannelOptions channel_options;
  channel_options.max_receive_message_size = 64 << 10;
  GzLoop gz({}, channel_options);
  EchoRequest request;
  request.set_response_size(1 << 20);
  request.set_status_code(kCompressResponses);
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = gz.loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await gz.loop.channel().call(kUnary, ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

// A one-stream HTTP/2 server that answers with grpc-encoding: snappy and a message flagged
// compressed, then grpc-status 0: what a client that cannot inflate snappy must fail (INTERNAL).
class SnappyServer final : public http2::ConnectionObserver, public http2::Stream {
 public:
  explicit SnappyServer(asio::io_context& io)
      : acceptor_(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
      if (ec) return;
      connection_ =
          std::make_shared<http2::Connection>(http2::make_tcp_stream(std::move(socket)),
                                              http2::Role::kServer, ConnectionLimits{}, this);
      connection_->start();
    });
  }
  ~SnappyServer() override {
    if (connection_ != nullptr) connection_->close();
    asio::error_code ignored;
    acceptor_.close(ignored);
  }
  int port() const { return acceptor_.local_endpoint().port(); }

  http2::Stream* on_stream_open(std::int32_t) override { return used_ ? nullptr : this; }
  void on_goaway(std::int32_t, http2::ErrorCode) override {}
  void on_connection_closed() override {}

  bool on_header(std::string_view, std::string_view) override { return true; }
  void on_headers_done() override {
    if (used_) return;
    used_ = true;
    const std::string message = frame(
        "\x0a\x03"
        "abc",
        /*compressed=*/true);
    outbound.append_copy(message.data(), message.size());
    outbound_end = true;
    trailers.owned.push_back({"grpc-status", "0"});
    const http2::HeaderField fields[] = {
        {":status", "200"}, {"content-type", "application/grpc"}, {"grpc-encoding", "snappy"}};
    connection_->submit_response(this, fields, /*with_data=*/true);
  }
  void on_data(Slice chunk) override { connection_->consume(this, chunk.size()); }
  void on_remote_end() override {}
  void on_outbound_taken() override {}
  void on_closed(http2::ErrorCode) override {}

 private:
  asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<http2::Connection> connection_;
  bool used_ = false;
};

TEST(CompressionCall, ResponseInAnUnsupportedEncodingIsInternal) {
  Loopback loop;
  SnappyServer snappy(loop.io());
  absl::Status s;
  {
    Channel channel(loop.io(), "127.0.0.1:" + std::to_string(snappy.port()));
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    s = loop.run([&]() -> asio::awaitable<absl::Status> {
      co_return co_await channel.call(kUnary, ctx, request, response);
    });
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(std::string(s.message()).find("snappy"), std::string::npos) << s;
}

TEST(CompressionCall, ManyCompressedCallsStayCorrect) {
  // Exercises the per-thread zlib streams' reset between messages on both sides.
  GzLoop gz;
  int ok = gz.loop.run([&]() -> asio::awaitable<int> {
    int n = 0;
    for (int i = 0; i < 300; ++i) {
      EchoRequest request;
      request.set_payload(pattern(static_cast<std::size_t>(i * 37)));
      request.set_status_code(kCompressResponses);
      EchoResponse response;
      ClientContext ctx;
      ctx.set_compression(i % 3 == 0 ? Compression::kIdentity : Compression::kGzip);
      absl::Status s = co_await gz.loop.channel().call(kUnary, ctx, request, response);
      if (s.ok() && response.payload() == request.payload() && ctx.response_compressed()) ++n;
    }
    co_return n;
  });
  EXPECT_EQ(ok, 300);
}

}  // namespace
}  // namespace ferry::compression_call_test

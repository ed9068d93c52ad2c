// The client facing broken and hostile servers, built here from raw bytes: a proxy's HTML error
// page in place of a gRPC response (each HTTP status mapped as gRPC's table says, before the body
// is read, over HTTP/2 and HTTP/1.1, for gRPC, gRPC-Web and Connect), informational (1xx)
// responses before the real one, the header-list limit applied per block, malformed -bin
// metadata, and the words of a status that says who reset the stream or closed the connection.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "asio/connect.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/read_until.hpp"
#include "asio/write.hpp"
#include "ferry/channel.h"
#include "ferry/testing/echo.ferry.h"
#include "support/gzip_data.h"
#include "support/h2_frame.h"
#include "support/wait.h"

namespace ferry::broken_server_test {
namespace {

using namespace std::chrono_literals;
using testing::Echo;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::h2_frame;

// --- HTTP/2 frames, by hand (RFC 9113 §4.1, §6; HPACK literals without indexing, RFC 7541) -----

constexpr std::uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4, kPing = 0x6,
                       kContinuation = 0x9;
constexpr std::uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

// An HPACK integer with a 7-bit prefix (RFC 7541 §5.1), as string lengths are.
void hpack_length(std::string& out, std::size_t n) {
  if (n < 127) {
    out.push_back(static_cast<char>(n));
    return;
  }
  out.push_back(static_cast<char>(127));
  n -= 127;
  while (n >= 128) {
    out.push_back(static_cast<char>(n % 128 + 128));
    n /= 128;
  }
  out.push_back(static_cast<char>(n));
}

using Fields = std::vector<std::pair<std::string, std::string>>;

std::string headers(std::uint32_t stream, const Fields& fields, bool end_stream) {
  std::string block;
  for (const auto& [name, value] : fields) {
    block.push_back('\0');  // literal header field without indexing, new name
    hpack_length(block, name.size());
    block += name;
    hpack_length(block, value.size());
    block += value;
  }
  // Frames of at most 16 KiB (SETTINGS_MAX_FRAME_SIZE's default): HEADERS, then CONTINUATION.
  constexpr std::size_t kMaxFrame = 16384;
  std::string out;
  std::size_t at = 0;
  do {
    const std::string part = block.substr(at, kMaxFrame);
    at += part.size();
    const std::uint8_t last = at >= block.size() ? kEndHeaders : 0;
    out += out.empty() ? h2_frame(kHeaders, last | (end_stream ? kEndStream : 0), stream, part)
                       : h2_frame(kContinuation, last, stream, part);
  } while (at < block.size());
  return out;
}

std::string data(std::uint32_t stream, const std::string& bytes, bool end_stream) {
  return h2_frame(kData, end_stream ? kEndStream : 0, stream, bytes);
}

// A gRPC message: the 5-byte prefix (compressed flag, length) and the bytes.
std::string grpc_message(const std::string& bytes, bool compressed = false) {
  std::string out(1, compressed ? '\1' : '\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>(bytes.size() >> shift));
  return out + bytes;
}

std::string echo_response(const std::string& payload) {
  EchoResponse response;
  response.set_payload(payload);
  return response.SerializeAsString();
}

// A whole successful gRPC response on stream: headers, one message, trailers.
std::string grpc_ok(std::uint32_t stream, const std::string& payload) {
  return headers(stream, {{":status", "200"}, {"content-type", "application/grpc"}}, false) +
         data(stream, grpc_message(echo_response(payload)), false) +
         headers(stream, {{"grpc-status", "0"}}, true);
}

const std::string kHtmlPage =
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
    "</center><hr><center>nginx</center></body></html>\r\n";

// An HTTP/2 server of one connection at a time, on a thread of its own, that speaks only as
// much HTTP/2 as it must (SETTINGS and PING acknowledged) and answers each request's HEADERS
// with the bytes script(stream, n) returns, n counting the requests from 0. It records the
// RST_STREAM codes the client sends.
class RawH2Server {
 public:
  using Script = std::function<std::string(std::uint32_t stream, int request)>;

  // trickle: the script's bytes go one per write (with TCP_NODELAY), so that the client reads
  // frames and header blocks split at every byte.
  explicit RawH2Server(Script script, bool trickle = false)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}),
        script_(std::move(script)),
        trickle_(trickle) {
    thread_ = std::thread([this] { serve(); });
  }
  ~RawH2Server() {
    stop_ = true;
    {
      std::lock_guard lock(mutex_);
      if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes the blocking read
    }
    asio::io_context io;  // and a connection wakes a blocking accept
    asio::ip::tcp::socket wake(io);
    asio::error_code ignored;
    wake.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }
  std::string target() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  int requests() const { return requests_.load(); }
  std::vector<std::uint32_t> resets() {
    std::lock_guard lock(mutex_);
    return resets_;
  }

 private:
  void serve() {
    while (!stop_) {
      asio::ip::tcp::socket socket(io_);
      asio::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) return;
      {
        std::lock_guard lock(mutex_);
        fd_ = socket.native_handle();
      }
      converse(socket);
      std::lock_guard lock(mutex_);
      fd_ = -1;
    }
  }

  void converse(asio::ip::tcp::socket& socket) {
    asio::error_code ec;
    std::string preface(24, '\0');
    asio::read(socket, asio::buffer(preface), ec);
    if (ec) return;
    asio::write(socket, asio::buffer(h2_frame(kSettings, 0, 0, "")), ec);
    for (;;) {
      unsigned char head[9];
      asio::read(socket, asio::buffer(head), ec);
      if (ec) return;
      const std::size_t length = (std::size_t{head[0]} << 16) | (head[1] << 8) | head[2];
      const std::uint32_t stream =
          ((head[5] & 0x7fu) << 24) | (head[6] << 16) | (head[7] << 8) | head[8];
      std::string payload(length, '\0');
      asio::read(socket, asio::buffer(payload), ec);
      if (ec) return;
      std::string answer;
      if (head[3] == kSettings && (head[4] & kAck) == 0) {
        answer = h2_frame(kSettings, kAck, 0, "");
      } else if (head[3] == kPing && (head[4] & kAck) == 0) {
        answer = h2_frame(kPing, kAck, 0, payload);
      } else if (head[3] == kRstStream && payload.size() == 4) {
        std::lock_guard lock(mutex_);
        resets_.push_back((std::uint32_t{static_cast<unsigned char>(payload[0])} << 24) |
                          (static_cast<unsigned char>(payload[1]) << 16) |
                          (static_cast<unsigned char>(payload[2]) << 8) |
                          static_cast<unsigned char>(payload[3]));
      } else if (head[3] == kHeaders) {
        answer = script_(stream, requests_++);
      }
      if (trickle_ && head[3] == kHeaders) {
        socket.set_option(asio::ip::tcp::no_delay(true), ec);
        for (std::size_t i = 0; i < answer.size() && !ec; ++i) {
          asio::write(socket, asio::buffer(answer.data() + i, 1), ec);
        }
      } else if (!answer.empty()) {
        asio::write(socket, asio::buffer(answer), ec);
      }
      if (ec) return;
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  Script script_;
  bool trickle_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  int fd_ = -1;
  std::vector<std::uint32_t> resets_;
  std::thread thread_;
};

absl::Status call(const std::string& target, EchoResponse& response, ChannelOptions options = {}) {
  Channel channel(target, std::move(options));
  Echo::BlockingStub stub(channel);
  ClientContext context;
  context.set_timeout(10s);
  EchoRequest request;
  request.set_payload("hello");
  return stub.Echo(context, request, response);
}

absl::Status call(const std::string& target, ChannelOptions options = {}) {
  EchoResponse response;
  return call(target, response, std::move(options));
}

bool contains(const absl::Status& s, std::string_view text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// --- a non-200 response is mapped by its HTTP status before its body is read ------------------

struct HttpMapping {
  int http_status;
  absl::StatusCode code;
};

// grpc/grpc doc/http-grpc-status-mapping.md.
const HttpMapping kMappings[] = {
    {400, absl::StatusCode::kInternal},         {401, absl::StatusCode::kUnauthenticated},
    {403, absl::StatusCode::kPermissionDenied}, {404, absl::StatusCode::kUnimplemented},
    {429, absl::StatusCode::kUnavailable},      {502, absl::StatusCode::kUnavailable},
    {503, absl::StatusCode::kUnavailable},      {504, absl::StatusCode::kUnavailable},
    {500, absl::StatusCode::kUnknown},          {418, absl::StatusCode::kUnknown},
};

// A proxy's HTML error page used to be read as gRPC frames: INTERNAL, "compressed flag is 60"
// ('<'), whatever the HTTP status said.
TEST(BrokenServer, AnHtmlErrorPageIsMappedByItsHttpStatus) {
  for (const HttpMapping& m : kMappings) {
    RawH2Server server([&](std::uint32_t stream, int) {
      return headers(stream,
                     {{":status", std::to_string(m.http_status)}, {"content-type", "text/html"}},
                     false) +
             data(stream, kHtmlPage, true);
    });
    const absl::Status s = call(server.target());
    EXPECT_EQ(s.code(), m.code) << m.http_status << ": " << s;
    EXPECT_TRUE(contains(s, "HTTP status " + std::to_string(m.http_status))) << s;
  }
}

// The page arriving one byte per DATA frame, and a grpc-status the proxy copied into its
// headers, change nothing: the HTTP status decides, from the headers alone.
TEST(BrokenServer, ANon200ResponseIsJudgedByItsHeadersAlone) {
  RawH2Server server([&](std::uint32_t stream, int) {
    std::string out = headers(
        stream, {{":status", "503"}, {"content-type", "application/grpc"}, {"grpc-status", "0"}},
        false);
    for (char c : kHtmlPage) out += data(stream, std::string(1, c), false);
    return out + data(stream, "", true);
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

// The point of the mapping: a policy that retries UNAVAILABLE retries a proxy's 503 page (it
// used to fail INTERNAL, and a response with headers counted as committed).
TEST(BrokenServer, ARetryPolicyRetriesA503Page) {
  RawH2Server server([&](std::uint32_t stream, int n) {
    if (n < 2) {
      return headers(stream, {{":status", "503"}, {"content-type", "text/html"}}, false) +
             data(stream, kHtmlPage, true);
    }
    return grpc_ok(stream, "third time");
  });
  ChannelOptions options;
  RetryPolicy& policy = options.method_configs["/ferry.testing.Echo/"].retry_policy.emplace();
  policy.max_attempts = 3;
  policy.initial_backoff = 10ms;
  EchoResponse response;
  const absl::Status s = call(server.target(), response, options);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "third time");
  EXPECT_EQ(server.requests(), 3);
}

// --- informational responses ------------------------------------------------------------------

// RFC 9110 §15.2: a 103 Early Hints (or any 1xx) comes before the final response. Its fields
// used to make the real headers count as trailers: their grpc-encoding was ignored (a gzip
// response failed) and their content-type too (an HTML body passed as OK).
TEST(BrokenServer, InformationalResponsesAreSkipped) {
  const std::string compressed = testing::zlib_gzip(echo_response("hinted"));
  RawH2Server server([&](std::uint32_t stream, int) {
    return headers(stream, {{":status", "103"}, {"link", "</style.css>; rel=preload"}}, false) +
           headers(stream, {{":status", "100"}}, false) +
           headers(stream,
                   {{":status", "200"},
                    {"content-type", "application/grpc"},
                    {"grpc-encoding", "gzip"},
                    {"x-initial", "yes"}},
                   false) +
           data(stream, grpc_message(compressed, /*compressed=*/true), false) +
           headers(stream, {{"grpc-status", "0"}, {"x-trailing", "yes"}}, true);
  });
  Channel channel(server.target());
  Echo::BlockingStub stub(channel);
  ClientContext context;
  context.set_timeout(10s);
  EchoRequest request;
  EchoResponse response;
  const absl::Status s = stub.Echo(context, request, response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "hinted");
  EXPECT_EQ(context.initial_metadata().get("x-initial"), "yes");
  EXPECT_EQ(context.initial_metadata().get("link"), std::nullopt);
  EXPECT_EQ(context.trailing_metadata().get("x-trailing"), "yes");
  EXPECT_EQ(context.trailing_metadata().get("x-initial"), std::nullopt);
}

TEST(BrokenServer, AnHtmlPageAfterEarlyHintsIsNotOk) {
  RawH2Server server([&](std::uint32_t stream, int) {
    return headers(stream, {{":status", "103"}, {"link", "</a.css>"}}, false) +
           headers(stream, {{":status", "200"}, {"content-type", "text/html"}}, false) +
           data(stream, kHtmlPage, false) + headers(stream, {{"grpc-status", "0"}}, true);
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << s;
  EXPECT_TRUE(contains(s, "content-type")) << s;
}

// The same responses one byte per read: a proxy's page, and early hints before a real response.
TEST(BrokenServer, ResponsesSplitAtEveryByteReadTheSame) {
  {
    RawH2Server server(
        [&](std::uint32_t stream, int) {
          return headers(stream, {{":status", "502"}, {"content-type", "text/html"}}, false) +
                 data(stream, kHtmlPage, true);
        },
        /*trickle=*/true);
    const absl::Status s = call(server.target());
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  RawH2Server server(
      [&](std::uint32_t stream, int) {
        return headers(stream, {{":status", "103"}, {"link", "</a.css>"}}, false) +
               grpc_ok(stream, "trickled");
      },
      /*trickle=*/true);
  EchoResponse response;
  const absl::Status s = call(server.target(), response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "trickled");
}

// --- the header-list limit, per block ---------------------------------------------------------

// RFC 9113 §6.5.2: SETTINGS_MAX_HEADER_LIST_SIZE bounds a header block. Headers and trailers of
// 10 KB each (the limit is 16 KiB) used to fail together.
TEST(BrokenServer, TheHeaderLimitAppliesToEachBlock) {
  const std::string big(10000, 'v');
  RawH2Server server([&](std::uint32_t stream, int n) {
    if (n == 0) {
      return headers(stream,
                     {{":status", "200"}, {"content-type", "application/grpc"}, {"x-big", big}},
                     false) +
             data(stream, grpc_message(echo_response("ok")), false) +
             headers(stream, {{"grpc-status", "0"}, {"x-big-trailer", big}}, true);
    }
    // One block over the limit by itself.
    return headers(stream,
                   {{":status", "200"},
                    {"content-type", "application/grpc"},
                    {"x-big", big},
                    {"x-bigger", big}},
                   false) +
           data(stream, grpc_message(echo_response("ok")), false) +
           headers(stream, {{"grpc-status", "0"}}, true);
  });
  EXPECT_TRUE(call(server.target()).ok());
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(contains(s, "16384-byte limit")) << s;
}

// --- malformed metadata -----------------------------------------------------------------------

TEST(BrokenServer, MalformedBinaryMetadataIsInternalAndNamed) {
  RawH2Server server([&](std::uint32_t stream, int) {
    return headers(stream,
                   {{":status", "200"}, {"content-type", "application/grpc"}, {"x-id-bin", "!!"}},
                   false) +
           data(stream, grpc_message(echo_response("ok")), false) +
           headers(stream, {{"grpc-status", "0"}}, true);
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(contains(s, "malformed binary metadata")) << s;
  EXPECT_TRUE(contains(s, "x-id-bin")) << s;
}

// --- who reset what ---------------------------------------------------------------------------

TEST(BrokenServer, AResetByTheServerIsWordedAsTheServers) {
  RawH2Server server([&](std::uint32_t stream, int) {
    return h2_frame(kRstStream, 0, stream, std::string("\0\0\0\x8", 4));  // CANCEL
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(contains(s, "the server reset the stream with CANCEL")) << s;
}

// A header name in capitals breaks HTTP/2's rules (RFC 9113 §8.2.1): ferry resets the stream
// with PROTOCOL_ERROR, and the status used to say the server had.
TEST(BrokenServer, AResetByFerryIsWordedAsFerrys) {
  RawH2Server server([&](std::uint32_t stream, int) {
    return headers(stream,
                   {{":status", "200"}, {"content-type", "application/grpc"}, {"X-Upper", "1"}},
                   false);
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(contains(s, "ferry reset the stream with PROTOCOL_ERROR")) << s;
  EXPECT_FALSE(contains(s, "the server reset")) << s;
  // The call ends when ferry resets the stream; the server reads the RST_STREAM a moment later.
  ASSERT_TRUE(testing::eventually([&] { return !server.resets().empty(); }));
  EXPECT_EQ(server.resets().front(), 0x1u);  // PROTOCOL_ERROR, sent by the client
}

// A server that floods the client with PINGs faster than it could acknowledge them: ferry's
// session detects the flood and ferry closes the connection, which the status says (it used to read
// as a lost connection).
TEST(BrokenServer, AFloodDetectedByFerryIsWordedAsFerrys) {
  RawH2Server server([&](std::uint32_t, int) {
    std::string pings;
    for (int i = 0; i < 5000; ++i) pings += h2_frame(kPing, 0, 0, std::string(8, 'p'));
    return pings;
  });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(contains(s, "ferry closed the connection to the server")) << s;
}

// A frame on stream 0 that must not be there (DATA): a connection error, GOAWAY(PROTOCOL_ERROR)
// from the client.
TEST(BrokenServer, AConnectionErrorFoundByFerryIsWordedAsFerrys) {
  RawH2Server server([&](std::uint32_t, int) { return data(0, "x", false); });
  const absl::Status s = call(server.target());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(contains(s, "ferry closed the connection to the server: PROTOCOL_ERROR")) << s;
}

// --- HTTP/1.1: gRPC-Web and Connect -----------------------------------------------------------

// An HTTP/1.1 server on a thread of its own that answers every request with `answer`.
class RawHttp1Server {
 public:
  explicit RawHttp1Server(std::string answer)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), answer_(std::move(answer)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~RawHttp1Server() {
    stop_ = true;
    asio::io_context io;
    asio::ip::tcp::socket wake(io);
    asio::error_code ignored;
    wake.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }
  std::string target() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  void serve() {
    while (!stop_) {
      asio::ip::tcp::socket socket(io_);
      asio::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) return;
      // The request's head, then its body: by content-length, or chunked up to the last chunk.
      std::string buffer;
      const std::size_t head =
          asio::read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n", ec);
      if (ec) continue;
      const std::string request = buffer.substr(0, head);
      if (const std::size_t at = request.find("content-length: "); at != std::string::npos) {
        const std::size_t length = std::stoul(request.substr(at + 16));
        if (buffer.size() - head < length) {
          std::string rest(length - (buffer.size() - head), '\0');
          asio::read(socket, asio::buffer(rest), ec);
        }
      } else if (request.find("chunked") != std::string::npos &&
                 buffer.find("0\r\n\r\n", head) == std::string::npos) {
        asio::read_until(socket, asio::dynamic_buffer(buffer), "0\r\n\r\n", ec);
      }
      asio::write(socket, asio::buffer(answer_), ec);
      socket.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
      char sink[256];
      while (!ec) socket.read_some(asio::buffer(sink), ec);  // until the client closes
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::string answer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ChannelOptions http1(ChannelProtocol protocol) {
  ChannelOptions options;
  options.protocol = protocol;
  options.http_version = ChannelHttpVersion::kHttp1;
  return options;
}

std::string http1_page(int status, const std::string& reason) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\ncontent-type: text/html\r\nconnection: close\r\ncontent-length: " +
         std::to_string(kHtmlPage.size()) + "\r\n\r\n" + kHtmlPage;
}

TEST(BrokenServer, AnHtmlErrorPageOverHttp1IsMappedByItsHttpStatus) {
  for (ChannelProtocol protocol : {ChannelProtocol::kGrpcWeb, ChannelProtocol::kConnect}) {
    RawHttp1Server server(http1_page(503, "Service Unavailable"));
    const absl::Status s = call(server.target(), http1(protocol));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_TRUE(contains(s, "HTTP status 503")) << s;
    RawHttp1Server forbidden(http1_page(403, "Forbidden"));
    EXPECT_EQ(call(forbidden.target(), http1(protocol)).code(),
              absl::StatusCode::kPermissionDenied);
  }
}

TEST(BrokenServer, InformationalResponsesOverHttp1AreSkipped) {
  EchoResponse body;
  body.set_payload("hinted");
  const std::string message = grpc_message(body.SerializeAsString());
  const std::string trailers = "grpc-status: 0\r\n";
  std::string trailer_frame(1, '\x80');
  for (int shift = 24; shift >= 0; shift -= 8) {
    trailer_frame.push_back(static_cast<char>(trailers.size() >> shift));
  }
  trailer_frame += trailers;
  const std::string payload = message + trailer_frame;
  RawHttp1Server server(
      "HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n"
      "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\nconnection: close\r\n"
      "content-length: " +
      std::to_string(payload.size()) + "\r\n\r\n" + payload);
  EchoResponse response;
  const absl::Status s = call(server.target(), response, http1(ChannelProtocol::kGrpcWeb));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "hinted");
}

}  // namespace
}  // namespace ferry::broken_server_test

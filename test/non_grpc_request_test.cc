// A request that is not gRPC, gRPC-Web or Connect (another method, another content-type), as
// generic HTTP/2 clients and h2spec send them: answered once the client has sent all of it
// (END_STREAM), with a short text/plain body, so that the request's own frames are judged by a
// stream that is still open rather than racing an answer that closed it. Played with a raw
// HTTP/2 client over TCP, which waits for a PING's ACK to know the server has read everything
// before it sends the next frame: the order h2spec's runs met only by chance on a loaded machine.
// The attacker's side: a request that never ends, one with a body many windows long, and as many
// of them as the connection allows streams, with the server's memory bounded throughout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "asio/ip/tcp.hpp"
#include "asio/write.hpp"
#include "ferry/buffer_pool.h"
#include "support/h2_frame.h"
#include "support/loopback.h"
#include "support/raw_call.h"

namespace ferry::non_grpc_request_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::h2_frame;
using testing::header_block;
using testing::Loopback;
using testing::RawCall;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4, kPing = 0x6,
                       kGoaway = 0x7, kWindowUpdate = 0x8;
constexpr std::uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;
constexpr std::uint32_t kProtocolError = 0x1, kRefusedStream = 0x7, kCancel = 0x8;

std::string be32(std::uint32_t v) {
  std::string s;
  for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>(v >> shift));
  return s;
}

// A request that is not gRPC: a POST of text/plain to one of the server's methods.
std::string plain_post(std::uint32_t stream, bool end_stream) {
  return h2_frame(kHeaders, kEndHeaders | (end_stream ? kEndStream : 0), stream,
                  header_block({{":method", "POST"},
                                {":scheme", "http"},
                                {":path", "/ferry.testing.Echo/Echo"},
                                {":authority", "localhost"},
                                {"content-type", "text/plain"}}));
}

std::string get_root(std::uint32_t stream, bool end_stream) {
  return h2_frame(
      kHeaders, kEndHeaders | (end_stream ? kEndStream : 0), stream,
      header_block(
          {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "localhost"}}));
}

using Frame = testing::H2Frame;

// A client speaking raw HTTP/2 over TCP: it keeps the server's flow-control windows (to send a
// long body as a well-behaved client would), acknowledges the server's SETTINGS, and keeps every
// other frame for the test to look at.
class RawH2Client {
 public:
  explicit RawH2Client(int port) : socket_(io_) {
    socket_.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    send(std::string(kPreface) + h2_frame(kSettings, 0, 0, ""));
  }

  void send(std::string_view bytes) {
    socket_.non_blocking(false);
    asio::write(socket_, asio::buffer(bytes));
  }

  // Sends a PING and reads until its ACK: every frame sent before it has been read and answered
  // by the server (it answers in order, in the turn that read them).
  void sync() {
    const std::string opaque = "sync" + be32(++pings_);
    send(h2_frame(kPing, 0, 0, opaque));
    read_until([&](const Frame& f) {
      return f.type == kPing && (f.flags & kAck) != 0 && f.payload == opaque;
    });
  }

  // Sends `size` bytes of DATA on `stream` within the server's windows (reading its
  // WINDOW_UPDATEs as needed), END_STREAM on the last frame when `end`. Calls `sample` after
  // each frame.
  template <class Sample>
  void send_body(std::uint32_t stream, std::size_t size, bool end, Sample sample) {
    const std::string chunk(16384, 'x');
    if (stream_windows_[stream] == 0) stream_windows_[stream] = initial_window_;  // a new one
    while (size > 0) {
      const std::size_t n = std::min(size, chunk.size());
      while (conn_window_ < static_cast<std::int64_t>(n) ||
             stream_windows_[stream] < static_cast<std::int64_t>(n)) {
        read_one(Clock::now() + 5s);
      }
      size -= n;
      send(h2_frame(kData, end && size == 0 ? kEndStream : 0, stream,
                    std::string_view(chunk).substr(0, n)));
      conn_window_ -= static_cast<std::int64_t>(n);
      stream_windows_[stream] -= static_cast<std::int64_t>(n);
      sample();
    }
  }

  // Reads until a frame satisfies done (true), or 5 s pass (throws).
  template <class Done>
  void read_until(Done done) {
    const auto until = Clock::now() + 5s;
    while (true) {
      for (; checked_ < frames_.size(); ++checked_) {
        if (done(frames_[checked_])) {
          ++checked_;
          return;
        }
      }
      read_one(until);
    }
  }

  // The frames received on `stream` (0: the connection's, SETTINGS and PING excepted).
  std::vector<Frame> on_stream(std::uint32_t stream) const {
    std::vector<Frame> out;
    for (const Frame& f : frames_) {
      if (f.stream == stream && f.type != kSettings && f.type != kPing && f.type != kWindowUpdate) {
        out.push_back(f);
      }
    }
    return out;
  }
  const std::vector<Frame>& frames() const { return frames_; }

 private:
  // Reads at least one frame (throws when `until` passes or the server closes).
  void read_one(Clock::time_point until) {
    socket_.non_blocking(true);
    const std::size_t before = frames_.size();
    while (frames_.size() == before) {
      char chunk[16384];
      asio::error_code ec;
      const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
      if (ec == asio::error::would_block) {
        if (Clock::now() > until) throw std::runtime_error("no frame from the server in time");
        std::this_thread::sleep_for(1ms);
        continue;
      }
      if (ec) {
        std::string seen;
        for (const Frame& f : frames_) {
          seen += " " + std::to_string(f.type) + "/" + std::to_string(f.stream) + "/" +
                  std::to_string(f.code());
        }
        throw std::runtime_error("the server closed the connection (" + ec.message() +
                                 "); frames (type/stream/code):" + seen);
      }
      buffer_.append(chunk, n);
      parse();
    }
  }
  void parse() {
    while (std::optional<Frame> f = testing::take_h2_frame(buffer_)) {
      on_frame(*f);
      frames_.push_back(std::move(*f));
    }
  }
  void on_frame(const Frame& f) {
    if (f.type == kSettings && (f.flags & kAck) == 0) {
      for (std::size_t i = 0; i + 6 <= f.payload.size(); i += 6) {
        const auto id = static_cast<std::uint16_t>((std::uint8_t(f.payload[i]) << 8) |
                                                   std::uint8_t(f.payload[i + 1]));
        std::uint32_t value = 0;
        for (std::size_t j = i + 2; j < i + 6; ++j)
          value = (value << 8) | std::uint8_t(f.payload[j]);
        if (id == 0x4) {  // SETTINGS_INITIAL_WINDOW_SIZE
          for (auto& [stream, window] : stream_windows_) window += value - initial_window_;
          initial_window_ = value;
        }
      }
      send(h2_frame(kSettings, kAck, 0, ""));
    } else if (f.type == kWindowUpdate && f.payload.size() == 4) {
      const std::uint32_t increment = f.code() & 0x7fffffffu;
      if (f.stream == 0) {
        conn_window_ += increment;
      } else {
        stream_windows_[f.stream] += increment;
      }
    }
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::string buffer_;
  std::vector<Frame> frames_;
  std::size_t checked_ = 0;  // read_until has looked at frames_ up to here
  std::uint32_t pings_ = 0;
  std::int64_t conn_window_ = 65535;
  std::int64_t initial_window_ = 65535;
  std::map<std::uint32_t, std::int64_t> stream_windows_;  // by stream id
};

bool has(const std::vector<Frame>& frames, std::uint8_t type) {
  return std::any_of(frames.begin(), frames.end(), [&](const Frame& f) { return f.type == type; });
}

std::string body_of(const std::vector<Frame>& frames) {
  std::string body;
  for (const Frame& f : frames) {
    if (f.type == kData) body += f.payload;
  }
  return body;
}

std::int64_t blocks_in_use() { return BufferPool::instance().stats().blocks_in_use; }

// --- the answer ---------------------------------------------------------------------------------

TEST(NonGrpcRequest, IsAnsweredWithItsStatusAndATextBody) {
  Loopback loop;
  {
    RawCall call(loop, "/", {{":method", "GET"}}, "");
    const testing::RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "405");
    EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
    EXPECT_EQ(r.header("grpc-status"), "13");
    EXPECT_EQ(r.data, "invalid gRPC request method 'GET'\n");
    EXPECT_EQ(r.h2_error, http2::ErrorCode::kNoError);  // ended by both sides, never reset
  }
  {
    RawCall call(loop, "/ferry.testing.Echo/Echo", {{"content-type", "text/plain"}}, "a body");
    const testing::RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "415");
    EXPECT_EQ(r.data, "invalid gRPC request content-type 'text/plain'\n");
    EXPECT_EQ(r.h2_error, http2::ErrorCode::kNoError);
  }
  {  // HEAD: the same status, and no body (RFC 9110 §9.3.2)
    RawCall call(loop, "/", {{":method", "HEAD"}}, "");
    const testing::RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "405");
    EXPECT_EQ(r.data, "");
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

// --- answered once complete, never before -------------------------------------------------------

TEST(NonGrpcRequest, WaitsForTheEndOfTheRequest) {
  Loopback loop;
  RawH2Client client(loop.port());
  client.send(plain_post(1, /*end_stream=*/false));
  client.sync();  // the server has read the request's HEADERS: it has not answered
  EXPECT_TRUE(client.on_stream(1).empty());
  client.send(h2_frame(kData, 0, 1, "part of a body"));
  client.sync();
  EXPECT_TRUE(client.on_stream(1).empty());
  client.send(h2_frame(kData, kEndStream, 1, "the rest"));
  client.read_until([](const Frame& f) { return f.stream == 1 && (f.flags & kEndStream) != 0; });
  const std::vector<Frame> frames = client.on_stream(1);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames[0].type, kHeaders);
  EXPECT_EQ(frames[0].flags & kEndStream, 0);  // a body follows
  EXPECT_EQ(body_of(frames), "invalid gRPC request content-type 'text/plain'\n");
  EXPECT_FALSE(has(frames, kRstStream));
}

// Reads until `stream` is reset or the connection is closed with GOAWAY (an engine may make some
// stream errors connection errors, as RFC 9113 allows and h2spec accepts); the error code.
std::uint32_t stream_or_connection_error(RawH2Client& client, std::uint32_t stream) {
  std::uint32_t code = 0xffffffffu;
  client.read_until([&](const Frame& f) {
    if ((f.type == kRstStream && f.stream == stream) || f.type == kGoaway) code = f.code();
    return code != 0xffffffffu;
  });
  return code;
}

TEST(NonGrpcRequest, FramesAfterTheHeadersAreJudgedByAnOpenStream) {
  // h2spec 6.9 #2, 8.1.2.1 #3 (and 6.1 #3, 8.1.2.6 #1, 8.1 #1 alike): the request's HEADERS, then
  // in a later read (the PING proves it) a frame breaking a rule of an open stream. An answer
  // sent at once had closed the stream, and the frame was then ignored where an error is due.
  Loopback loop;
  {
    RawH2Client client(loop.port());
    client.send(plain_post(1, false));
    client.sync();
    client.send(h2_frame(kWindowUpdate, 0, 1, be32(0)));  // increment 0 on a stream
    EXPECT_EQ(stream_or_connection_error(client, 1), kProtocolError);
    EXPECT_FALSE(has(client.on_stream(1), kHeaders));  // never answered
  }
  {
    RawH2Client client(loop.port());
    client.send(get_root(1, false));
    client.sync();
    // Trailers with a pseudo-header field.
    client.send(h2_frame(kHeaders, kEndHeaders | kEndStream, 1, header_block({{":path", "/x"}})));
    EXPECT_EQ(stream_or_connection_error(client, 1), kProtocolError);
    EXPECT_FALSE(has(client.on_stream(1), kHeaders));
  }
  {  // a request ended at once is answered at once
    RawH2Client client(loop.port());
    client.send(get_root(1, true));
    client.read_until([](const Frame& f) { return f.stream == 1 && (f.flags & kEndStream) != 0; });
    EXPECT_EQ(body_of(client.on_stream(1)), "invalid gRPC request method 'GET'\n");
    EXPECT_FALSE(has(client.on_stream(1), kRstStream));
  }
}

// --- the attacker's side ------------------------------------------------------------------------

TEST(NonGrpcRequest, AHugeBodyIsDroppedAsItComesWithItsWindowGivenBack) {
  // 48 MiB: 48 of the stream's windows, 3 of the connection's (ConnectionLimits' defaults). The
  // client sends only within the windows, so it gets to the end only if the server gives back
  // what it drops; and the server's memory stays at a few blocks throughout.
  Loopback loop;
  RawH2Client client(loop.port());
  client.send(plain_post(1, false));
  client.sync();
  const std::int64_t before = blocks_in_use();
  std::int64_t peak = before;
  client.send_body(1, std::size_t{48} << 20, /*end=*/true,
                   [&] { peak = std::max(peak, blocks_in_use()); });
  client.read_until([](const Frame& f) { return f.stream == 1 && (f.flags & kEndStream) != 0; });
  EXPECT_EQ(body_of(client.on_stream(1)), "invalid gRPC request content-type 'text/plain'\n");
  EXPECT_FALSE(has(client.on_stream(1), kRstStream));
  // The server's read blocks, and a block or two of the client's: never the body.
  EXPECT_LE(peak - before, 8) << "blocks: " << before << " before, " << peak << " at the peak";
}

TEST(NonGrpcRequest, RequestsThatNeverEndHoldOnlyTheirStreams) {
  // As many requests as the connection allows streams, each sending a window's worth of body and
  // never ending: nothing is answered and memory stays bounded; each stream the client gives up
  // makes room for a request that is answered, each it ends is answered, and one more than the
  // limit is refused.
  ServerOptions options;
  options.max_concurrent_streams = 8;
  Loopback loop(options);
  RawH2Client client(loop.port());
  client.sync();  // the server's SETTINGS are in
  const std::int64_t before = blocks_in_use();
  std::int64_t peak = before;
  for (std::uint32_t s = 1; s <= 15; s += 2) {
    client.send(s % 4 == 1 ? plain_post(s, false) : get_root(s, false));
    client.send_body(s, std::size_t{1} << 20, /*end=*/false,
                     [&] { peak = std::max(peak, blocks_in_use()); });
  }
  client.sync();
  for (std::uint32_t s = 1; s <= 15; s += 2) {
    EXPECT_TRUE(client.on_stream(s).empty()) << "stream " << s;  // nothing answered yet
  }
  EXPECT_LE(peak - before, 8) << "blocks: " << before << " before, " << peak << " at the peak";

  // The client gives up its first request: a new one is served in its place.
  client.send(h2_frame(kRstStream, 0, 1, be32(kCancel)));
  client.send(get_root(17, true));
  client.read_until([&](const Frame& f) { return f.stream == 17 && (f.flags & kEndStream) != 0; });
  EXPECT_EQ(body_of(client.on_stream(17)), "invalid gRPC request method 'GET'\n");
  EXPECT_FALSE(has(client.on_stream(17), kRstStream));
  // The others, ended now, are answered each.
  for (std::uint32_t s = 3; s <= 15; s += 2) {
    client.send(h2_frame(kData, kEndStream, s, ""));
    client.read_until([&](const Frame& f) { return f.stream == s && (f.flags & kEndStream) != 0; });
    EXPECT_NE(body_of(client.on_stream(s)), "") << "stream " << s;
    EXPECT_FALSE(has(client.on_stream(s), kRstStream)) << "stream " << s;
  }
  // Eight more that never end fill the connection again: the ninth is refused (REFUSED_STREAM).
  for (std::uint32_t s = 19; s <= 33; s += 2) client.send(get_root(s, false));
  client.send(get_root(35, true));
  const std::uint32_t code = stream_or_connection_error(client, 35);
  EXPECT_TRUE(code == kRefusedStream || code == kProtocolError) << code;
  EXPECT_EQ(loop.probe().started.load(), 0);
}

}  // namespace
}  // namespace ferry::non_grpc_request_test

// Frames on closed streams (RFC 9113 §5.1, §5.1.1), answered by a server connection whose HTTP/2
// session keeps no closed streams: the ledger's verdicts on their own, then a server connection
// in memory fed raw frames by the test playing the client. The case that matters most for real
// gRPC clients is the last one: frames the client sent before it saw the server's reset are
// ignored, never answered with a connection error.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "http2/connection.h"
#include "http2/peer_stream_ledger.h"
#include "support/h2_frame.h"
#include "transport/memory_stream.h"

namespace ferry::http2::closed_streams_test {
namespace {

using testing::h2_frame;
using testing::header_block;

using Verdict = PeerStreamLedger::Verdict;

TEST(PeerStreamLedger, JudgesByWhatHappenedToTheStream) {
  PeerStreamLedger ledger;
  ledger.on_headers(1);
  ledger.on_headers(3);
  ledger.on_remote_end(3);
  ledger.on_headers(7);  // 5 skipped
  ledger.on_peer_reset(7);
  EXPECT_EQ(ledger.judge(1), Verdict::kIgnore);  // opened, not ended by the peer: we closed it
  EXPECT_EQ(ledger.judge(3), Verdict::kConnectionStreamClosed);
  EXPECT_EQ(ledger.judge(5), Verdict::kConnectionProtocolError);
  EXPECT_EQ(ledger.judge(7), Verdict::kResetStreamClosed);
  EXPECT_FALSE(ledger.used(9));
  EXPECT_TRUE(ledger.used(7));
}

TEST(PeerStreamLedger, ForgetsBeyondItsWindowAndIgnoresThen) {
  PeerStreamLedger ledger;
  ledger.on_headers(1);
  ledger.on_remote_end(1);
  EXPECT_EQ(ledger.judge(1), Verdict::kConnectionStreamClosed);
  ledger.on_headers(1 + 2 * 63);  // stream 1 is still the window's last bit
  EXPECT_EQ(ledger.judge(1), Verdict::kConnectionStreamClosed);
  ledger.on_headers(1 + 2 * 64);  // now out of it: too old to judge
  EXPECT_EQ(ledger.judge(1), Verdict::kIgnore);
  ledger.on_headers(1 + 2 * 1000);  // a jump past the whole window clears it
  EXPECT_EQ(ledger.judge(1 + 2 * 999), Verdict::kConnectionProtocolError);
}

// --- a server connection fed raw frames --------------------------------------------------------

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4,
                       kGoaway = 0x7;
constexpr std::uint8_t kEndStream = 0x1, kEndHeaders = 0x4;

std::string request_headers(std::uint32_t stream, bool end_stream) {
  return h2_frame(kHeaders, kEndHeaders | (end_stream ? kEndStream : 0), stream,
                  header_block({{":method", "POST"},
                                {":scheme", "http"},
                                {":path", "/pkg.Svc/Method"},
                                {":authority", "memory"},
                                {"content-type", "application/grpc"}}));
}

std::string trailers(std::uint32_t stream) {
  return h2_frame(kHeaders, kEndHeaders | kEndStream, stream, header_block({{"x-trailer", "1"}}));
}

std::string rst_stream(std::uint32_t stream, std::uint32_t code) {
  std::string payload;
  for (int shift = 24; shift >= 0; shift -= 8) payload.push_back(static_cast<char>(code >> shift));
  return h2_frame(kRstStream, 0, stream, payload);
}

struct Frame {
  std::uint8_t type;
  std::uint8_t flags;
  std::uint32_t stream;
  std::string payload;
  std::uint32_t code() const {  // RST_STREAM's error code, or GOAWAY's
    const std::size_t at = type == kGoaway ? 4 : 0;
    std::uint32_t c = 0;
    for (std::size_t i = at; i < at + 4 && i < payload.size(); ++i) {
      c = (c << 8) | static_cast<std::uint8_t>(payload[i]);
    }
    return c;
  }
};

std::vector<Frame> parse_frames(const std::string& out) {
  std::vector<Frame> frames;
  for (std::size_t at = 0; at + 9 <= out.size();) {
    const std::size_t len = (std::size_t{std::uint8_t(out[at])} << 16) |
                            (std::size_t{std::uint8_t(out[at + 1])} << 8) |
                            std::uint8_t(out[at + 2]);
    Frame f{static_cast<std::uint8_t>(out[at + 3]), static_cast<std::uint8_t>(out[at + 4]), 0,
            out.substr(at + 9, len)};
    for (int i = 5; i < 9; ++i) f.stream = (f.stream << 8) | std::uint8_t(out[at + i]);
    f.stream &= 0x7fffffff;
    frames.push_back(std::move(f));
    at += 9 + len;
  }
  return frames;
}

// A server-side stream that answers nothing by itself; the test decides.
class Quiet : public Stream {
 public:
  bool closed = false;
  bool on_header(std::string_view, std::string_view) override { return true; }
  void on_headers_done() override {}
  void on_data(Slice) override {}
  void on_remote_end() override {}
  void on_outbound_taken() override {}
  void on_closed(ErrorCode) override { closed = true; }
};

class Observer : public ConnectionObserver {
 public:
  std::vector<std::unique_ptr<Quiet>> opened;
  bool closed = false;
  Stream* on_stream_open(std::int32_t) override {
    opened.push_back(std::make_unique<Quiet>());
    return opened.back().get();
  }
  void on_goaway(std::int32_t, ErrorCode) override {}
  void on_connection_closed() override { closed = true; }
};

// The test plays the client at side 0 of the pipe; the server connection is at side 1.
struct RawClient {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<MemoryPipe> pipe = MemoryPipe::create(io.get_executor());
  Observer observer;
  std::shared_ptr<Connection> server =
      std::make_shared<Connection>(pipe->end(1), Role::kServer, ConnectionLimits{}, &observer);

  RawClient() {
    server->start();
    send(std::string(kPreface) + h2_frame(kSettings, 0, 0, ""));
    drain();
  }
  ~RawClient() {
    server->close();
    io.poll();
  }
  void send(const std::string& bytes) {
    pipe->inject(1, bytes);
    drain();
  }
  void drain() {
    for (int i = 0; i < 10000; ++i) {
      if (io.poll_one() == 0) break;
    }
  }
  std::vector<Frame> received() { return parse_frames(pipe->take_written(1)); }
  // Answers stream id with a headers-only response (Trailers-Only): ends the server's side.
  void answer(std::size_t index) {
    const HeaderField status[] = {HeaderField::literal(":status", "200")};
    ASSERT_TRUE(server->submit_response(observer.opened.at(index).get(), status, false));
    drain();
  }
};

bool has(const std::vector<Frame>& frames, std::uint8_t type, std::uint32_t stream,
         std::uint32_t code) {
  for (const Frame& f : frames) {
    if (f.type == type && f.stream == stream && f.code() == code) return true;
  }
  return false;
}

bool has_type(const std::vector<Frame>& frames, std::uint8_t type) {
  for (const Frame& f : frames) {
    if (f.type == type) return true;
  }
  return false;
}

TEST(ClosedStreams, HeadersAfterTheClientsOwnResetGetStreamClosed) {
  RawClient c;
  c.send(request_headers(1, false));
  c.send(rst_stream(1, 0x8));  // CANCEL
  ASSERT_TRUE(c.observer.opened.at(0)->closed);
  c.received();
  c.send(trailers(1));
  const auto out = c.received();
  EXPECT_TRUE(has(out, kRstStream, 1, 0x5)) << "RST_STREAM(STREAM_CLOSED) on stream 1";
  EXPECT_FALSE(has_type(out, kGoaway));
  EXPECT_FALSE(c.observer.closed);
}

TEST(ClosedStreams, HeadersAfterEndStreamBothWaysIsAConnectionError) {
  RawClient c;
  c.send(request_headers(1, true));
  c.answer(0);
  ASSERT_TRUE(c.observer.opened.at(0)->closed);
  c.received();
  c.send(trailers(1));
  EXPECT_TRUE(has(c.received(), kGoaway, 0, 0x5)) << "GOAWAY(STREAM_CLOSED)";
  EXPECT_TRUE(c.observer.closed);
}

TEST(ClosedStreams, HeadersOnASkippedLowerIdIsAProtocolError) {
  RawClient c;
  c.send(request_headers(5, true));
  c.send(request_headers(3, true));
  EXPECT_TRUE(has(c.received(), kGoaway, 0, 0x1)) << "GOAWAY(PROTOCOL_ERROR)";
  EXPECT_TRUE(c.observer.closed);
  EXPECT_EQ(c.observer.opened.size(), 1u);
}

// A gRPC server that ends a call early resets the client's side (RST_STREAM NO_ERROR after its
// trailers, or CANCEL): the client's DATA and trailers already on their way must be ignored, and
// the connection goes on serving.
TEST(ClosedStreams, FramesInFlightAfterTheServersResetAreIgnored) {
  RawClient c;
  c.send(request_headers(1, false));
  c.server->reset(c.observer.opened.at(0).get(), ErrorCode::kCancel);
  c.drain();
  ASSERT_TRUE(c.observer.opened.at(0)->closed);
  EXPECT_TRUE(has(c.received(), kRstStream, 1, 0x8));
  c.send(h2_frame(kData, 0, 1, std::string("\0\0\0\0\0", 5)));
  c.send(trailers(1));
  const auto out = c.received();
  EXPECT_FALSE(has_type(out, kGoaway));
  EXPECT_FALSE(has_type(out, kRstStream));
  EXPECT_FALSE(c.observer.closed);
  c.send(request_headers(3, true));
  EXPECT_EQ(c.observer.opened.size(), 2u);
}

}  // namespace
}  // namespace ferry::http2::closed_streams_test

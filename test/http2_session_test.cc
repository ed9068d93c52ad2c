// ferry's own HTTP/2 session (src/http2/session): driven with bytes as a peer would send them,
// its output parsed back. Each RFC 9113 §5.1 state transition and error code, flow control's
// edge cases (windows, overflow, SETTINGS_INITIAL_WINDOW_SIZE on open streams, WINDOW_UPDATE
// batching), header validation (§8.1-§8.3), GOAWAY, and the attacker's cases: input one byte
// per read, floods of SETTINGS, PING, RST_STREAM, empty DATA, WINDOW_UPDATE and CONTINUATION,
// stream id reuse, HEADERS and DATA on closed streams, each with bounded memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http2/frame/parser.h"
#include "http2/frame/writer.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"
#include "http2/session/session.h"
#include "support/h2_frame.h"

namespace ferry::http2::session::http2_session_test {
namespace {

using Bytes = std::vector<std::uint8_t>;
using frame::EventType;
using frame::FrameType;

// A stream that records what the session tells it.
class TestStream final : public Stream {
 public:
  bool on_header(std::string_view name, std::string_view value) override {
    if (refuse_headers) return false;
    headers.emplace_back(std::string(name), std::string(value));
    return true;
  }
  void on_headers_done() override { ++blocks; }
  void on_data(Slice chunk) override { data.append(chunk.data(), chunk.data() + chunk.size()); }
  void on_remote_end() override { remote_ended = true; }
  void on_outbound_taken() override { ++taken; }
  void on_closed(ErrorCode error) override {
    closed = true;
    close_code = error;
  }

  // The outbound side, as a call fills it.
  void queue(std::string_view bytes) { outbound.append_copy(bytes.data(), bytes.size()); }
  void end_with(std::vector<HeaderField> trailer_fields) {
    outbound_end = true;
    for (const HeaderField& f : trailer_fields)
      trailers.owned.push_back({std::string(f.name), std::string(f.value)});
  }
  void end() { outbound_end = true; }
  bool was_reset_by_us() const { return reset_sent(); }
  std::size_t outbound_size() const { return outbound.size(); }
  std::string_view reason() const { return local_close_reason(); }

  bool refuse_headers = false;
  std::vector<std::pair<std::string, std::string>> headers;
  int blocks = 0;
  std::string data;
  bool remote_ended = false;
  int taken = 0;
  bool closed = false;
  ErrorCode close_code = ErrorCode::kNoError;
};

class TestHost final : public SessionHost {
 public:
  Stream* on_stream_open(std::uint32_t id) override {
    if (refuse) return nullptr;
    streams.push_back(std::make_unique<TestStream>());
    opened.push_back(id);
    return streams.back().get();
  }
  void on_stream_closing(Stream*) override { ++closing; }
  void on_outbound_framed(Stream*, std::size_t n) override { framed += n; }
  void on_goaway(std::uint32_t last, ErrorCode error) override {
    goaway_last = last;
    goaway_error = error;
    ++goaways;
  }
  void on_peer_settings() override { ++settings; }
  void on_ping(bool ack) override { ++(ack ? ping_acks : pings); }
  void on_connection_window_opened() override { ++window_opened; }

  TestStream* stream(std::size_t i) { return streams.at(i).get(); }

  bool refuse = false;
  std::vector<std::unique_ptr<TestStream>> streams;
  std::vector<std::uint32_t> opened;
  int closing = 0;
  std::size_t framed = 0;
  std::uint32_t goaway_last = 0;
  ErrorCode goaway_error = ErrorCode::kNoError;
  int goaways = 0, settings = 0, pings = 0, ping_acks = 0, window_opened = 0;
};

// A frame the session wrote, parsed back.
struct Out {
  EventType type = EventType::kData;
  std::uint32_t stream_id = 0;
  bool end_stream = false;
  ErrorCode error = ErrorCode::kNoError;
  std::uint32_t increment = 0;
  std::uint32_t last_stream_id = 0;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;
};

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes frame_of(FrameType type, std::uint8_t flags, std::uint32_t id, const Bytes& payload) {
  Bytes out(frame::kFrameHeaderSize);
  frame::write_frame_header(out.data(), static_cast<std::uint32_t>(payload.size()), type, flags,
                            id);
  return out + payload;
}
Bytes u32(std::uint32_t v) {
  Bytes b(4);
  frame::write_u32(b.data(), v);
  return b;
}

using Fields = std::vector<std::pair<std::string, std::string>>;
Fields request(std::string path = "/pkg.Svc/Method") {
  return {{":method", "POST"},
          {":scheme", "http"},
          {":path", std::move(path)},
          {":authority", "localhost"},
          {"content-type", "application/grpc"},
          {"te", "trailers"}};
}

// The peer: builds frames, feeds them to the session the way a connection does (a buffer whose
// unparsed rest is kept for the next read), parses what the session wrote.
class Http2Session : public ::testing::Test {
 protected:
  void make(Role role = Role::kServer) {
    role_ = role;
    session_ = std::make_unique<Session>(role, limits, host, out_, defences);
    peer_parser_ = std::make_unique<frame::Parser>(
        role == Role::kServer ? frame::Role::kClient : frame::Role::kServer,
        frame::ParserLimits{.max_frame_size = frame::kMaxAllowedFrameSize});
  }
  // The server's start: preface and SETTINGS from the peer, its output drained.
  void start() {
    make(Role::kServer);
    feed(text(frame::kClientPreface) + settings({}));
    drain();
  }

  Bytes settings(std::vector<frame::Setting> values) {
    Bytes payload(values.size() * 6);
    for (std::size_t i = 0; i < values.size(); ++i) {
      payload[6 * i] = static_cast<std::uint8_t>(static_cast<std::uint16_t>(values[i].id) >> 8);
      payload[6 * i + 1] = static_cast<std::uint8_t>(values[i].id);
      frame::write_u32(payload.data() + 6 * i + 2, values[i].value);
    }
    return frame_of(FrameType::kSettings, 0, 0, payload);
  }
  Bytes block(const Fields& fields) {
    // Without indexing: each block stands alone, so that blocks built in any order (the operands
    // of a + are evaluated in no set order) and across sessions decode.
    std::vector<hpack::Field> f;
    for (const auto& [n, v] : fields) f.push_back({n, v, hpack::Indexing::kWithout});
    std::string out;
    encoder_.encode(f, out);
    return text(out);
  }
  Bytes headers(std::uint32_t id, const Fields& fields, bool end_stream, std::uint8_t extra = 0) {
    return frame_of(FrameType::kHeaders,
                    static_cast<std::uint8_t>(frame::flags::kEndHeaders |
                                              (end_stream ? frame::flags::kEndStream : 0) | extra),
                    id, block(fields));
  }
  Bytes data(std::uint32_t id, std::string_view payload, bool end_stream) {
    return frame_of(FrameType::kData, end_stream ? frame::flags::kEndStream : 0, id, text(payload));
  }
  Bytes rst(std::uint32_t id, ErrorCode code) {
    return frame_of(FrameType::kRstStream, 0, id, u32(static_cast<std::uint32_t>(code)));
  }
  Bytes window_update(std::uint32_t id, std::uint32_t increment) {
    return frame_of(FrameType::kWindowUpdate, 0, id, u32(increment));
  }
  Bytes ping(bool ack = false) {
    return frame_of(FrameType::kPing, ack ? frame::flags::kAck : 0, 0, text("12345678"));
  }

  // Feeds bytes (one byte per read when one_byte).
  void feed(const Bytes& bytes, bool one_byte = false) {
    if (!one_byte) {
      buffered_.insert(buffered_.end(), bytes.begin(), bytes.end());
      parse();
      return;
    }
    for (std::uint8_t b : bytes) {
      buffered_.push_back(b);
      parse();
    }
  }
  void parse() {
    for (;;) {
      const Session::ReceiveResult r = session_->receive(buffered_, nullptr, nullptr);
      buffered_.erase(buffered_.begin(),
                      buffered_.begin() + static_cast<std::ptrdiff_t>(r.consumed));
      if (!r.paused || buffered_.empty()) break;
    }
  }

  // Runs the session's output pass and parses everything it wrote.
  std::vector<Out> drain() {
    session_->produce(std::size_t{1} << 20);
    std::string bytes(out_.size(), '\0');
    out_.copy_to(0, out_.size(), bytes.data());
    out_.clear();
    session_->on_output_written();
    // (A client's output starts with the preface, which the server-side parser checks.)
    out_bytes_ += bytes;
    std::vector<Out> frames;
    frame::FrameEvent event;
    for (;;) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(out_bytes_.data());
      const frame::Parser::Result r = peer_parser_->next({p, out_bytes_.size()}, event);
      if (r.status == frame::Parser::Status::kConnectionError) {
        ADD_FAILURE() << "the session wrote an invalid frame: " << peer_parser_->reason();
        break;
      }
      if (r.status == frame::Parser::Status::kNeedMore) {
        out_bytes_.erase(0, r.consumed);
        break;
      }
      Out o;
      o.type = event.type;
      o.stream_id = event.stream_id;
      o.end_stream = event.end_stream;
      o.error = event.error_code;
      o.increment = event.increment;
      o.last_stream_id = event.last_stream_id;
      o.payload.assign(event.payload.begin(), event.payload.end());
      if (event.type == EventType::kPing || event.type == EventType::kPingAck) {
        o.payload.assign(std::begin(event.ping), std::end(event.ping));
      }
      if (event.type == EventType::kHeaders) {
        hpack::DecodedHeaders decoded;
        const absl::Status st = peer_decoder_.decode(event.payload, decoded);
        EXPECT_TRUE(st.ok()) << st;
        for (const auto& f : decoded.fields()) o.headers.emplace_back(f.name, f.value);
      }
      frames.push_back(std::move(o));
      out_bytes_.erase(0, r.consumed);  // after the event's views into it were used
    }
    return frames;
  }

  static const Out* find(const std::vector<Out>& frames, EventType type, std::uint32_t id = 0) {
    for (const Out& o : frames) {
      if (o.type == type && (id == 0 || o.stream_id == id)) return &o;
    }
    return nullptr;
  }
  static std::size_t count(const std::vector<Out>& frames, EventType type) {
    std::size_t n = 0;
    for (const Out& o : frames) n += o.type == type;
    return n;
  }
  // The RST_STREAM code the session wrote for stream id (kNoError when none: check has_rst).
  static bool has_rst(const std::vector<Out>& frames, std::uint32_t id, ErrorCode code) {
    for (const Out& o : frames) {
      if (o.type == EventType::kRstStream && o.stream_id == id && o.error == code) return true;
    }
    return false;
  }
  static bool has_goaway(const std::vector<Out>& frames, ErrorCode code) {
    for (const Out& o : frames) {
      if (o.type == EventType::kGoaway && o.error == code) return true;
    }
    return false;
  }
  // Sends a response with body and OK trailers on the stream.
  void respond(TestStream* s, std::string_view body) {
    const HeaderField response[] = {HeaderField::literal(":status", "200"),
                                    HeaderField::literal("content-type", "application/grpc")};
    ASSERT_TRUE(session_->submit_response(s, response, /*with_data=*/true));
    s->queue(body);
    s->end_with({HeaderField::literal("grpc-status", "0")});
    session_->resume(s);
  }

  ConnectionLimits limits;
  limits::DefenceLimits defences;
  TestHost host;
  SliceChain out_;
  std::unique_ptr<Session> session_;
  Role role_ = Role::kServer;
  hpack::Encoder encoder_;
  hpack::Decoder peer_decoder_{hpack::DecoderLimits{.max_header_list_size = 1u << 20}};
  std::unique_ptr<frame::Parser> peer_parser_;
  Bytes buffered_;
  std::string out_bytes_;
};

// --- preface, SETTINGS, PING ------------------------------------------------------------------

TEST_F(Http2Session, ServerSendsSettingsAndAcknowledgesThePeers) {
  make(Role::kServer);
  limits.stream_window = 1u << 20;
  feed(text(frame::kClientPreface) + settings({{frame::SettingId::kMaxFrameSize, 1u << 20}}));
  const std::vector<Out> frames = drain();
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames[0].type, EventType::kSettings);
  EXPECT_EQ(frames[1].type, EventType::kWindowUpdate);  // the connection window, 16 MiB
  EXPECT_EQ(frames[1].increment, (16u << 20) - 65535);
  EXPECT_EQ(frames[2].type, EventType::kSettingsAck);
  EXPECT_EQ(host.settings, 1);
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, PrefaceErrorsEndTheConnection) {
  make(Role::kServer);
  feed(text("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(session_->failed());
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));

  make(Role::kServer);
  feed(text(frame::kClientPreface) + ping());  // the first frame must be SETTINGS
  EXPECT_TRUE(session_->failed());
}

TEST_F(Http2Session, PingIsAnsweredWithItsPayload) {
  start();
  feed(ping());
  const std::vector<Out> frames = drain();
  const Out* ack = find(frames, EventType::kPingAck);
  ASSERT_NE(ack, nullptr);
  feed(ping(/*ack=*/true));
  EXPECT_EQ(host.pings, 1);
  EXPECT_EQ(host.ping_acks, 1);
  session_->ping();
  EXPECT_EQ(count(drain(), EventType::kPing), 1u);
}

// --- streams: a call, its states -------------------------------------------------------------

TEST_F(Http2Session, UnaryCallGoesThroughEveryState) {
  start();
  feed(headers(1, request(), false) + data(1, "hello", true));
  ASSERT_EQ(host.streams.size(), 1u);
  TestStream* s = host.stream(0);
  EXPECT_EQ(s->stream_id(), 1);
  EXPECT_EQ(s->blocks, 1);
  EXPECT_EQ(s->headers[2], (std::pair<std::string, std::string>{":path", "/pkg.Svc/Method"}));
  EXPECT_EQ(s->data, "hello");
  EXPECT_TRUE(s->remote_ended);  // half-closed (remote)
  session_->consume(s, 5);
  respond(s, "world");
  const std::vector<Out> frames = drain();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].type, EventType::kHeaders);
  EXPECT_EQ(frames[0].headers[0].second, "200");
  EXPECT_EQ(frames[1].type, EventType::kData);
  EXPECT_EQ(frames[1].payload, "world");
  EXPECT_EQ(frames[2].type, EventType::kHeaders);
  EXPECT_TRUE(frames[2].end_stream);
  EXPECT_EQ(frames[2].headers[0].second, "0");
  // Closed both ways: no RST_STREAM, no stream WINDOW_UPDATE for a unary call.
  EXPECT_TRUE(s->closed);
  EXPECT_EQ(s->close_code, ErrorCode::kNoError);
  EXPECT_EQ(session_->open_streams(), 0u);
  EXPECT_EQ(host.framed, 5u);
}

TEST_F(Http2Session, OneBytePerReadGivesTheSameCall) {
  make(Role::kServer);
  feed(text(frame::kClientPreface) + settings({}) + headers(1, request(), false) +
           data(1, "hello", false) + data(1, " again", true),
       /*one_byte=*/true);
  ASSERT_EQ(host.streams.size(), 1u);
  EXPECT_EQ(host.stream(0)->data, "hello again");
  EXPECT_TRUE(host.stream(0)->remote_ended);
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, ResponseWhileTheClientStillSendsEndsWithRstNoError) {
  start();
  feed(headers(1, request(), false));
  TestStream* s = host.stream(0);
  respond(s, "x");
  const std::vector<Out> frames = drain();
  EXPECT_TRUE(has_rst(frames, 1, ErrorCode::kNoError));
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->was_reset_by_us());
}

TEST_F(Http2Session, TrailersOnlyEndsTheStream) {
  start();
  feed(headers(1, request(), true));
  const HeaderField only[] = {HeaderField::literal(":status", "200"),
                              HeaderField::literal("grpc-status", "12")};
  ASSERT_TRUE(session_->submit_response(host.stream(0), only, /*with_data=*/false));
  const std::vector<Out> frames = drain();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].end_stream);
  EXPECT_TRUE(host.stream(0)->closed);
}

TEST_F(Http2Session, DataOnAClosedStreamIsStreamClosed) {
  // h2spec 5.1 #11: DATA on a stream closed by END_STREAM both ways.
  start();
  feed(headers(1, request(), true));
  respond(host.stream(0), "x");
  drain();
  feed(data(1, "late", false));
  std::vector<Out> frames = drain();
  EXPECT_TRUE(has_rst(frames, 1, ErrorCode::kStreamClosed));
  EXPECT_FALSE(session_->failed());
  // h2spec 5.1 #8: DATA after the client's own RST_STREAM.
  feed(headers(3, request(), false) + rst(3, ErrorCode::kCancel));
  EXPECT_EQ(host.stream(1)->close_code, ErrorCode::kCancel);
  feed(data(3, "late", false));
  frames = drain();
  EXPECT_TRUE(has_rst(frames, 3, ErrorCode::kStreamClosed));
  // After this end's own RST_STREAM, what was in flight is ignored (§5.1 "closed").
  feed(headers(5, request(), false));
  session_->reset(host.stream(2), ErrorCode::kCancel);
  EXPECT_TRUE(has_rst(drain(), 5, ErrorCode::kCancel));
  feed(data(5, "in flight", false) + headers(5, {{"x", "y"}}, true));
  frames = drain();
  EXPECT_TRUE(frames.empty());
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, DataOnAnIdleStreamIsAConnectionError) {
  start();
  feed(data(5, "x", false));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));
  start();
  feed(window_update(7, 1));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));
  start();
  feed(rst(9, ErrorCode::kCancel));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));
}

TEST_F(Http2Session, HalfClosedRemoteRefusesDataAndHeaders) {
  // h2spec 5.1 #5, #6.
  start();
  feed(headers(1, request(), true) + data(1, "x", false));
  std::vector<Out> frames = drain();
  EXPECT_TRUE(has_rst(frames, 1, ErrorCode::kStreamClosed));
  EXPECT_TRUE(host.stream(0)->closed);
  feed(headers(3, request(), true) + headers(3, {{"x", "y"}}, true));
  frames = drain();
  EXPECT_TRUE(has_rst(frames, 3, ErrorCode::kStreamClosed));
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, AStreamAnsweredAtOnceIsJudgedByItsStateUntilItCloses) {
  // The server answers before the client's next frame is parsed (a 405 to a request that is
  // not gRPC, say): frames that follow in the same read get the answer the stream's state asks
  // for, not silence (h2spec 5.1 #5, 8.1.2.6 #1).
  start();
  const HeaderField only[] = {HeaderField::literal(":status", "405")};
  feed(headers(1, request(), true));
  ASSERT_TRUE(session_->submit_response(host.stream(0), only, /*with_data=*/false));
  feed(data(1, "x", false));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kStreamClosed));
  Fields f = request();
  f.push_back({"content-length", "4"});
  feed(headers(3, f, false));
  ASSERT_TRUE(session_->submit_response(host.stream(1), only, /*with_data=*/false));
  feed(data(3, "abc", true));
  EXPECT_TRUE(has_rst(drain(), 3, ErrorCode::kProtocolError));
  feed(headers(5, request(), false));
  ASSERT_TRUE(session_->submit_response(host.stream(2), only, /*with_data=*/false));
  feed(window_update(5, 0x7fffffffu));
  EXPECT_TRUE(has_rst(drain(), 5, ErrorCode::kFlowControlError));
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, HeadersOnClosedAndReusedStreams) {
  start();
  feed(headers(1, request(), true));
  respond(host.stream(0), "x");
  drain();
  // The client ended stream 1 (END_STREAM): HEADERS on it again is a connection STREAM_CLOSED.
  feed(headers(1, request(), true));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kStreamClosed));

  // An id the client skipped: lower than one it used, never opened.
  start();
  feed(headers(5, request(), true) + headers(3, request(), true));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));

  // Even ids are the server's: a client may not open one.
  start();
  feed(headers(2, request(), true));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kProtocolError));

  // After the client's reset: STREAM_CLOSED on the stream only.
  start();
  feed(headers(1, request(), false) + rst(1, ErrorCode::kCancel) + headers(1, request(), true));
  const std::vector<Out> frames = drain();
  EXPECT_TRUE(has_rst(frames, 1, ErrorCode::kStreamClosed));
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, MaxConcurrentStreamsRefusesTheRest) {
  limits.max_concurrent_streams = 2;
  start();
  feed(headers(1, request(), false) + headers(3, request(), false) + headers(5, request(), false));
  EXPECT_EQ(host.streams.size(), 2u);
  const std::vector<Out> frames = drain();
  EXPECT_TRUE(has_rst(frames, 5, ErrorCode::kRefusedStream));
  // A stream that closes makes room.
  feed(rst(1, ErrorCode::kCancel) + headers(7, request(), false));
  EXPECT_EQ(host.streams.size(), 3u);
}

TEST_F(Http2Session, RefusedByTheApplication) {
  start();
  host.refuse = true;
  feed(headers(1, request(), true));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kRefusedStream));
}

TEST_F(Http2Session, PriorityIsAcceptedAndIgnored) {
  start();
  Bytes priority = u32(0) + Bytes{16};
  feed(frame_of(FrameType::kPriority, 0, 1, priority) + headers(1, request(), true) +
       frame_of(FrameType::kPriority, 0, 9, priority));
  EXPECT_EQ(host.streams.size(), 1u);
  EXPECT_FALSE(session_->failed());
  // RFC 9113 §5.3.1: a stream that depends on itself is a stream error.
  feed(frame_of(FrameType::kPriority, 0, 3, u32(3) + Bytes{16}));
  EXPECT_TRUE(has_rst(drain(), 3, ErrorCode::kProtocolError));
}

// --- header validation (RFC 9113 §8) -----------------------------------------------------------

// A malformed field that enters the peer's HPACK table (literal with incremental indexing) is
// still malformed when the peer sends it again by index: the decoder marks only entries that
// passed the character checks as needing none (hpack::DecodedField::syntax_checked).
TEST_F(Http2Session, AMalformedFieldSentAgainByIndexIsStillMalformed) {
  start();
  auto literal_indexed = [](std::string_view name, std::string_view value) {
    const std::string field = testing::hpack_literal_indexed(name, value);
    return Bytes(field.begin(), field.end());
  };
  // :method POST, :scheme http, :path / from the static table, then the field.
  const Bytes pseudo{0x83, 0x86, 0x84};
  const std::uint8_t flags = frame::flags::kEndHeaders | frame::flags::kEndStream;
  std::uint32_t id = 1;
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"x-a", "b\nc"}, {"X-Upper", "v"}, {"x-c", std::string("a\0b", 3)}}) {
    SCOPED_TRACE(name);
    feed(frame_of(FrameType::kHeaders, flags, id, pseudo + literal_indexed(name, value)));
    EXPECT_TRUE(has_rst(drain(), id, ErrorCode::kProtocolError)) << "stream " << id;
    id += 2;
    feed(frame_of(FrameType::kHeaders, flags, id, pseudo + Bytes{0xbe}));  // index 62: that field
    EXPECT_TRUE(has_rst(drain(), id, ErrorCode::kProtocolError)) << "stream " << id;
    id += 2;
  }
  // A clean field by index is taken.
  feed(frame_of(FrameType::kHeaders, flags, id, pseudo + literal_indexed("x-d", "fine")));
  feed(frame_of(FrameType::kHeaders, flags, id + 2, pseudo + Bytes{0xbe}));
  ASSERT_EQ(host.streams.size(), 2u);
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, MalformedRequestsAreStreamErrors) {
  const std::vector<Fields> malformed = {
      {{":method", "POST"}, {":scheme", "http"}},                                  // no :path
      {{":method", "POST"}, {":scheme", "http"}, {":path", ""}},                   // empty :path
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {":path", "/"}},  // twice
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {":status", "200"}},
      {{":method", "POST"}, {"a", "b"}, {":scheme", "http"}, {":path", "/"}},  // pseudo late
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"Upper", "x"}},
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"connection", "close"}},
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"transfer-encoding", "x"}},
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"te", "gzip"}},
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"a", "b\nc"}},
      {{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {"content-length", "x1"}},
  };
  start();
  std::uint32_t id = 1;
  for (const Fields& f : malformed) {
    feed(headers(id, f, true));
    EXPECT_TRUE(has_rst(drain(), id, ErrorCode::kProtocolError)) << "stream " << id;
    id += 2;
  }
  EXPECT_TRUE(host.streams.empty());
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, TrailersAreChecked) {
  start();
  // h2spec 8.1.2.1 #3: a pseudo-header in trailers.
  feed(headers(1, request(), false) + headers(1, {{":path", "/"}}, true));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kProtocolError));
  // h2spec 8.1 #1: a second HEADERS without END_STREAM.
  feed(headers(3, request(), false) + headers(3, {{"x", "y"}}, false));
  EXPECT_TRUE(has_rst(drain(), 3, ErrorCode::kProtocolError));
  // Valid trailers end the request.
  feed(headers(5, request(), false) + headers(5, {{"x", "y"}}, true));
  EXPECT_TRUE(host.stream(2)->remote_ended);
  EXPECT_EQ(host.stream(2)->blocks, 2);
}

TEST_F(Http2Session, ContentLengthMustMatchTheData) {
  start();
  Fields f = request();
  f.push_back({"content-length", "4"});
  // h2spec 8.1.2.6 #1 and #2.
  feed(headers(1, f, false) + data(1, "abc", true));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kProtocolError));
  feed(headers(3, f, false) + data(3, "ab", false) + data(3, "cde", true));
  EXPECT_TRUE(has_rst(drain(), 3, ErrorCode::kProtocolError));
  feed(headers(5, f, false) + data(5, "ab", false) + data(5, "cd", true));
  EXPECT_TRUE(host.streams.back()->remote_ended);
}

TEST_F(Http2Session, OversizedHeaderListResetsTheStreamAndKeepsTheTable) {
  limits.max_header_list_size = 400;
  start();
  Fields big = request();
  big.push_back({"x-big", std::string(1000, 'a')});  // over twice the advertised list size
  feed(headers(1, big, true));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kProtocolError));
  // The HPACK table stayed in step: the next request decodes.
  feed(headers(3, request(), true));
  ASSERT_EQ(host.streams.size(), 1u);
  EXPECT_EQ(host.stream(0)->headers.size(), request().size());
}

TEST_F(Http2Session, HeaderRefusedByTheStreamResetsIt) {
  start();
  host.refuse = false;
  feed(headers(1, request(), false));
  TestStream* s = host.stream(0);
  s->refuse_headers = true;
  feed(headers(1, {{"x", "y"}}, true));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kInternalError));
  EXPECT_EQ(s->close_code, ErrorCode::kInternalError);
}

// --- flow control ------------------------------------------------------------------------------

TEST_F(Http2Session, StreamWindowOverrunIsFlowControlError) {
  limits.stream_window = 65535;
  start();
  feed(frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));
  feed(headers(1, request(), false));
  const std::string chunk(16384, 'x');
  for (int i = 0; i < 4; ++i) feed(data(1, chunk, false));  // 65536 > 65535
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kFlowControlError));
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, ConnectionWindowOverrunIsAConnectionError) {
  limits.connection_window = 65535;
  limits.stream_window = 1u << 20;
  start();
  feed(headers(1, request(), false));
  const std::string chunk(16384, 'x');
  for (int i = 0; i < 4; ++i) feed(data(1, chunk, false));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kFlowControlError));
}

TEST_F(Http2Session, WindowUpdatesAreBatched) {
  limits.stream_window = 64u << 10;
  limits.connection_window = 256u << 10;
  start();
  feed(frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));
  feed(headers(1, request(), false));
  TestStream* s = host.stream(0);
  const std::string chunk(16384, 'x');
  feed(data(1, chunk, false));
  session_->consume(s, 16384);
  // A quarter of the stream window: not yet half.
  EXPECT_EQ(count(drain(), EventType::kWindowUpdate), 0u);
  feed(data(1, chunk, false));
  session_->consume(s, 16384);
  // Half the stream window (32 KiB) consumed: one stream update. The connection's comes at a
  // quarter of its window (64 KiB).
  std::vector<Out> frames = drain();
  ASSERT_EQ(count(frames, EventType::kWindowUpdate), 1u);
  EXPECT_EQ(find(frames, EventType::kWindowUpdate)->stream_id, 1u);
  EXPECT_EQ(find(frames, EventType::kWindowUpdate)->increment, 32768u);
  feed(data(1, chunk, false) + data(1, chunk, true));
  session_->consume(s, 32768);
  frames = drain();
  // The stream ended: no stream update after END_STREAM; the connection's 64 KiB.
  ASSERT_EQ(count(frames, EventType::kWindowUpdate), 1u);
  EXPECT_EQ(find(frames, EventType::kWindowUpdate)->stream_id, 0u);
  EXPECT_EQ(find(frames, EventType::kWindowUpdate)->increment, 65536u);
}

TEST_F(Http2Session, SendWindowsHoldAndReleaseTheResponse) {
  make(Role::kServer);
  // h2spec 6.9.1 #1: initial window 1.
  feed(text(frame::kClientPreface) + settings({{frame::SettingId::kInitialWindowSize, 1}}) +
       headers(1, request(), true));
  drain();
  TestStream* s = host.stream(0);
  respond(s, "hello");
  std::vector<Out> frames = drain();
  ASSERT_EQ(count(frames, EventType::kData), 1u);
  EXPECT_EQ(find(frames, EventType::kData)->payload, "h");
  EXPECT_FALSE(s->closed);
  // h2spec 6.9.2 #1: SETTINGS_INITIAL_WINDOW_SIZE raised with the stream open applies to it.
  feed(settings({{frame::SettingId::kInitialWindowSize, 3}}));
  frames = drain();
  EXPECT_EQ(find(frames, EventType::kData)->payload, "el");
  // Made negative (h2spec 6.9.2 #2): nothing goes until a WINDOW_UPDATE lifts it above 0.
  feed(settings({{frame::SettingId::kInitialWindowSize, 0}}));
  feed(window_update(1, 3));
  frames = drain();
  EXPECT_EQ(count(frames, EventType::kData), 0u);
  feed(window_update(1, 2));
  frames = drain();
  EXPECT_EQ(find(frames, EventType::kData)->payload, "lo");
  EXPECT_TRUE(find(frames, EventType::kHeaders)->end_stream);
  EXPECT_TRUE(s->closed);
}

TEST_F(Http2Session, ConnectionWindowHoldsEveryStream) {
  start();
  feed(settings({{frame::SettingId::kInitialWindowSize, 1u << 20}}) + headers(1, request(), true));
  TestStream* s = host.stream(0);
  respond(s, std::string(70000, 'x'));
  std::vector<Out> frames = drain();
  std::size_t sent = 0;
  for (const Out& o : frames) {
    if (o.type == EventType::kData) sent += o.payload.size();
  }
  EXPECT_EQ(sent, 65535u);
  EXPECT_LE(session_->peer_connection_window(), 0);
  feed(window_update(0, 10000));
  EXPECT_EQ(host.window_opened, 1);
  frames = drain();
  ASSERT_NE(find(frames, EventType::kData), nullptr);
  EXPECT_EQ(find(frames, EventType::kData)->payload.size(), 70000u - 65535u);
  EXPECT_TRUE(s->closed);
}

TEST_F(Http2Session, WindowOverflowErrors) {
  // h2spec 6.9.1 #2 and #3.
  start();
  feed(window_update(0, 0x7fffffffu));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kFlowControlError));
  start();
  feed(headers(1, request(), false) + window_update(1, 0x7fffffffu));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kFlowControlError));
  EXPECT_FALSE(session_->failed());
  // SETTINGS_INITIAL_WINDOW_SIZE that takes an open stream's window past 2^31-1.
  start();
  feed(headers(1, request(), false) + window_update(1, 0x7fffffffu - 65535));
  feed(settings({{frame::SettingId::kInitialWindowSize, 65536}}));
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kFlowControlError));
  // A 0 increment on a stream: a stream error (h2spec 6.9 #2).
  start();
  feed(headers(1, request(), false) + window_update(1, 0));
  EXPECT_TRUE(has_rst(drain(), 1, ErrorCode::kProtocolError));
}

TEST_F(Http2Session, PaddingIsReturnedToTheWindows) {
  limits.stream_window = 64u << 10;
  limits.connection_window = 64u << 10;
  start();
  feed(frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));
  feed(headers(1, request(), false));
  // 1 pad-length octet, 4 payload, 200 padding: the padding's 201 bytes return by themselves.
  Bytes payload = Bytes{200} + text("abcd") + Bytes(200, 0);
  for (int i = 0; i < 100; ++i) {
    feed(frame_of(FrameType::kData, frame::flags::kPadded, 1, payload));
    session_->consume(host.stream(0), 4);
  }
  EXPECT_EQ(host.stream(0)->data.size(), 400u);
  EXPECT_FALSE(session_->failed());
  EXPECT_FALSE(host.stream(0)->closed);
}

// RFC 9113 §6.5.3: a peer that never acknowledges our SETTINGS gets GOAWAY(SETTINGS_TIMEOUT).
TEST_F(Http2Session, UnacknowledgedSettingsTimeOut) {
  const auto before = Session::Clock::now();
  start();
  const auto due = session_->next_deadline();
  EXPECT_GE(due, before + std::chrono::seconds(10));
  EXPECT_LE(due, Session::Clock::now() + std::chrono::seconds(10));
  // The peer's own SETTINGS, however many, are no ACK.
  for (int i = 0; i < 5; ++i) feed(settings({}));
  drain();
  EXPECT_EQ(session_->next_deadline(), due);
  session_->on_timer(due - std::chrono::milliseconds(1));
  EXPECT_FALSE(session_->failed());
  session_->on_timer(due);
  EXPECT_TRUE(session_->failed());
  EXPECT_EQ(session_->error_code(), ErrorCode::kSettingsTimeout);
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kSettingsTimeout));
  EXPECT_FALSE(session_->want_read());
}

TEST_F(Http2Session, AcknowledgedSettingsStopTheTimer) {
  start();
  feed(frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));
  EXPECT_EQ(session_->next_deadline(), Session::Clock::time_point::max());
  session_->on_timer(Session::Clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(session_->failed());
  // The client's side too, and a timeout that is off.
  make(Role::kClient);
  feed(settings({}) + frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));
  EXPECT_EQ(session_->next_deadline(), Session::Clock::time_point::max());
  limits.settings_ack_timeout = std::chrono::milliseconds::max();
  make(Role::kClient);
  EXPECT_EQ(session_->next_deadline(), Session::Clock::time_point::max());
  session_->on_timer(Session::Clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(session_->failed());
}

// The peer's SETTINGS_MAX_HEADER_LIST_SIZE: a block of ours over it is never sent; the stream
// alone fails, INTERNAL, the limit named.
TEST_F(Http2Session, ResponseOverThePeersHeaderListLimitResetsTheStream) {
  make(Role::kServer);
  feed(text(frame::kClientPreface) + settings({{frame::SettingId::kMaxHeaderListSize, 200}}));
  drain();
  const std::string big(200, 'v');
  // Response headers over the limit.
  feed(headers(1, request(), true));
  const HeaderField too_big[] = {HeaderField::literal(":status", "200"),
                                 HeaderField::literal("x-big", big)};
  EXPECT_TRUE(session_->submit_response(host.stream(0), too_big, /*with_data=*/true));
  std::vector<Out> frames = drain();
  EXPECT_EQ(count(frames, EventType::kHeaders), 0u);
  EXPECT_TRUE(has_rst(frames, 1, ErrorCode::kInternalError));
  EXPECT_TRUE(host.stream(0)->closed);
  EXPECT_EQ(host.stream(0)->close_code, ErrorCode::kInternalError);
  EXPECT_NE(host.stream(0)->reason().find("SETTINGS_MAX_HEADER_LIST_SIZE"), std::string::npos);
  // Trailers over the limit, after a body that went out.
  feed(headers(3, request(), true));
  TestStream* s = host.stream(1);
  const HeaderField ok[] = {HeaderField::literal(":status", "200")};
  ASSERT_TRUE(session_->submit_response(s, ok, /*with_data=*/true));
  s->queue("body");
  s->end_with({HeaderField::literal("grpc-status", "0"), HeaderField::literal("x-big", big)});
  session_->resume(s);
  frames = drain();
  EXPECT_EQ(count(frames, EventType::kHeaders), 1u);  // the response's, not the trailers
  EXPECT_NE(find(frames, EventType::kData, 3), nullptr);
  EXPECT_TRUE(has_rst(frames, 3, ErrorCode::kInternalError));
  EXPECT_TRUE(s->closed);
  EXPECT_EQ(s->close_code, ErrorCode::kInternalError);
  // Never a connection error; a block within the limit goes out.
  EXPECT_FALSE(session_->failed());
  EXPECT_FALSE(has_goaway(frames, ErrorCode::kInternalError));
  feed(headers(5, request(), true));
  respond(host.stream(2), "fine");
  frames = drain();
  EXPECT_EQ(count(frames, EventType::kHeaders), 2u);
  EXPECT_EQ(session_->open_streams(), 0u);
}

TEST_F(Http2Session, RequestOverThePeersHeaderListLimitFailsTheCall) {
  make(Role::kClient);
  feed(settings({{frame::SettingId::kMaxHeaderListSize, 200}}));
  drain();
  const std::string big(200, 'v');
  const HeaderField too_big[] = {
      HeaderField::literal(":method", "POST"), HeaderField::literal(":scheme", "http"),
      HeaderField::literal(":path", "/a.B/C"), HeaderField::literal("x-big", big)};
  TestStream call;
  call.queue("ping");
  call.end();
  EXPECT_EQ(session_->submit_request(&call, too_big), 1);
  std::vector<Out> frames = drain();
  EXPECT_EQ(count(frames, EventType::kHeaders), 0u);  // never on the wire
  EXPECT_EQ(count(frames, EventType::kData), 0u);
  EXPECT_EQ(count(frames, EventType::kRstStream), 0u);
  EXPECT_TRUE(call.closed);
  EXPECT_EQ(call.close_code, ErrorCode::kInternalError);
  EXPECT_NE(call.reason().find("SETTINGS_MAX_HEADER_LIST_SIZE"), std::string::npos);
  EXPECT_FALSE(session_->failed());
  // The next call goes out.
  const HeaderField small[] = {HeaderField::literal(":method", "POST"),
                               HeaderField::literal(":scheme", "http"),
                               HeaderField::literal(":path", "/a.B/C")};
  TestStream next;
  EXPECT_EQ(session_->submit_request(&next, small), 3);
  frames = drain();
  EXPECT_NE(find(frames, EventType::kHeaders, 3), nullptr);
  EXPECT_EQ(session_->open_streams(), 1u);
}

TEST_F(Http2Session, ATraceContextGoesNeverIndexedAndRaw) {
  // A no_index field (the client's traceparent, new in every call) is never indexed and its value
  // is sent as raw octets, which the server copies instead of Huffman-decoding; other fields are
  // Huffman-coded where that is shorter.
  make(Role::kClient);
  const std::string trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  HeaderField traceparent{"traceparent", trace};
  traceparent.no_index = true;
  const HeaderField fields[] = {
      HeaderField::literal(":method", "POST"), HeaderField::literal(":scheme", "http"),
      HeaderField::literal(":path", "/a.B/C"), HeaderField{"x-other", trace}, traceparent};
  TestStream call;
  EXPECT_EQ(session_->submit_request(&call, fields), 1);
  const std::vector<Out> frames = drain();
  const Out* sent = find(frames, EventType::kHeaders, 1);
  ASSERT_NE(sent, nullptr);
  // Once in the block as it is: traceparent's (its name too); x-other's went Huffman-coded.
  const std::size_t at = sent->payload.find(trace);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(sent->payload.find(trace, at + 1), std::string::npos);
  EXPECT_NE(sent->payload.find("traceparent"), std::string::npos);
  EXPECT_EQ(sent->headers.back(), (std::pair<std::string, std::string>{"traceparent", trace}));
}

// --- GOAWAY ------------------------------------------------------------------------------------

TEST_F(Http2Session, ShutdownRefusesNewStreamsAndFinishesOpenOnes) {
  start();
  feed(headers(1, request(), false));
  session_->shutdown();
  std::vector<Out> frames = drain();
  ASSERT_NE(find(frames, EventType::kPing), nullptr);
  // (The first GOAWAY, 2^31-1, and its PING: ShutdownIsTwoGoawaysAroundAPing.)
  feed(frame_of(FrameType::kPing, frame::flags::kAck, 0,
                text(find(frames, EventType::kPing)->payload)));
  frames = drain();
  const Out* goaway = find(frames, EventType::kGoaway);
  ASSERT_NE(goaway, nullptr);
  EXPECT_EQ(goaway->error, ErrorCode::kNoError);
  EXPECT_EQ(goaway->last_stream_id, 1u);
  feed(headers(3, request(), true));
  EXPECT_TRUE(has_rst(drain(), 3, ErrorCode::kRefusedStream));
  EXPECT_TRUE(session_->want_read());  // stream 1 is still open
  feed(data(1, "x", true));
  respond(host.stream(0), "y");
  drain();
  EXPECT_FALSE(session_->want_read());
}

// RFC 9113 §6.8's two-step shutdown: GOAWAY(2^31-1) and a PING; the client's streams opened
// before it read them are served; the PING's ACK brings the GOAWAY with the real last id.
TEST_F(Http2Session, ShutdownIsTwoGoawaysAroundAPing) {
  start();
  feed(headers(1, request(), false));
  drain();
  session_->shutdown();
  session_->shutdown();  // a second call (idle, then age) changes nothing
  std::vector<Out> frames = drain();
  ASSERT_EQ(count(frames, EventType::kGoaway), 1u);
  const Out* notice = find(frames, EventType::kGoaway);
  EXPECT_EQ(notice->error, ErrorCode::kNoError);
  EXPECT_EQ(notice->last_stream_id, 0x7fffffffu);
  ASSERT_NE(find(frames, EventType::kPing), nullptr);
  const std::string ping_payload = find(frames, EventType::kPing)->payload;
  EXPECT_FALSE(session_->goaway_sent());
  // A stream the client opened before it read the notice is served.
  feed(headers(3, request(), true));
  ASSERT_EQ(host.opened.size(), 2u);
  EXPECT_EQ(host.opened[1], 3u);
  frames = drain();
  EXPECT_FALSE(has_rst(frames, 3, ErrorCode::kRefusedStream));
  EXPECT_EQ(count(frames, EventType::kGoaway), 0u);
  // The ACK of another PING (keepalive's) is not the one awaited.
  feed(frame_of(FrameType::kPing, frame::flags::kAck, 0, Bytes(8, 0)));
  EXPECT_EQ(count(drain(), EventType::kGoaway), 0u);
  EXPECT_EQ(host.ping_acks, 1);
  // The awaited ACK: the final GOAWAY names stream 3.
  feed(frame_of(FrameType::kPing, frame::flags::kAck, 0, text(ping_payload)));
  frames = drain();
  ASSERT_EQ(count(frames, EventType::kGoaway), 1u);
  EXPECT_EQ(find(frames, EventType::kGoaway)->last_stream_id, 3u);
  EXPECT_TRUE(session_->goaway_sent());
  EXPECT_EQ(host.ping_acks, 1);  // the shutdown's ACK is not the lifecycle's business
  // From here on new streams are refused; the two open ones finish.
  feed(headers(5, request(), true));
  EXPECT_TRUE(has_rst(drain(), 5, ErrorCode::kRefusedStream));
  EXPECT_EQ(host.opened.size(), 2u);
  feed(data(1, "x", true));
  respond(host.stream(0), "y");
  respond(host.stream(1), "z");
  drain();
  EXPECT_EQ(session_->open_streams(), 0u);
  EXPECT_FALSE(session_->want_read());
  // A repeated ACK does nothing more.
  feed(frame_of(FrameType::kPing, frame::flags::kAck, 0, text(ping_payload)));
  EXPECT_EQ(count(drain(), EventType::kGoaway), 0u);
}

TEST_F(Http2Session, ShutdownsSecondGoawayGoesAfterABoundWithoutTheAck) {
  start();
  feed(frame_of(FrameType::kSettings, frame::flags::kAck, 0, {}));  // (the SETTINGS timer off)
  feed(headers(1, request(), false));
  const auto before = Session::Clock::now();
  session_->shutdown();
  EXPECT_EQ(count(drain(), EventType::kGoaway), 1u);
  const auto due = session_->next_deadline();
  EXPECT_GE(due, before + std::chrono::milliseconds(1000));
  EXPECT_LE(due, Session::Clock::now() + std::chrono::milliseconds(1000));
  session_->on_timer(due - std::chrono::milliseconds(1));
  EXPECT_EQ(count(drain(), EventType::kGoaway), 0u);
  session_->on_timer(due);
  std::vector<Out> frames = drain();
  ASSERT_EQ(count(frames, EventType::kGoaway), 1u);
  EXPECT_EQ(find(frames, EventType::kGoaway)->last_stream_id, 1u);
  EXPECT_EQ(session_->next_deadline(), Session::Clock::time_point::max());
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, PingFloodDuringTheShutdownIsCalmedDown) {
  start();
  session_->shutdown();
  Bytes flood;
  for (int i = 0; i < 1100; ++i) flood = flood + ping();
  feed(flood);  // the ACKs owed are never written
  EXPECT_TRUE(session_->failed());
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
  // Its GOAWAY was the last frame: no second GOAWAY(NO_ERROR) after it.
  session_->on_timer(Session::Clock::now() + std::chrono::hours(1));
  std::vector<Out> frames = drain();
  EXPECT_EQ(frames.back().type, EventType::kGoaway);
  EXPECT_EQ(frames.back().error, ErrorCode::kEnhanceYourCalm);
}

TEST_F(Http2Session, ClientShutdownIsOneGoaway) {
  make(Role::kClient);
  drain();
  session_->shutdown();
  std::vector<Out> frames = drain();
  ASSERT_EQ(count(frames, EventType::kGoaway), 1u);
  EXPECT_EQ(find(frames, EventType::kGoaway)->last_stream_id, 0u);
  EXPECT_EQ(count(frames, EventType::kPing), 0u);
}

TEST_F(Http2Session, PeersGoawayIsReported) {
  start();
  feed(frame_of(FrameType::kGoaway, 0, 0, u32(0) + u32(0)));
  EXPECT_EQ(host.goaways, 1);
  EXPECT_TRUE(session_->goaway_received());
  EXPECT_FALSE(session_->want_read());
}

// --- the client side ---------------------------------------------------------------------------

TEST_F(Http2Session, ClientCallAndGoaway) {
  make(Role::kClient);
  TestStream call;
  const HeaderField req[] = {
      HeaderField::literal(":method", "POST"), HeaderField::literal(":scheme", "http"),
      HeaderField::literal(":path", "/a.B/C"), HeaderField::literal(":authority", "x")};
  call.queue("ping");
  call.end();
  EXPECT_EQ(session_->submit_request(&call, req), 1);
  std::vector<Out> frames = drain();
  ASSERT_NE(find(frames, EventType::kHeaders), nullptr);
  const Out* body = find(frames, EventType::kData);
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->payload, "ping");
  EXPECT_TRUE(body->end_stream);
  // The server's side, with the peer's encoder.
  feed(settings({}) + headers(1, {{":status", "200"}}, false) + data(1, "pong", false) +
       headers(1, {{"grpc-status", "0"}}, true));
  EXPECT_EQ(call.data, "pong");
  EXPECT_EQ(call.blocks, 2);
  EXPECT_TRUE(call.closed);
  EXPECT_EQ(call.close_code, ErrorCode::kNoError);

  // Streams above the GOAWAY's last id are refused, to be retried.
  TestStream a, b;
  EXPECT_EQ(session_->submit_request(&a, req), 3);
  EXPECT_EQ(session_->submit_request(&b, req), 5);
  feed(frame_of(FrameType::kGoaway, 0, 0, u32(3) + u32(0)));
  EXPECT_TRUE(b.closed);
  EXPECT_EQ(b.close_code, ErrorCode::kRefusedStream);
  EXPECT_FALSE(a.closed);
  TestStream c;
  EXPECT_EQ(session_->submit_request(&c, req), -1);
}

TEST_F(Http2Session, ClientChecksTheResponse) {
  make(Role::kClient);
  TestStream call;
  const HeaderField req[] = {HeaderField::literal(":method", "POST"),
                             HeaderField::literal(":scheme", "http"),
                             HeaderField::literal(":path", "/a.B/C")};
  ASSERT_EQ(session_->submit_request(&call, req), 1);
  drain();
  feed(settings({}) + headers(1, {{"grpc-status", "0"}}, true));  // no :status
  EXPECT_TRUE(call.closed);
  EXPECT_EQ(call.close_code, ErrorCode::kProtocolError);
  // A server may not open streams.
  feed(headers(2, {{":status", "200"}}, true));
  EXPECT_TRUE(session_->failed());
}

TEST_F(Http2Session, ClientHoldsStreamsBeyondTheServersLimit) {
  make(Role::kClient);
  const HeaderField req[] = {HeaderField::literal(":method", "POST"),
                             HeaderField::literal(":scheme", "http"),
                             HeaderField::literal(":path", "/a.B/C")};
  feed(settings({{frame::SettingId::kMaxConcurrentStreams, 1}}));
  drain();
  TestStream a, b, c;
  ASSERT_EQ(session_->submit_request(&a, req), 1);
  ASSERT_EQ(session_->submit_request(&b, req), 3);
  ASSERT_EQ(session_->submit_request(&c, req), 5);
  std::vector<Out> frames = drain();
  EXPECT_EQ(count(frames, EventType::kHeaders), 1u);  // stream 1 only
  EXPECT_TRUE(session_->want_read());
  // A held stream reset before its HEADERS left closes without a frame.
  session_->reset(&b, ErrorCode::kCancel);
  frames = drain();
  EXPECT_TRUE(b.closed);
  EXPECT_EQ(count(frames, EventType::kRstStream), 0u);
  // Stream 1 ends: stream 5's HEADERS go.
  feed(headers(1, {{":status", "200"}}, false) + headers(1, {{"grpc-status", "0"}}, true));
  session_->reset(&a, ErrorCode::kNoError);  // (its request side, never ended)
  frames = drain();
  ASSERT_TRUE(a.closed);
  const Out* opened = find(frames, EventType::kHeaders);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->stream_id, 5u);
  EXPECT_FALSE(session_->failed());
}

// --- floods: bounded memory and CPU ------------------------------------------------------------

TEST_F(Http2Session, PingFloodWithoutReadingIsCalmedDown) {
  start();
  Bytes flood;
  for (int i = 0; i < 1001; ++i) flood = flood + ping();
  feed(flood);  // the peer reads none of the ACKs
  EXPECT_TRUE(session_->failed());
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
  EXPECT_LE(out_.size(), 1001u * 17 + 100);
}

TEST_F(Http2Session, PingsAnsweredAsTheyAreReadAreNoFlood) {
  start();
  for (int i = 0; i < 3000; ++i) {
    feed(ping());
    drain();
  }
  EXPECT_FALSE(session_->failed());
}

TEST_F(Http2Session, SettingsFloodIsCalmedDown) {
  start();
  Bytes flood;
  for (int i = 0; i < 1001; ++i) flood = flood + settings({});
  feed(flood);
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
}

TEST_F(Http2Session, RapidResetIsCalmedDown) {
  // CVE-2023-44487: streams opened and reset at once, past the budget. No refill: the session
  // reads the real clock, and a slow (sanitized, loaded) run must not earn tokens back.
  defences.reset_burst = 100;
  defences.reset_rate = 0;
  start();
  for (std::uint32_t i = 0; i < 101 && !session_->failed(); ++i) {
    feed(headers(2 * i + 1, request(), false) + rst(2 * i + 1, ErrorCode::kCancel));
  }
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
  EXPECT_TRUE(has_goaway(drain(), ErrorCode::kEnhanceYourCalm));
  // At most the stream whose reset broke the budget is left, for the connection to close.
  EXPECT_LE(session_->open_streams(), 1u);
}

TEST_F(Http2Session, MadeYouResetCountsTheServersResets) {
  // CVE-2025-8671: frames that make the server reset streams (here DATA on closed streams)
  // draw on the same budget (not refilled, as above).
  defences.reset_burst = 50;
  defences.reset_rate = 0;
  start();
  feed(headers(1, request(), true));
  respond(host.stream(0), "x");
  drain();
  for (int i = 0; i < 51 && !session_->failed(); ++i) {
    feed(data(1, "x", false));
    drain();
  }
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
}

TEST_F(Http2Session, EmptyDataFloodIsCalmedDown) {
  // CVE-2019-9518 (the budget not refilled, as above).
  defences.glitch_rate = 0;
  start();
  feed(headers(1, request(), false));
  Bytes flood;
  for (int i = 0; i < 1001; ++i) flood = flood + data(1, "", false);
  feed(flood);
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
}

TEST_F(Http2Session, ContinuationFloodEndsAtTheCap) {
  start();
  Bytes flood = frame_of(FrameType::kHeaders, 0, 1, block(request()));
  for (int i = 0; i < 100; ++i)
    flood = flood + frame_of(FrameType::kContinuation, 0, 1, Bytes{0x40});
  feed(flood);
  EXPECT_EQ(session_->error_code(), ErrorCode::kEnhanceYourCalm);
  EXPECT_TRUE(host.streams.empty());
}

TEST_F(Http2Session, WindowUpdateAndPriorityFloodsCostNothing) {
  start();
  feed(headers(1, request(), false));
  drain();
  const std::size_t memory = session_->memory();
  Bytes flood;
  for (int i = 0; i < 2000; ++i) {
    flood = flood + window_update(1, 1) + window_update(0, 1) +
            frame_of(FrameType::kPriority, 0, 3, u32(0) + Bytes{16});
  }
  feed(flood, /*one_byte=*/false);
  EXPECT_FALSE(session_->failed());
  EXPECT_TRUE(drain().empty());  // nothing to answer, nothing kept
  EXPECT_EQ(session_->memory(), memory);
}

TEST_F(Http2Session, ManyStreamsLeaveNothingBehind) {
  start();
  for (std::uint32_t id = 1; id < 4001; id += 2) {
    feed(headers(id, request(), true));
    respond(host.streams.back().get(), "x");
    drain();
  }
  EXPECT_EQ(session_->open_streams(), 0u);
  EXPECT_EQ(host.closing, 2000);
  EXPECT_LT(session_->memory(), 64u << 10);
}

}  // namespace
}  // namespace ferry::http2::session::http2_session_test

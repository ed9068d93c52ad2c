// ferry's HTTP/2 frame layer (src/http2/frame, streams/, limits/defences.h): every frame type
// written and parsed back, every RFC 9113 §4-§6 error a frame alone can carry mapped to its code,
// the same bytes split at every offset and fed one byte at a time giving the same events, the
// stream-id rules of §5.1.1 and the table of open streams, and the floods of the 2019-2024
// advisories mounted against the parser and the defences.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "http2/frame/parser.h"
#include "http2/frame/writer.h"
#include "http2/hpack/decoder.h"
#include "http2/limits/defences.h"
#include "http2/streams/stream_ids.h"
#include "http2/streams/stream_table.h"

namespace ferry::http2::frame::http2_frame_test {
namespace {

using Bytes = std::vector<std::uint8_t>;
using limits::Clock;
using limits::DefenceLimits;
using limits::Defences;
using limits::TokenBucket;
using streams::StreamIds;

Bytes raw_frame(std::uint8_t type, std::uint8_t frame_flags, std::uint32_t stream_id,
                const Bytes& payload, std::uint32_t declared = UINT32_MAX) {
  Bytes out(kFrameHeaderSize);
  write_frame_header(out.data(), declared == UINT32_MAX ? payload.size() : declared,
                     static_cast<FrameType>(type), frame_flags, stream_id);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}
Bytes frame_of(FrameType type, std::uint8_t frame_flags, std::uint32_t stream_id,
               const Bytes& payload) {
  return raw_frame(static_cast<std::uint8_t>(type), frame_flags, stream_id, payload);
}
Bytes u32(std::uint32_t v) {
  Bytes b(4);
  write_u32(b.data(), v);
  return b;
}
Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes empty_settings() { return frame_of(FrameType::kSettings, 0, 0, {}); }
// What a client sends first: the preface and its SETTINGS.
Bytes client_start() { return text(kClientPreface) + empty_settings(); }

struct Record {
  EventType type;
  std::uint32_t stream_id;
  bool end_stream;
  std::string payload;
  std::uint32_t flow_controlled_size;
  ErrorCode error_code;
  ErrorCode stream_error;
  std::uint32_t empty_frames;
  std::uint32_t last_stream_id;
  std::uint32_t increment;
  std::string ping;
  std::uint16_t present;
  std::vector<std::uint32_t> settings;
  bool operator==(const Record&) const = default;
};

struct Outcome {
  std::vector<Record> events;
  ErrorCode error = ErrorCode::kNoError;
  std::string reason;
  std::size_t kept = 0;  // bytes left unconsumed at the end
  bool operator==(const Outcome&) const = default;
};

Record record(const FrameEvent& e) {
  Record r{e.type,
           e.stream_id,
           e.end_stream,
           std::string(e.payload.begin(), e.payload.end()),
           e.flow_controlled_size,
           e.error_code,
           e.stream_error,
           e.empty_frames,
           e.last_stream_id,
           e.increment,
           std::string(e.ping, e.ping + 8),
           e.settings.present,
           {}};
  if (e.type == EventType::kSettings) {
    r.settings.assign(std::begin(e.settings.values), std::end(e.settings.values));
    r.settings.push_back(e.settings.min_header_table_size);
  }
  return r;
}

// Feeds `bytes` to a parser as a connection would: in chunks cut at `cuts`, keeping the
// unconsumed rest in front of the next chunk.
Outcome run(Parser& parser, const Bytes& bytes, const std::vector<std::size_t>& cuts) {
  Outcome out;
  Bytes pending;
  std::size_t from = 0;
  auto drain = [&]() {
    for (;;) {
      FrameEvent event;
      const Parser::Result r = parser.next(pending, event);
      EXPECT_LE(r.consumed, pending.size());
      if (r.status == Parser::Status::kEvent) out.events.push_back(record(event));
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(r.consumed));
      if (r.status == Parser::Status::kEvent) continue;
      if (r.status == Parser::Status::kConnectionError) {
        out.error = parser.error_code();
        out.reason = std::string(parser.reason());
        return false;
      }
      // Never more than one incomplete frame is kept.
      EXPECT_LT(pending.size(), kFrameHeaderSize + parser.limits().max_frame_size);
      EXPECT_GT(parser.bytes_needed(), 0u);
      return true;
    }
  };
  std::vector<std::size_t> ends = cuts;
  ends.push_back(bytes.size());
  for (const std::size_t to : ends) {
    if (to < from) continue;
    pending.insert(pending.end(), bytes.begin() + static_cast<std::ptrdiff_t>(from),
                   bytes.begin() + static_cast<std::ptrdiff_t>(to));
    from = to;
    if (!drain()) return out;
  }
  out.kept = pending.size();
  return out;
}

Outcome parse(const Bytes& bytes, Role role = Role::kServer, ParserLimits limits = {}) {
  Parser parser(role, limits);
  return run(parser, bytes, {});
}

// A client's side of a connection with one of each frame, in every form (padding, priority,
// a block in three frames, unknown types and flags).
Bytes rich_client_stream() {
  Bytes b = text(kClientPreface);
  std::uint8_t buf[256];
  const Setting settings[] = {{SettingId::kHeaderTableSize, 8192},
                              {SettingId::kEnablePush, 0},
                              {static_cast<SettingId>(0x77), 5},  // unknown: ignored
                              {SettingId::kInitialWindowSize, kMaxWindowSize},
                              {SettingId::kMaxFrameSize, kMaxAllowedFrameSize},
                              {SettingId::kHeaderTableSize, 100}};
  b = b + Bytes(buf, buf + write_settings(buf, settings));
  b = b + Bytes(buf, buf + write_settings_ack(buf));
  const Bytes block = text("header block bytes, abcdefghijklmnopqrstuvwxyz");
  b = b + Bytes(buf, buf + write_headers(buf, 1, block, false, 16));  // HEADERS + 2 CONT
  b = b + frame_of(FrameType::kData, flags::kPadded, 1, Bytes{3} + text("hello") + Bytes{0, 0, 0});
  b = b + raw_frame(0xfa, 0xff, 0, text("unknown type"));
  b = b + frame_of(FrameType::kPriority, 0, 3, u32(1) + Bytes{16});
  b = b + frame_of(FrameType::kHeaders,
                   flags::kPadded | flags::kPriority | flags::kEndHeaders | flags::kEndStream, 3,
                   Bytes{2} + u32(0x80000001) + Bytes{200} + text("blk") + Bytes{0, 0});
  b = b + frame_of(FrameType::kData, flags::kEndStream | flags::kPadded, 1, Bytes{0});
  const std::uint8_t opaque[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  b = b + Bytes(buf, buf + write_ping(buf, opaque, false));
  b = b + Bytes(buf, buf + write_ping(buf, opaque, true));
  b = b + Bytes(buf, buf + write_window_update(buf, 0, 1));
  b = b + Bytes(buf, buf + write_window_update(buf, 3, kMaxWindowSize));
  b = b + Bytes(buf, buf + write_rst_stream(buf, 3, ErrorCode::kCancel));
  b = b + Bytes(buf, buf + write_goaway(buf, 7, ErrorCode::kEnhanceYourCalm, text("calm down")));
  b = b + frame_of(FrameType::kHeaders, flags::kEndHeaders, 0x80000005, text("reserved bit"));
  return b;
}

TEST(Http2FrameTest, EveryFrameTypeRoundTrips) {
  const Outcome out = parse(rich_client_stream());
  ASSERT_EQ(out.error, ErrorCode::kNoError) << out.reason;
  ASSERT_EQ(out.events.size(), 13u);
  EXPECT_EQ(out.kept, 0u);
  const Record& settings = out.events[0];
  EXPECT_EQ(settings.type, EventType::kSettings);
  EXPECT_EQ(settings.settings[1], 100u);      // the last value wins
  EXPECT_EQ(settings.settings.back(), 100u);  // the smallest, for the encoder
  EXPECT_EQ(settings.settings[4], kMaxWindowSize);
  EXPECT_EQ(settings.settings[5], kMaxAllowedFrameSize);
  EXPECT_EQ(settings.present, (1u << 1) | (1u << 2) | (1u << 4) | (1u << 5));
  EXPECT_EQ(out.events[1].type, EventType::kSettingsAck);
  EXPECT_EQ(out.events[2].type, EventType::kHeaders);
  EXPECT_EQ(out.events[2].stream_id, 1u);
  EXPECT_FALSE(out.events[2].end_stream);
  EXPECT_EQ(out.events[2].payload, "header block bytes, abcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(out.events[3].type, EventType::kData);
  EXPECT_EQ(out.events[3].payload, "hello");
  EXPECT_EQ(out.events[3].flow_controlled_size, 9u);   // padding counts for flow control
  EXPECT_EQ(out.events[4].type, EventType::kHeaders);  // PRIORITY and the unknown frame: none
  EXPECT_EQ(out.events[4].stream_id, 3u);
  EXPECT_TRUE(out.events[4].end_stream);
  EXPECT_EQ(out.events[4].payload, "blk");
  EXPECT_EQ(out.events[4].stream_error, ErrorCode::kNoError);
  EXPECT_EQ(out.events[5].type, EventType::kData);
  EXPECT_TRUE(out.events[5].end_stream);
  EXPECT_EQ(out.events[5].payload, "");
  EXPECT_EQ(out.events[5].flow_controlled_size, 1u);
  EXPECT_EQ(out.events[6].type, EventType::kPing);
  EXPECT_EQ(out.events[6].ping, std::string("\1\2\3\4\5\6\7\10", 8));
  EXPECT_EQ(out.events[7].type, EventType::kPingAck);
  EXPECT_EQ(out.events[8].type, EventType::kWindowUpdate);
  EXPECT_EQ(out.events[8].stream_id, 0u);
  EXPECT_EQ(out.events[8].increment, 1u);
  EXPECT_EQ(out.events[9].increment, kMaxWindowSize);
  EXPECT_EQ(out.events[10].type, EventType::kRstStream);
  EXPECT_EQ(out.events[10].error_code, ErrorCode::kCancel);
  EXPECT_EQ(out.events[11].type, EventType::kGoaway);
  EXPECT_EQ(out.events[11].last_stream_id, 7u);
  EXPECT_EQ(out.events[11].error_code, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(out.events[11].payload, "calm down");
  EXPECT_EQ(out.events[12].stream_id, 5u);  // RFC 9113 §4.1: the reserved bit is ignored
}

TEST(Http2FrameTest, SplitAtEveryOffsetGivesTheSameEvents) {
  const Bytes bytes = rich_client_stream();
  const Outcome whole = parse(bytes);
  ASSERT_EQ(whole.error, ErrorCode::kNoError);
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    Parser parser(Role::kServer);
    EXPECT_EQ(run(parser, bytes, {cut}), whole) << "cut at " << cut;
  }
  for (std::size_t cut = 0; cut + 7 <= bytes.size(); cut += 5) {
    Parser parser(Role::kServer);
    EXPECT_EQ(run(parser, bytes, {cut, cut + 7}), whole) << "cuts at " << cut;
  }
  std::vector<std::size_t> every_byte;
  for (std::size_t i = 1; i < bytes.size(); ++i) every_byte.push_back(i);
  Parser parser(Role::kServer);
  EXPECT_EQ(run(parser, bytes, every_byte), whole);
}

TEST(Http2FrameTest, HeadersSplitIntoContinuationsAtMaxFrameSize) {
  Bytes block(40000);
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::uint8_t>(i * 7);
  Bytes out(headers_size(block.size(), 16384));
  EXPECT_EQ(out.size(), 40000u + 3 * kFrameHeaderSize);
  EXPECT_EQ(write_headers(std::span(out).first(out.size() - 1), 1, block, true, 16384), 0u);
  ASSERT_EQ(write_headers(out, 1, block, true, 16384), out.size());
  EXPECT_EQ(out[3], static_cast<std::uint8_t>(FrameType::kHeaders));
  EXPECT_EQ(out[4], flags::kEndStream);
  EXPECT_EQ(out[kFrameHeaderSize + 16384 + 3], static_cast<std::uint8_t>(FrameType::kContinuation));
  ParserLimits limits;
  limits.max_header_block_size = 64u << 10;
  const Outcome got = parse(client_start() + out, Role::kServer, limits);
  ASSERT_EQ(got.error, ErrorCode::kNoError) << got.reason;
  ASSERT_EQ(got.events.size(), 2u);
  EXPECT_EQ(got.events[1].payload, std::string(block.begin(), block.end()));
  EXPECT_TRUE(got.events[1].end_stream);
  EXPECT_EQ(got.events[1].empty_frames, 0u);

  // An empty block is one HEADERS frame with END_HEADERS.
  Bytes empty(headers_size(0, 16384));
  ASSERT_EQ(write_headers(empty, 3, {}, false, 16384), kFrameHeaderSize);
  const Outcome none = parse(client_start() + empty);
  ASSERT_EQ(none.events.size(), 2u);
  EXPECT_EQ(none.events[1].payload, "");
}

TEST(Http2FrameTest, DataHeaderForAPayloadByReference) {
  std::uint8_t header[kFrameHeaderSize];
  ASSERT_EQ(write_data_header(header, 9, 5, true), kFrameHeaderSize);
  std::uint8_t unused[kFrameHeaderSize];
  EXPECT_EQ(write_data_header(unused, 9, kMaxAllowedFrameSize + 1, false), 0u);
  EXPECT_EQ(write_data_header(std::span(unused).first(8), 9, 5, false), 0u);
  const Outcome out = parse(client_start() + Bytes(header, header + 9) + text("abcde"));
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[1].type, EventType::kData);
  EXPECT_EQ(out.events[1].stream_id, 9u);
  EXPECT_TRUE(out.events[1].end_stream);
  EXPECT_EQ(out.events[1].payload, "abcde");
}

TEST(Http2FrameTest, DataIsAViewOfTheReadBuffer) {
  const Bytes bytes = client_start() + frame_of(FrameType::kData, 0, 1, text("payload"));
  Parser parser(Role::kServer);
  FrameEvent event;
  Parser::Result r = parser.next(bytes, event);
  ASSERT_EQ(r.status, Parser::Status::kEvent);
  r = parser.next(std::span(bytes).subspan(r.consumed), event);
  ASSERT_EQ(r.status, Parser::Status::kEvent);
  EXPECT_EQ(event.payload.data(), bytes.data() + bytes.size() - 7);
}

TEST(Http2FrameTest, GoawayDebugDataTruncatedToTheFrameSize) {
  const Bytes debug(20000, 'x');
  Bytes out(goaway_size(debug.size()));
  const std::size_t n = write_goaway(out, 1, ErrorCode::kNoError, debug, 16384);
  EXPECT_EQ(n, kFrameHeaderSize + 16384u);
  const Outcome got = parse(client_start() + Bytes(out.begin(), out.begin() + n));
  ASSERT_EQ(got.events.size(), 2u);
  EXPECT_EQ(got.events[1].payload.size(), 16384u - 8);
}

struct ErrorCase {
  const char* name;
  Bytes bytes;  // after the client's preface and SETTINGS (server side) unless `whole`
  ErrorCode code;
  Role role = Role::kServer;
  bool whole = false;
};

TEST(Http2FrameTest, EveryConnectionErrorHasItsCode) {
  constexpr auto P = ErrorCode::kProtocolError;
  constexpr auto F = ErrorCode::kFrameSizeError;
  constexpr auto E = ErrorCode::kEnhanceYourCalm;
  auto setting = [](std::uint16_t id, std::uint32_t v) {
    return frame_of(
        FrameType::kSettings, 0, 0,
        Bytes{static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id)} + u32(v));
  };
  const Bytes headers_open = frame_of(FrameType::kHeaders, 0, 1, text("a"));
  Bytes many_settings;
  for (int i = 0; i < 33; ++i) many_settings = many_settings + Bytes{0, 3, 0, 0, 0, 1};
  const std::vector<ErrorCase> cases = {
      {"an HTTP/1.1 request", text("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), P, Role::kServer, true},
      {"a preface wrong in its last byte", text("PRI * HTTP/2.0\r\n\r\nSM\r\n\rX"), P,
       Role::kServer, true},
      {"first frame not SETTINGS",
       text(kClientPreface) + frame_of(FrameType::kPing, 0, 0, Bytes(8)), P, Role::kServer, true},
      {"first frame a SETTINGS ACK",
       text(kClientPreface) + frame_of(FrameType::kSettings, flags::kAck, 0, {}), P, Role::kServer,
       true},
      {"server's first frame not SETTINGS", frame_of(FrameType::kGoaway, 0, 0, Bytes(8)), P,
       Role::kClient, true},
      {"16 MiB declared", raw_frame(0, 0, 1, {}, kMaxAllowedFrameSize), F},
      {"one octet over SETTINGS_MAX_FRAME_SIZE", raw_frame(0, 0, 1, {}, 16385), F},
      {"DATA on stream 0", frame_of(FrameType::kData, 0, 0, text("x")), P},
      {"DATA padded, no Pad Length", frame_of(FrameType::kData, flags::kPadded, 1, {}), F},
      {"DATA padding = payload", frame_of(FrameType::kData, flags::kPadded, 1, Bytes{3, 0, 0}), P},
      {"DATA padding > payload", frame_of(FrameType::kData, flags::kPadded, 1, Bytes{255}), P},
      {"HEADERS on stream 0", frame_of(FrameType::kHeaders, flags::kEndHeaders, 0, text("x")), P},
      {"HEADERS padded, no Pad Length",
       frame_of(FrameType::kHeaders, flags::kPadded | flags::kEndHeaders, 1, {}), F},
      {"HEADERS priority cut short",
       frame_of(FrameType::kHeaders, flags::kPriority | flags::kEndHeaders, 1, Bytes{0, 0, 0, 3}),
       F},
      {"HEADERS padding > rest",
       frame_of(FrameType::kHeaders, flags::kPadded | flags::kPriority | flags::kEndHeaders, 1,
                Bytes{1} + u32(3) + Bytes{1}),
       P},
      {"PRIORITY on stream 0", frame_of(FrameType::kPriority, 0, 0, u32(1) + Bytes{1}), P},
      {"RST_STREAM on stream 0", frame_of(FrameType::kRstStream, 0, 0, u32(8)), P},
      {"RST_STREAM of 3 octets", frame_of(FrameType::kRstStream, 0, 1, Bytes(3)), F},
      {"RST_STREAM of 5 octets", frame_of(FrameType::kRstStream, 0, 1, Bytes(5)), F},
      {"SETTINGS on stream 1", frame_of(FrameType::kSettings, 0, 1, {}), P},
      {"SETTINGS ACK with payload", frame_of(FrameType::kSettings, flags::kAck, 0, Bytes(6)), F},
      {"SETTINGS of 5 octets", frame_of(FrameType::kSettings, 0, 0, Bytes(5)), F},
      {"SETTINGS of 7 octets", frame_of(FrameType::kSettings, 0, 0, Bytes(7)), F},
      {"ENABLE_PUSH 2", setting(2, 2), P},
      {"ENABLE_PUSH 1 from a server", setting(2, 1), P, Role::kClient},
      {"INITIAL_WINDOW_SIZE 2^31", setting(4, 0x80000000u), ErrorCode::kFlowControlError},
      {"MAX_FRAME_SIZE 16383", setting(5, 16383), P},
      {"MAX_FRAME_SIZE 2^24", setting(5, 1u << 24), P},
      {"ENABLE_CONNECT_PROTOCOL 2", setting(8, 2), P},
      {"NO_RFC7540_PRIORITIES 7", setting(9, 7), P},
      {"33 SETTINGS entries", frame_of(FrameType::kSettings, 0, 0, many_settings), E},
      {"PUSH_PROMISE to a server", frame_of(FrameType::kPushPromise, flags::kEndHeaders, 1, u32(2)),
       P},
      {"PUSH_PROMISE to a client", frame_of(FrameType::kPushPromise, flags::kEndHeaders, 1, u32(2)),
       P, Role::kClient},
      {"PING on stream 1", frame_of(FrameType::kPing, 0, 1, Bytes(8)), P},
      {"PING of 7 octets", frame_of(FrameType::kPing, 0, 0, Bytes(7)), F},
      {"PING ACK of 9 octets", frame_of(FrameType::kPing, flags::kAck, 0, Bytes(9)), F},
      {"GOAWAY on stream 1", frame_of(FrameType::kGoaway, 0, 1, Bytes(8)), P},
      {"GOAWAY of 7 octets", frame_of(FrameType::kGoaway, 0, 0, Bytes(7)), F},
      // The size is checked before the stream, as nghttp2 does and h2spec 6.7 #4 expects (a
      // 6-octet PING on stream 1).
      {"PING of 6 octets on stream 1", frame_of(FrameType::kPing, 0, 1, Bytes(6)), F},
      {"RST_STREAM of 3 octets on stream 0", frame_of(FrameType::kRstStream, 0, 0, Bytes(3)), F},
      {"SETTINGS of 5 octets on stream 1", frame_of(FrameType::kSettings, 0, 1, Bytes(5)), F},
      {"SETTINGS ACK with payload on stream 1",
       frame_of(FrameType::kSettings, flags::kAck, 1, Bytes(6)), F},
      {"SETTINGS ACK on stream 1", frame_of(FrameType::kSettings, flags::kAck, 1, {}), P},
      {"GOAWAY of 7 octets on stream 1", frame_of(FrameType::kGoaway, 0, 1, Bytes(7)), F},
      {"WINDOW_UPDATE of 3 octets", frame_of(FrameType::kWindowUpdate, 0, 1, Bytes(3)), F},
      {"WINDOW_UPDATE of 5 octets", frame_of(FrameType::kWindowUpdate, 0, 0, Bytes(5)), F},
      {"WINDOW_UPDATE 0 on the connection", frame_of(FrameType::kWindowUpdate, 0, 0, u32(0)), P},
      {"WINDOW_UPDATE 0 with the reserved bit",
       frame_of(FrameType::kWindowUpdate, 0, 0, u32(0x80000000u)), P},
      {"CONTINUATION without HEADERS",
       frame_of(FrameType::kContinuation, flags::kEndHeaders, 1, text("x")), P},
      {"DATA inside a header block", headers_open + frame_of(FrameType::kData, 0, 1, text("x")), P},
      {"CONTINUATION of another stream",
       headers_open + frame_of(FrameType::kContinuation, flags::kEndHeaders, 3, text("x")), P},
      {"an unknown frame inside a header block", headers_open + raw_frame(0xee, 0, 1, {}), P},
      {"SETTINGS inside a header block", headers_open + empty_settings(), P},
  };
  for (const ErrorCase& c : cases) {
    Bytes bytes =
        c.whole ? c.bytes : (c.role == Role::kServer ? client_start() : empty_settings()) + c.bytes;
    const Outcome out = parse(bytes, c.role);
    EXPECT_EQ(out.error, c.code) << c.name << ": " << out.reason;
    EXPECT_FALSE(out.reason.empty()) << c.name;
    // And the same bytes one at a time.
    std::vector<std::size_t> every_byte;
    for (std::size_t i = 1; i < bytes.size(); ++i) every_byte.push_back(i);
    Parser parser(c.role);
    EXPECT_EQ(run(parser, bytes, every_byte).error, c.code) << c.name;
  }
}

TEST(Http2FrameTest, StreamErrorsLeaveTheConnectionUp) {
  const Bytes bytes = client_start() + frame_of(FrameType::kPriority, 0, 1, u32(3)) +  // 4 octets
                      frame_of(FrameType::kPriority, 0, 5, u32(5) + Bytes{9}) +        // on itself
                      frame_of(FrameType::kWindowUpdate, 0, 7, u32(0)) +  // 0 on a stream
                      frame_of(FrameType::kHeaders, flags::kPriority | flags::kEndHeaders, 9,
                               u32(0x80000009u) + Bytes{1} + text("b")) +  // on itself
                      frame_of(FrameType::kPing, 0, 0, Bytes(8));
  const Outcome out = parse(bytes);
  ASSERT_EQ(out.error, ErrorCode::kNoError) << out.reason;
  ASSERT_EQ(out.events.size(), 6u);
  EXPECT_EQ(out.events[1].type, EventType::kStreamError);
  EXPECT_EQ(out.events[1].stream_id, 1u);
  EXPECT_EQ(out.events[1].error_code, ErrorCode::kFrameSizeError);
  EXPECT_EQ(out.events[2].stream_id, 5u);
  EXPECT_EQ(out.events[2].error_code, ErrorCode::kProtocolError);
  EXPECT_EQ(out.events[3].stream_id, 7u);
  EXPECT_EQ(out.events[3].error_code, ErrorCode::kProtocolError);
  // The block is delivered (the HPACK table must see it) with the stream's error.
  EXPECT_EQ(out.events[4].type, EventType::kHeaders);
  EXPECT_EQ(out.events[4].payload, "b");
  EXPECT_EQ(out.events[4].stream_error, ErrorCode::kProtocolError);
  EXPECT_EQ(out.events[5].type, EventType::kPing);
}

TEST(Http2FrameTest, ErrorsAreSticky) {
  Parser parser(Role::kServer);
  const Bytes bad = client_start() + frame_of(FrameType::kData, 0, 0, {});
  FrameEvent event;
  std::span<const std::uint8_t> rest = bad;
  Parser::Result r{};
  do {
    r = parser.next(rest, event);
    rest = rest.subspan(r.consumed);
  } while (r.status == Parser::Status::kEvent);
  ASSERT_EQ(r.status, Parser::Status::kConnectionError);
  const Bytes good = empty_settings();
  EXPECT_EQ(parser.next(good, event).status, Parser::Status::kConnectionError);
  EXPECT_EQ(parser.error_code(), ErrorCode::kProtocolError);
}

TEST(Http2FrameTest, OversizedFramesRefusedFromTheirHeader) {
  // The 9-byte header alone is enough: the payload is never waited for.
  Parser parser(Role::kServer);
  const Bytes bytes = client_start() + raw_frame(0, 0, 1, {}, 0xffffff);
  EXPECT_EQ(run(parser, bytes, {}).error, ErrorCode::kFrameSizeError);
  // After SETTINGS_MAX_FRAME_SIZE is raised, the same size is allowed and waited for.
  ParserLimits limits;
  limits.max_frame_size = kMaxAllowedFrameSize;
  Parser big(Role::kServer, limits);
  const Outcome out = run(big, bytes, {});
  EXPECT_EQ(out.error, ErrorCode::kNoError);
  EXPECT_EQ(out.kept, kFrameHeaderSize);
  EXPECT_EQ(big.bytes_needed(), 0xffffffu);
}

TEST(Http2FrameTest, TruncatedFramesWaitForTheirBytes) {
  Parser parser(Role::kServer);
  Bytes bytes = client_start() + frame_of(FrameType::kData, 0, 1, text("0123456789"));
  bytes.resize(bytes.size() - 4);
  const Outcome out = run(parser, bytes, {});
  EXPECT_EQ(out.error, ErrorCode::kNoError);
  EXPECT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.kept, kFrameHeaderSize + 6);
  EXPECT_EQ(parser.bytes_needed(), 4u);
  Parser partial_preface(Role::kServer);
  FrameEvent event;
  const Parser::Result r = partial_preface.next(text("PRI * HTTP"), event);
  EXPECT_EQ(r.status, Parser::Status::kNeedMore);
  EXPECT_EQ(r.consumed, 10u);
  EXPECT_EQ(partial_preface.bytes_needed(), kClientPrefaceSize - 10);
}

TEST(Http2FrameTest, PaddingToTheLastOctetIsAllowed) {
  const Outcome out =
      parse(client_start() + frame_of(FrameType::kData, flags::kPadded, 1, Bytes{4, 0, 0, 0, 0}) +
            frame_of(FrameType::kHeaders, flags::kPadded | flags::kEndHeaders, 1, Bytes{2, 0, 0}));
  ASSERT_EQ(out.error, ErrorCode::kNoError) << out.reason;
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.events[1].payload, "");
  EXPECT_EQ(out.events[1].flow_controlled_size, 5u);
  EXPECT_EQ(out.events[2].payload, "");
}

// CVE-2024-27316 and kin (CONTINUATION flood): the ninth CONTINUATION of a block, or the frame
// that takes the block past its limit, ends the connection from its header alone.
TEST(Http2FrameTest, ContinuationFloodEndsAtTheCapWithoutBuffering) {
  Bytes bytes = client_start() + frame_of(FrameType::kHeaders, 0, 1, {});
  for (int i = 0; i < 8; ++i) bytes = bytes + frame_of(FrameType::kContinuation, 0, 1, {});
  bytes = bytes + raw_frame(9, 0, 1, {}, 16384);  // the 9th: its header only
  const Outcome out = parse(bytes);
  EXPECT_EQ(out.error, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(out.reason, "too many CONTINUATION frames");

  Bytes big = client_start() + frame_of(FrameType::kHeaders, 0, 1, Bytes(16000, 'a')) +
              frame_of(FrameType::kContinuation, 0, 1, Bytes(16000, 'b')) +
              raw_frame(9, flags::kEndHeaders, 1, {}, 1000);  // 33000 > 32 KiB
  Parser parser(Role::kServer);
  const Outcome too_big = run(parser, big, {});
  EXPECT_EQ(too_big.error, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(too_big.reason, "header block too large");
  EXPECT_LE(parser.memory(), 32u << 10);
  // A block exactly at the limit passes.
  ParserLimits limits;
  limits.max_header_block_size = 32000;
  const Outcome fits =
      parse(client_start() + frame_of(FrameType::kHeaders, 0, 1, Bytes(16000, 'a')) +
                frame_of(FrameType::kContinuation, flags::kEndHeaders, 1, Bytes(16000, 'b')),
            Role::kServer, limits);
  EXPECT_EQ(fits.error, ErrorCode::kNoError) << fits.reason;
  ASSERT_EQ(fits.events.size(), 2u);
  EXPECT_EQ(fits.events[1].payload.size(), 32000u);
}

TEST(Http2FrameTest, TrimReleasesTheBlockBuffer) {
  Parser parser(Role::kServer);
  const Bytes bytes = client_start() + frame_of(FrameType::kHeaders, 0, 1, text("ab")) +
                      frame_of(FrameType::kContinuation, flags::kEndHeaders, 1, text("cd"));
  const Outcome out = run(parser, bytes, {});
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_GT(parser.memory(), 0u);
  parser.trim();
  EXPECT_EQ(parser.memory(), 0u);
}

// RFC 9113 §5.1.1.
TEST(Http2FrameTest, StreamIdsOnTheServer) {
  StreamIds ids(Role::kServer);
  using V = StreamIds::HeadersVerdict;
  EXPECT_EQ(ids.on_peer_headers(2), V::kProtocolError);  // even: a server's, and idle
  EXPECT_EQ(ids.on_peer_headers(5), V::kNewStream);
  EXPECT_EQ(ids.highest_peer(), 5u);
  EXPECT_EQ(ids.on_peer_headers(5), V::kKnownStream);  // trailers, or a closed stream
  EXPECT_EQ(ids.on_peer_headers(3), V::kKnownStream);  // skipped: implicitly closed
  EXPECT_EQ(ids.on_peer_headers(7), V::kNewStream);
  EXPECT_EQ(ids.state(3), StreamIds::State::kOpened);
  EXPECT_EQ(ids.state(9), StreamIds::State::kIdle);
  using F = StreamIds::Verdict;
  // DATA on a closed stream: STREAM_CLOSED without a record (h2spec 5.1 #8); on an idle one, a
  // connection error.
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kData, 3), F::kStreamClosed);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kData, 9), F::kProtocolError);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kWindowUpdate, 3), F::kIgnore);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kRstStream, 7), F::kIgnore);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kRstStream, 11), F::kProtocolError);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kWindowUpdate, 2), F::kProtocolError);
  EXPECT_EQ(ids.on_peer_headers(kStreamIdMask), V::kNewStream);
  EXPECT_EQ(ids.on_peer_headers(kStreamIdMask), V::kKnownStream);
}

TEST(Http2FrameTest, StreamIdsOnTheClient) {
  StreamIds ids(Role::kClient);
  using V = StreamIds::HeadersVerdict;
  EXPECT_EQ(ids.on_peer_headers(1), V::kProtocolError);  // ours, and not opened yet
  EXPECT_EQ(ids.open_local(), 1u);
  EXPECT_EQ(ids.open_local(), 3u);
  EXPECT_EQ(ids.on_peer_headers(1), V::kKnownStream);  // the response
  EXPECT_EQ(ids.on_peer_headers(5), V::kProtocolError);
  EXPECT_EQ(ids.on_peer_headers(2), V::kProtocolError);  // a server opens no stream
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kData, 1), StreamIds::Verdict::kStreamClosed);
  EXPECT_EQ(ids.on_frame_without_stream(EventType::kData, 5), StreamIds::Verdict::kProtocolError);
  StreamIds last(Role::kClient);
  std::uint32_t id = 0;
  for (int i = 0; i < 3; ++i) id = last.open_local();
  EXPECT_EQ(id, 5u);
}

// The session's table of open streams against a std::map, under the orders a peer may open and
// close streams in: oldest first (64 unary calls in flight), newest first, at random, and a
// stream that stays open while thousands come and go after it. Its storage stays bounded by the
// most streams open at once.
TEST(Http2FrameTest, StreamTableAgreesWithAMap) {
  struct Item {
    std::uint32_t id;
  };
  std::minstd_rand random(38);
  enum class Order { kOldestFirst, kNewestFirst, kRandom, kOneStaysOpen };
  for (const Order order :
       {Order::kOldestFirst, Order::kNewestFirst, Order::kRandom, Order::kOneStaysOpen}) {
    SCOPED_TRACE(static_cast<int>(order));
    streams::StreamTable<Item> table;
    std::map<std::uint32_t, std::unique_ptr<Item>> open;
    std::uint32_t next_id = 1;
    constexpr std::size_t kMostOpen = 64;
    std::size_t memory_at_most = 0;
    for (int step = 0; step < 20000; ++step) {
      const bool opening = open.size() < kMostOpen && (open.size() < 2 || random() % 2 == 0);
      if (opening) {
        auto item = std::make_unique<Item>(Item{next_id});
        table.insert(next_id, item.get());
        open.emplace(next_id, std::move(item));
        next_id += 2 + 2 * (random() % 3);  // ids only grow, with gaps
      } else {
        auto it = open.begin();
        switch (order) {
          case Order::kOldestFirst:
            break;
          case Order::kNewestFirst:
            it = std::prev(open.end());
            break;
          case Order::kRandom:
            std::advance(it, random() % open.size());
            break;
          case Order::kOneStaysOpen:
            it = std::next(open.begin(), 1 + random() % (open.size() - 1));
            break;
        }
        table.erase(it->first, it->second.get());
        open.erase(it);
      }
      ASSERT_EQ(table.size(), open.size());
      ASSERT_EQ(table.highest(), open.empty() ? nullptr : open.rbegin()->second.get());
      // Every open stream is found, ids between and around them are not.
      if (step % 97 == 0) {
        std::vector<std::uint32_t> seen;
        table.for_each([&](std::uint32_t id, Item* item) {
          EXPECT_EQ(item->id, id);
          seen.push_back(id);
          return true;
        });
        std::vector<std::uint32_t> expected;
        for (const auto& [id, item] : open) expected.push_back(id);
        ASSERT_EQ(seen, expected);
        std::vector<std::uint32_t> probes = {0, 1, next_id};
        for (const auto& [id, item] : open) {
          for (const std::uint32_t near : {id - 2, id - 1, id, id + 1, id + 2}) {
            probes.push_back(near);
          }
        }
        for (const std::uint32_t id : probes) {
          const auto it = open.find(id);
          ASSERT_EQ(table.find(id), it == open.end() ? nullptr : it->second.get()) << id;
        }
      }
      memory_at_most = std::max(memory_at_most, table.memory());
    }
    // Twice the open streams and the slack, in a vector that grows by doubling.
    EXPECT_LE(memory_at_most, 4 * (2 * kMostOpen + 17) * sizeof(std::pair<std::uint32_t, Item*>));
    // An erase of what the table does not hold (an id it never had, or another stream's) is a
    // no-op.
    Item stranger{next_id};
    table.erase(next_id, &stranger);
    if (!open.empty()) table.erase(open.begin()->first, &stranger);
    EXPECT_EQ(table.size(), open.size());
  }
}

TEST(Http2FrameTest, TokenBucketRefillsAtItsRate) {
  const Clock::time_point t0{};
  TokenBucket bucket(1000, 33, t0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(bucket.take(t0));
  EXPECT_FALSE(bucket.take(t0));
  EXPECT_FALSE(bucket.take(t0 + std::chrono::milliseconds(30)));  // 0.99 of a token
  EXPECT_TRUE(bucket.take(t0 + std::chrono::milliseconds(31)));
  EXPECT_EQ(bucket.tokens(t0 + std::chrono::seconds(1) + std::chrono::milliseconds(31)), 33u);
  EXPECT_EQ(bucket.tokens(t0 + std::chrono::hours(24 * 365)), 1000u);  // capped, no overflow
  // Time going backwards refills nothing.
  TokenBucket back(2, 1, t0 + std::chrono::seconds(10));
  EXPECT_TRUE(back.take(t0));
  EXPECT_TRUE(back.take(t0));
  EXPECT_FALSE(back.take(t0));
}

// A peer's bytes through the parser and the defences, as the connection will run them.
// Returns the number of events accepted before the defences answered ENHANCE_YOUR_CALM (or all).
struct Mounted {
  std::size_t accepted = 0;
  ErrorCode verdict = ErrorCode::kNoError;
};
Mounted mount(const Bytes& bytes, Defences& defences, Clock::time_point now,
              std::size_t write_acks_every = 0) {
  Parser parser(Role::kServer);
  Mounted m;
  std::span<const std::uint8_t> rest = bytes;
  for (;;) {
    FrameEvent event;
    const Parser::Result r = parser.next(rest, event);
    rest = rest.subspan(r.consumed);
    if (r.status != Parser::Status::kEvent) {
      EXPECT_EQ(r.status, Parser::Status::kNeedMore) << parser.reason();
      return m;
    }
    m.verdict = defences.on_event(event, now);
    if (m.verdict != ErrorCode::kNoError) return m;
    ++m.accepted;
    if (write_acks_every != 0 && m.accepted % write_acks_every == 0) defences.on_acks_written();
  }
}

Bytes repeat(const Bytes& unit, int n) {
  Bytes out;
  for (int i = 0; i < n; ++i) out.insert(out.end(), unit.begin(), unit.end());
  return out;
}

// CVE-2019-9513 resource loop: PRIORITY frames leave nothing behind (no priority tree).
TEST(Http2FrameTest, PriorityFloodHoldsNothing) {
  Bytes flood = client_start();
  for (std::uint32_t id = 1; id < 20000; id += 2) {
    const Bytes priority = frame_of(FrameType::kPriority, 0, id, u32(id + 2) + Bytes{255});
    flood.insert(flood.end(), priority.begin(), priority.end());
  }
  Parser parser(Role::kServer);
  const Outcome out = run(parser, flood, {});
  EXPECT_EQ(out.error, ErrorCode::kNoError);
  EXPECT_EQ(out.events.size(), 1u);  // the SETTINGS alone
  EXPECT_EQ(out.kept, 0u);
  EXPECT_EQ(parser.memory(), 0u);
}

// CVE-2019-9512 ping flood.
TEST(Http2FrameTest, PingFloodBoundedByQueuedAcks) {
  const Clock::time_point t0{};
  const Bytes flood = client_start() + repeat(frame_of(FrameType::kPing, 0, 0, Bytes(8)), 1100);
  Defences defences(t0);
  const Mounted m = mount(flood, defences, t0);
  EXPECT_EQ(m.verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(m.accepted, 1000u);  // the client's SETTINGS (an ACK) and 999 PINGs
  // A peer that reads its answers is never cut off.
  Defences reading(t0);
  EXPECT_EQ(mount(flood, reading, t0, 100).verdict, ErrorCode::kNoError);
}

// CVE-2019-9515 settings flood.
TEST(Http2FrameTest, SettingsFloodBoundedByQueuedAcks) {
  const Clock::time_point t0{};
  DefenceLimits limits;
  limits.max_queued_acks = 10;
  Defences defences(t0, limits);
  const Mounted m = mount(client_start() + repeat(empty_settings(), 50), defences, t0);
  EXPECT_EQ(m.verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(m.accepted, 10u);
  EXPECT_EQ(defences.queued_acks(), 10u);
}

// CVE-2019-9518 empty frames flood: DATA with no payload and no END_STREAM.
TEST(Http2FrameTest, EmptyDataFloodIsAGlitch) {
  const Clock::time_point t0{};
  const Bytes flood = client_start() + repeat(frame_of(FrameType::kData, 0, 1, {}), 1100);
  Defences defences(t0);
  const Mounted m = mount(flood, defences, t0);
  EXPECT_EQ(m.verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(m.accepted, 1 + 1000u);
  // The same frames spread below 33 a second pass; DATA with bytes or END_STREAM never count.
  Defences slow(t0);
  Clock::time_point now = t0;
  Parser parser(Role::kServer);
  std::span<const std::uint8_t> rest = flood;
  FrameEvent event;
  for (Parser::Result r = parser.next(rest, event); r.status == Parser::Status::kEvent;
       rest = rest.subspan(r.consumed), r = parser.next(rest, event)) {
    now += std::chrono::milliseconds(31);
    ASSERT_EQ(slow.on_event(event, now), ErrorCode::kNoError);
  }
  Defences full(t0);
  const Bytes useful = client_start() + repeat(frame_of(FrameType::kData, 0, 1, text("x")), 1100) +
                       repeat(frame_of(FrameType::kData, flags::kEndStream, 1, {}), 1100);
  EXPECT_EQ(mount(useful, full, t0).verdict, ErrorCode::kNoError);
}

// CVE-2019-9518 with empty CONTINUATIONs: each block's empty frames are glitches.
TEST(Http2FrameTest, EmptyContinuationFloodIsAGlitch) {
  const Clock::time_point t0{};
  Bytes block = frame_of(FrameType::kHeaders, 0, 1, {});
  for (int i = 0; i < 7; ++i) block = block + frame_of(FrameType::kContinuation, 0, 1, {});
  block = block + frame_of(FrameType::kContinuation, flags::kEndHeaders, 1, text("x"));
  Defences defences(t0);
  const Mounted m = mount(client_start() + repeat(block, 200), defences, t0);
  EXPECT_EQ(m.verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(m.accepted, 1 + 125u);  // 8 glitches a block: the 126th block crosses 1000
}

// CVE-2019-9514 reset flood and CVE-2023-44487 rapid reset: HEADERS then RST_STREAM, stream
// after stream.
TEST(Http2FrameTest, RapidResetBoundedByTheResetBudget) {
  const Clock::time_point t0{};
  Bytes flood = client_start();
  for (std::uint32_t id = 1; id < 2 * 1100; id += 2) {
    flood = flood + frame_of(FrameType::kHeaders, flags::kEndHeaders, id, Bytes{0x82}) +
            frame_of(FrameType::kRstStream, 0, id, u32(8));
  }
  Defences defences(t0);
  const Mounted m = mount(flood, defences, t0);
  EXPECT_EQ(m.verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(m.accepted, 1 + 2 * 1000u + 1);  // SETTINGS, 1000 pairs, the 1001st HEADERS
  // A second later, 33 more resets are allowed.
  const Clock::time_point t1 = t0 + std::chrono::seconds(1);
  for (int i = 0; i < 33; ++i) EXPECT_EQ(defences.on_reset(t1), ErrorCode::kNoError);
  EXPECT_EQ(defences.on_reset(t1), ErrorCode::kEnhanceYourCalm);
}

// CVE-2019-9516: 0-length header names, decoded by ferry's HPACK decoder, each a glitch.
TEST(Http2FrameTest, EmptyHeaderNamesAreGlitches) {
  const Clock::time_point t0{};
  // A literal without indexing with a new, empty name and the value "a", 50 times a block.
  Bytes block;
  for (int i = 0; i < 50; ++i) block = block + Bytes{0x00, 0x00, 0x01, 'a'};
  Bytes flood = client_start();
  for (std::uint32_t id = 1; id < 2 * 30; id += 2) {
    Bytes frames(headers_size(block.size(), 16384));
    write_headers(frames, id, block, true, 16384);
    flood = flood + frames;
  }
  Parser parser(Role::kServer);
  hpack::Decoder decoder;
  hpack::DecodedHeaders headers;
  Defences defences(t0);
  std::span<const std::uint8_t> rest = flood;
  std::size_t blocks = 0;
  ErrorCode verdict = ErrorCode::kNoError;
  FrameEvent event;
  for (Parser::Result r = parser.next(rest, event);
       r.status == Parser::Status::kEvent && verdict == ErrorCode::kNoError;
       rest = rest.subspan(r.consumed), r = parser.next(rest, event)) {
    if (event.type != EventType::kHeaders) continue;
    ++blocks;
    ASSERT_TRUE(decoder.decode(event.payload, headers).ok());
    for (const hpack::DecodedField& field : headers.fields()) {
      if (!field.name.empty()) continue;
      verdict = defences.on_empty_field_name(t0);
      if (verdict != ErrorCode::kNoError) break;
    }
  }
  EXPECT_EQ(verdict, ErrorCode::kEnhanceYourCalm);
  EXPECT_EQ(blocks, 21u);  // 1000 empty names in 20 blocks: the 21st's first is one too many
}

}  // namespace
}  // namespace ferry::http2::frame::http2_frame_test

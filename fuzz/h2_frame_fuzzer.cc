// libFuzzer target: ferry's HTTP/2 frame parser (src/http2/frame/parser.h) from one side of a
// connection (FERRY_FUZZ_ROLE_CLIENT: a server's bytes to a client; otherwise a client's bytes
// to a server), built twice as h2_frame_server_fuzzer and h2_frame_client_fuzzer. Checks: no
// crash, leak or read outside the buffer (ASan); the same events and the same error whether
// the bytes come whole or in the chunks the input picks; at most one incomplete frame kept;
// DATA payloads within their frame, header blocks within max_header_block_size and the block
// buffer too; every SETTINGS value reported within its RFC 9113 §6.5.2 range; every header
// block written again by the frame writer at the smallest frame size parses back the same;
// the defences (limits/defences.h) fed every event. Input: byte 0 the limits and whether the
// preface and an empty SETTINGS come first, byte 1 the chunking's seed, then the bytes
// (fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "http2/frame/parser.h"
#include "http2/frame/writer.h"
#include "http2/limits/defences.h"

namespace {

namespace frame = ferry::http2::frame;
using frame::EventType;
using frame::FrameEvent;
using frame::Parser;

#ifdef FERRY_FUZZ_ROLE_CLIENT
constexpr frame::Role kRole = frame::Role::kClient;
#else
constexpr frame::Role kRole = frame::Role::kServer;
#endif

// An event as comparable bytes.
void append_event(std::string& out, const FrameEvent& e) {
  out += static_cast<char>(e.type);
  out.append(reinterpret_cast<const char*>(&e.stream_id), 4);
  out += static_cast<char>(e.end_stream);
  out.append(reinterpret_cast<const char*>(&e.flow_controlled_size), 4);
  out.append(reinterpret_cast<const char*>(&e.error_code), 4);
  out.append(reinterpret_cast<const char*>(&e.stream_error), 4);
  out.append(reinterpret_cast<const char*>(&e.last_stream_id), 4);
  out.append(reinterpret_cast<const char*>(&e.increment), 4);
  out.append(reinterpret_cast<const char*>(&e.empty_frames), 4);
  out.append(reinterpret_cast<const char*>(e.ping), 8);
  out.append(reinterpret_cast<const char*>(e.settings.values), sizeof(e.settings.values));
  out.append(reinterpret_cast<const char*>(&e.settings.present), 2);
  out.append(reinterpret_cast<const char*>(&e.settings.min_header_table_size), 4);
  const std::uint32_t n = static_cast<std::uint32_t>(e.payload.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  out.append(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
}

void check_event(const FrameEvent& e, const frame::ParserLimits& limits) {
  switch (e.type) {
    case EventType::kData:
      FUZZ_CHECK(e.stream_id != 0);
      FUZZ_CHECK(e.payload.size() <= e.flow_controlled_size);
      FUZZ_CHECK(e.flow_controlled_size <= limits.max_frame_size);
      break;
    case EventType::kHeaders:
      FUZZ_CHECK(e.stream_id != 0);
      FUZZ_CHECK(e.payload.size() <= limits.max_header_block_size);
      break;
    case EventType::kSettings: {
      using frame::SettingId;
      const auto& s = e.settings;
      if (s.has(SettingId::kEnablePush)) FUZZ_CHECK(s.get(SettingId::kEnablePush) <= 1);
      if (kRole == frame::Role::kClient && s.has(SettingId::kEnablePush)) {
        FUZZ_CHECK(s.get(SettingId::kEnablePush) == 0);
      }
      if (s.has(SettingId::kInitialWindowSize)) {
        FUZZ_CHECK(s.get(SettingId::kInitialWindowSize) <= frame::kMaxWindowSize);
      }
      if (s.has(SettingId::kMaxFrameSize)) {
        FUZZ_CHECK(s.get(SettingId::kMaxFrameSize) >= frame::kDefaultMaxFrameSize);
        FUZZ_CHECK(s.get(SettingId::kMaxFrameSize) <= frame::kMaxAllowedFrameSize);
      }
      break;
    }
    case EventType::kWindowUpdate:
      FUZZ_CHECK(e.increment > 0 && e.increment <= frame::kMaxWindowSize);
      break;
    case EventType::kRstStream:
    case EventType::kStreamError:
      FUZZ_CHECK(e.stream_id != 0);
      break;
    default:
      break;
  }
}

// Parses `bytes` in chunks (sizes from `seed`; 0: whole) as a connection would, keeping the
// unconsumed rest. Returns the events and the error as bytes.
std::string run(std::span<const std::uint8_t> bytes, const frame::ParserLimits& limits,
                std::uint32_t seed) {
  Parser parser(kRole, limits);
  ferry::http2::limits::Defences defences(ferry::http2::limits::Clock::time_point{});
  std::string out;
  std::vector<std::uint8_t> pending;
  std::size_t from = 0;
  std::uint32_t rng = seed * 2654435761u + 1;
  while (from < bytes.size() || from == 0) {
    std::size_t n = bytes.size() - from;
    if (seed != 0) {
      rng = rng * 1103515245u + 12345u;
      n = std::min<std::size_t>(n, 1 + (rng >> 16) % 40);
    }
    pending.insert(pending.end(), bytes.begin() + from, bytes.begin() + from + n);
    from += n;
    for (;;) {
      FrameEvent event;
      const Parser::Result r = parser.next(pending, event);
      FUZZ_CHECK(r.consumed <= pending.size());
      FUZZ_CHECK(parser.memory() <= limits.max_header_block_size);
      if (r.status == Parser::Status::kEvent) {
        check_event(event, limits);
        append_event(out, event);
        (void)defences.on_event(event, ferry::http2::limits::Clock::time_point{});
        if (event.type == EventType::kHeaders) {
          // The block written again in the smallest frames parses back the same.
          std::vector<std::uint8_t> again(
              frame::headers_size(event.payload.size(), frame::kDefaultMaxFrameSize));
          FUZZ_CHECK(frame::write_headers(again, event.stream_id, event.payload, event.end_stream,
                                          frame::kDefaultMaxFrameSize) == again.size());
          std::vector<std::uint8_t> stream;
          if (kRole == frame::Role::kServer) {
            stream.assign(frame::kClientPreface, frame::kClientPreface + frame::kClientPrefaceSize);
          }
          const std::uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
          stream.insert(stream.end(), settings, settings + 9);
          stream.insert(stream.end(), again.begin(), again.end());
          frame::ParserLimits roomy = limits;
          roomy.max_continuation_frames = 1u << 20;
          Parser reparse(kRole, roomy);
          std::span<const std::uint8_t> rest = stream;
          FrameEvent back;
          Parser::Result b = reparse.next(rest, back);
          FUZZ_CHECK(b.status == Parser::Status::kEvent && back.type == EventType::kSettings);
          b = reparse.next(rest.subspan(b.consumed), back);
          FUZZ_CHECK(b.status == Parser::Status::kEvent && back.type == EventType::kHeaders);
          FUZZ_CHECK(back.payload.size() == event.payload.size());
          FUZZ_CHECK(event.payload.empty() || std::memcmp(back.payload.data(), event.payload.data(),
                                                          event.payload.size()) == 0);
        }
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(r.consumed));
      if (r.status == Parser::Status::kEvent) continue;
      if (r.status == Parser::Status::kConnectionError) {
        FUZZ_CHECK(parser.error_code() != ferry::http2::ErrorCode::kNoError);
        out += "error:";
        out += static_cast<char>(parser.error_code());
        out += parser.reason();
        return out;
      }
      FUZZ_CHECK(pending.size() < frame::kFrameHeaderSize + limits.max_frame_size);
      FUZZ_CHECK(parser.bytes_needed() > 0);
      break;
    }
    if (bytes.empty()) break;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  frame::ParserLimits limits;
  constexpr std::uint32_t kFrameSizes[] = {frame::kDefaultMaxFrameSize, 20000, 1u << 20,
                                           frame::kMaxAllowedFrameSize};
  constexpr std::uint32_t kBlockSizes[] = {32u << 10, 64, 1000, 1u << 20};
  constexpr std::uint32_t kContinuations[] = {8, 0, 2, 1000};
  limits.max_frame_size = kFrameSizes[mode & 3];
  limits.max_header_block_size = kBlockSizes[(mode >> 2) & 3];
  limits.max_continuation_frames = kContinuations[(mode >> 4) & 3];
  std::vector<std::uint8_t> bytes;
  if (mode & 0x40) {  // the preface (server side) and an empty SETTINGS first
    if (kRole == frame::Role::kServer) {
      bytes.assign(frame::kClientPreface, frame::kClientPreface + frame::kClientPrefaceSize);
    }
    const std::uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    bytes.insert(bytes.end(), settings, settings + 9);
  }
  bytes.insert(bytes.end(), data + 2, data + size);
  const std::string whole = run(bytes, limits, 0);
  const std::string chunked = run(bytes, limits, data[1] | 0x100u);
  FUZZ_CHECK(whole == chunked);
  return 0;
}

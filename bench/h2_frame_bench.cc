// HTTP/2 frame parsing, ferry's (src/http2/frame) against nghttp2's session in the same run: a
// server reading one loop turn of 64 unary gRPC requests (HEADERS + DATA each, as an nghttp2
// client's deflater encodes them: :path a literal every call), the same bytes to both.
// nghttp2_session_mem_recv runs with no callbacks (it still inflates every header block and
// keeps a stream per request); ferry's rows are the frame parser alone and the parser with its
// HPACK decoder over each block, which is the comparable one. A session starts every 16 turns
// (outside the timing; the streams of a turn stay open in nghttp2, as the handlers would keep
// them). Compare medians of --benchmark_repetitions; allocations per turn as counters.
#include <benchmark/benchmark.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "alloc_counter.h"
#include "http2/frame/parser.h"
#include "http2/frame/writer.h"
#include "http2/hpack/decoder.h"

namespace {

namespace frame = ferry::http2::frame;
using Bytes = std::vector<std::uint8_t>;

constexpr int kCallsPerTurn = 64;
constexpr int kTurnsPerSession = 16;

const char* const kRequest[][2] = {{":method", "POST"},
                                   {":scheme", "http"},
                                   {":path", "/grpc.testing.TestService/UnaryCall"},
                                   {":authority", "localhost:50051"},
                                   {"content-type", "application/grpc"},
                                   {"user-agent", "grpc-go/1.85.0"},
                                   {"te", "trailers"},
                                   {"grpc-accept-encoding", "identity,deflate,gzip"},
                                   {"grpc-timeout", "999847u"}};

// The connection's start (preface and SETTINGS) and its turns, as an nghttp2 client encodes them.
struct Connection {
  Bytes start;
  std::vector<Bytes> turns;
};

const Connection& connection() {
  static const Connection c = [] {
    Connection c;
    c.start.assign(frame::kClientPreface, frame::kClientPreface + frame::kClientPrefaceSize);
    std::uint8_t settings[64];
    const frame::Setting s[] = {{frame::SettingId::kEnablePush, 0},
                                {frame::SettingId::kInitialWindowSize, 1u << 20}};
    c.start.insert(c.start.end(), settings, settings + frame::write_settings(settings, s));
    nghttp2_hd_deflater* deflater = nullptr;
    if (nghttp2_hd_deflate_new(&deflater, 4096) != 0) std::abort();
    std::vector<nghttp2_nv> nv;
    for (const auto& f : kRequest) {
      nv.push_back(
          {reinterpret_cast<std::uint8_t*>(const_cast<char*>(f[0])),
           reinterpret_cast<std::uint8_t*>(const_cast<char*>(f[1])), std::strlen(f[0]),
           std::strlen(f[1]),
           static_cast<std::uint8_t>(std::strcmp(f[0], ":path") == 0 ? NGHTTP2_NV_FLAG_NO_INDEX
                                                                     : NGHTTP2_NV_FLAG_NONE)});
    }
    // A 16-byte message in its gRPC frame.
    const std::uint8_t message[] = {0,   0,   0,   0,   16,  10,  14,  'h', 'e', 'l', 'l',
                                    'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!'};
    std::uint32_t stream_id = 1;
    for (int t = 0; t < kTurnsPerSession; ++t) {
      Bytes turn;
      for (int i = 0; i < kCallsPerTurn; ++i, stream_id += 2) {
        Bytes block(nghttp2_hd_deflate_bound(deflater, nv.data(), nv.size()));
        const auto n =
            nghttp2_hd_deflate_hd(deflater, block.data(), block.size(), nv.data(), nv.size());
        if (n < 0) std::abort();
        block.resize(static_cast<std::size_t>(n));
        Bytes frames(frame::headers_size(block.size(), frame::kDefaultMaxFrameSize) +
                     frame::kFrameHeaderSize);
        std::size_t used =
            frame::write_headers(frames, stream_id, block, false, frame::kDefaultMaxFrameSize);
        used += frame::write_data_header(std::span(frames).subspan(used), stream_id,
                                         sizeof(message), true);
        turn.insert(turn.end(), frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(used));
        turn.insert(turn.end(), message, message + sizeof(message));
      }
      c.turns.push_back(std::move(turn));
    }
    nghttp2_hd_deflate_del(deflater);
    return c;
  }();
  return c;
}

// `allocations`: those made in the timed turns.
void report(benchmark::State& state, std::uint64_t allocations) {
  state.counters["allocs/turn"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations());
  state.counters["bytes/turn"] = static_cast<double>(connection().turns[0].size());
  state.SetItemsProcessed(state.iterations() * kCallsPerTurn);
}

// Parses a whole turn: every frame, every event consumed; with `decoder`, each block decoded.
template <bool kDecode>
std::size_t parse_turn(frame::Parser& parser, ferry::http2::hpack::Decoder* decoder,
                       ferry::http2::hpack::DecodedHeaders* headers,
                       std::span<const std::uint8_t> bytes) {
  std::size_t events = 0;
  frame::FrameEvent event;
  for (;;) {
    const frame::Parser::Result r = parser.next(bytes, event);
    if (r.status != frame::Parser::Status::kEvent) {
      if (r.status != frame::Parser::Status::kNeedMore || r.consumed != bytes.size()) std::abort();
      return events;
    }
    bytes = bytes.subspan(r.consumed);
    ++events;
    if constexpr (kDecode) {
      if (event.type == frame::EventType::kHeaders &&
          !decoder->decode(event.payload, *headers).ok()) {
        std::abort();
      }
    }
    benchmark::DoNotOptimize(event);
  }
}

template <bool kDecode>
void BM_Ferry(benchmark::State& state) {
  const Connection& c = connection();
  std::uint64_t allocations = 0;
  int turn = kTurnsPerSession;
  std::unique_ptr<frame::Parser> parser;
  std::unique_ptr<ferry::http2::hpack::Decoder> decoder;
  ferry::http2::hpack::DecodedHeaders headers;  // reused, as the connection will
  for (auto _ : state) {
    if (turn == kTurnsPerSession) {
      state.PauseTiming();
      parser = std::make_unique<frame::Parser>(frame::Role::kServer);
      decoder = std::make_unique<ferry::http2::hpack::Decoder>();
      if (parse_turn<false>(*parser, nullptr, nullptr, c.start) != 1) std::abort();
      turn = 0;
      state.ResumeTiming();
    }
    const std::uint64_t before = ferry::bench::thread_allocation_count();
    benchmark::DoNotOptimize(parse_turn<kDecode>(*parser, decoder.get(), &headers, c.turns[turn]));
    allocations += ferry::bench::thread_allocation_count() - before;
    ++turn;
  }
  report(state, allocations);
}

void BM_ParseTurn_Ferry(benchmark::State& state) { BM_Ferry<false>(state); }
void BM_ParseAndDecodeTurn_Ferry(benchmark::State& state) { BM_Ferry<true>(state); }

void BM_ParseTurn_Nghttp2(benchmark::State& state) {
  const Connection& c = connection();
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) std::abort();
  nghttp2_session* session = nullptr;
  int turn = kTurnsPerSession;
  std::uint64_t allocations = 0;
  for (auto _ : state) {
    if (turn == kTurnsPerSession) {
      state.PauseTiming();
      if (session != nullptr) nghttp2_session_del(session);
      if (nghttp2_session_server_new(&session, callbacks, nullptr) != 0) std::abort();
      const auto rv = nghttp2_session_mem_recv(session, c.start.data(), c.start.size());
      if (rv != static_cast<std::remove_cv_t<decltype(rv)>>(c.start.size())) std::abort();
      turn = 0;
      state.ResumeTiming();
    }
    const Bytes& bytes = c.turns[turn];
    const std::uint64_t before = ferry::bench::thread_allocation_count();
    const auto rv = nghttp2_session_mem_recv(session, bytes.data(), bytes.size());
    allocations += ferry::bench::thread_allocation_count() - before;
    if (rv != static_cast<std::remove_cv_t<decltype(rv)>>(bytes.size())) std::abort();
    ++turn;
  }
  report(state, allocations);
  nghttp2_session_del(session);
  nghttp2_session_callbacks_del(callbacks);
}

}  // namespace

BENCHMARK(BM_ParseTurn_Ferry);
BENCHMARK(BM_ParseAndDecodeTurn_Ferry);
BENCHMARK(BM_ParseTurn_Nghttp2);

BENCHMARK_MAIN();

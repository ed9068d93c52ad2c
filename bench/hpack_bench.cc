// HPACK, ferry's (src/http2/hpack) against nghttp2's deflater and inflater in the same run:
// decoding and encoding a typical gRPC request block and response (headers, then trailers), on a
// connection's first call (the coder created for it) and on a repeated call (steady state), with
// the heap allocations per call. The blocks decoded are nghttp2's deflater's (what an nghttp2
// client sends, :path as a literal every call), the same bytes for both decoders. Compare each
// ferry row with its nghttp2 row (medians of --benchmark_repetitions).
#include <benchmark/benchmark.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"

namespace {

using ferry::http2::hpack::DecodedHeaders;
using ferry::http2::hpack::Decoder;
using ferry::http2::hpack::Encoder;
using ferry::http2::hpack::Field;
using Bytes = std::vector<std::uint8_t>;

// A grpc-go client's unary request and a server's response, as ferry sends them.
const std::vector<Field> kRequest = {{":method", "POST"},
                                     {":scheme", "http"},
                                     {":path", "/grpc.testing.TestService/UnaryCall"},
                                     {":authority", "localhost:50051"},
                                     {"content-type", "application/grpc"},
                                     {"user-agent", "grpc-go/1.85.0"},
                                     {"te", "trailers"},
                                     {"grpc-accept-encoding", "identity,deflate,gzip"}};
const std::vector<Field> kResponseHeaders = {{":status", "200"},
                                             {"content-type", "application/grpc"},
                                             {"grpc-accept-encoding", "identity,deflate,gzip"}};
const std::vector<Field> kTrailers = {{"grpc-status", "0"}};

std::vector<nghttp2_nv> to_nv(const std::vector<Field>& fields) {
  std::vector<nghttp2_nv> nv;
  for (const Field& f : fields) {
    nv.push_back({const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(f.name.data())),
                  const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(f.value.data())),
                  f.name.size(), f.value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  return nv;
}

Bytes deflate(nghttp2_hd_deflater* deflater, const std::vector<nghttp2_nv>& nv) {
  Bytes out(nghttp2_hd_deflate_bound(deflater, nv.data(), nv.size()));
  const auto n = nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), nv.data(), nv.size());
  if (n < 0) std::abort();
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// nghttp2_hd_inflate_hd2 over a whole block, the fields handed to `sink` as a session would.
std::size_t inflate(nghttp2_hd_inflater* inflater, const Bytes& block) {
  const std::uint8_t* in = block.data();
  std::size_t left = block.size(), fields = 0;
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const auto rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, 1);
    if (rv < 0) std::abort();
    in += rv;
    left -= static_cast<std::size_t>(rv);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      benchmark::DoNotOptimize(nv);
      ++fields;
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      return fields;
    }
  }
}

// The blocks an nghttp2 client and server send: the first call's and the second's.
struct Blocks {
  Bytes request[2], headers[2], trailers[2];
  Blocks() {
    nghttp2_hd_deflater* client;
    nghttp2_hd_deflater* server;
    nghttp2_hd_deflate_new(&client, 4096);
    nghttp2_hd_deflate_new(&server, 4096);
    for (int call = 0; call < 2; ++call) {
      request[call] = deflate(client, to_nv(kRequest));
      headers[call] = deflate(server, to_nv(kResponseHeaders));
      trailers[call] = deflate(server, to_nv(kTrailers));
    }
    nghttp2_hd_deflate_del(client);
    nghttp2_hd_deflate_del(server);
  }
};
const Blocks& blocks() {
  static const Blocks b;
  return b;
}

void report_allocations(benchmark::State& state, std::uint64_t before) {
  state.counters["allocs/call"] =
      benchmark::Counter(static_cast<double>(ferry::bench::thread_allocation_count() - before) /
                         static_cast<double>(state.iterations()));
}

// ---- decoding ----------------------------------------------------------------------------

void BM_DecodeRequestFirst_Ferry(benchmark::State& state) {
  const Bytes& block = blocks().request[0];
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    Decoder decoder;
    DecodedHeaders out;
    if (!decoder.decode(block, out).ok()) std::abort();
    benchmark::DoNotOptimize(out.fields().data());
  }
  report_allocations(state, before);
}

void BM_DecodeRequestFirst_Nghttp2(benchmark::State& state) {
  const Bytes& block = blocks().request[0];
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    nghttp2_hd_inflater* inflater;
    nghttp2_hd_inflate_new(&inflater);
    benchmark::DoNotOptimize(inflate(inflater, block));
    nghttp2_hd_inflate_del(inflater);
  }
  report_allocations(state, before);
}

// Repeated calls: the second call's blocks, decoded again and again in the state the first call
// left (they add nothing to the table, so that state holds).
void BM_DecodeRequestRepeated_Ferry(benchmark::State& state) {
  Decoder decoder;
  DecodedHeaders out;
  if (!decoder.decode(blocks().request[0], out).ok()) std::abort();
  const Bytes& block = blocks().request[1];
  if (!decoder.decode(block, out).ok()) std::abort();
  const std::uint32_t table = decoder.table().size();
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    if (!decoder.decode(block, out).ok()) std::abort();
    benchmark::DoNotOptimize(out.fields().data());
  }
  report_allocations(state, before);
  if (decoder.table().size() != table) state.SkipWithError("the block changed the table");
}

void BM_DecodeRequestRepeated_Nghttp2(benchmark::State& state) {
  nghttp2_hd_inflater* inflater;
  nghttp2_hd_inflate_new(&inflater);
  inflate(inflater, blocks().request[0]);
  const Bytes& block = blocks().request[1];
  inflate(inflater, block);
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) benchmark::DoNotOptimize(inflate(inflater, block));
  report_allocations(state, before);
  nghttp2_hd_inflate_del(inflater);
}

void BM_DecodeResponseRepeated_Ferry(benchmark::State& state) {
  Decoder decoder;
  DecodedHeaders out;
  for (int call = 0; call < 2; ++call) {
    if (!decoder.decode(blocks().headers[call], out).ok()) std::abort();
    if (!decoder.decode(blocks().trailers[call], out).ok()) std::abort();
  }
  const std::uint32_t table = decoder.table().size();
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    if (!decoder.decode(blocks().headers[1], out).ok()) std::abort();
    benchmark::DoNotOptimize(out.fields().data());
    if (!decoder.decode(blocks().trailers[1], out).ok()) std::abort();
    benchmark::DoNotOptimize(out.fields().data());
  }
  report_allocations(state, before);
  if (decoder.table().size() != table) state.SkipWithError("the blocks changed the table");
}

void BM_DecodeResponseRepeated_Nghttp2(benchmark::State& state) {
  nghttp2_hd_inflater* inflater;
  nghttp2_hd_inflate_new(&inflater);
  for (int call = 0; call < 2; ++call) {
    inflate(inflater, blocks().headers[call]);
    inflate(inflater, blocks().trailers[call]);
  }
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    benchmark::DoNotOptimize(inflate(inflater, blocks().headers[1]));
    benchmark::DoNotOptimize(inflate(inflater, blocks().trailers[1]));
  }
  report_allocations(state, before);
  nghttp2_hd_inflate_del(inflater);
}

// ---- encoding ----------------------------------------------------------------------------

void BM_EncodeRequestFirst_Ferry(benchmark::State& state) {
  std::string out;
  out.reserve(1024);
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    Encoder encoder;
    out.clear();
    encoder.encode(kRequest, out);
    benchmark::DoNotOptimize(out.data());
  }
  report_allocations(state, before);
}

void BM_EncodeRequestFirst_Nghttp2(benchmark::State& state) {
  const std::vector<nghttp2_nv> nv = to_nv(kRequest);
  Bytes out(1024);
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    nghttp2_hd_deflater* deflater;
    nghttp2_hd_deflate_new(&deflater, 4096);
    benchmark::DoNotOptimize(
        nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), nv.data(), nv.size()));
    nghttp2_hd_deflate_del(deflater);
  }
  report_allocations(state, before);
}

void BM_EncodeRequestRepeated_Ferry(benchmark::State& state) {
  Encoder encoder;
  std::string out;
  encoder.encode(kRequest, out);
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    out.clear();
    encoder.encode(kRequest, out);
    benchmark::DoNotOptimize(out.data());
  }
  report_allocations(state, before);
  state.counters["bytes"] = static_cast<double>(out.size());
}

void BM_EncodeRequestRepeated_Nghttp2(benchmark::State& state) {
  nghttp2_hd_deflater* deflater;
  nghttp2_hd_deflate_new(&deflater, 4096);
  const std::vector<nghttp2_nv> nv = to_nv(kRequest);
  Bytes out(1024);
  nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), nv.data(), nv.size());
  ssize_t n = 0;
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    n = nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), nv.data(), nv.size());
    benchmark::DoNotOptimize(n);
  }
  report_allocations(state, before);
  state.counters["bytes"] = static_cast<double>(n);
  nghttp2_hd_deflate_del(deflater);
}

void BM_EncodeResponseRepeated_Ferry(benchmark::State& state) {
  Encoder encoder;
  std::string out;
  encoder.encode(kResponseHeaders, out);
  encoder.encode(kTrailers, out);
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    out.clear();
    encoder.encode(kResponseHeaders, out);
    encoder.encode(kTrailers, out);
    benchmark::DoNotOptimize(out.data());
  }
  report_allocations(state, before);
  state.counters["bytes"] = static_cast<double>(out.size());
}

void BM_EncodeResponseRepeated_Nghttp2(benchmark::State& state) {
  nghttp2_hd_deflater* deflater;
  nghttp2_hd_deflate_new(&deflater, 4096);
  const std::vector<nghttp2_nv> headers = to_nv(kResponseHeaders);
  const std::vector<nghttp2_nv> trailers = to_nv(kTrailers);
  Bytes out(1024);
  nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), headers.data(), headers.size());
  nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), trailers.data(), trailers.size());
  ssize_t n = 0;
  const std::uint64_t before = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    n = nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), headers.data(), headers.size());
    n += nghttp2_hd_deflate_hd(deflater, out.data(), out.size(), trailers.data(), trailers.size());
    benchmark::DoNotOptimize(n);
  }
  report_allocations(state, before);
  state.counters["bytes"] = static_cast<double>(n);
  nghttp2_hd_deflate_del(deflater);
}

}  // namespace

BENCHMARK(BM_DecodeRequestFirst_Ferry);
BENCHMARK(BM_DecodeRequestFirst_Nghttp2);
BENCHMARK(BM_DecodeRequestRepeated_Ferry);
BENCHMARK(BM_DecodeRequestRepeated_Nghttp2);
BENCHMARK(BM_DecodeResponseRepeated_Ferry);
BENCHMARK(BM_DecodeResponseRepeated_Nghttp2);
BENCHMARK(BM_EncodeRequestFirst_Ferry);
BENCHMARK(BM_EncodeRequestFirst_Nghttp2);
BENCHMARK(BM_EncodeRequestRepeated_Ferry);
BENCHMARK(BM_EncodeRequestRepeated_Nghttp2);
BENCHMARK(BM_EncodeResponseRepeated_Ferry);
BENCHMARK(BM_EncodeResponseRepeated_Nghttp2);

BENCHMARK_MAIN();

// bench/codec_bench.cc: the codec layer (protobuf message <-> gRPC Length-Prefixed-Message) against
// its baselines in one run: a naive string-and-copy codec, grpc++'s own serialization, a flat
// preallocated buffer (the best a contiguous codec can do) and a memcpy of the wire bytes (the
// floor). Benchmarks are named <Encode|Decode>/<impl>/<body bytes>; each reports bytes_per_second
// over the wire size (prefix + payload) and allocs_per_op, heap allocations per iteration.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "alloc_counter.h"
#include "ferry/buffer_pool.h"
#include "ferry/bytes_field.h"
#include "ferry/compression.h"
#include "ferry/frame.h"
#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"
#include "ferry/slice.h"
#include "ferry/slice_chain.h"
#include "ferry/testing/buffer.pb.h"

#ifdef FERRY_HAVE_GRPCPP
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/grpc_library.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#endif

namespace ferry::bench {
namespace {

using ferry::testing::Buffer;

constexpr std::size_t kBodySizes[] = {1, 1024, 8 * 1024, 64 * 1024, 512 * 1024, 1024 * 1024};
constexpr std::size_t kLargestBody = 1024 * 1024;
// Prefix, field tag and the longest length varint: room for the largest message of the suite.
constexpr std::size_t kMaxWireSize = kFramePrefixSize + 1 + 5 + kLargestBody;

// One message of the suite and its encoding, built once per size.
struct Input {
  Buffer msg;
  std::vector<std::uint8_t> wire;  // prefix + payload, contiguous

  std::size_t payload_size() const { return wire.size() - kFramePrefixSize; }
};

// A failure here means a broken codec, not a slow one: stop rather than time garbage.
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "codec_bench: %s failed\n", what);
    std::abort();
  }
}

const Input& input_for(std::size_t body_size) {
  static std::map<std::size_t, Input> inputs;
  auto [it, inserted] = inputs.try_emplace(body_size);
  Input& in = it->second;
  if (inserted) {
    std::string body(body_size, '\0');
    // Varied bytes, so no layer can get away with a shortcut for uniform data.
    for (std::size_t i = 0; i < body_size; ++i) body[i] = static_cast<char>('a' + i * 7 % 26);
    in.msg.set_body(std::move(body));
    const std::size_t size = in.msg.ByteSizeLong();
    in.wire.resize(kFramePrefixSize + size);
    write_frame_prefix(in.wire.data(), false, static_cast<std::uint32_t>(size));
    in.msg.SerializeWithCachedSizesToArray(in.wire.data() + kFramePrefixSize);
  }
  return in;
}

// The wire bytes as a connection's reads would deliver them: pooled blocks of at most
// BufferPool::kBlockSize bytes each.
std::vector<Slice> wire_chunks(const Input& in) {
  std::vector<Slice> chunks;
  for (std::size_t offset = 0; offset < in.wire.size(); offset += BufferPool::kBlockSize) {
    const std::size_t n = std::min(BufferPool::kBlockSize, in.wire.size() - offset);
    chunks.push_back(Slice::copy_of(in.wire.data() + offset, n));
  }
  return chunks;
}

// The body of in as a shared external slice (Slice::external), for the by-reference rows: what a
// user holding a large payload (a file chunk, a cached blob) sends without copying it.
const SliceChain& shared_body(const Input& in) {
  static std::map<const Input*, SliceChain> bodies;
  auto [it, inserted] = bodies.try_emplace(&in);
  if (inserted) {
    auto owner = std::make_shared<std::string>(in.msg.body());
    it->second.append(Slice::external(owner->data(), owner->size(), owner));
  }
  return it->second;
}

// Runs op once untimed, so that pools, caches and reused buffers are warm and only the steady
// state is counted, then the timed loop.
template <typename Op>
void run(benchmark::State& state, const Input& in, Op&& op) {
  op();
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) op();
  const std::uint64_t allocs = allocation_count() - allocs_before;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * in.wire.size()));
  state.counters["allocs_per_op"] =
      benchmark::Counter(static_cast<double>(allocs), benchmark::Counter::kAvgIterations);
}

// ---- encode ------------------------------------------------------------------------------------

void encode_ferry(benchmark::State& state, const Input& in) {
  // The chain outlives the loop, but clear() hands its block back each time: every iteration pays
  // for a block from the pool and its return, as a connection's write path does.
  SliceChain out;
  run(state, in, [&] {
    expect(encode_message(in.msg, out).ok(), "ferry::encode_message");
    benchmark::DoNotOptimize(out.slice(0).data());
    out.clear();
  });
}

// By reference (ServerContext::write_raw's path): the message is built around the shared body
// (append_with_bytes_field: the empty rest, the field's tag and length, the body's one slice) and
// framed (encode_chain: prefix, then the message's slices shared). No byte of the body is
// touched, so the time should not grow with its size.
void encode_ferry_ref(benchmark::State& state, const Input& in) {
  const SliceChain& body = shared_body(in);
  const Buffer rest;
  SliceChain message;
  SliceChain out;
  run(state, in, [&] {
    expect(append_with_bytes_field(rest, 1, body, message).ok(), "ferry::append_with_bytes_field");
    expect(encode_chain(message, false, out).ok(), "ferry::encode_chain");
    benchmark::DoNotOptimize(out.slice(0).data());
    message.clear();
    out.clear();
  });
}

// gzip per-message compression (grpc-encoding: gzip): serialize into pooled blocks, deflate into
// the chain. wire_ratio: compressed frame / uncompressed frame; bytes_per_second counts the
// uncompressed frame, so the figure compares with encode_ferry's directly.
void encode_ferry_gzip(benchmark::State& state, const Input& in) {
  SliceChain out;
  std::size_t wire = 0;
  run(state, in, [&] {
    expect(encode_compressed_message(in.msg, Compression::kGzip, out).ok(),
           "ferry::encode_compressed_message");
    wire = out.size();
    out.clear();
  });
  state.counters["wire_ratio"] = static_cast<double>(wire) / static_cast<double>(in.wire.size());
}

void encode_naive(benchmark::State& state, const Input& in) {
  run(state, in, [&] {
    std::string payload;
    expect(in.msg.SerializeToString(&payload), "SerializeToString");
    std::vector<std::uint8_t> wire(kFramePrefixSize + payload.size());
    write_frame_prefix(wire.data(), false, static_cast<std::uint32_t>(payload.size()));
    std::memcpy(wire.data() + kFramePrefixSize, payload.data(), payload.size());
    benchmark::DoNotOptimize(wire.data());
  });
}

#ifdef FERRY_HAVE_GRPCPP
void encode_grpcpp(benchmark::State& state, const Input& in) {
  run(state, in, [&] {
    grpc::ByteBuffer buffer;
    bool own_buffer;
    expect(grpc::SerializationTraits<Buffer>::Serialize(in.msg, &buffer, &own_buffer).ok(),
           "grpc::SerializationTraits::Serialize");
    benchmark::DoNotOptimize(buffer.Length());
  });
}
#endif

void encode_prealloc(benchmark::State& state, const Input& in) {
  std::vector<std::uint8_t> buffer(kMaxWireSize);
  run(state, in, [&] {
    const std::size_t size = in.msg.ByteSizeLong();
    write_frame_prefix(buffer.data(), false, static_cast<std::uint32_t>(size));
    std::uint8_t* end = in.msg.SerializeWithCachedSizesToArray(buffer.data() + kFramePrefixSize);
    benchmark::DoNotOptimize(end);
  });
}

void encode_memcpy(benchmark::State& state, const Input& in) {
  std::vector<std::uint8_t> buffer(kMaxWireSize);
  run(state, in, [&] {
    std::memcpy(buffer.data(), in.wire.data(), in.wire.size());
    benchmark::DoNotOptimize(buffer.data());
  });
}

// ---- decode ------------------------------------------------------------------------------------

void decode_ferry(benchmark::State& state, const Input& in) {
  const std::vector<Slice> chunks = wire_chunks(in);
  FrameDecoder decoder;
  DecodedMessage decoded;
  Buffer msg;  // reused, as a call object's request is
  run(state, in, [&] {
    for (const Slice& chunk : chunks) decoder.push(chunk);
    absl::StatusOr<bool> got = decoder.next(decoded);
    expect(got.ok() && *got, "ferry::FrameDecoder::next");
    expect(parse_message(decoded.payload, msg).ok(), "ferry::parse_message");
    benchmark::DoNotOptimize(msg.body().data());
  });
}

// By reference (read_raw's path): frame-decode, then cut the body out as slices of the read
// blocks (take_bytes_field) and parse the rest; the body's bytes are never read.
void decode_ferry_ref(benchmark::State& state, const Input& in) {
  const std::vector<Slice> chunks = wire_chunks(in);
  FrameDecoder decoder;
  DecodedMessage decoded;
  SliceChain body;
  Buffer rest;
  run(state, in, [&] {
    for (const Slice& chunk : chunks) decoder.push(chunk);
    absl::StatusOr<bool> got = decoder.next(decoded);
    expect(got.ok() && *got, "ferry::FrameDecoder::next");
    expect(take_bytes_field(decoded.payload, 1, body).ok(), "ferry::take_bytes_field");
    expect(parse_message(decoded.payload, rest).ok(), "ferry::parse_message");
    benchmark::DoNotOptimize(body.size());
  });
}

// Frame-decode, inflate and parse a gzip-compressed message, delivered in block-sized reads.
void decode_ferry_gzip(benchmark::State& state, const Input& in) {
  SliceChain encoded;
  expect(encode_compressed_message(in.msg, Compression::kGzip, encoded).ok(), "gzip encode");
  std::vector<Slice> chunks;
  for (const Slice& s : encoded) chunks.push_back(Slice::copy_of(s.data(), s.size()));
  FrameDecoder decoder(FrameDecoderOptions{64 << 20, true});
  DecodedMessage decoded;
  SliceChain plain;
  Buffer msg;
  run(state, in, [&] {
    for (const Slice& chunk : chunks) decoder.push(chunk);
    absl::StatusOr<bool> got = decoder.next(decoded);
    expect(got.ok() && *got && decoded.compressed, "ferry::FrameDecoder::next");
    expect(decompress_payload(decoded.payload, Compression::kGzip, 64 << 20, plain).ok(),
           "ferry::decompress_payload");
    expect(parse_message(plain, msg).ok(), "ferry::parse_message");
    plain.consume(plain.size());  // as the call layer's per-thread scratch chain does
    benchmark::DoNotOptimize(msg.body().data());
  });
}

void decode_naive(benchmark::State& state, const Input& in) {
  run(state, in, [&] {
    const std::uint32_t length = read_frame_length(in.wire.data());
    std::string payload(reinterpret_cast<const char*>(in.wire.data()) + kFramePrefixSize, length);
    Buffer msg;
    expect(msg.ParseFromString(payload), "ParseFromString");
    benchmark::DoNotOptimize(msg.body().data());
  });
}

#ifdef FERRY_HAVE_GRPCPP
// grpc++'s receive path per message: a grpc_byte_buffer over the transport's ref-counted slices,
// deserialized into a fresh request object. The slices are cut once, outside the loop, at the same
// boundaries as ferry's chunks (minus the prefix, which grpc's transport strips), so that neither
// side pays for making its input.
std::vector<grpc::Slice> payload_slices(const Input& in) {
  std::vector<grpc::Slice> slices;
  for (std::size_t offset = 0; offset < in.wire.size(); offset += BufferPool::kBlockSize) {
    const std::size_t begin = std::max(offset, kFramePrefixSize);
    const std::size_t end = std::min(offset + BufferPool::kBlockSize, in.wire.size());
    if (begin < end) slices.emplace_back(in.wire.data() + begin, end - begin);
  }
  return slices;
}

void decode_grpcpp(benchmark::State& state, const Input& in) {
  const std::vector<grpc::Slice> slices = payload_slices(in);
  run(state, in, [&] {
    grpc::ByteBuffer buffer(slices.data(), slices.size());
    Buffer msg;
    expect(grpc::SerializationTraits<Buffer>::Deserialize(&buffer, &msg).ok(),
           "grpc::SerializationTraits::Deserialize");
    benchmark::DoNotOptimize(msg.body().data());
  });
}
#endif

void decode_prealloc(benchmark::State& state, const Input& in) {
  Buffer msg;
  run(state, in, [&] {
    const std::uint32_t length = read_frame_length(in.wire.data());
    expect(msg.ParseFromArray(in.wire.data() + kFramePrefixSize, static_cast<int>(length)),
           "ParseFromArray");
    benchmark::DoNotOptimize(msg.body().data());
  });
}

void decode_memcpy(benchmark::State& state, const Input& in) {
  std::vector<std::uint8_t> buffer(kMaxWireSize);
  run(state, in, [&] {
    std::memcpy(buffer.data(), in.wire.data(), in.wire.size());
    benchmark::DoNotOptimize(buffer.data());
  });
}

// ---- registration ------------------------------------------------------------------------------

using BenchFn = void (*)(benchmark::State&, const Input&);

struct Impl {
  const char* name;
  BenchFn encode;
  BenchFn decode;
};

constexpr Impl kImpls[] = {
    {"ferry", encode_ferry, decode_ferry},
    {"ferry-ref", encode_ferry_ref, decode_ferry_ref},
    {"ferry-gzip", encode_ferry_gzip, decode_ferry_gzip},
    {"naive", encode_naive, decode_naive},
#ifdef FERRY_HAVE_GRPCPP
    {"grpcpp", encode_grpcpp, decode_grpcpp},
#endif
    {"prealloc", encode_prealloc, decode_prealloc},
    {"memcpy", encode_memcpy, decode_memcpy},
};

void register_benchmarks() {
  for (const bool encode : {true, false}) {
    for (const std::size_t body_size : kBodySizes) {
      for (const Impl& impl : kImpls) {
        const std::string name = std::string(encode ? "Encode/" : "Decode/") + impl.name + "/" +
                                 std::to_string(body_size);
        const BenchFn fn = encode ? impl.encode : impl.decode;
        benchmark::RegisterBenchmark(name.c_str(), [fn, body_size](benchmark::State& state) {
          fn(state, input_for(body_size));
        });
      }
    }
  }
}

// ---- checks before timing ----------------------------------------------------------------------

// allocs_per_op is only as good as the interposer: make sure both malloc and the aligned operator
// new behind the pool's fresh blocks reach it.
bool allocation_counter_works() {
  const std::uint64_t before = allocation_count();
  void* p = std::malloc(64);
  benchmark::DoNotOptimize(p);
  std::free(p);
  const std::uint64_t after_malloc = allocation_count();
  void* q = ::operator new (BufferPool::kBlockSize, std::align_val_t{64});
  benchmark::DoNotOptimize(q);
  ::operator delete (q, std::align_val_t{64});
  const std::uint64_t after_aligned = allocation_count();
  if (after_malloc == before || after_aligned == after_malloc) {
    std::fprintf(stderr, "codec_bench: the allocation counter misses %s\n",
                 after_malloc == before ? "malloc" : "aligned operator new");
    return false;
  }
  return true;
}

// Every implementation must produce (or read back) the same bytes, or its timing means nothing.
bool codecs_agree() {
  for (const std::size_t body_size : kBodySizes) {
    const Input& in = input_for(body_size);
    const std::string_view wire(reinterpret_cast<const char*>(in.wire.data()), in.wire.size());

    SliceChain out;
    if (!encode_message(in.msg, out).ok() || out.to_string() != wire) {
      std::fprintf(stderr, "codec_bench: ferry encodes %zu bytes wrongly\n", body_size);
      return false;
    }
    FrameDecoder decoder;
    for (const Slice& chunk : wire_chunks(in)) decoder.push(chunk);
    DecodedMessage decoded;
    absl::StatusOr<bool> got = decoder.next(decoded);
    Buffer msg;
    if (!got.ok() || !*got || !parse_message(decoded.payload, msg).ok() ||
        msg.body() != in.msg.body()) {
      std::fprintf(stderr, "codec_bench: ferry decodes %zu bytes wrongly\n", body_size);
      return false;
    }
    SliceChain message;
    SliceChain by_reference;
    if (!append_with_bytes_field(Buffer(), 1, shared_body(in), message).ok() ||
        !encode_chain(message, false, by_reference).ok() || by_reference.to_string() != wire) {
      std::fprintf(stderr, "codec_bench: ferry-ref encodes %zu bytes wrongly\n", body_size);
      return false;
    }
    SliceChain body;
    Buffer rest;
    if (!take_bytes_field(decoded.payload, 1, body).ok() || body.to_string() != in.msg.body() ||
        !parse_message(decoded.payload, rest).ok() || !rest.body().empty()) {
      std::fprintf(stderr, "codec_bench: ferry-ref decodes %zu bytes wrongly\n", body_size);
      return false;
    }

#ifdef FERRY_HAVE_GRPCPP
    grpc::ByteBuffer buffer;
    bool own_buffer;
    std::vector<grpc::Slice> slices;
    std::string serialized;
    if (grpc::SerializationTraits<Buffer>::Serialize(in.msg, &buffer, &own_buffer).ok() &&
        buffer.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) serialized.append(s.begin(), s.end());
    }
    const std::vector<grpc::Slice> payload = payload_slices(in);
    grpc::ByteBuffer received(payload.data(), payload.size());
    Buffer from_grpc;
    if (serialized != wire.substr(kFramePrefixSize) ||
        !grpc::SerializationTraits<Buffer>::Deserialize(&received, &from_grpc).ok() ||
        from_grpc.body() != in.msg.body()) {
      std::fprintf(stderr, "codec_bench: grpc++ baseline disagrees at %zu bytes\n", body_size);
      return false;
    }
#endif
  }
  return true;
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
#ifdef FERRY_HAVE_GRPCPP
  // Installs grpc++'s core interface (ByteBuffer and Slice go through it). grpc_init() is not
  // needed for slices and byte buffers, and is left out: its background threads would allocate
  // while allocations are being counted.
  grpc::internal::GrpcLibraryInitializer grpc_library;
  grpc_library.summon();
#endif
  if (!ferry::bench::allocation_counter_works() || !ferry::bench::codecs_agree()) return 1;
  ferry::bench::register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

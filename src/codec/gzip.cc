// Implementation of src/codec/gzip.h.
#include "codec/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ferry::detail {
namespace {

// windowBits 15 (32 KiB, what every gRPC peer uses) + 16: the gzip wrapper, not zlib's.
constexpr int kGzipWindowBits = 15 + 16;
// Level 1 (Z_BEST_SPEED), not zlib's default 6: several times faster per message on the codec
// bench for a somewhat larger output (docs/design/gzip.md). gRPC messages are mostly small and
// CPU is what a transport spends; TODO(perf): a per-call level if users need the ratio.
constexpr int kGzipLevel = Z_BEST_SPEED;
// memLevel 6 (zlib's default is 8): deflateReset clears a hash table of 2^(memLevel + 8) bytes
// per message, and clearing 16 KiB instead of 64 KiB saves a noticeable part of a small
// message's cost, for a barely larger output (docs/design/gzip.md).
constexpr int kGzipMemLevel = 6;

// One deflate stream per thread, reset per message: deflateInit2 allocates ~150 KiB, which per
// message would cost more than compressing a small one.
class Deflater {
 public:
  Deflater() {
    ok_ = deflateInit2(&z_, kGzipLevel, Z_DEFLATED, kGzipWindowBits, kGzipMemLevel,
                       Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~Deflater() {
    if (ok_) deflateEnd(&z_);
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // The stream, reset for a new message; null when zlib could not be set up.
  z_stream* fresh() {
    if (!ok_ || deflateReset(&z_) != Z_OK) return nullptr;
    return &z_;
  }

 private:
  z_stream z_{};
  bool ok_ = false;
};

// The same for inflate (~7 KiB of state plus a 32 KiB window, allocated on first use).
class Inflater {
 public:
  Inflater() { ok_ = inflateInit2(&z_, kGzipWindowBits) == Z_OK; }
  ~Inflater() {
    if (ok_) inflateEnd(&z_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  z_stream* fresh() {
    if (!ok_ || inflateReset(&z_) != Z_OK) return nullptr;
    return &z_;
  }

 private:
  z_stream z_{};
  bool ok_ = false;
};

Deflater& thread_deflater() {
  thread_local Deflater deflater;
  return deflater;
}

Inflater& thread_inflater() {
  thread_local Inflater inflater;
  return inflater;
}

// Points z's output at writable room in out's tail (a fresh block when the tail is full), at
// most limit bytes; returns how many.
std::size_t give_room(z_stream* z, SliceChain& out, std::size_t limit) {
  std::size_t room = out.tail_room();
  if (room == 0) room = BufferPool::kBlockSize;
  room = std::min(room, limit);
  z->next_out = out.reserve(room);
  z->avail_out = static_cast<uInt>(room);
  return room;
}

[[gnu::cold]] absl::Status zlib_error(const char* what, int rc, const z_stream* z) {
  return absl::InternalError(absl::StrCat(what, ": ", z->msg != nullptr ? z->msg : zError(rc)));
}

}  // namespace

absl::Status gzip_compress(const SliceChain& plain, SliceChain& out) {
  z_stream* z = thread_deflater().fresh();
  if (z == nullptr) return absl::InternalError("gzip: zlib's deflate could not be set up");
  const std::size_t mark = out.size();
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();

  // Feed every slice, then finish; each deflate() call gets up to a block of output room.
  std::size_t next = 0;
  int flush = Z_NO_FLUSH;
  while (true) {
    if (flush == Z_NO_FLUSH && z->avail_in == 0) {
      while (next < plain.slice_count() && plain.slice(next).empty()) ++next;
      if (next == plain.slice_count()) {
        flush = Z_FINISH;
      } else {
        const Slice& s = plain.slice(next++);
        z->next_in = const_cast<Bytef*>(s.data());
        z->avail_in = static_cast<uInt>(s.size());
      }
    }
    const std::size_t room = give_room(z, out, kAny);
    const uInt in_before = z->avail_in;
    const int rc = deflate(z, flush);
    const std::size_t got = room - z->avail_out;
    out.commit(got);
    if (rc == Z_STREAM_END) return absl::OkStatus();
    // Z_BUF_ERROR is "no progress possible", which room and input rule out; never spin on it.
    const bool stuck = rc == Z_BUF_ERROR && got == 0 && z->avail_in == in_before;
    if ((rc != Z_OK && rc != Z_BUF_ERROR) || stuck) {
      out.truncate(mark);
      return zlib_error("gzip: deflate failed", rc, z);
    }
  }
}

absl::Status gzip_decompress(const SliceChain& compressed, std::size_t max_size, SliceChain& out) {
  if (compressed.empty()) return absl::OkStatus();
  z_stream* z = thread_inflater().fresh();
  if (z == nullptr) return absl::InternalError("gzip: zlib's inflate could not be set up");
  const std::size_t mark = out.size();
  // One byte past the limit is enough to know it is passed; never ask zlib for more.
  const std::size_t cap =
      max_size == std::numeric_limits<std::size_t>::max() ? max_size : max_size + 1;
  std::size_t produced = 0;
  bool member_ended = false;

  auto fail = [&](absl::Status status) {
    out.truncate(mark);
    return status;
  };

  for (const Slice& s : compressed) {
    if (s.empty()) continue;
    z->next_in = const_cast<Bytef*>(s.data());
    z->avail_in = static_cast<uInt>(s.size());
    do {
      if (member_ended) {
        // Bytes after a complete member: gzip allows members back to back (RFC 1952 2.2); a
        // second one must be well-formed too, so garbage fails its header check.
        if (inflateReset(z) != Z_OK) return fail(zlib_error("gzip: inflate", Z_STREAM_ERROR, z));
        member_ended = false;
      }
      const std::size_t room = give_room(z, out, cap - produced);
      const uInt in_before = z->avail_in;
      const int rc = inflate(z, Z_NO_FLUSH);
      const std::size_t got = room - z->avail_out;
      out.commit(got);
      produced += got;
      if (produced > max_size) {
        return fail(absl::ResourceExhaustedError(absl::StrCat(
            "received message larger than max after decompression (over ", max_size, " bytes)")));
      }
      if (rc == Z_STREAM_END) {
        member_ended = true;
      } else if (rc == Z_BUF_ERROR) {
        if (got == 0 && z->avail_in == in_before) break;  // needs the next slice
      } else if (rc != Z_OK) {
        return fail(zlib_error("invalid gzip data", rc, z));
      }
      // Go on while input is left, or while the output room filled up (more may be pending).
    } while (z->avail_in > 0 || (z->avail_out == 0 && !member_ended));
  }
  if (!member_ended) return fail(absl::InternalError("invalid gzip data: truncated"));
  return absl::OkStatus();
}

}  // namespace ferry::detail

// Byte streams in memory (transport layer, private): two ends of a pipe on one executor, for
// driving HTTP/2 connections without sockets in unit tests and fuzz targets. What one end writes,
// the other reads; a test may also play one end itself (inject bytes, take what was written).
// Completions are always posted, never run inside the call that causes them, as with sockets.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "asio/any_io_executor.hpp"
#include "transport/byte_stream.h"

namespace ferry::http2 {

class MemoryPipe;

// One end of a MemoryPipe.
class MemoryStream final : public ByteStream {
 public:
  MemoryStream(std::shared_ptr<MemoryPipe> pipe, int side);
  ~MemoryStream() override;

  const asio::any_io_executor& executor() const override;
  void async_read_some(asio::mutable_buffer into,
                       std::shared_ptr<ByteStreamClient> client) override;
  std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) override;
  void async_write(std::span<const asio::const_buffer> buffers,
                   std::shared_ptr<ByteStreamClient> client) override;
  void close() override;
  std::string peer_address() const override { return "memory:" + std::to_string(1 - side_); }

 private:
  std::shared_ptr<MemoryPipe> pipe_;
  int side_;
};

// The shared state of two MemoryStreams: one buffer per direction, each bounded by capacity
// (a writer beyond it is told would_block, and an async_write waits for the reader), and the
// pending operations. Touched on its executor only.
class MemoryPipe : public std::enable_shared_from_this<MemoryPipe> {
 public:
  // capacity: bytes one direction buffers before its writer must wait (a socket's buffer).
  static std::shared_ptr<MemoryPipe> create(asio::any_io_executor executor,
                                            std::size_t capacity = 256 * 1024);

  // The two ends as byte streams for connections (each may be taken once).
  std::unique_ptr<ByteStream> end(int side);

  // Playing an end from the test: bytes become readable at `to_side`, as if its peer wrote
  // them (ignoring capacity); eof: that side's reads then end (after what is buffered).
  void inject(int to_side, std::string_view bytes);
  void inject_eof(int to_side);
  // What `from_side` has written and nobody read, taken.
  std::string take_written(int from_side);
  // Whether `side` was closed by its stream.
  bool closed(int side) const { return dir_[side].closed; }

  const asio::any_io_executor& executor() const { return executor_; }

 private:
  friend class MemoryStream;
  // Bytes flowing to one side, and what waits on them.
  struct Direction {
    std::string buffer;   // written to this side, not yet read
    bool eof = false;     // nothing more will be written
    bool closed = false;  // this side's stream was closed
    // A read pending at this side.
    asio::mutable_buffer read_into;
    std::shared_ptr<ByteStreamClient> reader;
    // An async_write pending toward this side (from the other one), and how far it got.
    std::vector<asio::const_buffer> write_rest;
    std::shared_ptr<ByteStreamClient> writer;
  };

  MemoryPipe(asio::any_io_executor executor, std::size_t capacity)
      : executor_(std::move(executor)), capacity_(capacity) {}

  // Completes what can complete in direction d: a pending read, a pending write's progress.
  void pump(int d);
  std::size_t room(int d) const {
    return dir_[d].buffer.size() >= capacity_ ? 0 : capacity_ - dir_[d].buffer.size();
  }

  asio::any_io_executor executor_;
  std::size_t capacity_;
  Direction dir_[2];
};

}  // namespace ferry::http2

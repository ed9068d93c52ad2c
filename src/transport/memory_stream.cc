// Implementation of src/transport/memory_stream.h.
#include "transport/memory_stream.h"

#include <algorithm>
#include <cstring>

#include "asio/post.hpp"

namespace ferry::http2 {

std::shared_ptr<MemoryPipe> MemoryPipe::create(asio::any_io_executor executor,
                                               std::size_t capacity) {
  return std::shared_ptr<MemoryPipe>(new MemoryPipe(std::move(executor), capacity));
}

std::unique_ptr<ByteStream> MemoryPipe::end(int side) {
  return std::make_unique<MemoryStream>(shared_from_this(), side);
}

void MemoryPipe::inject(int to_side, std::string_view bytes) {
  dir_[to_side].buffer.append(bytes);
  pump(to_side);
}

void MemoryPipe::inject_eof(int to_side) {
  dir_[to_side].eof = true;
  pump(to_side);
}

std::string MemoryPipe::take_written(int from_side) {
  const int d = 1 - from_side;
  std::string out = std::move(dir_[d].buffer);
  dir_[d].buffer.clear();
  pump(d);  // room for a waiting writer
  return out;
}

void MemoryPipe::pump(int d) {
  Direction& dir = dir_[d];
  // A waiting writer moves on as room appears.
  while (dir.writer != nullptr && room(d) > 0) {
    if (dir.write_rest.empty()) {
      asio::post(executor_, [w = std::move(dir.writer)] { w->on_written({}); });
      dir.writer = nullptr;
      break;
    }
    asio::const_buffer& b = dir.write_rest.front();
    const std::size_t n = std::min(b.size(), room(d));
    dir.buffer.append(static_cast<const char*>(b.data()), n);
    b += n;
    if (b.size() == 0) dir.write_rest.erase(dir.write_rest.begin());
    if (dir.write_rest.empty()) {
      asio::post(executor_, [w = std::move(dir.writer)] { w->on_written({}); });
      dir.writer = nullptr;
    }
  }
  // A pending read takes what is there, or learns of the end.
  if (dir.reader != nullptr && (!dir.buffer.empty() || dir.eof || dir.closed)) {
    std::size_t n = 0;
    asio::error_code ec;
    if (dir.closed) {
      ec = asio::error::operation_aborted;
    } else if (!dir.buffer.empty()) {
      n = std::min(dir.buffer.size(), dir.read_into.size());
      std::memcpy(dir.read_into.data(), dir.buffer.data(), n);
      dir.buffer.erase(0, n);
    } else {
      ec = asio::error::eof;
    }
    asio::post(executor_, [r = std::move(dir.reader), ec, n] { r->on_read(ec, n); });
    dir.reader = nullptr;
    if (n > 0) pump(d);  // the read made room
  }
}

MemoryStream::MemoryStream(std::shared_ptr<MemoryPipe> pipe, int side)
    : pipe_(std::move(pipe)), side_(side) {}

MemoryStream::~MemoryStream() { close(); }

const asio::any_io_executor& MemoryStream::executor() const { return pipe_->executor(); }

void MemoryStream::async_read_some(asio::mutable_buffer into,
                                   std::shared_ptr<ByteStreamClient> client) {
  MemoryPipe::Direction& in = pipe_->dir_[side_];
  in.read_into = into;
  in.reader = std::move(client);
  pipe_->pump(side_);
}

std::size_t MemoryStream::write_some_now(std::span<const iovec> slices, asio::error_code& ec) {
  const int d = 1 - side_;
  MemoryPipe::Direction& out = pipe_->dir_[d];
  if (pipe_->dir_[side_].closed || out.closed || out.eof) {
    ec = asio::error::broken_pipe;
    return 0;
  }
  std::size_t written = 0;
  for (const iovec& v : slices) {
    const std::size_t n = std::min(v.iov_len, pipe_->room(d));
    out.buffer.append(static_cast<const char*>(v.iov_base), n);
    written += n;
    if (n < v.iov_len) break;
  }
  if (written == 0 && !slices.empty()) ec = asio::error::would_block;
  pipe_->pump(d);
  return written;
}

void MemoryStream::async_write(std::span<const asio::const_buffer> buffers,
                               std::shared_ptr<ByteStreamClient> client) {
  const int d = 1 - side_;
  MemoryPipe::Direction& out = pipe_->dir_[d];
  if (out.closed || out.eof || pipe_->dir_[side_].closed) {
    asio::post(pipe_->executor(),
               [client = std::move(client)] { client->on_written(asio::error::broken_pipe); });
    return;
  }
  out.write_rest.assign(buffers.begin(), buffers.end());
  out.writer = std::move(client);
  pipe_->pump(d);
}

void MemoryStream::close() {
  MemoryPipe::Direction& in = pipe_->dir_[side_];
  MemoryPipe::Direction& out = pipe_->dir_[1 - side_];
  if (in.closed) return;
  in.closed = true;
  out.eof = true;               // the peer reads what is buffered, then the end
  if (out.writer != nullptr) {  // our own pending write toward the peer is aborted
    asio::post(pipe_->executor(),
               [w = std::move(out.writer)] { w->on_written(asio::error::operation_aborted); });
    out.writer = nullptr;
    out.write_rest.clear();
  }
  pipe_->pump(side_);
  pipe_->pump(1 - side_);
}

}  // namespace ferry::http2

// A hand-made gRPC request over ferry's own HTTP/2 client connection (test support): any request
// headers and any DATA bytes, for what a correct client never sends (unknown grpc-encoding, a
// compressed flag without one, corrupt gzip, bombs), and the response exactly as it came:
// every header field, the DATA bytes, the reset code. Runs on a Loopback's client loop.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asio/connect.hpp"
#include "asio/ip/tcp.hpp"
#include "http2/connection.h"
#include "support/loopback.h"
#include "transport/socket_stream.h"

namespace ferry::testing {

struct RawResponse {
  std::vector<std::pair<std::string, std::string>> headers;  // every block, in order
  int header_blocks = 0;
  std::string data;  // DATA payload bytes (gRPC frames)
  bool closed = false;
  http2::ErrorCode h2_error = http2::ErrorCode::kNoError;

  // The first value of a header field, from any block.
  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
};

class RawCall final : public http2::Stream, public http2::ConnectionObserver {
 public:
  // Connects to the loopback's server and sends a POST to path with the usual gRPC headers plus
  // extra (which replace the usual ones they name), then body as DATA and END_STREAM.
  RawCall(Loopback& loop, std::string_view path,
          std::vector<std::pair<std::string, std::string>> extra, std::string_view body)
      : loop_(loop) {
    asio::ip::tcp::socket socket(loop.io());
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                           static_cast<unsigned short>(loop.port())));
    connection_ = std::make_shared<http2::Connection>(
        http2::make_tcp_stream(std::move(socket)), http2::Role::kClient, ConnectionLimits{}, this);
    connection_->start();
    headers_ = {{":method", "POST"},
                {":scheme", "http"},
                {":path", std::string(path)},
                {":authority", loop.target()},
                {"content-type", "application/grpc"},
                {"te", "trailers"}};
    for (auto& h : extra) {
      // One of the fields above is replaced (another content-type, :method or :path); any
      // other is added.
      auto same = std::find_if(headers_.begin(), headers_.begin() + 6,
                               [&](const auto& d) { return d.first == h.first; });
      if (same != headers_.begin() + 6) {
        same->second = std::move(h.second);
      } else {
        headers_.push_back(std::move(h));
      }
    }
    std::vector<http2::HeaderField> fields;
    for (const auto& [n, v] : headers_) fields.push_back({n, v});
    outbound.append_copy(body.data(), body.size());
    outbound_end = true;
    if (connection_->submit_request(this, fields) < 0) throw std::runtime_error("submit_request");
  }

  ~RawCall() override {
    connection_->close();
    // Aborted socket operations hold the connection; let them run while this is alive.
    for (int i = 0; i < 100 && loop_.io().poll() > 0; ++i) {
    }
  }

  // Turns the loop until the stream is closed; the response as received.
  const RawResponse& wait() {
    if (!loop_.wait_until([this] { return response_.closed; })) {
      throw std::runtime_error("RawCall: no response in time");
    }
    return response_;
  }

  // http2::Stream
  bool on_header(std::string_view name, std::string_view value) override {
    response_.headers.emplace_back(std::string(name), std::string(value));
    return true;
  }
  void on_headers_done() override { ++response_.header_blocks; }
  void on_data(Slice chunk) override {
    response_.data.append(chunk.view());
    connection_->consume(this, chunk.size());
  }
  void on_remote_end() override {}
  void on_outbound_taken() override {}
  void on_closed(http2::ErrorCode h2_error) override {
    response_.closed = true;
    response_.h2_error = h2_error;
  }

  // http2::ConnectionObserver
  http2::Stream* on_stream_open(std::int32_t) override { return nullptr; }
  void on_goaway(std::int32_t, http2::ErrorCode) override {}
  void on_connection_closed() override {}

 private:
  Loopback& loop_;
  std::shared_ptr<http2::Connection> connection_;
  std::vector<std::pair<std::string, std::string>> headers_;
  RawResponse response_;
};

}  // namespace ferry::testing

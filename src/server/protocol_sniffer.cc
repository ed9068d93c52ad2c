// Implementation of src/server/protocol_sniffer.h.
#include "server/protocol_sniffer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "transport/prefixed_stream.h"

namespace ferry::detail {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// "PRI " begins no HTTP/1.1 request ferry serves; four bytes tell the two apart.
constexpr std::size_t kEnough = 4;
// The request lines the HTTP/1.1 engine takes. Anything else goes to HTTP/2, whose engine
// answers a bad preface with GOAWAY(PROTOCOL_ERROR), as a gRPC client expects.
constexpr std::string_view kHttp1Methods[] = {"POST ", "GET ",    "OPTIONS ", "HEAD ",
                                              "PUT ",  "DELETE ", "PATCH "};

enum class Verdict { kHttp2, kHttp1, kMore };

Verdict judge(std::string_view bytes) {
  const std::size_t preface = std::min(bytes.size(), kPreface.size());
  if (bytes.substr(0, preface) == kPreface.substr(0, preface)) {
    return bytes.size() >= kEnough ? Verdict::kHttp2 : Verdict::kMore;
  }
  bool maybe = false;
  for (std::string_view method : kHttp1Methods) {
    const std::size_t n = std::min(bytes.size(), method.size());
    if (bytes.substr(0, n) != method.substr(0, n)) continue;
    if (n == method.size()) return Verdict::kHttp1;
    maybe = true;
  }
  return maybe ? Verdict::kMore : Verdict::kHttp2;
}

}  // namespace

ProtocolSniffer::ProtocolSniffer(std::unique_ptr<http2::ByteStream> stream, Done done)
    : stream_(std::move(stream)), done_(std::move(done)), timer_(stream_->executor()) {}

std::shared_ptr<ProtocolSniffer> ProtocolSniffer::start(std::unique_ptr<http2::ByteStream> stream,
                                                        std::chrono::milliseconds timeout,
                                                        Done done) {
  auto sniffer = std::make_shared<ProtocolSniffer>(std::move(stream), std::move(done));
  if (timeout != std::chrono::milliseconds::max()) {
    sniffer->timer_.expires_after(timeout);
    sniffer->timer_.async_wait(
        [weak = std::weak_ptr<ProtocolSniffer>(sniffer)](const asio::error_code& ec) {
          if (auto self = weak.lock(); self && !ec) self->close();
        });
  }
  sniffer->read_more();
  return sniffer;
}

void ProtocolSniffer::read_more() {
  stream_->async_read_some(asio::buffer(bytes_ + have_, sizeof(bytes_) - have_),
                           shared_from_this());
}

void ProtocolSniffer::on_read(const asio::error_code& ec, std::size_t n) {
  if (stream_ == nullptr) return;  // closed meanwhile
  if (ec) return fail();
  have_ += n;
  switch (judge(std::string_view(bytes_, have_))) {
    case Verdict::kHttp2:
      return finish(true);
    case Verdict::kHttp1:
      return finish(false);
    case Verdict::kMore:
      return read_more();
  }
}

void ProtocolSniffer::finish(bool http2) {
  timer_.cancel();
  auto stream =
      std::make_unique<http2::PrefixedStream>(std::move(stream_), std::string(bytes_, have_));
  Done done = std::move(done_);
  done(std::move(stream), http2);
}

void ProtocolSniffer::fail() {
  timer_.cancel();
  if (stream_ != nullptr) stream_->close();
  stream_.reset();
  if (Done done = std::move(done_)) done(nullptr, false);
}

void ProtocolSniffer::close() { fail(); }

}  // namespace ferry::detail

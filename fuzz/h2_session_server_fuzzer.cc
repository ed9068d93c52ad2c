// h2_session_server_fuzzer: ferry's own HTTP/2 session (src/http2/session/session.h) as a
// server, fed the bytes of a whole client connection after the preface, in chunks whose sizes the
// input chooses, with no connection or socket around it: the frame parser, HPACK, stream states,
// flow control, the closed-stream ledger, the defences and the output writer all run on hostile
// input. The streams behave as calls do, each by its id: most take DATA and give its window back
// and answer the client's END_STREAM with headers, a body and trailers; some answer at once
// with headers alone, before the request ends (as a rejection does); some never read (their
// windows fill); some reset themselves on their first DATA; a header `x-reject: 1` resets one;
// every seventh stream is refused, as a server at its limit refuses.
//
// Checks, beyond the sanitizers: a stream is told nothing after it closed, no DATA after its
// END_STREAM, and no second END_STREAM; the host hears of every close, just before the stream
// does, and only of streams it opened; the session's open streams are those not closed; every
// byte the session writes parses as HTTP/2 frames (a client's frame parser, at the largest
// limits a client may set); the session's memory stays bounded.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/buffer_pool.h"
#include "ferry/slice_chain.h"
#include "fuzz_check.h"
#include "http2/frame/parser.h"
#include "http2/read_parts.h"
#include "http2/session/session.h"

namespace ferry::http2 {
namespace {

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class FuzzServer;

class FuzzStream : public Stream {
 public:
  FuzzStream(FuzzServer& server, std::uint32_t id) : server_(server), id_(id) {}

  bool on_header(std::string_view name, std::string_view value) override {
    FUZZ_CHECK(!closed);
    // A header the application refuses resets the stream (a bad grpc-timeout would).
    return !(name == "x-reject" && value == "1");
  }
  void on_headers_done() override;
  void on_data(Slice chunk) override;
  void on_remote_end() override;
  void on_outbound_taken() override { FUZZ_CHECK(!closed); }
  void on_closed(ErrorCode) override {
    FUZZ_CHECK(!closed);
    FUZZ_CHECK(host_told);  // the host first, then the stream
    closed = true;
  }

  bool closed = false;
  bool host_told = false;

 private:
  // How this stream behaves, by its id.
  bool answers_early() const { return id_ % 5 == 1 && id_ > 1; }
  bool never_reads() const { return id_ % 5 == 3; }
  bool resets_on_data() const { return id_ % 11 == 0; }
  void answer();

  FuzzServer& server_;
  std::uint32_t id_;
  std::size_t received_ = 0;
  bool remote_ended_ = false;
  bool answered_ = false;
  bool headers_seen_ = false;
};

class FuzzServer final : public session::SessionHost {
 public:
  FuzzServer() : limits_(make_limits()), session(session::Role::kServer, limits_, *this, out) {}

  Stream* on_stream_open(std::uint32_t id) override {
    if (id % 7 == 0 || streams.size() >= 256) return nullptr;
    for (const auto& s : streams) FUZZ_CHECK(s->stream_id() != static_cast<std::int32_t>(id));
    streams.push_back(std::make_unique<FuzzStream>(*this, id));
    return streams.back().get();
  }
  void on_stream_closing(Stream* stream) override {
    FuzzStream* s = find(stream);
    FUZZ_CHECK(s != nullptr);  // only streams this host opened
    FUZZ_CHECK(!s->closed && !s->host_told);
    s->host_told = true;
  }
  void on_outbound_framed(Stream* stream, std::size_t n) override {
    FuzzStream* s = find(stream);
    FUZZ_CHECK(s != nullptr && !s->closed);
    FUZZ_CHECK(n > 0);
  }
  void on_goaway(std::uint32_t, ErrorCode) override {}
  void on_peer_settings() override {}
  void on_ping(bool) override {}
  void on_connection_window_opened() override {}

  FuzzStream* find(Stream* stream) {
    for (const auto& s : streams) {
      if (s.get() == stream) return s.get();
    }
    return nullptr;
  }

  // What the session wrote goes to the client, which reads it all: it must parse as frames.
  void drain() {
    session.produce(64 * 1024);
    if (!out.empty()) {
      const std::string bytes = out.to_string();
      out.clear();
      session.on_output_written();
      written_.append(bytes);
      std::size_t at = 0;
      frame::FrameEvent event;
      while (true) {
        const auto r = client_parser_.next(
            {reinterpret_cast<const std::uint8_t*>(written_.data()) + at, written_.size() - at},
            event);
        at += r.consumed;
        if (r.status == frame::Parser::Status::kNeedMore) break;
        FUZZ_CHECK(r.status != frame::Parser::Status::kConnectionError);
      }
      written_.erase(0, at);
    }
    FUZZ_CHECK(session.memory() <= (std::size_t{1} << 20));
  }

  SliceChain out;

 private:
  static ConnectionLimits make_limits() {
    ConnectionLimits limits;
    limits.max_concurrent_streams = 100;
    limits.stream_window = 65535;
    limits.connection_window = 1 << 20;
    return limits;
  }
  static frame::ParserLimits client_limits() {
    // The largest a client may allow: whatever the peer's SETTINGS said, the server's frames
    // must fit these.
    return {.max_frame_size = (1u << 24) - 1,
            .max_header_block_size = 1u << 20,
            .max_continuation_frames = 1000,
            .max_settings_entries = 32};
  }

  ConnectionLimits limits_;

 public:
  session::Session session;
  std::vector<std::unique_ptr<FuzzStream>> streams;

 private:
  frame::Parser client_parser_{frame::Role::kClient, client_limits()};
  std::string written_;  // what the session wrote, not yet parsed (part of a frame)
};

void FuzzStream::on_headers_done() {
  FUZZ_CHECK(!closed);
  // A second block is the trailers; on_remote_end follows it.
  if (headers_seen_) return;
  headers_seen_ = true;
  if (answers_early()) answer();
}

void FuzzStream::on_data(Slice chunk) {
  FUZZ_CHECK(!closed);
  FUZZ_CHECK(!remote_ended_);
  FUZZ_CHECK(chunk.size() > 0);
  received_ += chunk.size();
  if (resets_on_data()) {
    server_.session.reset(this, ErrorCode::kCancel);
    return;
  }
  if (!never_reads()) server_.session.consume(this, chunk.size());
}

void FuzzStream::on_remote_end() {
  FUZZ_CHECK(!closed);
  FUZZ_CHECK(!remote_ended_);
  remote_ended_ = true;
  answer();
}

void FuzzStream::answer() {
  if (answered_) return;
  answered_ = true;
  if (answers_early()) {
    // Headers alone: the stream ends here (RST_STREAM(NO_ERROR) when the client has not).
    static constexpr HeaderField kRejection[] = {HeaderField::literal(":status", "405"),
                                                 HeaderField::literal("grpc-status", "13")};
    server_.session.submit_response(this, kRejection, /*with_data=*/false);
    return;
  }
  static constexpr HeaderField kResponse[] = {
      HeaderField::literal(":status", "200"),
      HeaderField::literal("content-type", "application/grpc")};
  // A body as long as the request (bounded), then trailers.
  const std::string body(std::min<std::size_t>(received_ + 5, 70000), 'r');
  outbound.append_copy(body.data(), body.size());
  trailers.owned.push_back({"grpc-status", "0"});
  outbound_end = true;
  if (server_.session.submit_response(this, kResponse, /*with_data=*/true)) {
    server_.session.resume(this);
  }
}

void run(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  // Byte 0: the chunking (1..256 bytes per read); byte 1: the calls per part of a read
  // (write_policy's calls_per_write; 0 = the whole read is one part), and in its high bits: 0x80
  // the server shuts down gracefully halfway (two GOAWAYs around a PING, the client's bytes
  // going on), 0x40 the session's timer runs after each chunk (5 s on: a shutdown's second
  // GOAWAY is due, our SETTINGS' ACK not yet) and at the end (an hour on: it is).
  const std::size_t chunk = std::size_t{data[0]} + 1;
  ReadParts parts(data[1] % 8);
  const bool shuts_down = (data[1] & 0x80) != 0;
  const bool timers = (data[1] & 0x40) != 0;
  data += 2;
  size -= 2;

  FuzzServer server;
  std::string pending(kClientPreface);  // bytes read and not yet parsed
  auto receive = [&] {
    while (!pending.empty() && !server.session.failed()) {
      parts.start_part();
      session::Session::ReceiveResult r;
      if (pending.size() <= BufferPool::kBlockSize) {
        // As a connection reads: into a pooled block, DATA handed on as slices of it.
        detail::Block* block = BufferPool::instance().acquire();
        std::memcpy(block->data(), pending.data(), pending.size());
        block->used = static_cast<std::uint32_t>(pending.size());
        r = server.session.receive({block->data(), pending.size()}, block, &parts);
        detail::block_unref(block);
      } else {
        r = server.session.receive(
            {reinterpret_cast<const std::uint8_t*>(pending.data()), pending.size()}, nullptr,
            &parts);
      }
      FUZZ_CHECK(r.consumed <= pending.size());
      pending.erase(0, r.consumed);
      server.drain();
      if (!r.paused) break;
    }
  };
  receive();
  bool shut = false;
  for (std::size_t at = 0; at < size && !server.session.failed(); at += chunk) {
    if (shuts_down && !shut && at >= size / 2) {
      server.session.shutdown();
      shut = true;
    }
    const std::size_t n = std::min(chunk, size - at);
    pending.append(reinterpret_cast<const char*>(data + at), n);
    receive();
    if (timers) {
      server.session.on_timer(session::Session::Clock::now() + std::chrono::seconds(5));
      server.drain();
    }
    // What the parser keeps is at most one frame (the largest this end allows) and the chunk.
    FUZZ_CHECK(pending.size() <= BufferPool::kBlockSize + chunk);
  }
  if (timers) server.session.on_timer(session::Session::Clock::now() + std::chrono::hours(1));
  server.drain();

  // The session's open streams are the ones not closed; the connection then goes, and tells
  // them.
  std::size_t open = 0;
  for (const auto& s : server.streams) {
    if (s->closed) continue;
    ++open;
    FUZZ_CHECK(server.session.find(static_cast<std::uint32_t>(s->stream_id())) == s.get());
  }
  FUZZ_CHECK(server.session.open_streams() == open);
  server.session.forget_streams();
  for (const auto& s : server.streams) {
    if (s->closed) continue;
    s->host_told = true;
    s->on_closed(ErrorCode::kConnectionLost);
  }
}

}  // namespace
}  // namespace ferry::http2

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ferry::http2::run(data, size);
  return 0;
}

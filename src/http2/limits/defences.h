// The HTTP/2 engine's defences against floods of cheap frames, each named after the advisory
// it answers (http2 layer, private): bounded queues of the ACKs a peer makes this end owe, and
// token buckets for resets and for "glitches" (frames that do nothing useful). The connection
// feeds each parsed frame to Defences::on_event(); a non-kNoError answer is the connection
// error to send in GOAWAY (ENHANCE_YOUR_CALM) before closing. Time is passed in by the caller
// (its loop's clock), so the tests drive it. One per connection, its thread only.
// docs/connections.md has the table: advisory, defence, default, what the peer sees.
#pragma once

#include <chrono>
#include <cstdint>

#include "http2/error_code.h"
#include "http2/frame/parser.h"

namespace ferry::http2::limits {

using Clock = std::chrono::steady_clock;

// A token bucket: `burst` tokens at first and at most, refilled at `rate` tokens a second.
// Exact in integer arithmetic (nanotokens), no drift however often it is asked.
class TokenBucket {
 public:
  TokenBucket(std::uint32_t burst, std::uint32_t rate_per_second, Clock::time_point now)
      : capacity_(std::uint64_t{burst} * kScale),
        rate_(rate_per_second),
        level_(capacity_),
        last_(now) {}

  // Takes one token when there is one (after refilling for the time since the last call);
  // false when the bucket is empty.
  bool take(Clock::time_point now) {
    refill(now);
    if (level_ < kScale) return false;
    level_ -= kScale;
    return true;
  }
  // Whole tokens left at `now`.
  std::uint64_t tokens(Clock::time_point now) {
    refill(now);
    return level_ / kScale;
  }

 private:
  static constexpr std::uint64_t kScale = 1'000'000'000;  // nanotokens per token
  void refill(Clock::time_point now) {
    if (now <= last_) return;
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
    if (rate_ == 0) return;
    // A full refill takes capacity / rate ns; anything longer only fills the bucket (and the
    // product below stays far from overflowing).
    const std::uint64_t full_ns = capacity_ / rate_ + 1;
    const std::uint64_t ns = static_cast<std::uint64_t>(elapsed) < full_ns
                                 ? static_cast<std::uint64_t>(elapsed)
                                 : full_ns;
    level_ += ns * rate_;
    if (level_ > capacity_) level_ = capacity_;
  }
  std::uint64_t capacity_;
  std::uint64_t rate_;
  std::uint64_t level_;
  Clock::time_point last_;
};

// Each limit on what a peer's cheap frames may make this end do (ferry's defaults; nghttp2's
// where it has one, which they match).
struct DefenceLimits {
  // CVE-2019-9512 ping flood, CVE-2019-9515 settings flood: the PING and SETTINGS ACKs queued
  // and not yet written. A peer that sends them faster than it reads the answers fills this
  // (nghttp2: max_outbound_ack 1000).
  std::uint32_t max_queued_acks = 1000;
  // CVE-2019-9514 reset flood, CVE-2023-44487 rapid reset, CVE-2025-8671 MadeYouReset: streams
  // reset by the peer, or by this end because of the peer's frames, from one budget of `burst`
  // refilled at `rate` a second (nghttp2: stream_reset_rate_limit 1000, 33).
  std::uint32_t reset_burst = 1000;
  std::uint32_t reset_rate = 33;
  // CVE-2019-9518 empty frames flood (DATA without payload nor END_STREAM, empty HEADERS
  // fragments and CONTINUATIONs), CVE-2019-9516 0-length header names: "glitches", frames that
  // cost work and do nothing, from one budget (nghttp2: glitch_rate_limit 1000, 33).
  std::uint32_t glitch_burst = 1000;
  std::uint32_t glitch_rate = 33;
};

class Defences {
 public:
  explicit Defences(Clock::time_point now, DefenceLimits limits = {})
      : limits_(limits),
        resets_(limits.reset_burst, limits.reset_rate, now),
        glitches_(limits.glitch_burst, limits.glitch_rate, now) {}

  // Counts what a parsed frame costs: a PING or SETTINGS is an ACK queued, a RST_STREAM a
  // reset, an empty DATA without END_STREAM and a header block's empty frames are glitches.
  // Returns kNoError, or ENHANCE_YOUR_CALM: the connection error to close with.
  [[nodiscard]] ErrorCode on_event(const frame::FrameEvent& event, Clock::time_point now) {
    switch (event.type) {
      case frame::EventType::kPing:
      case frame::EventType::kSettings:
        return on_ack_queued();
      case frame::EventType::kRstStream:
        return on_reset(now);
      case frame::EventType::kData:
        if (event.flow_controlled_size == 0 && !event.end_stream) return on_glitch(now);
        return ErrorCode::kNoError;
      case frame::EventType::kHeaders:
        for (std::uint32_t i = 0; i < event.empty_frames; ++i) {
          if (on_glitch(now) != ErrorCode::kNoError) return ErrorCode::kEnhanceYourCalm;
        }
        return ErrorCode::kNoError;
      default:
        return ErrorCode::kNoError;
    }
  }

  // An ACK queued for writing; ENHANCE_YOUR_CALM past max_queued_acks unwritten.
  [[nodiscard]] ErrorCode on_ack_queued() {
    if (queued_acks_ >= limits_.max_queued_acks) return ErrorCode::kEnhanceYourCalm;
    ++queued_acks_;
    return ErrorCode::kNoError;
  }
  // The queued ACKs were written to the socket.
  void on_acks_written() { queued_acks_ = 0; }
  std::uint32_t queued_acks() const { return queued_acks_; }

  // A stream reset by the peer, or by this end because of the peer's frames (a malformed
  // request, DATA on a closed stream: MadeYouReset).
  [[nodiscard]] ErrorCode on_reset(Clock::time_point now) {
    return resets_.take(now) ? ErrorCode::kNoError : ErrorCode::kEnhanceYourCalm;
  }
  // A frame or field that did nothing useful.
  [[nodiscard]] ErrorCode on_glitch(Clock::time_point now) {
    return glitches_.take(now) ? ErrorCode::kNoError : ErrorCode::kEnhanceYourCalm;
  }
  // CVE-2019-9516: a decoded field with an empty name is malformed (RFC 9110 §5.1: a name is a
  // token of at least one character; RFC 9113 §8.1.1: the stream is reset with PROTOCOL_ERROR)
  // and a glitch. Returns the glitch budget's answer; the caller resets the stream.
  [[nodiscard]] ErrorCode on_empty_field_name(Clock::time_point now) { return on_glitch(now); }

  const DefenceLimits& limits() const { return limits_; }

 private:
  DefenceLimits limits_;
  std::uint32_t queued_acks_ = 0;
  TokenBucket resets_;
  TokenBucket glitches_;
};

}  // namespace ferry::http2::limits

// ferry's own HTTP/2 session: see session.h.
#include "http2/session/session.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "http2/frame/writer.h"
#include "http2/hpack/field_syntax.h"

namespace ferry::http2::session {
namespace {

using frame::EventType;
using frame::FrameEvent;
using frame::kFrameHeaderSize;

// A DATA payload up to this size is copied beside its frame header rather than sent by
// reference: for a small message the copy costs less than splitting it off its queue and
// counting references, and a batch of small answers goes out as one contiguous slice.
constexpr std::size_t kCopiedPayload = 256;
// RFC 9113 §6.5.2: the initial window every stream and the connection start with.
constexpr std::uint32_t kDefaultWindow = 65535;
constexpr std::int64_t kMaxWindow = frame::kMaxWindowSize;
// The most DATA one stream frames per turn of produce() before the next stream's turn: streams
// sharing the connection take turns by this much.
constexpr std::size_t kStreamQuantum = 64u << 10;
// The opaque bytes of a keepalive PING.
constexpr std::uint8_t kPingOpaque[8] = {};
// The opaque bytes of the PING that follows a graceful shutdown's first GOAWAY: its ACK says the
// peer has read that GOAWAY (RFC 9113 §6.8).
constexpr std::uint8_t kShutdownPingOpaque[8] = {'s', 'h', 'u', 't', 'd', 'o', 'w', 'n'};
// How long the first GOAWAY of a graceful shutdown waits for that ACK before the second.
constexpr std::chrono::milliseconds kShutdownNoticeBound{1000};

// now + d, or never when d is kNever (or so large that the sum would overflow).
limits::Clock::time_point deadline_after(limits::Clock::time_point now,
                                         std::chrono::milliseconds d) {
  if (d <= std::chrono::milliseconds::zero() ||
      d >= std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365))) {
    return limits::Clock::time_point::max();
  }
  return now + d;
}

// The size of a header list as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 §6.5.2: name,
// value and 32 octets per field).
std::uint64_t header_list_size(std::span<const hpack::Field> fields) {
  std::uint64_t n = 0;
  for (const hpack::Field& f : fields) n += f.name.size() + f.value.size() + 32;
  return n;
}

using hpack::valid_field_name;
using hpack::valid_field_value;

// RFC 9113 §8.2.2: fields of HTTP/1.1's connection management are malformed in HTTP/2.
bool connection_specific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// A no_index field (a trace context, new in every call) is never indexed and goes raw: the
// receiver copies it instead of Huffman-decoding it (HeaderField::no_index).
hpack::Field to_field(std::string_view name, std::string_view value, bool no_index) {
  if (no_index) return {name, value, hpack::Indexing::kNever, /*raw=*/true};
  return {name, value, hpack::Indexing::kAuto};
}
// A literal's strings never change: the encoder trusts its hint for them without comparing.
hpack::Field to_field(const HeaderField& f) {
  hpack::Field field = to_field(f.name, f.value, f.no_index);
  field.immutable = f.static_storage;
  return field;
}

using FieldList = absl::InlinedVector<hpack::Field, 16>;

}  // namespace

Session::Session(Role role, const ConnectionLimits& limits, SessionHost& host, SliceChain& out,
                 limits::DefenceLimits defences)
    : role_(role),
      host_(host),
      out_(out),
      parser_(role),
      // The decoded list is bounded at twice what this end advertises: the HPACK bomb's bound.
      // Below that the layer above judges the list (its own status for a block over the limit).
      decoder_(hpack::DecoderLimits{
          .max_table_size = 4096,
          .max_header_list_size = static_cast<std::uint32_t>(std::min<std::uint64_t>(
              std::uint64_t{limits.max_header_list_size} * 2, 0xffffffffu))}),
      ids_(role),
      defences_(Clock::now(), defences),
      local_initial_window_(std::min<std::uint32_t>(limits.stream_window, frame::kMaxWindowSize)),
      local_connection_window_(std::max<std::uint32_t>(
          std::min<std::uint32_t>(limits.connection_window, frame::kMaxWindowSize),
          kDefaultWindow)),
      local_max_concurrent_(limits.max_concurrent_streams),
      settings_deadline_(deadline_after(Clock::now(), limits.settings_ack_timeout)),
      conn_recv_window_(local_connection_window_) {
  // RFC 9113 §3.4: the preface, then this end's SETTINGS (§6.5), then the connection window
  // beyond its initial 65535 (§6.9.2: SETTINGS cannot change it).
  frame::Setting settings[3];
  std::size_t count = 0;
  settings[count++] = {frame::SettingId::kInitialWindowSize, local_initial_window_};
  settings[count++] = {frame::SettingId::kMaxHeaderListSize, limits.max_header_list_size};
  if (role == Role::kServer) {
    settings[count++] = {frame::SettingId::kMaxConcurrentStreams, local_max_concurrent_};
  } else {
    settings[count++] = {frame::SettingId::kEnablePush, 0};
  }
  std::size_t size = frame::settings_size(count) + frame::kWindowUpdateFrameSize;
  if (role == Role::kClient) size += frame::kClientPrefaceSize;
  std::uint8_t* p = out_.reserve(size);
  std::uint8_t* const start = p;
  if (role == Role::kClient) {
    std::memcpy(p, frame::kClientPreface, frame::kClientPrefaceSize);
    p += frame::kClientPrefaceSize;
  }
  p += frame::write_settings({p, frame::settings_size(count)}, {settings, count});
  if (local_connection_window_ > kDefaultWindow) {
    p += frame::write_window_update({p, frame::kWindowUpdateFrameSize}, 0,
                                    local_connection_window_ - kDefaultWindow);
  }
  out_.commit(static_cast<std::size_t>(p - start));
}

// --- output helpers ------------------------------------------------------------------------

void Session::write_rst(std::uint32_t id, ErrorCode code) {
  std::uint8_t* p = out_.reserve(frame::kRstStreamFrameSize);
  out_.commit(frame::write_rst_stream({p, frame::kRstStreamFrameSize}, id, code));
}

void Session::write_window_update(std::uint32_t id, std::uint32_t increment) {
  std::uint8_t* p = out_.reserve(frame::kWindowUpdateFrameSize);
  out_.commit(frame::write_window_update({p, frame::kWindowUpdateFrameSize}, id, increment));
}

void Session::write_goaway(ErrorCode code, std::string_view debug) {
  // The debug data is ours (a static reason): bounded, and cut to the peer's frame size.
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(debug.data());
  const std::size_t n = std::min<std::size_t>(debug.size(), 256);
  const std::size_t size = frame::goaway_size(n);
  std::uint8_t* p = out_.reserve(size);
  goaway_last_ = std::min(goaway_last_, last_processed_);
  out_.commit(frame::write_goaway({p, size}, goaway_last_, code, {bytes, n}, peer_max_frame_size_));
  goaway_sent_ = true;
}

void Session::write_headers(std::uint32_t id, std::span<const hpack::Field> fields,
                            bool end_stream) {
  const std::size_t max_block = hpack::Encoder::max_encoded_size(fields);
  if (kFrameHeaderSize + max_block <= BufferPool::kBlockSize && max_block <= peer_max_frame_size_) {
    // The usual case: encoded in place after room for its frame header, one frame.
    std::uint8_t* p = out_.reserve(kFrameHeaderSize + max_block);
    const std::uint8_t* end = encoder_.encode(fields, p + kFrameHeaderSize);
    const auto block = static_cast<std::uint32_t>(end - (p + kFrameHeaderSize));
    frame::write_frame_header(
        p, block, frame::FrameType::kHeaders,
        static_cast<std::uint8_t>(frame::flags::kEndHeaders |
                                  (end_stream ? frame::flags::kEndStream : 0)),
        id);
    out_.commit(kFrameHeaderSize + block);
  } else {
    // A large block: encoded aside, then split into HEADERS and CONTINUATIONs.
    scratch_.resize(max_block);
    const std::uint8_t* end = encoder_.encode(fields, scratch_.data());
    const std::span<const std::uint8_t> block(scratch_.data(),
                                              static_cast<std::size_t>(end - scratch_.data()));
    std::vector<std::uint8_t> frames(frame::headers_size(block.size(), peer_max_frame_size_));
    frame::write_headers(frames, id, block, end_stream, peer_max_frame_size_);
    out_.append_copy(frames.data(), frames.size());
  }
  data_sent_ = true;
}

void Session::fail(ErrorCode code, std::string_view reason) {
  if (terminated_) return;
  error_code_ = code;
  error_reason_ = reason;
  write_goaway(code, reason);
  terminated_ = true;
}

void Session::terminate(ErrorCode error, std::string_view debug) { fail(error, debug); }

void Session::stream_error(std::uint32_t id, ErrorCode code) {
  // CVE-2025-8671 MadeYouReset: resets the peer's frames make this end send draw on the same
  // budget as the peer's own (limits/defences.h).
  if (defences_.on_reset(Clock::now()) != ErrorCode::kNoError) {
    fail(ErrorCode::kEnhanceYourCalm, "too many stream errors");
    return;
  }
  write_rst(id, code);
  if (Stream* stream = find(id)) {
    StreamState& st = state(stream);
    stream->reset_sent_ = true;
    st.local_closed = true;
    close(stream, code);
  }
}

// --- stream table --------------------------------------------------------------------------

Stream* Session::find(std::uint32_t id) { return streams_.find(id); }

void Session::insert(Stream* stream) {
  streams_.insert(static_cast<std::uint32_t>(stream->id_), stream);
  state(stream).in_table = true;
}

void Session::erase(Stream* stream) {
  streams_.erase(static_cast<std::uint32_t>(stream->id_), stream);
  state(stream).in_table = false;
}

void Session::enqueue(Stream* stream) {
  StreamState& st = state(stream);
  if (st.in_send_queue) return;
  st.in_send_queue = true;
  st.send_next = nullptr;
  if (send_tail_ == nullptr) {
    send_head_ = send_tail_ = stream;
  } else {
    state(send_tail_).send_next = stream;
    send_tail_ = stream;
  }
}

void Session::close(Stream* stream, ErrorCode code) {
  StreamState& st = state(stream);
  if (st.in_send_queue) {
    // Unlinked from the queue (rare: a stream closed with output still queued).
    Stream* prev = nullptr;
    for (Stream* s = send_head_; s != nullptr; prev = s, s = state(s).send_next) {
      if (s != stream) continue;
      if (prev == nullptr) {
        send_head_ = st.send_next;
      } else {
        state(prev).send_next = st.send_next;
      }
      if (send_tail_ == stream) send_tail_ = prev;
      break;
    }
    st.in_send_queue = false;
  }
  if (role_ == Role::kClient && !st.sending) {
    // Its HEADERS were still held.
    for (auto it = pending_opens_.begin(); it != pending_opens_.end(); ++it) {
      if (it->stream == stream) {
        pending_opens_.erase(it);
        break;
      }
    }
  } else if (role_ == Role::kClient && local_open_ > 0) {
    --local_open_;
  }
  erase(stream);
  // What the peer sent on it and the application did not take stays charged to the connection
  // window until the application consumes it (it does, from on_closed: consume_connection).
  host_.on_stream_closing(stream);
  stream->on_closed(code);
}

void Session::close_later(Stream* stream, ErrorCode code) {
  StreamState& st = state(stream);
  if (st.closing) return;
  st.closing = true;
  st.close_code = code;
  enqueue(stream);
}

void Session::forget_streams() {
  streams_.for_each([](std::uint32_t, Stream* stream) {
    state(stream).in_send_queue = false;
    state(stream).in_table = false;
    return true;
  });
  streams_.clear();
  send_head_ = send_tail_ = nullptr;
  pending_opens_.clear();
  local_open_ = 0;
}

bool Session::want_read() const {
  if (terminated_) return false;
  if (!streams_.empty()) return true;
  return !goaway_sent_ && !goaway_received_;
}

bool Session::accepts_new_streams() const {
  return !terminated_ && !goaway_sent_ && !goaway_received_ &&
         ids_.highest_local() + 2 <= frame::kStreamIdMask;
}

std::size_t Session::memory() const {
  return parser_.memory() + decoded_.memory() + decoder_.table().memory() +
         encoder_.table().memory() + streams_.memory() + scratch_.capacity();
}

// --- input ---------------------------------------------------------------------------------

Session::ReceiveResult Session::receive(std::span<const std::uint8_t> bytes, detail::Block* block,
                                        ReadParts* parts) {
  ReceiveResult result;
  FrameEvent event;
  while (!terminated_) {
    const frame::Parser::Result r = parser_.next(bytes.subspan(result.consumed), event);
    result.consumed += r.consumed;
    if (r.status == frame::Parser::Status::kNeedMore) break;
    if (r.status == frame::Parser::Status::kConnectionError) {
      fail(parser_.error_code(), parser_.reason());
      break;
    }
    switch (event.type) {
      case EventType::kData:
        on_data(event, block, parts);
        break;
      case EventType::kHeaders:
        on_headers(event, parts);
        break;
      case EventType::kRstStream:
        on_rst_stream(event);
        break;
      case EventType::kSettings:
        on_settings(event);
        break;
      case EventType::kSettingsAck:
        on_settings_ack();
        break;
      case EventType::kPing: {
        // CVE-2019-9512 ping flood: the ACKs owed are bounded.
        if (defences_.on_ack_queued() != ErrorCode::kNoError) {
          fail(ErrorCode::kEnhanceYourCalm, "too many PINGs unanswered");
          break;
        }
        std::uint8_t* p = out_.reserve(frame::kPingFrameSize);
        out_.commit(frame::write_ping({p, frame::kPingFrameSize}, event.ping, /*ack=*/true));
        host_.on_ping(false);
        break;
      }
      case EventType::kPingAck:
        if (shutdown_notice_ &&
            std::memcmp(event.ping, kShutdownPingOpaque, sizeof kShutdownPingOpaque) == 0) {
          // The peer has read the first GOAWAY: what it opened before is all there will be.
          finish_shutdown();
        } else {
          host_.on_ping(true);
        }
        break;
      case EventType::kGoaway:
        on_goaway(event);
        break;
      case EventType::kWindowUpdate:
        on_window_update(event);
        break;
      case EventType::kStreamError:
        // A frame broke a rule of its stream alone (PRIORITY on itself, a 0 increment).
        stream_error(event.stream_id, event.error_code);
        break;
    }
    if (parts != nullptr && parts->full()) {
      result.paused = result.consumed < bytes.size();
      break;
    }
  }
  return result;
}

void Session::on_settings(const FrameEvent& event) {
  // CVE-2019-9515 settings flood: the ACKs owed are bounded.
  if (defences_.on_ack_queued() != ErrorCode::kNoError) {
    fail(ErrorCode::kEnhanceYourCalm, "too many SETTINGS unanswered");
    return;
  }
  const frame::SettingsValues& v = event.settings;
  using frame::SettingId;
  if (v.has(SettingId::kHeaderTableSize)) {
    // RFC 7541 §4.2: the smallest size since the last block, then the final one.
    encoder_.set_peer_max_table_size(v.min_header_table_size);
    encoder_.set_peer_max_table_size(v.get(SettingId::kHeaderTableSize));
  }
  if (v.has(SettingId::kMaxFrameSize)) peer_max_frame_size_ = v.get(SettingId::kMaxFrameSize);
  if (v.has(SettingId::kMaxConcurrentStreams)) {
    peer_max_concurrent_ = v.get(SettingId::kMaxConcurrentStreams);
  }
  if (v.has(SettingId::kMaxHeaderListSize)) {
    peer_max_header_list_ = v.get(SettingId::kMaxHeaderListSize);
  }
  if (v.has(SettingId::kInitialWindowSize)) {
    // RFC 9113 §6.9.2: the change applies to every open stream's window, which may go negative
    // or, past 2^31-1, is a FLOW_CONTROL_ERROR of the connection.
    const std::uint32_t value = v.get(SettingId::kInitialWindowSize);
    const std::int64_t delta = std::int64_t{value} - peer_initial_window_;
    peer_initial_window_ = value;
    if (delta != 0) {
      bool overflow = false;
      streams_.for_each([&](std::uint32_t, Stream* stream) {
        StreamState& st = state(stream);
        st.send_window += delta;
        if (st.send_window > kMaxWindow) {
          overflow = true;
          return false;
        }
        if (delta > 0 && st.send_window > 0 && st.sending && !st.local_closed) enqueue(stream);
        return true;
      });
      if (overflow) {
        fail(ErrorCode::kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE overflows a window");
        return;
      }
    }
  }
  std::uint8_t* p = out_.reserve(kFrameHeaderSize);
  out_.commit(frame::write_settings_ack({p, kFrameHeaderSize}));
  host_.on_peer_settings();
}

void Session::on_settings_ack() {
  if (settings_acked_) return;  // only one SETTINGS of ours is ever outstanding
  settings_acked_ = true;
  if (local_initial_window_ < kDefaultWindow) {
    // Streams opened before the ACK were allowed the default window (the peer could not know
    // ours yet); from now on the advertised one holds (RFC 9113 §6.9.2).
    const std::int64_t delta = std::int64_t{local_initial_window_} - kDefaultWindow;
    streams_.for_each([&](std::uint32_t, Stream* stream) {
      state(stream).recv_window += delta;
      return true;
    });
  }
}

void Session::add_connection_unacked(std::size_t n) {
  conn_unacked_ += static_cast<std::uint32_t>(n);
  // Batched: one WINDOW_UPDATE per quarter of the window (DESIGN.md: grpc-go's rule).
  if (conn_unacked_ >= local_connection_window_ / 4) {
    write_window_update(0, conn_unacked_);
    conn_recv_window_ += conn_unacked_;
    conn_unacked_ = 0;
  }
}

void Session::on_data(const FrameEvent& event, detail::Block* block, ReadParts* parts) {
  const std::uint32_t size = event.flow_controlled_size;
  // RFC 9113 §6.9.1: more than the connection window allows is a FLOW_CONTROL_ERROR.
  conn_recv_window_ -= size;
  if (conn_recv_window_ < 0) {
    fail(ErrorCode::kFlowControlError, "DATA beyond the connection window");
    return;
  }
  if (size == 0 && !event.end_stream && defences_.on_glitch(Clock::now()) != ErrorCode::kNoError) {
    // CVE-2019-9518 empty frames flood.
    fail(ErrorCode::kEnhanceYourCalm, "too many empty DATA frames");
    return;
  }
  Stream* stream = find(event.stream_id);
  if (stream == nullptr) {
    if (ids_.on_frame_without_stream(EventType::kData, event.stream_id) ==
        streams::StreamIds::Verdict::kProtocolError) {
      fail(ErrorCode::kProtocolError, "DATA on an idle stream");  // RFC 9113 §5.1 "idle"
      return;
    }
    // The bytes are nobody's: returned to the connection window at once.
    add_connection_unacked(size);
    // RFC 9113 §5.1 "closed": frames in flight on a stream this end reset are ignored; DATA on
    // one the client ended or reset itself is a stream error STREAM_CLOSED (h2spec 5.1 #8,
    // #11). A client ignores DATA on its closed streams.
    if (role_ == Role::kServer && ledger_.judge(static_cast<std::int32_t>(event.stream_id)) !=
                                      PeerStreamLedger::Verdict::kIgnore) {
      stream_error(event.stream_id, ErrorCode::kStreamClosed);
    }
    return;
  }
  StreamState& st = state(stream);
  if (st.remote_closed) {
    // §5.1 "half-closed (remote)": a stream error STREAM_CLOSED.
    add_connection_unacked(size);
    stream_error(event.stream_id, ErrorCode::kStreamClosed);
    return;
  }
  st.recv_window -= size;
  if (st.recv_window < 0) {
    add_connection_unacked(size);
    stream_error(event.stream_id, ErrorCode::kFlowControlError);
    return;
  }
  const std::size_t payload = event.payload.size();
  st.data_received += payload;
  if (st.content_length >= 0 &&
      (st.data_received > static_cast<std::uint64_t>(st.content_length) ||
       (event.end_stream && st.data_received != static_cast<std::uint64_t>(st.content_length)))) {
    // RFC 9113 §8.1.1: DATA unlike content-length makes the request malformed.
    add_connection_unacked(size);
    stream_error(event.stream_id, ErrorCode::kProtocolError);
    return;
  }
  if (size > payload) {
    // Padding is flow-controlled but no one's to consume: returned at once.
    const std::uint32_t pad = size - static_cast<std::uint32_t>(payload);
    st.recv_window += pad;
    add_connection_unacked(pad);
  }
  if (st.closing) {
    // This end closes the stream (its answer or reset is written, the close comes at the next
    // output pass): the frame was judged as the stream's state asks, its bytes go back.
    add_connection_unacked(payload);
    if (event.end_stream) {
      st.remote_closed = true;
      if (role_ == Role::kServer) ledger_.on_remote_end(stream->id_);
    }
    return;
  }
  if (payload > 0) {
    const std::uint8_t* data = event.payload.data();
    if (block != nullptr && data >= block->data() &&
        data + payload <= block->data() + block->used) {
      stream->on_data(Slice(block, data, payload));  // zero-copy: a view of the read block
    } else {
      stream->on_data(Slice::copy_of(data, payload));
    }
    if (terminated_) return;
  }
  if (event.end_stream) on_remote_end(stream, parts);
}

void Session::on_remote_end(Stream* stream, ReadParts* parts) {
  StreamState& st = state(stream);
  st.remote_closed = true;
  if (role_ == Role::kServer) ledger_.on_remote_end(stream->id_);
  if (parts != nullptr) parts->on_call_ended();
  stream->on_remote_end();
  // The stream may have been reset or closed from inside on_remote_end.
  if (terminated_ || find(static_cast<std::uint32_t>(stream->id_)) != stream) return;
  if (st.local_closed && !st.closing) close(stream, ErrorCode::kNoError);
}

bool Session::valid_block(BlockKind kind, std::int64_t& content_length) {
  // RFC 9113 §8.3: pseudo-header fields first, each once, only those of the message's kind.
  bool regular_seen = false;
  bool method = false, scheme = false, path = false, authority = false, status = false;
  bool connect = false;
  for (const hpack::DecodedField& f : decoded_.fields()) {
    const std::string_view name = f.name;
    if (name.empty()) {
      // CVE-2019-9516: an empty name is malformed, and a glitch.
      if (defences_.on_empty_field_name(Clock::now()) != ErrorCode::kNoError) {
        fail(ErrorCode::kEnhanceYourCalm, "too many empty header names");
      }
      return false;
    }
    // A field sent whole by index from an entry that passed these checks when it entered the
    // table (or from the static table) is not checked again (DecodedField::syntax_checked).
    if (!f.syntax_checked && !valid_field_value(f.value)) return false;
    if (name[0] == ':') {
      if (regular_seen || kind == BlockKind::kTrailers) return false;
      auto once = [](bool& seen) { return !std::exchange(seen, true); };
      if (kind == BlockKind::kResponse) {
        if (name != ":status" || !once(status)) return false;
        if (f.value.size() != 3) return false;
        for (char c : f.value) {
          if (c < '0' || c > '9') return false;
        }
        continue;
      }
      if (name == ":method") {
        if (!once(method) || f.value.empty()) return false;
        connect = f.value == "CONNECT";
      } else if (name == ":scheme") {
        if (!once(scheme) || f.value.empty()) return false;
      } else if (name == ":path") {
        if (!once(path) || f.value.empty()) return false;
      } else if (name == ":authority") {
        if (!once(authority)) return false;
      } else {
        return false;  // §8.3: an unknown pseudo-header
      }
      continue;
    }
    regular_seen = true;
    if (!f.syntax_checked && !valid_field_name(name)) return false;
    if (connection_specific(name)) return false;
    // §8.2.2: te is allowed with the value "trailers" only.
    if (name == "te" && f.value != "trailers") return false;
    if (name == "content-length" && kind != BlockKind::kTrailers) {
      if (f.value.empty() || f.value.size() > 18) return false;
      std::int64_t n = 0;
      for (char c : f.value) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
      }
      if (content_length >= 0 && content_length != n) return false;
      content_length = n;
    }
  }
  if (kind == BlockKind::kRequest) {
    // §8.3.1: every request has :method, :scheme and :path, save CONNECT (§8.5), which has
    // :authority and neither of the others.
    if (connect) return authority && !scheme && !path;
    return method && scheme && path;
  }
  if (kind == BlockKind::kResponse) return status;
  return true;
}

void Session::deliver(Stream* stream, bool end_stream, ReadParts* parts) {
  const auto id = static_cast<std::uint32_t>(stream->id_);
  for (const hpack::DecodedField& f : decoded_.fields()) {
    if (!stream->on_header(f.name, f.value)) {
      // The layer above refused the field (too large, malformed for gRPC): the stream is reset
      // with INTERNAL_ERROR, the connection goes on.
      write_rst(id, ErrorCode::kInternalError);
      stream->reset_sent_ = true;
      state(stream).local_closed = true;
      close(stream, ErrorCode::kInternalError);
      return;
    }
    if (terminated_) return;
  }
  stream->on_headers_done();
  if (terminated_ || find(id) != stream) return;
  if (end_stream) on_remote_end(stream, parts);
}

void Session::on_headers(const FrameEvent& event, ReadParts* parts) {
  // CVE-2019-9518: the block's empty frames are glitches.
  for (std::uint32_t i = 0; i < event.empty_frames; ++i) {
    if (defences_.on_glitch(Clock::now()) != ErrorCode::kNoError) {
      fail(ErrorCode::kEnhanceYourCalm, "too many empty header frames");
      return;
    }
  }
  // The block is always decoded: the HPACK table must stay in step with the peer's, whatever
  // becomes of the stream (RFC 9113 §4.3).
  const absl::Status decoded = decoder_.decode(event.payload, decoded_);
  if (!decoded.ok() && decoded.code() != absl::StatusCode::kResourceExhausted) {
    fail(ErrorCode::kCompressionError, "invalid header block");
    return;
  }
  const bool too_large = !decoded.ok();
  const std::uint32_t id = event.stream_id;
  Stream* stream = find(id);
  if (stream != nullptr) {
    StreamState& st = state(stream);
    if (st.remote_closed) {
      // §5.1 "half-closed (remote)": STREAM_CLOSED.
      stream_error(id, ErrorCode::kStreamClosed);
      return;
    }
    const bool informational =
        role_ == Role::kClient && !st.headers_received && !event.end_stream &&
        !decoded_.fields().empty() && decoded_.fields()[0].name == ":status" &&
        !decoded_.fields()[0].value.empty() && decoded_.fields()[0].value[0] == '1';
    BlockKind kind = BlockKind::kTrailers;
    if (!st.headers_received && role_ == Role::kClient) kind = BlockKind::kResponse;
    // §8.1: a second block (trailers) ends the stream; a block without END_STREAM after the
    // first is malformed (1xx responses aside, RFC 9110 §15.2).
    if (too_large || event.stream_error != ErrorCode::kNoError ||
        (kind == BlockKind::kTrailers && !event.end_stream) ||
        !valid_block(kind, st.content_length)) {
      if (terminated_) return;
      stream_error(id, event.stream_error != ErrorCode::kNoError ? event.stream_error
                                                                 : ErrorCode::kProtocolError);
      return;
    }
    if (informational) return;  // 100 Continue and kin: not for gRPC, skipped
    st.headers_received = true;
    if (event.end_stream && st.content_length >= 0 &&
        st.data_received != static_cast<std::uint64_t>(st.content_length)) {
      stream_error(id, ErrorCode::kProtocolError);
      return;
    }
    if (st.closing) {
      // Judged as the stream's state asks (trailers checked), not delivered: it is closing.
      st.remote_closed = true;  // (trailers end the stream)
      if (role_ == Role::kServer) ledger_.on_remote_end(stream->id_);
      return;
    }
    deliver(stream, event.end_stream, parts);
    return;
  }
  switch (ids_.on_peer_headers(id)) {
    case streams::StreamIds::HeadersVerdict::kProtocolError:
      fail(ErrorCode::kProtocolError, "HEADERS on a stream the peer may not open");
      return;
    case streams::StreamIds::HeadersVerdict::kKnownStream:
      // A closed stream: what became of it decides (http2/peer_stream_ledger.h).
      if (role_ != Role::kServer) return;
      switch (ledger_.judge(static_cast<std::int32_t>(id))) {
        case PeerStreamLedger::Verdict::kIgnore:
          return;
        case PeerStreamLedger::Verdict::kResetStreamClosed:
          stream_error(id, ErrorCode::kStreamClosed);
          return;
        case PeerStreamLedger::Verdict::kConnectionStreamClosed:
          fail(ErrorCode::kStreamClosed, "HEADERS on a closed stream");
          return;
        case PeerStreamLedger::Verdict::kConnectionProtocolError:
          fail(ErrorCode::kProtocolError, "HEADERS on a stream id already passed");
          return;
      }
      return;
    case streams::StreamIds::HeadersVerdict::kNewStream:
      break;
  }
  // A new stream from the client.
  ledger_.on_headers(static_cast<std::int32_t>(id));
  std::int64_t content_length = -1;
  if (event.stream_error != ErrorCode::kNoError) {
    stream_error(id, event.stream_error);
    return;
  }
  if (too_large || !valid_block(BlockKind::kRequest, content_length)) {
    // §8.1.1: a malformed request is a stream error PROTOCOL_ERROR.
    if (!terminated_) stream_error(id, ErrorCode::kProtocolError);
    return;
  }
  if (event.end_stream && content_length > 0) {
    stream_error(id, ErrorCode::kProtocolError);
    return;
  }
  // After our GOAWAY (above its last stream id) or past SETTINGS_MAX_CONCURRENT_STREAMS
  // (§5.1.2): refused, so that the client may retry it elsewhere.
  if (id > goaway_last_ || goaway_sent_ || streams_.size() >= local_max_concurrent_) {
    write_rst(id, ErrorCode::kRefusedStream);
    return;
  }
  stream = host_.on_stream_open(id);
  if (terminated_) return;
  if (stream == nullptr) {
    write_rst(id, ErrorCode::kRefusedStream);
    return;
  }
  last_processed_ = id;
  stream->id_ = static_cast<std::int32_t>(id);
  StreamState& st = state(stream);
  st = StreamState{};
  st.send_window = peer_initial_window_;
  st.recv_window = settings_acked_ ? local_initial_window_
                                   : std::max<std::uint32_t>(local_initial_window_, kDefaultWindow);
  st.content_length = content_length;
  st.headers_received = true;
  insert(stream);
  deliver(stream, event.end_stream, parts);
}

void Session::on_rst_stream(const FrameEvent& event) {
  // CVE-2019-9514 reset flood, CVE-2023-44487 rapid reset: the peer's resets are budgeted.
  if (defences_.on_reset(Clock::now()) != ErrorCode::kNoError) {
    fail(ErrorCode::kEnhanceYourCalm, "too many RST_STREAM");
    return;
  }
  Stream* stream = find(event.stream_id);
  if (stream == nullptr) {
    if (ids_.on_frame_without_stream(EventType::kRstStream, event.stream_id) ==
        streams::StreamIds::Verdict::kProtocolError) {
      fail(ErrorCode::kProtocolError, "RST_STREAM on an idle stream");  // §6.4
    }
    if (role_ == Role::kServer) ledger_.on_peer_reset(static_cast<std::int32_t>(event.stream_id));
    return;
  }
  if (role_ == Role::kServer) ledger_.on_peer_reset(static_cast<std::int32_t>(event.stream_id));
  // (A stream this end was closing closes now, with the peer's code: later frames on it are
  // judged as on a stream the peer reset.)
  close(stream, event.error_code);
}

void Session::on_window_update(const FrameEvent& event) {
  if (event.stream_id == 0) {
    conn_send_window_ += event.increment;
    if (conn_send_window_ > kMaxWindow) {
      // §6.9.1: a window above 2^31-1 is a FLOW_CONTROL_ERROR.
      fail(ErrorCode::kFlowControlError, "connection window above 2^31-1");
      return;
    }
    host_.on_connection_window_opened();
    return;
  }
  Stream* stream = find(event.stream_id);
  if (stream == nullptr) {
    if (ids_.on_frame_without_stream(EventType::kWindowUpdate, event.stream_id) ==
        streams::StreamIds::Verdict::kProtocolError) {
      fail(ErrorCode::kProtocolError, "WINDOW_UPDATE on an idle stream");
    }
    return;
  }
  StreamState& st = state(stream);
  st.send_window += event.increment;
  if (st.send_window > kMaxWindow) {
    stream_error(event.stream_id, ErrorCode::kFlowControlError);  // §6.9.1, h2spec 6.9.1 #3
    return;
  }
  if (st.sending && !st.local_closed && !st.closing && st.send_window > 0) enqueue(stream);
}

void Session::on_goaway(const FrameEvent& event) {
  goaway_received_ = true;
  host_.on_goaway(event.last_stream_id, event.error_code);
  if (terminated_) return;
  // The streams this end opened above the last one the peer processed were not processed:
  // closed as refused, so that their calls may be retried (RFC 9113 §6.8).
  while (!streams_.empty()) {
    Stream* last = streams_.highest();
    const auto id = static_cast<std::uint32_t>(last->id_);
    if (id <= event.last_stream_id || ids_.peer_parity(id)) break;
    close(last, ErrorCode::kRefusedStream);
  }
}

// --- output --------------------------------------------------------------------------------

std::int32_t Session::submit_request(Stream* stream, std::span<const HeaderField> headers) {
  if (!accepts_new_streams()) return -1;
  const std::uint32_t id = ids_.open_local();
  if (id == 0) return -1;
  stream->id_ = static_cast<std::int32_t>(id);
  StreamState& st = state(stream);
  st = StreamState{};
  st.send_window = peer_initial_window_;
  st.recv_window = settings_acked_ ? local_initial_window_
                                   : std::max<std::uint32_t>(local_initial_window_, kDefaultWindow);
  insert(stream);
  if (local_open_ < peer_max_concurrent_ && pending_opens_.empty()) {
    FieldList fields;
    for (const HeaderField& h : headers) fields.push_back(to_field(h));
    open_now(stream, fields);
    return static_cast<std::int32_t>(id);
  }
  // RFC 9113 §5.1.2: the server allows no more streams now: the HEADERS wait (in id order) for
  // one of this end's streams to close.
  PendingOpen pending{stream, {}};  // (st.sending stays false until the HEADERS go)
  pending.fields.reserve(headers.size());
  for (const HeaderField& h : headers) {
    pending.fields.push_back({std::string(h.name), std::string(h.value), h.no_index});
  }
  pending_opens_.push_back(std::move(pending));
  return static_cast<std::int32_t>(id);
}

void Session::open_now(Stream* stream, std::span<const hpack::Field> fields) {
  StreamState& st = state(stream);
  if (!fits_peer_header_list(fields)) {
    refuse_oversized_block(stream);  // never on the wire: no RST_STREAM
    return;
  }
  write_headers(static_cast<std::uint32_t>(stream->id_), fields, /*end_stream=*/false);
  st.sending = true;
  ++local_open_;
  if (!stream->outbound.empty() || stream->outbound_end) enqueue(stream);
}

void Session::open_pending() {
  while (!pending_opens_.empty() && local_open_ < peer_max_concurrent_ && !terminated_) {
    PendingOpen pending = std::move(pending_opens_.front());
    pending_opens_.erase(pending_opens_.begin());
    FieldList fields;
    for (const PendingField& f : pending.fields) {
      fields.push_back(to_field(f.name, f.value, f.no_index));
    }
    open_now(pending.stream, fields);
  }
}

bool Session::submit_response(Stream* stream, std::span<const HeaderField> headers,
                              bool with_data) {
  if (terminated_) return false;
  StreamState& st = state(stream);
  if (!state(stream).in_table || st.closing || st.sending || st.local_closed) {
    return false;
  }
  FieldList fields;
  for (const HeaderField& h : headers) fields.push_back(to_field(h));
  if (!fits_peer_header_list(fields)) {
    refuse_oversized_block(stream);
    return true;  // the stream closes, reset, at the next produce()
  }
  write_headers(static_cast<std::uint32_t>(stream->id_), fields, /*end_stream=*/!with_data);
  if (with_data) {
    st.sending = true;
    if (!stream->outbound.empty() || stream->outbound_end) enqueue(stream);
    return true;
  }
  // Trailers-Only: the stream ends here.
  st.local_closed = true;
  if (!st.remote_closed) {
    // RFC 9113 §8.1: the client is asked to stop sending (as gRPC servers do).
    write_rst(static_cast<std::uint32_t>(stream->id_), ErrorCode::kNoError);
    stream->reset_sent_ = true;
  }
  close_later(stream, ErrorCode::kNoError);
  return true;
}

void Session::resume(Stream* stream) {
  StreamState& st = state(stream);
  if (terminated_ || !st.sending || st.local_closed || st.closing) return;
  if (!state(stream).in_table) return;
  enqueue(stream);
}

void Session::reset(Stream* stream, ErrorCode error) {
  if (terminated_ || stream->id_ <= 0) return;
  if (!state(stream).in_table) return;
  StreamState& st = state(stream);
  if (st.closing) return;
  // A stream whose HEADERS are still held was never on the wire: it closes without a frame.
  if (role_ == Role::kServer || st.sending)
    write_rst(static_cast<std::uint32_t>(stream->id_), error);
  stream->reset_sent_ = true;
  st.local_closed = true;
  close_later(stream, error);
}

void Session::consume(Stream* stream, std::size_t n) {
  if (terminated_ || n == 0 || stream->id_ <= 0) return;
  if (state(stream).in_table) {
    StreamState& st = state(stream);
    st.recv_unacked += static_cast<std::uint32_t>(n);
    // No WINDOW_UPDATE once the peer has ended the stream (it sends no more), nor one per small
    // message: half the window at a time (a unary call never needs one).
    if (!st.remote_closed && !st.closing && st.recv_unacked >= local_initial_window_ / 2) {
      write_window_update(static_cast<std::uint32_t>(stream->id_), st.recv_unacked);
      st.recv_window += st.recv_unacked;
      st.recv_unacked = 0;
    }
  }
  add_connection_unacked(n);
}

void Session::consume_connection(std::size_t n) {
  if (terminated_ || n == 0) return;
  add_connection_unacked(n);
}

void Session::shutdown() {
  if (terminated_ || goaway_sent_ || shutdown_notice_) return;
  if (role_ == Role::kClient) {
    // The server opens no streams: nothing can be in flight toward this end.
    write_goaway(ErrorCode::kNoError, {});
    return;
  }
  // RFC 9113 §6.8's graceful shutdown, as grpc-go and nghttp2's shutdown notice do it: GOAWAY
  // with the largest stream id (no new streams, please; those already on their way are served)
  // and a PING; once its ACK arrives (or after a bound) the GOAWAY with the real last stream id.
  shutdown_notice_ = true;
  notice_deadline_ = deadline_after(Clock::now(), kShutdownNoticeBound);
  const std::size_t size = frame::goaway_size(0);
  std::uint8_t* p = out_.reserve(size + frame::kPingFrameSize);
  std::size_t n = frame::write_goaway({p, size}, frame::kStreamIdMask, ErrorCode::kNoError, {},
                                      peer_max_frame_size_);
  n += frame::write_ping({p + n, frame::kPingFrameSize}, kShutdownPingOpaque, /*ack=*/false);
  out_.commit(n);
}

void Session::finish_shutdown() {
  shutdown_notice_ = false;
  if (terminated_ || goaway_sent_) return;
  write_goaway(ErrorCode::kNoError, {});
}

limits::Clock::time_point Session::next_deadline() const {
  if (terminated_) return Clock::time_point::max();
  Clock::time_point next = Clock::time_point::max();
  if (!settings_acked_) next = settings_deadline_;
  if (shutdown_notice_) next = std::min(next, notice_deadline_);
  return next;
}

void Session::on_timer(Clock::time_point now) {
  if (terminated_) return;
  if (!settings_acked_ && now >= settings_deadline_) {
    // RFC 9113 §6.5.3: our SETTINGS went unacknowledged for too long.
    fail(ErrorCode::kSettingsTimeout, "SETTINGS not acknowledged in time");
    return;
  }
  if (shutdown_notice_ && now >= notice_deadline_) finish_shutdown();
}

bool Session::fits_peer_header_list(std::span<const hpack::Field> fields) const {
  return header_list_size(fields) <= peer_max_header_list_;
}

void Session::refuse_oversized_block(Stream* stream) {
  // Never sent as is (the peer would reset the stream or end the connection for it): this
  // stream alone fails, INTERNAL, with the limit named (as grpc-go does for oversized metadata).
  stream->local_close_reason_ = role_ == Role::kServer
                                    ? "the response's header list is larger than the client's "
                                      "SETTINGS_MAX_HEADER_LIST_SIZE"
                                    : "the request's header list is larger than the server's "
                                      "SETTINGS_MAX_HEADER_LIST_SIZE";
  StreamState& st = state(stream);
  if (role_ == Role::kServer || st.sending) {
    write_rst(static_cast<std::uint32_t>(stream->id_), ErrorCode::kInternalError);
  }
  stream->reset_sent_ = true;
  st.local_closed = true;
  close_later(stream, ErrorCode::kInternalError);
}

void Session::ping() {
  if (terminated_) return;
  std::uint8_t* p = out_.reserve(frame::kPingFrameSize);
  out_.commit(frame::write_ping({p, frame::kPingFrameSize}, kPingOpaque, /*ack=*/false));
}

void Session::produce(std::size_t budget) {
  // Twice at most: streams closed in the first pass may let held HEADERS go in the second.
  for (int pass = 0; pass < 2; ++pass) {
    if (!pending_opens_.empty()) open_pending();
    while (send_head_ != nullptr && out_.size() < budget) {
      Stream* stream = send_head_;
      StreamState& st = state(stream);
      send_head_ = st.send_next;
      if (send_head_ == nullptr) send_tail_ = nullptr;
      st.in_send_queue = false;
      st.send_next = nullptr;
      if (st.closing) {
        close(stream, st.close_code);
        continue;
      }
      if (!produce_stream(stream, budget)) {
        // The connection window is used up: the stream waits at the head for a WINDOW_UPDATE.
        st.in_send_queue = true;
        st.send_next = send_head_;
        send_head_ = stream;
        if (send_tail_ == nullptr) send_tail_ = stream;
        break;
      }
    }
    if (pending_opens_.empty() || local_open_ >= peer_max_concurrent_) break;
  }
}

bool Session::produce_stream(Stream* stream, std::size_t budget) {
  StreamState& st = state(stream);
  const auto id = static_cast<std::uint32_t>(stream->id_);
  std::size_t framed = 0;
  if (st.local_closed) return true;
  while (!st.local_closed) {
    const std::size_t available = stream->outbound.size();
    const bool ending = stream->outbound_end;
    if (available == 0 && !ending) return true;  // resume() brings it back
    if (available > 0) {
      if (conn_send_window_ <= 0) return false;
      if (st.send_window <= 0) return true;  // a WINDOW_UPDATE brings it back
      if (framed >= kStreamQuantum || out_.size() >= budget) {
        enqueue(stream);  // its turn is over: to the back of the queue
        return true;
      }
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::int64_t>({static_cast<std::int64_t>(available), st.send_window,
                                  conn_send_window_, std::int64_t{peer_max_frame_size_}}));
      // END_STREAM on the last DATA when the stream ends without trailers (a client's request).
      const bool end = ending && n == available && stream->trailers.empty();
      if (n <= kCopiedPayload) {
        std::uint8_t* p = out_.reserve(kFrameHeaderSize + n);
        frame::write_data_header({p, kFrameHeaderSize}, id, static_cast<std::uint32_t>(n), end);
        stream->outbound.copy_to(0, n, p + kFrameHeaderSize);
        out_.commit(kFrameHeaderSize + n);
        stream->outbound.consume(n);
      } else {
        std::uint8_t* p = out_.reserve(kFrameHeaderSize);
        frame::write_data_header({p, kFrameHeaderSize}, id, static_cast<std::uint32_t>(n), end);
        out_.commit(kFrameHeaderSize);
        out_.append(stream->outbound.split_front(n));
      }
      st.send_window -= static_cast<std::int64_t>(n);
      conn_send_window_ -= static_cast<std::int64_t>(n);
      framed += n;
      data_sent_ = true;
      if (end) st.local_closed = true;
      host_.on_outbound_framed(stream, n);
      stream->on_outbound_taken();
      if (find(id) != stream || st.closing) {
        // Reset or closed from inside on_outbound_taken.
        if (st.closing && find(id) == stream) close(stream, st.close_code);
        return true;
      }
      continue;
    }
    // Everything queued is out and the stream ends: trailers (server) or an empty DATA with
    // END_STREAM (client).
    if (!stream->trailers.empty()) {
      FieldList fields;
      for (const HeaderField& h : stream->trailers.literal) fields.push_back(to_field(h));
      for (const Header& h : stream->trailers.owned) fields.push_back({h.name, h.value});
      if (!fits_peer_header_list(fields)) {
        refuse_oversized_block(stream);
        return true;
      }
      write_headers(id, fields, /*end_stream=*/true);
    } else {
      std::uint8_t* p = out_.reserve(kFrameHeaderSize);
      out_.commit(frame::write_data_header({p, kFrameHeaderSize}, id, 0, /*end_stream=*/true));
      data_sent_ = true;
    }
    st.local_closed = true;
  }
  // This end's side is closed.
  if (st.remote_closed) {
    close(stream, ErrorCode::kNoError);
  } else if (role_ == Role::kServer) {
    // The response is complete while the client still sends: it is asked to stop (RFC 9113
    // §8.1), so that a client that never half-closes does not keep the stream.
    write_rst(id, ErrorCode::kNoError);
    stream->reset_sent_ = true;
    close(stream, ErrorCode::kNoError);
  }
  return true;
}

}  // namespace ferry::http2::session

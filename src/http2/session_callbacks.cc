// Implementation of src/http2/session_callbacks.h.
#include "http2/session_callbacks.h"

#include <cassert>
#include <cstring>

namespace ferry::http2 {

nghttp2_nv to_nv(const HeaderField& f) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(f.name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(f.value.data())), f.name.size(),
          f.value.size(),
          static_cast<std::uint8_t>(
              (f.static_storage ? (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)
                                : NGHTTP2_NV_FLAG_NONE) |
              (f.no_index ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE))};
}

void append_nv(std::span<const HeaderField> fields, NvArray& out) {
  for (const HeaderField& f : fields) out.push_back(to_nv(f));
}

namespace {

Connection& self(void* user_data) { return *static_cast<Connection*>(user_data); }

// A DATA payload up to this size is copied in after its frame header rather than sent by
// reference: for a small message the copy costs less than splitting it off its queue and
// counting references to its block, and the small frames of a batch of answers then go out as
// one contiguous slice instead of two iovecs each.
constexpr std::size_t kCopiedPayload = 256;

}  // namespace

// Control frames and DATA frame padding: small, so copied into the pending output.
ssize_t Connection::Callbacks::send(nghttp2_session*, const std::uint8_t* data, std::size_t length,
                                    int, void* user_data) {
  self(user_data).pending_.append_copy(data, length);
  return static_cast<ssize_t>(length);
}

// A DATA frame: its 9-byte header is copied, its payload moved by reference from the stream.
int Connection::Callbacks::send_data(nghttp2_session*, nghttp2_frame* frame,
                                     const std::uint8_t* framehd, std::size_t length,
                                     nghttp2_data_source* source, void* user_data) {
  Connection& c = self(user_data);
  auto* stream = static_cast<Stream*>(source->ptr);
  if (length <= kCopiedPayload) {
    std::uint8_t* out = c.pending_.reserve(9 + length);
    std::memcpy(out, framehd, 9);
    stream->outbound.copy_to(0, length, out + 9);
    c.pending_.commit(9 + length);
    stream->outbound.consume(length);
  } else {
    c.pending_.append_copy(framehd, 9);
    c.pending_.append(stream->outbound.split_front(length));
  }
  assert(frame->data.padlen == 0);
  (void)frame;
  c.on_queued_taken(stream, length);
  stream->on_outbound_taken();
  return 0;
}

ssize_t Connection::Callbacks::read_data(nghttp2_session* session, std::int32_t, std::uint8_t*,
                                         std::size_t length, std::uint32_t* flags,
                                         nghttp2_data_source* source, void*) {
  auto* stream = static_cast<Stream*>(source->ptr);
  const std::size_t available = stream->outbound.size();
  const std::size_t n = std::min(length, available);
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  if (n == available && stream->outbound_end) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!stream->trailers.empty()) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      NvArray nva;
      append_nv(stream->trailers.literal, nva);
      for (const Header& h : stream->trailers.owned) nva.push_back(to_nv({h.name, h.value}));
      if (nghttp2_submit_trailer(session, stream->id_, nva.data(), nva.size()) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
    }
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    stream->deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

// Every frame header, before nghttp2 acts on the frame: the server records the client's new
// streams, and answers HEADERS on a client stream nghttp2 no longer knows (it keeps no closed
// streams) as RFC 9113 §5.1 says, which nghttp2 alone would silently ignore. (DATA on such a
// stream never gets here: nghttp2 skips it before this callback.)
int Connection::Callbacks::begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd,
                                       void* user_data) {
  Connection& c = self(user_data);
  if (c.role_ != Role::kServer || hd->type != NGHTTP2_HEADERS || (hd->stream_id & 1) == 0) {
    return 0;
  }
  PeerStreamLedger& ledger = c.peer_streams_;
  if (!ledger.used(hd->stream_id)) {
    ledger.on_headers(hd->stream_id);
    return 0;
  }
  if (nghttp2_session_find_stream(session, hd->stream_id) != nullptr) return 0;
  switch (ledger.judge(hd->stream_id)) {
    case PeerStreamLedger::Verdict::kIgnore:
      break;
    case PeerStreamLedger::Verdict::kResetStreamClosed:
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, hd->stream_id, NGHTTP2_STREAM_CLOSED);
      break;
    case PeerStreamLedger::Verdict::kConnectionStreamClosed:
      nghttp2_session_terminate_session(session, NGHTTP2_STREAM_CLOSED);
      break;
    case PeerStreamLedger::Verdict::kConnectionProtocolError:
      nghttp2_session_terminate_session(session, NGHTTP2_PROTOCOL_ERROR);
      break;
  }
  return 0;
}

int Connection::Callbacks::begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                         void* user_data) {
  Connection& c = self(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST ||
      c.role_ != Role::kServer) {
    return 0;
  }
  // Above our GOAWAY's last stream id (queued, not yet written): the peer will retry it
  // elsewhere, so it must not run here.
  Stream* stream = frame->hd.stream_id > c.goaway_last_stream_id_
                       ? nullptr
                       : c.observer_->on_stream_open(frame->hd.stream_id);
  if (stream == nullptr) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_REFUSED_STREAM);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  stream->id_ = frame->hd.stream_id;
  c.link(stream);
  nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream);
  return 0;
}

int Connection::Callbacks::header(nghttp2_session*, const nghttp2_frame* frame,
                                  const std::uint8_t* name, std::size_t namelen,
                                  const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                                  void* user_data) {
  Stream* stream = self(user_data).find_stream(frame->hd.stream_id);
  if (stream == nullptr) return 0;
  const bool ok =
      stream->on_header(std::string_view(reinterpret_cast<const char*>(name), namelen),
                        std::string_view(reinterpret_cast<const char*>(value), valuelen));
  // Resets the stream (RST_STREAM INTERNAL_ERROR) without tearing down the connection.
  return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

int Connection::Callbacks::frame_recv(nghttp2_session*, const nghttp2_frame* frame,
                                      void* user_data) {
  Connection& c = self(user_data);
  if (c.role_ == Role::kServer) {
    if (frame->hd.type == NGHTTP2_RST_STREAM) c.peer_streams_.on_peer_reset(frame->hd.stream_id);
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
        (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)) {
      c.peer_streams_.on_remote_end(frame->hd.stream_id);
    }
  }
  if (frame->hd.type == NGHTTP2_WINDOW_UPDATE && frame->hd.stream_id == 0 && c.send_waiters_) {
    c.wake_send_waiters();  // writers held because the peer read nothing may go on
  }
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    c.goaway_received_ = true;
    c.observer_->on_goaway(frame->goaway.last_stream_id,
                           static_cast<ErrorCode>(frame->goaway.error_code));
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) {
    if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
      c.observer_->on_peer_settings();
    }
    if (c.lifecycle_ != nullptr) {
      const bool ack = (frame->hd.flags & NGHTTP2_FLAG_ACK) != 0;
      if (frame->hd.type == NGHTTP2_SETTINGS && !ack) c.lifecycle_->on_peer_settings();
      if (frame->hd.type == NGHTTP2_PING) {
        if (ack) {
          c.lifecycle_->on_ping_ack();
        } else {
          c.lifecycle_->on_ping_received();
        }
      }
    }
    return 0;
  }
  Stream* stream = c.find_stream(frame->hd.stream_id);
  if (stream == nullptr) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS) stream->on_headers_done();
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    c.parts_.on_call_ended();
    stream->on_remote_end();
  }
  return 0;
}

int Connection::Callbacks::data_chunk(nghttp2_session* session, std::uint8_t,
                                      std::int32_t stream_id, const std::uint8_t* data,
                                      std::size_t len, void* user_data) {
  Connection& c = self(user_data);
  Stream* stream = c.find_stream(stream_id);
  if (stream == nullptr) {
    nghttp2_session_consume(session, stream_id, len);
    return 0;
  }
  detail::Block* block = c.read_block_;
  if (block != nullptr && data >= block->data() && data + len <= block->data() + block->used) {
    stream->on_data(Slice(block, data, len));  // zero-copy: a view of the read block
  } else {
    stream->on_data(Slice::copy_of(data, len));
  }
  // Enough calls of this read are parsed: stop here, so that their answers leave first.
  if (!c.parts_.full()) return 0;
  c.paused_in_data_ = true;
  return NGHTTP2_ERR_PAUSE;
}

int Connection::Callbacks::stream_close(nghttp2_session* session, std::int32_t stream_id,
                                        std::uint32_t error, void* user_data) {
  Connection& c = self(user_data);
  Stream* stream = c.find_stream(stream_id);
  if (stream == nullptr) return 0;
  nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
  c.unlink(stream);
  stream->on_closed(static_cast<ErrorCode>(error));
  return 0;
}

// A server that has sent its whole response (END_STREAM) while the client is still sending
// asks it to stop with RST_STREAM(NO_ERROR) (RFC 9113 8.1), as gRPC servers do. Without it a
// client that never half-closes (a bidi call ended by a status mid-stream) keeps the stream,
// its call and its unread DATA alive on both sides until the connection goes. Sent only once
// the END_STREAM frame is out: submitted earlier, RST_STREAM would overtake queued DATA.
int Connection::Callbacks::frame_send(nghttp2_session* session, const nghttp2_frame* frame,
                                      void* user_data) {
  Connection& c = self(user_data);
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    // Ours, not the peer's: the call's status says so (nghttp2 closes the stream after this).
    if (Stream* stream = c.find_stream(frame->hd.stream_id)) stream->reset_sent_ = true;
  }
  if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR &&
      c.local_close_reason_.empty()) {
    // nghttp2 (or ferry) ends the connection for the peer's fault: its streams are told.
    c.local_close_reason_ = error_code_name(static_cast<ErrorCode>(frame->goaway.error_code));
  }
  if (c.lifecycle_ != nullptr &&
      (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)) {
    c.lifecycle_->on_data_sent();
  }
  if (c.role_ == Role::kServer &&
      (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
      nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  }
  return 0;
}

nghttp2_session_callbacks* Connection::Callbacks::table() {
  static nghttp2_session_callbacks* const shared = [] {
    nghttp2_session_callbacks* cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_send_callback(cbs, send);
    nghttp2_session_callbacks_set_send_data_callback(cbs, send_data);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, frame_send);
    return cbs;
  }();
  return shared;
}

}  // namespace ferry::http2

// ferry/limits.h: the limits both ends of a connection enforce (public). ServerOptions and
// ChannelOptions derive from these, so a limit is declared, documented and defaulted once; the
// HTTP/2 layer takes ConnectionLimits as they are.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "ferry/frame.h"
#include "ferry/write_policy.h"

namespace ferry {

// What one message may weigh (per call, both directions).
struct MessageLimits {
  // Larger received messages fail the call with RESOURCE_EXHAUSTED before they are buffered.
  std::size_t max_receive_message_size = kDefaultMaxReceiveMessageSize;
  // Larger messages fail the write with RESOURCE_EXHAUSTED (checked on the uncompressed size).
  std::size_t max_send_message_size = kMaxFramePayloadSize;
  // The memory a call's unfinished inbound message may keep alive: what is held, not what was
  // declared (the 64 KiB blocks its bytes are in, counted whole when it holds bytes of them by
  // reference, and the free rest of the block it copies into). A message still arriving is
  // acknowledged to flow control as it comes, so windows do not bound it; this does. Past it
  // the call fails with RESOURCE_EXHAUSTED (a server answers it as the call's status, a client
  // resets the stream and returns it). ferry copies the bytes of a message trickled a few per
  // read into packed blocks as they arrive, so that it holds at most about twice its bytes:
  // 0, the default, is 2 x max_receive_message_size + 256 KiB, which a message within the
  // receive limit never reaches; set less to bound a call's memory more tightly than its
  // messages' size.
  std::size_t max_held_receive_bytes = 0;

  // max_held_receive_bytes as it applies: the default resolved, saturating (an unlimited receive
  // size leaves it unlimited).
  std::size_t held_receive_budget() const {
    constexpr std::size_t kSlack = std::size_t{256} << 10;
    if (max_held_receive_bytes != 0) return max_held_receive_bytes;
    if (max_receive_message_size > (SIZE_MAX - kSlack) / 2) return SIZE_MAX;
    return 2 * max_receive_message_size + kSlack;
  }
};

// What one HTTP/2 connection advertises in its SETTINGS and enforces.
struct ConnectionLimits {
  // Streams the peer may open at once (SETTINGS_MAX_CONCURRENT_STREAMS). What bounds a server's
  // calls per connection; a client advertises it too (servers open no streams).
  std::uint32_t max_concurrent_streams = 1000;
  // Bytes the peer may send on one stream before the application reads them
  // (SETTINGS_INITIAL_WINDOW_SIZE): bounds the memory unread messages take per call.
  std::uint32_t stream_window = 1u << 20;
  // The same for all streams of the connection together (connection-level WINDOW_UPDATE).
  std::uint32_t connection_window = 16u << 20;
  // Largest header block accepted (SETTINGS_MAX_HEADER_LIST_SIZE; names + values + 32 per
  // field, as HPACK counts); a larger one resets the stream.
  std::uint32_t max_header_list_size = 16u << 10;
  // Bytes of messages queued for sending on the connection and not yet taken by the peer's
  // flow-control windows (answers to a client that does not read). Beyond it, a streaming write
  // on a stream that still has bytes queued waits until they are taken before queuing its
  // message: the connection then holds at most this plus one message per stream, where each
  // stream alone may queue 256 KiB and a message. A stream the peer reads empties its queue and
  // goes on, so unread streams cannot starve it. A peer that reads nothing at all (connection
  // window used up) holds every streaming writer at the bound. Unary answers are not held.
  std::size_t max_queued_send_bytes = std::size_t{32} << 20;
  // The memory all the connection's calls together may keep alive for their unfinished inbound
  // messages (each counted as MessageLimits::max_held_receive_bytes counts it): what bounds a
  // peer that opens many streams and sends each the start of a large message. Past it the
  // connection ends with GOAWAY ENHANCE_YOUR_CALM (debug data "held_bytes") and its calls fail
  // UNAVAILABLE. Not applied to HTTP/1.1, which carries one call at a time. Default 256 MiB.
  std::size_t max_held_bytes = std::size_t{256} << 20;
  // How long the peer may take to acknowledge this end's SETTINGS; past it the connection ends
  // with GOAWAY SETTINGS_TIMEOUT (RFC 9113 §6.5.3). milliseconds::max() (kNever) or 0 turns it
  // off.
  std::chrono::milliseconds settings_ack_timeout = std::chrono::seconds(10);
  // When what the connection produces is written (ferry/write_policy.h).
  WritePolicy write_policy;
};

}  // namespace ferry

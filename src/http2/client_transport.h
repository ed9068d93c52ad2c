// What a channel's calls need of their connection to one server (http2 layer, private): HTTP/2
// (http2::Connection, every call a stream of one connection) or HTTP/1.1 (http1::ClientPool, a
// connection per call in flight). The calls speak to either alike.
#pragma once

#include <cstdint>
#include <span>

#include "http2/stream.h"

namespace ferry::http2 {

class ClientTransport : public StreamCarrier {
 public:
  // Starts the connection (HTTP/2: the preface and SETTINGS; HTTP/1.1: reading).
  virtual void start() = 0;
  // Opens a stream with request headers; its body comes from the stream's outbound queue. The
  // stream id, or -1 when no stream can be opened now.
  virtual std::int32_t submit_request(Stream* stream, std::span<const HeaderField> headers) = 0;
  // Whether a new stream may still be opened.
  virtual bool accepts_new_streams() const = 0;
  virtual bool is_open() const = 0;
  // No new streams; closes once those open are done.
  virtual void shutdown() = 0;
  // Closes now: every open stream gets on_closed(kConnectionLost).
  virtual void close() = 0;

 protected:
  ~ClientTransport() = default;
};

}  // namespace ferry::http2

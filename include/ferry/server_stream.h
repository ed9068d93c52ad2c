// ferry/server_stream.h: typed views of a server call's message streams (server layer, public),
// from ferry/typed_stream.h's template: each forwards to ServerContext's type-erased operations
// (read, read_raw, write, write_raw, last_message_compressed; their completion tokens and
// cancellation as there), so they add no code per type.
#pragma once

#include "ferry/server_context.h"
#include "ferry/typed_stream.h"

namespace ferry {

// The requests of a client-streaming call.
template <class Request>
using ServerReader = TypedStream<ServerContext&, void, Request>;
// The responses of a server-streaming call; write suspends while the client's window is full
// (backpressure).
template <class Response>
using ServerWriter = TypedStream<ServerContext&, Response, void>;
// A bidi call's requests and responses.
template <class Request, class Response>
using ServerReaderWriter = TypedStream<ServerContext&, Response, Request>;

}  // namespace ferry

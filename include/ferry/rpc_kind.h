// ferry/rpc_kind.h: the four kinds of gRPC method (public), shared by the server's method table
// (ferry/service.h), the channel's calls (ferry/channel.h) and the interceptors
// (ferry/interceptor.h).
#pragma once

namespace ferry {

// Unary: one request, one response. Client streaming: requests, then one response. Server
// streaming: one request, then responses. Bidi: both sides stream.
enum class RpcKind { kUnary, kClientStreaming, kServerStreaming, kBidiStreaming };

}  // namespace ferry

// The client's interceptor chain (client layer, private): the call shapes of unary_call.h and
// Channel::open with the channel's interceptors around them. Channel takes these paths only when
// it has interceptors; the plain paths stay as they were. Everything runs on the channel's
// executor.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/client_context.h"
#include "ferry/rpc_kind.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

class ChannelCore;
class ClientCall;

// unary_call with the interceptors: their on_start hooks (a rejection is returned without
// sending anything), the call, then their on_finish hooks.
asio::awaitable<absl::Status> intercepted_unary_call(std::shared_ptr<ChannelCore> core,
                                                     std::string_view method,
                                                     ClientContext& context,
                                                     const google::protobuf::MessageLite& request,
                                                     google::protobuf::MessageLite& response);

// Starts a streaming call (with its one request when request is non-null) with the
// interceptors: on_start hooks first; the on_finish hooks run when the call is done (the call
// owns that observer); kind is what they are told the call is. A rejected call is returned over, with the rejection. The returned call
// holds one reference for the caller.
asio::awaitable<ClientCall*> intercepted_start(std::shared_ptr<ChannelCore> core,
                                               std::string_view method, ClientContext& context,
                                               const google::protobuf::MessageLite* request,
                                               RpcKind kind);

}  // namespace ferry::detail

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
class ClientCallObserver;

// unary_call with the interceptors: their on_start hooks (a rejection is returned without
// sending anything), the call, then their on_finish hooks.
asio::awaitable<absl::Status> intercepted_unary_call(std::shared_ptr<ChannelCore> core,
                                                     std::string_view method,
                                                     ClientContext& context,
                                                     const google::protobuf::MessageLite& request,
                                                     google::protobuf::MessageLite& response);

// A streaming call's on_start hooks, run before it is opened: status is the first rejection
// (OK when none rejected), and observer runs the on_finish hooks of those that ran once the call
// it is given to is over (ClientCall::set_observer; a call retried by its method's policy gives
// it to its last attempt). kind is what the hooks are told the call is.
struct StreamHooks {
  absl::Status status;
  std::unique_ptr<ClientCallObserver> observer;
};
asio::awaitable<StreamHooks> start_stream_hooks(std::shared_ptr<ChannelCore> core,
                                                std::string_view method, ClientContext& context,
                                                RpcKind kind);

}  // namespace ferry::detail

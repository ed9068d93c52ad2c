// The client's call shapes that send one request (client layer, private): a unary call from
// start to status, the client's hot path, and the start of a server-streaming call. Both run on
// the channel's executor.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "common/ref.h"
#include "ferry/client_context.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

class ChannelCore;
class ClientCall;

class ClientCallObserver;

// A whole unary call: starts it, sends request with the end of the client's stream, reads the
// one response and returns the status. One coroutine frame per call in flight. observer, when
// non-null (a call with interceptors), is told of every attempt: attempt_started, then
// attempt_ended for one a retry follows, or on_call_done for the last.
asio::awaitable<absl::Status> unary_call(std::shared_ptr<ChannelCore> core, std::string_view method,
                                         ClientContext& context,
                                         const google::protobuf::MessageLite& request,
                                         google::protobuf::MessageLite& response,
                                         ClientCallObserver* observer = nullptr);

// The status of a call whose server must send exactly one response (unary, client-streaming):
// the call's status, or UNIMPLEMENTED when the server said OK without sending the response.
absl::Status single_response_status(absl::Status status, bool got_response);

}  // namespace ferry::detail

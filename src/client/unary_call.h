// The client's call shapes that send one request (client layer, private): a unary call from
// start to status, the client's hot path, and the start of a server-streaming call. Both run on
// the channel's executor.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/client_context.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

class ChannelCore;
class ClientCall;

// What one attempt of a call carried, for the interceptors (CallOutcome).
struct AttemptTraffic {
  std::size_t messages_sent = 0;
  std::size_t messages_received = 0;
  std::size_t bytes_sent = 0;
  std::size_t bytes_received = 0;
};

// A whole unary call: starts it, sends request with the end of the client's stream, reads the
// one response and returns the status. One coroutine frame per call in flight. When traffic is
// non-null it receives what the last attempt carried.
asio::awaitable<absl::Status> unary_call(std::shared_ptr<ChannelCore> core, std::string_view method,
                                         ClientContext& context,
                                         const google::protobuf::MessageLite& request,
                                         google::protobuf::MessageLite& response,
                                         AttemptTraffic* traffic = nullptr);

// The status of a call whose server must send exactly one response (unary, client-streaming):
// the call's status, or INTERNAL when the server said OK without sending the response.
absl::Status single_response_status(absl::Status status, bool got_response);

// Starts a call and sends its one request with the end of the client's stream (server-streaming
// calls). A request that cannot be sent (e.g. over the send limit) ends the call with the
// write's status: the server would otherwise wait for it forever.
asio::awaitable<ClientCall*> start_with_request(std::shared_ptr<ChannelCore> core,
                                                std::string_view method, ClientContext& context,
                                                const google::protobuf::MessageLite& request);

}  // namespace ferry::detail

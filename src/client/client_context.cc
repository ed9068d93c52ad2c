// Implementation of ferry/client_context.h: the context of a call made on behalf of a server
// call (deadline and cancellation propagation, call/cancellation_link.h).
#include "ferry/client_context.h"

#include "call/cancellation_link.h"
#include "ferry/server_context.h"

namespace ferry {

ClientContext ClientContext::from_server_context(ServerContext& server) {
  ClientContext context;
  context.deadline_ = server.deadline();
  context.parent_ = server.cancellation_link();
  return context;
}

}  // namespace ferry

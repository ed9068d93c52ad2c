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
  // The server call's span is the parent of the calls its handler makes (gRFC A72).
  context.trace_parent_ = server.trace_context();
  return context;
}

}  // namespace ferry

// ferry/interceptor.h: interceptors around server handlers and client calls (server and client
// layers, public): authentication, logging and metrics in one place rather than in every
// handler. An interceptor is a pair of hooks: a coroutine before the call (it sees the method,
// metadata, deadline and peer, may add metadata, and may reject the call with a status) and a
// function once the call is over (final status, duration, message counts).
//
// Registered in ServerOptions::interceptors / ChannelOptions::interceptors, they form a chain:
// the on_start hooks run in registration order, and once the call is over the on_finish hooks
// of every interceptor whose on_start ran (whatever it returned) run in reverse order. A server
// or channel with none pays nothing for the feature.
//
// This header gathers the pieces, each in its layer: ferry/call_info.h (CallInfo, CallOutcome,
// ready_status), ferry/server_interceptor.h and ferry/client_interceptor.h.
#pragma once

#include "ferry/call_info.h"
#include "ferry/client_context.h"
#include "ferry/client_interceptor.h"
#include "ferry/rpc_kind.h"
#include "ferry/server_context.h"
#include "ferry/server_interceptor.h"
#include "ferry/service.h"

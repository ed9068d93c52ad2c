// ferry/completion.h: how ferry's asynchronous operations complete (client and server layers,
// public; the machinery is ferry/detail/async_operation.h's). Every operation is an asio
// initiating function: its last argument is a completion token, asio::use_awaitable by default,
// or any other (a callback, asio::use_future, asio::experimental::deferred,
// bind_cancellation_slot(...)).
//
// With asio::use_awaitable the operation returns an awaitable directly (no frame beyond the
// operation's own: the hot path's cost is unchanged). With any other token it runs as a
// coroutine co_spawned on the call's executor and completes through the token; the handler's
// associated executor and allocator are honoured, and its cancellation slot is relayed to the
// call's thread.
#pragma once

#include "ferry/detail/async_operation.h"  // IWYU pragma: export

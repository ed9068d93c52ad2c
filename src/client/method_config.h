// Per-method call defaults applied as a call starts (client layer, private; the settings are
// ferry/method_config.h's): the entry for a method, and what it does to the call's context
// (a shorter deadline, wait_for_ready when the context left it unset).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "ferry/client_context.h"
#include "ferry/limits.h"
#include "ferry/method_config.h"

namespace ferry::detail {

// The entry for method ("/package.Service/Method"): its own in per_method, else its service's
// ("/package.Service/"), else fallback.
const MethodConfig& find_method_config(
    const std::map<std::string, MethodConfig, std::less<>>& per_method,
    const MethodConfig& fallback, std::string_view method);

// Applies config to a call's context as it starts: the deadline becomes min(deadline, now +
// timeout) when the timeout is set and not zero; wait_for_ready is set unless the context set it.
// Idempotent for a call's retries (a later attempt's now + timeout is never earlier than the
// first's).
void apply_method_config(const MethodConfig& config, ClientContext& context);

// Shortens context's deadline to now + timeout when that is earlier; a timeout of zero or less
// leaves it. Safe for any timeout (one past the clock's range leaves the deadline as it is).
void shorten_deadline(ClientContext& context, std::chrono::milliseconds timeout);

// The message limits of a call under config: the channel's, with the method's request and
// response limits in their place where config sets them.
MessageLimits message_limits(const MethodConfig& config, const MessageLimits& channel);

}  // namespace ferry::detail

// ferry/method_config.h: per-method call defaults of a channel (client layer, public): the
// service config's methodConfig "timeout" and "waitForReady" (gRPC's service-config design),
// applied to each call as it starts. Retry policies per method are ferry/retry.h's.
#pragma once

#include <chrono>
#include <optional>

namespace ferry {

// Defaults for the calls of one method (or service, or every method; see
// ChannelOptions::method_configs).
struct MethodConfig {
  // The longest a call may take: its deadline becomes min(its own deadline, start + timeout), so
  // a call's own earlier deadline wins. Unset: no limit beyond the call's own. Applied to the
  // ClientContext when the call starts (its deadline() then reports the shortened one).
  std::optional<std::chrono::milliseconds> timeout;
  // wait_for_ready for calls whose ClientContext did not set it (a context that called
  // set_wait_for_ready wins, as in gRPC). Unset: the library default, fail fast.
  std::optional<bool> wait_for_ready;

  bool empty() const { return !timeout && !wait_for_ready; }
};

}  // namespace ferry

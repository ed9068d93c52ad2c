// ferry/method_config.h: per-method settings of a channel (client layer, public): what gRPC's
// service config says in a "methodConfig" entry (timeout, waitForReady, retryPolicy,
// maxRequestMessageBytes, maxResponseMessageBytes), applied to each call of the method as it
// starts. ChannelOptions::method_configs keys them by method or service (ferry/channel.h);
// apply_service_config (ferry/service_config.h) fills them from the JSON document.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include "ferry/retry.h"

namespace ferry {

// The settings for the calls of one method (or service, or every method). An unset field leaves
// the channel's own setting (ChannelOptions) in force; the entry that applies to a method is the
// most specific one, whole (a field it lacks is not taken from a less specific entry), as in
// gRPC's service config.
struct MethodConfig {
  // The longest a call may take: its deadline becomes min(its own deadline, start + timeout), so
  // a call's own earlier deadline wins. Unset or zero: no limit beyond the call's own (gRPC
  // reads a zero timeout as none; a service config's "0s" leaves it unset, and a part of a
  // millisecond counts as one). Applied to the
  // ClientContext when the call starts (its deadline() then reports the shortened one).
  std::optional<std::chrono::milliseconds> timeout;
  // wait_for_ready for calls whose ClientContext did not set it (a context that called
  // set_wait_for_ready wins, as in gRPC). Unset: the library default, fail fast.
  std::optional<bool> wait_for_ready;
  // Retries of failed calls (ferry/retry.h). Unset, or max_attempts 1: not retried (a call the
  // server never processed is still retried transparently).
  std::optional<RetryPolicy> retry_policy;
  // Message size limits for the method's calls, in place of the channel's
  // (MessageLimits::max_send_message_size and max_receive_message_size): requests larger than
  // max_request_message_bytes fail their write, responses larger than
  // max_response_message_bytes fail the call with RESOURCE_EXHAUSTED.
  std::optional<std::size_t> max_request_message_bytes;
  std::optional<std::size_t> max_response_message_bytes;

  bool empty() const {
    return !timeout && !wait_for_ready && !retry_policy && !max_request_message_bytes &&
           !max_response_message_bytes;
  }
};

}  // namespace ferry

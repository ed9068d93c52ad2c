// Implementation of src/client/method_config.h.
#include "client/method_config.h"

namespace ferry::detail {

const MethodConfig& find_method_config(
    const std::map<std::string, MethodConfig, std::less<>>& per_method,
    const MethodConfig& fallback, std::string_view method) {
  if (per_method.empty()) return fallback;
  if (auto it = per_method.find(method); it != per_method.end()) return it->second;
  if (const std::size_t slash = method.rfind('/'); slash != std::string_view::npos) {
    if (auto svc = per_method.find(method.substr(0, slash + 1)); svc != per_method.end()) {
      return svc->second;
    }
  }
  return fallback;
}

void shorten_deadline(ClientContext& context, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;  // zero is no timeout, as in gRPC
  const auto now = ClientContext::Clock::now();
  const auto deadline = context.deadline();
  if (deadline <= now) return;
  // Compared in milliseconds first: now + timeout in the clock's nanoseconds overflows for a
  // timeout over about 292 years, which a service config or an xDS route may give.
  if (timeout >= std::chrono::ceil<std::chrono::milliseconds>(deadline - now)) return;
  context.set_deadline(now + timeout);
}

void apply_method_config(const MethodConfig& config, ClientContext& context) {
  if (config.timeout) shorten_deadline(context, *config.timeout);
  if (config.wait_for_ready && !context.wait_for_ready_set()) {
    const bool wait = *config.wait_for_ready;
    context.set_wait_for_ready(wait);
  }
}

MessageLimits message_limits(const MethodConfig& config, const MessageLimits& channel) {
  MessageLimits limits = channel;
  if (config.max_request_message_bytes) {
    limits.max_send_message_size = *config.max_request_message_bytes;
  }
  if (config.max_response_message_bytes) {
    limits.max_receive_message_size = *config.max_response_message_bytes;
  }
  return limits;
}

}  // namespace ferry::detail

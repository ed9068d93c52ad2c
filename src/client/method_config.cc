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

void apply_method_config(const MethodConfig& config, ClientContext& context) {
  if (config.timeout && config.timeout->count() > 0) {  // zero is no timeout, as in gRPC
    const auto limit = ClientContext::Clock::now() + *config.timeout;
    if (limit < context.deadline()) context.set_deadline(limit);
  }
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

// The OTLP resource as ferry's exporters send it (ferry::otlp, private; src/otlp/otlp_client.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ferry::otlp_detail {

// resource, then service.name = unknown_service and telemetry.sdk.{name,language,version} =
// ferry, cpp, 0.1 for those not given (as the OpenTelemetry SDKs do).
std::vector<std::pair<std::string, std::string>> full_resource(
    std::vector<std::pair<std::string, std::string>> resource);

}  // namespace ferry::otlp_detail

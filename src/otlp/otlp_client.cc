// Implementation of ferry/otlp.h: the OTLP exporter options (from code or the OTEL_* environment
// variables) and OtlpClient, the export call over a ferry Channel (ferry::otlp, above the core).
#include <atomic>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "ferry/channel.h"
#include "ferry/client_context.h"
#include "ferry/otlp.h"
#include "otlp/resource.h"

namespace ferry {
namespace {

// (Debian's abseil has a string_view of its own: these few helpers take std's.)
std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string ascii_case(std::string_view text, bool upper) {
  std::string out(text);
  for (char& c : out) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool starts_with_ignore_case(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         ascii_case(text.substr(0, prefix.size()), false) == ascii_case(prefix, false);
}

std::string env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  return value == nullptr ? std::string() : std::string(value);
}

// The signal's variable (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT), else the general one.
std::string otlp_env(std::string_view signal, std::string_view suffix) {
  std::string value = env("OTEL_EXPORTER_OTLP_" + std::string(signal) + "_" + std::string(suffix));
  if (value.empty()) value = env("OTEL_EXPORTER_OTLP_" + std::string(suffix));
  return value;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// W3C Baggage's percent-encoding, which the OTEL_* lists use; a bad escape stays as it is.
std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

void set_or_add(std::vector<std::pair<std::string, std::string>>& list, std::string key,
                std::string value) {
  for (auto& [k, v] : list) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  list.emplace_back(std::move(key), std::move(value));
}

// The endpoint as a ferry target, and whether it asks for TLS.
absl::StatusOr<std::pair<std::string, bool>> endpoint_target(std::string_view endpoint) {
  bool tls = false;
  if (starts_with_ignore_case(endpoint, "http://")) {
    endpoint.remove_prefix(7);
  } else if (starts_with_ignore_case(endpoint, "https://")) {
    endpoint.remove_prefix(8);
    tls = true;
  } else {
    if (endpoint.empty()) return absl::InvalidArgumentError("OTLP endpoint is empty");
    return std::make_pair(std::string(endpoint), false);  // a ferry target as it is
  }
  // OTLP/gRPC takes no path: "http://host:4317/" names host:4317.
  endpoint = endpoint.substr(0, endpoint.find('/'));
  if (endpoint.empty()) return absl::InvalidArgumentError("OTLP endpoint has no host");
  std::string target(endpoint);
  // Without a port, OTLP/gRPC's 4317 (a bracketed IPv6 address keeps its colons).
  const std::size_t bracket = target.rfind(']');
  const std::size_t colon = target.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    target += ":4317";
  }
  return std::make_pair(std::move(target), tls);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_otlp_key_values(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = trim(entry.substr(0, eq));
    if (key.empty()) continue;
    out.emplace_back(percent_decode(key), percent_decode(trim(entry.substr(eq + 1))));
  }
  return out;
}

OtlpExporterOptions otlp_options_from_environment(std::string_view signal) {
  OtlpExporterOptions options;
  const std::string upper = ascii_case(signal, true);
  if (std::string endpoint = otlp_env(upper, "ENDPOINT"); !endpoint.empty()) {
    options.endpoint = std::move(endpoint);
  }
  for (auto& [key, value] : parse_otlp_key_values(otlp_env(upper, "HEADERS"))) {
    options.headers.emplace_back(ascii_case(key, false), std::move(value));
  }
  if (std::string timeout = otlp_env(upper, "TIMEOUT"); !timeout.empty()) {
    int ms = 0;
    if (absl::SimpleAtoi(absl::string_view(timeout.data(), timeout.size()), &ms) && ms > 0)
      options.timeout = std::chrono::milliseconds(ms);
  }
  if (std::string ca = otlp_env(upper, "CERTIFICATE"); !ca.empty()) {
    ChannelTlsConfig tls;
    tls.root_certificates.path = ca;
    if (auto credentials = ChannelCredentials::create(std::move(tls)); credentials.ok()) {
      options.credentials = *std::move(credentials);
    }
  }
  for (auto& [key, value] : parse_otlp_key_values(env("OTEL_RESOURCE_ATTRIBUTES"))) {
    set_or_add(options.resource, std::move(key), std::move(value));
  }
  if (std::string name = env("OTEL_SERVICE_NAME"); !name.empty()) {
    set_or_add(options.resource, "service.name", std::move(name));
  }
  return options;
}

namespace otlp_detail {

std::vector<std::pair<std::string, std::string>> full_resource(
    std::vector<std::pair<std::string, std::string>> resource) {
  auto add = [&](std::string_view key, std::string_view value) {
    for (const auto& [k, v] : resource) {
      if (k == key) return;
    }
    resource.emplace_back(key, value);
  };
  add("service.name", "unknown_service");
  add("telemetry.sdk.name", "ferry");
  add("telemetry.sdk.language", "cpp");
  add("telemetry.sdk.version", "0.1");
  return resource;
}

}  // namespace otlp_detail

struct OtlpClient::Flights {
  explicit Flights(std::size_t limit) : max(limit) {}
  const std::size_t max;
  std::atomic<std::size_t> count{0};
};

absl::StatusOr<std::unique_ptr<OtlpClient>> OtlpClient::create(OtlpExporterOptions options,
                                                               std::size_t max_in_flight) {
  absl::StatusOr<std::pair<std::string, bool>> target = endpoint_target(options.endpoint);
  if (!target.ok()) return target.status();
  if (target->second && options.credentials == nullptr) {
    absl::StatusOr<std::shared_ptr<ChannelCredentials>> system = ChannelCredentials::create({});
    if (!system.ok()) return system.status();
    options.credentials = *std::move(system);
  }
  if (max_in_flight == 0) max_in_flight = 1;
  return std::unique_ptr<OtlpClient>(
      new OtlpClient(std::move(options), std::move(target->first), max_in_flight));
}

OtlpClient::OtlpClient(OtlpExporterOptions options, std::string target, std::size_t max_in_flight)
    : options_(std::move(options)), flights_(std::make_shared<Flights>(max_in_flight)) {
  ChannelOptions channel;
  channel.credentials = options_.credentials;
  channel.max_receive_message_size = options_.max_response_bytes;
  channel.user_agent = "ferry-otlp/0.1";
  // A Collector that is down is tried again each export, not held back by minutes of back-off.
  channel.backoff.max = std::chrono::seconds(5);
  channel_ = std::make_unique<Channel>(std::move(target), std::move(channel));
}

OtlpClient::~OtlpClient() = default;  // the Channel fails its calls and joins its thread

std::size_t OtlpClient::in_flight() const {
  return flights_->count.load(std::memory_order_acquire);
}

bool OtlpClient::start_export(std::string_view method,
                              std::shared_ptr<google::protobuf::MessageLite> request,
                              std::shared_ptr<google::protobuf::MessageLite> response,
                              std::function<void(const absl::Status&)> done) {
  std::size_t n = flights_->count.load(std::memory_order_relaxed);
  do {
    if (n >= flights_->max) return false;
  } while (!flights_->count.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
  auto context = std::make_shared<ClientContext>();
  context->set_timeout(options_.timeout);
  for (const auto& [key, value] : options_.headers) context->add_metadata(key, value);
  asio::co_spawn(
      channel_->executor(),
      [channel = channel_.get(), method = std::string(method), context = std::move(context),
       request = std::move(request), response = std::move(response), done = std::move(done),
       flights = flights_]() -> asio::awaitable<void> {
        const absl::Status status = co_await channel->call(method, *context, *request, *response);
        flights->count.fetch_sub(1, std::memory_order_acq_rel);
        if (done) done(status);
      },
      asio::detached);
  return true;
}

}  // namespace ferry

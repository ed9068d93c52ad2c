// Implementation of ferry/csds.h: each request answered from all_client_status(), the process's
// shared xDS clients' caches (src/xds/xds_client.cc), as envoy.service.status.v3 messages.
#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "envoy/config/core/v3/base.pb.h"
#include "envoy/service/status/v3/csds.pb.h"
#include "ferry/csds.h"
#include "ferry/server_stream.h"
#include "ferry/xds.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "xds/xds_client.h"

namespace ferry::xds {
namespace {

namespace status_v3 = ::envoy::service::status::v3;
namespace admin_v3 = ::envoy::admin::v3;

void set_timestamp(google::protobuf::Timestamp& out, std::chrono::system_clock::time_point t) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  out.set_seconds(ns / 1'000'000'000);
  out.set_nanos(static_cast<std::int32_t>(ns % 1'000'000'000));
}

admin_v3::ClientResourceStatus csds_state(ResourceStatus::State state) {
  switch (state) {
    case ResourceStatus::State::kRequested:
      return admin_v3::REQUESTED;
    case ResourceStatus::State::kAcked:
      return admin_v3::ACKED;
    case ResourceStatus::State::kNacked:
      return admin_v3::NACKED;
    case ResourceStatus::State::kDoesNotExist:
      return admin_v3::DOES_NOT_EXIST;
  }
  return admin_v3::UNKNOWN;
}

// A protobuf field's tag and length prefix, at most: what an entry adds to its parent's size
// beyond its own bytes.
constexpr std::size_t kEntryOverhead = 6;

// The answer to one request, within max_bytes (ferry/csds.h says how): every status first, then
// the resources' contents in order while they fit.
absl::Status csds_answer(const status_v3::ClientStatusRequest& request, std::size_t max_bytes,
                         status_v3::ClientStatusResponse& response) {
  response.Clear();
  std::vector<ClientStatus> clients = all_client_status();
  std::size_t total = 0;
  for (ClientStatus& client : clients) {
    status_v3::ClientConfig& config = *response.add_config();
    *config.mutable_node() = detail::node_of(client.node);
    total += config.ByteSizeLong() + kEntryOverhead;
    for (ResourceStatus& r : client.resources) {
      status_v3::ClientConfig::GenericXdsConfig& entry = *config.add_generic_xds_configs();
      entry.set_type_url(r.type_url);
      entry.set_name(r.name);
      entry.set_version_info(r.version);
      entry.set_client_status(csds_state(r.state));
      if (r.last_updated != std::chrono::system_clock::time_point{})
        set_timestamp(*entry.mutable_last_updated(), r.last_updated);
      if (r.state == ResourceStatus::State::kNacked) {
        admin_v3::UpdateFailureState& failure = *entry.mutable_error_state();
        failure.set_details(r.error);
        failure.set_version_info(r.nacked_version);
        if (r.nacked_at != std::chrono::system_clock::time_point{})
          set_timestamp(*failure.mutable_last_update_attempt(), r.nacked_at);
      }
      total += entry.ByteSizeLong() + kEntryOverhead;
      if (total > max_bytes) {
        response.Clear();
        return absl::ResourceExhaustedError(absl::StrCat(
            "CSDS: the xDS clients' statuses exceed the response limit of ", max_bytes, " bytes"));
      }
    }
  }
  if (request.exclude_resource_contents()) return absl::OkStatus();
  for (int c = 0; c < response.config_size(); ++c) {
    status_v3::ClientConfig& config = *response.mutable_config(c);
    const std::vector<ResourceStatus>& resources = clients[c].resources;
    for (int i = 0; i < config.generic_xds_configs_size(); ++i) {
      const std::string& contents = resources[i].resource;
      // An Any's bytes, and the field's tag and length around them.
      if (contents.empty() || total + contents.size() + kEntryOverhead > max_bytes) continue;
      if (config.mutable_generic_xds_configs(i)->mutable_xds_config()->ParseFromString(contents)) {
        total += contents.size() + kEntryOverhead;
      } else {
        config.mutable_generic_xds_configs(i)->clear_xds_config();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

CsdsService::CsdsService(CsdsServiceOptions options)
    : Service("envoy.service.status.v3.ClientStatusDiscoveryService") {
  const std::size_t max_bytes = options.max_response_bytes;
  add_unary<status_v3::ClientStatusRequest, status_v3::ClientStatusResponse>(
      "FetchClientStatus",
      [max_bytes](ServerContext&, const status_v3::ClientStatusRequest& request,
                  status_v3::ClientStatusResponse& response) -> asio::awaitable<absl::Status> {
        co_return csds_answer(request, max_bytes, response);
      });
  add_bidi_streaming<status_v3::ClientStatusRequest, status_v3::ClientStatusResponse>(
      "StreamClientStatus",
      [max_bytes](
          ServerContext&,
          ServerReaderWriter<status_v3::ClientStatusRequest, status_v3::ClientStatusResponse>&
              stream) -> asio::awaitable<absl::Status> {
        status_v3::ClientStatusRequest request;
        status_v3::ClientStatusResponse response;
        while (co_await stream.read(request)) {
          if (absl::Status s = csds_answer(request, max_bytes, response); !s.ok()) co_return s;
          if (absl::Status s = co_await stream.write(response); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  set_descriptor_source([]() -> const google::protobuf::ServiceDescriptor* {
    return status_v3::ClientStatusRequest::descriptor()->file()->FindServiceByName(
        "ClientStatusDiscoveryService");
  });
}

}  // namespace ferry::xds

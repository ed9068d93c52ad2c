// ferry/csds.h: gRFC A40's Client Status Discovery Service,
// envoy.service.status.v3.ClientStatusDiscoveryService (library ferry::xds, above the core): a
// service a ferry server opts into so that tools (grpcdebug, grpcurl) can ask what the process's
// xDS clients hold — each resource's type, name, version, contents and ACKed / NACKed (with the
// error) / does-not-exist / requested state, per client with its bootstrap's node.
//
//   ferry::xds::CsdsService csds;
//   server.add_service(csds);          // FetchClientStatus and StreamClientStatus
//
// It shows configuration (routes, clusters, endpoint addresses, node metadata) to whoever can
// call it: register it only on a server (or a port) that admin tools alone can reach, as gRPC's
// own docs advise. Not built in the sanitizer trees (ferry::xds_proto is left out there).
#pragma once

#include <cstddef>

#include "ferry/service.h"

namespace ferry::xds {

struct CsdsServiceOptions {
  // The largest response the service sends, in bytes of the serialized ClientStatusResponse:
  // past it each further resource is listed without its contents (xds_config and the failed
  // configuration left out, as a request's exclude_resource_contents asks), and a response whose
  // statuses alone exceed it fails with RESOURCE_EXHAUSTED. Default: under gRPC's default
  // receive limit of 4 MiB, so a stock client can read every answer.
  std::size_t max_response_bytes = 4'000'000;
};

// envoy.service.status.v3.ClientStatusDiscoveryService over every shared xDS client alive in the
// process (ferry/xds.h's all_client_status): one ClientConfig per client, with its node and its
// resources as generic_xds_configs. FetchClientStatus answers once; StreamClientStatus answers
// each request on the stream. The request's node_matchers are ignored (a process answers for
// its own clients, as gRPC does); exclude_resource_contents is honoured. Each answer asks every
// client's thread for a copy of its cache, so it costs that cache's size in copies, on the call's
// I/O thread: an admin's tool, not a hot path. Thread-safe; must outlive the servers it is
// registered with.
class CsdsService final : public Service {
 public:
  explicit CsdsService(CsdsServiceOptions options = {});
};

}  // namespace ferry::xds

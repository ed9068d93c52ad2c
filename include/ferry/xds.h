// ferry/xds.h: the foundation of ferry's xDS client (library ferry::xds, above the core): the
// bootstrap that grpc-go and gRPC C++ read (gRFC A27), so the same file configures all three.
// docs/xds.md says what exists and what does not yet (no `xds:///` targets on Channel so far).
//
//   auto bootstrap = ferry::xds::load_bootstrap();   // GRPC_XDS_BOOTSTRAP or _CONFIG
//   if (!bootstrap.ok()) ...;                        // a clear error, never a crash
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::xds {

// The channel credentials of an xDS server: the first entry of its `channel_creds` whose type
// ferry supports (entries of other types, e.g. google_default, are skipped, as gRPC does).
enum class ChannelCredsType { kInsecure, kTls };

struct XdsServer {
  std::string server_uri;  // a gRPC target, e.g. "dns:///xds.example.com:443" or "host:port"
  ChannelCredsType creds = ChannelCredsType::kInsecure;
  // The `config` object of the chosen `tls` entry, as JSON text ("{}" when absent): gRFC A65's
  // certificate file paths; read when TLS to the control plane is wired up.
  std::string creds_config_json = "{}";
  std::vector<std::string> server_features;  // all of them, known or not, in order

  // gRFC A53: "ignore_resource_deletion" — a deleted LDS/CDS resource is kept, not removed.
  bool ignore_resource_deletion() const;
};

struct Locality {
  std::string region;
  std::string zone;
  std::string sub_zone;
  bool operator==(const Locality&) const = default;
};

// The node that identifies this process to the control plane (envoy.config.core.v3.Node).
struct Node {
  std::string id;
  std::string cluster;
  Locality locality;
  std::string metadata_json = "{}";  // the `metadata` object (a google.protobuf.Struct), as JSON
};

struct Bootstrap {
  std::vector<XdsServer> xds_servers;  // at least one; the first is used
  Node node;
  // Present in the file but not used yet (docs/xds.md): certificate_providers (gRFC A29),
  // authorities and the resource name templates (gRFC A47).
  bool has_certificate_providers = false;
  bool has_authorities = false;
};

// Parses a bootstrap document. Errors are INVALID_ARGUMENT naming the field, e.g.
// "xds bootstrap: xds_servers[0].channel_creds: no supported type (insecure, tls) among
// [google_default]"; unknown fields are ignored (as gRPC does), wrong types are errors.
absl::StatusOr<Bootstrap> parse_bootstrap(std::string_view json);

// The process's bootstrap: the file named by GRPC_XDS_BOOTSTRAP, else the JSON in
// GRPC_XDS_BOOTSTRAP_CONFIG (gRPC's precedence). FAILED_PRECONDITION when neither is set,
// NOT_FOUND when the file cannot be read, INVALID_ARGUMENT when it is not a bootstrap (or is
// larger than kMaxBootstrapBytes).
absl::StatusOr<Bootstrap> load_bootstrap();
inline constexpr std::size_t kMaxBootstrapBytes = 1 << 20;

}  // namespace ferry::xds

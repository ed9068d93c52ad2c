// ferry/xds.h: ferry's xDS client (library ferry::xds, above the core): the bootstrap that
// grpc-go and gRPC C++ read (gRFC A27), so the same file configures all three, and `xds:///`
// targets on ferry::Channel, resolved through an ADS stream to the bootstrap's control plane.
// docs/xds.md says what is supported and what is not yet.
//
//   ferry::xds::register_resolver();                 // once: Channel takes "xds:///name" targets
//   ferry::Channel channel("xds:///my-service");     // GRPC_XDS_BOOTSTRAP or _CONFIG
//
// The ADS client and the resolver need ferry::xds_proto, which the sanitizer build trees leave
// out: there ferry::xds holds the bootstrap parser only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/connectivity.h"
#include "ferry/resolver.h"

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

// How the xDS client behaves; the defaults are gRPC's.
struct XdsClientOptions {
  // gRFC A27's resource-does-not-exist timer: a resource asked for and in no response by then is
  // taken not to exist (a channel waiting for it fails its calls with UNAVAILABLE).
  std::chrono::milliseconds resource_does_not_exist_timeout = std::chrono::seconds(15);
  // Between attempts to reach the control plane; reset once a stream got a response.
  BackoffOptions backoff{};
  // gRFC A27's priority failover (a channel's priority policy, as gRPC's): a priority still
  // CONNECTING this long hands over to the next one (as one whose endpoints all failed does at
  // once); a lower priority a higher one took the calls back from keeps its connections this
  // long (gRPC's child retention), then closes them.
  std::chrono::milliseconds priority_failover_timeout = std::chrono::seconds(10);
  std::chrono::milliseconds priority_retention_timeout = std::chrono::minutes(15);
};

// A resolver for an "xds:///listener" target (ChannelOptions::resolver), through the shared xDS
// client of this bootstrap and options in the process (one ADS stream for every channel that
// uses them). The resolver routes each call of its channel (gRFC A28): the first route of the
// listener's virtual host that matches the call's path and metadata, then that route's cluster
// or one of its weighted clusters; each cluster's calls go to its highest priority that is READY
// (or still connecting within priority_failover_timeout), to a locality drawn by weight, and
// round robin over that locality's ready endpoints (gRFC A27). It tells the channel at once when
// routes or endpoints change (so give each channel a resolver of its own: it tells one channel).
// INVALID_ARGUMENT for a target that is not xds:///name (an authority, xds://a/name, is gRFC A47's
// federation: not supported).
absl::StatusOr<std::shared_ptr<Resolver>> make_resolver(std::string_view target,
                                                        const Bootstrap& bootstrap,
                                                        const XdsClientOptions& options = {});

// Registers the "xds" scheme (ferry/resolver.h's register_resolver_scheme): a Channel made with
// an xds:/// target afterwards reads the process's bootstrap (load_bootstrap()) and resolves
// through make_resolver; a bad or missing bootstrap fails that channel's calls with UNAVAILABLE
// saying why. Idempotent; from any thread.
void register_resolver();

// One resource in an xDS client's cache (gRFC A40's client status, for status pages and tests).
struct ResourceStatus {
  enum class State { kRequested, kAcked, kNacked, kDoesNotExist };
  std::string type_url;
  std::string name;
  std::string version;  // of the version in use (empty: none yet)
  State state = State::kRequested;
  std::string error;  // kNacked: why the newest version was refused (the cached one is kept)
  // The version in use as the control plane sent it: a serialized google.protobuf.Any of the
  // resource's type (empty: none yet), and when it came.
  std::string resource;
  std::chrono::system_clock::time_point last_updated{};
  // kNacked: the refused response's version_info and when it came.
  std::string nacked_version;
  std::chrono::system_clock::time_point nacked_at{};
};

// The cache of the shared client of this bootstrap and options, if one is alive; else empty.
std::vector<ResourceStatus> client_status(const Bootstrap& bootstrap,
                                          const XdsClientOptions& options = {});

// The cache of every shared client alive in the process, each with its bootstrap's node (what a
// CSDS service answers, ferry/csds.h).
struct ClientStatus {
  Node node;
  std::string server_uri;  // the control plane it talks to
  std::vector<ResourceStatus> resources;
};
std::vector<ClientStatus> all_client_status();

}  // namespace ferry::xds

// The xDS bootstrap (ferry/xds.h): grpc-go's and gRPC C++'s format read field by field, and
// every bad document — missing, not JSON, no servers, unknown or missing creds, a wrong type
// anywhere — refused with an error naming the field, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ferry/xds.h"

namespace ferry::xds_bootstrap_test {
namespace {

using xds::Bootstrap;
using xds::ChannelCredsType;
using xds::load_bootstrap;
using xds::parse_bootstrap;

// The bootstrap grpc-go's examples and Traffic Director's generator write.
constexpr const char* kFull = R"({
  "xds_servers": [{
    "server_uri": "dns:///xds.example.com:443",
    "channel_creds": [{"type": "google_default"}, {"type": "tls", "config": {"ca_certificate_file": "/etc/ca.pem"}}, {"type": "insecure"}],
    "server_features": ["xds_v3", "ignore_resource_deletion", "something_new"]
  }, {
    "server_uri": "localhost:18000",
    "channel_creds": [{"type": "insecure"}]
  }],
  "node": {
    "id": "projects/1/networks/default/nodes/abc",
    "cluster": "cluster-x",
    "locality": {"region": "r1", "zone": "z1", "sub_zone": "s\"1"},
    "metadata": {"TRAFFICDIRECTOR_NETWORK_NAME": "default", "n": 1.5, "list": [true, null]}
  },
  "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {}}},
  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s",
  "unknown_top_level": 42
})";

TEST(XdsBootstrap, ReadsGrpcFormat) {
  auto bootstrap = parse_bootstrap(kFull);
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  ASSERT_EQ(bootstrap->xds_servers.size(), 2u);
  const auto& first = bootstrap->xds_servers[0];
  EXPECT_EQ(first.server_uri, "dns:///xds.example.com:443");
  EXPECT_EQ(first.creds, ChannelCredsType::kTls);  // google_default skipped, tls first supported
  EXPECT_EQ(first.creds_config_json, R"({"ca_certificate_file":"/etc/ca.pem"})");
  EXPECT_EQ(first.server_features.size(), 3u);
  EXPECT_TRUE(first.ignore_resource_deletion());
  EXPECT_EQ(bootstrap->xds_servers[1].creds, ChannelCredsType::kInsecure);
  EXPECT_EQ(bootstrap->xds_servers[1].creds_config_json, "{}");
  EXPECT_FALSE(bootstrap->xds_servers[1].ignore_resource_deletion());
  EXPECT_EQ(bootstrap->node.id, "projects/1/networks/default/nodes/abc");
  EXPECT_EQ(bootstrap->node.cluster, "cluster-x");
  EXPECT_EQ(bootstrap->node.locality, (xds::Locality{"r1", "z1", "s\"1"}));
  EXPECT_EQ(bootstrap->node.metadata_json,
            R"({"TRAFFICDIRECTOR_NETWORK_NAME":"default","n":1.5,"list":[true,null]})");
  EXPECT_TRUE(bootstrap->has_certificate_providers);
  EXPECT_FALSE(bootstrap->has_authorities);
}

TEST(XdsBootstrap, MinimalHasEmptyNode) {
  auto bootstrap = parse_bootstrap(
      R"({"xds_servers":[{"server_uri":"a:1","channel_creds":[{"type":"insecure"}]}]})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  EXPECT_EQ(bootstrap->node.id, "");
  EXPECT_EQ(bootstrap->node.metadata_json, "{}");
}

struct BadCase {
  const char* json;
  const char* error_part;  // the error names this
};

TEST(XdsBootstrap, RefusesBadDocumentsNamingTheField) {
  const BadCase cases[] = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[]", "document: must be an object"},
      {"{}", "xds_servers: missing"},
      {R"({"xds_servers": {}})", "xds_servers: must be an array"},
      {R"({"xds_servers": []})", "xds_servers: empty"},
      {R"({"xds_servers": [1]})", "xds_servers[0]: must be an object"},
      {R"({"xds_servers": [{"channel_creds":[{"type":"insecure"}]}]})",
       "xds_servers[0].server_uri: missing"},
      {R"({"xds_servers": [{"server_uri": 5, "channel_creds":[]}]})",
       "xds_servers[0].server_uri: must be a string"},
      {R"({"xds_servers": [{"server_uri": "", "channel_creds":[{"type":"insecure"}]}]})",
       "xds_servers[0].server_uri: empty"},
      {R"({"xds_servers": [{"server_uri": "a:1"}]})", "xds_servers[0].channel_creds: missing"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": []}]})",
       "no supported type (insecure, tls) among []"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"google_default"},{"type":"alts"}]}]})",
       "no supported type (insecure, tls) among [google_default, alts]"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{}]}]})",
       "xds_servers[0].channel_creds[0].type: missing"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"tls","config":[]}]}]})",
       "channel_creds[0].config: must be an object"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}], "server_features": [1]}]})",
       "server_features[0]: must be a string"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}, {"server_uri": "b:1", "channel_creds": [{"type":"local"}]}]})",
       "xds_servers[1].channel_creds: no supported type"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "node": "n"})",
       "node: must be an object"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "node": {"id": 1}})",
       "node.id: must be a string"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "node": {"locality": {"zone": []}}})",
       "node.locality.zone: must be a string"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "node": {"metadata": 3}})",
       "node.metadata: must be an object"},
      {R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "certificate_providers": []})",
       "certificate_providers: must be an object"},
  };
  for (const BadCase& bad : cases) {
    auto bootstrap = parse_bootstrap(bad.json);
    ASSERT_FALSE(bootstrap.ok()) << bad.json;
    EXPECT_EQ(bootstrap.status().code(), absl::StatusCode::kInvalidArgument) << bad.json;
    EXPECT_NE(std::string(bootstrap.status().message()).find(bad.error_part), std::string::npos)
        << bad.json << " -> " << bootstrap.status();
  }
}

TEST(XdsBootstrap, RefusesHugeAndDeepDocuments) {
  std::string huge = R"({"xds_servers": [{"server_uri": ")";
  huge.append(xds::kMaxBootstrapBytes, 'a');
  huge += R"(", "channel_creds": [{"type":"insecure"}]}]})";
  auto bootstrap = parse_bootstrap(huge);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_NE(std::string(bootstrap.status().message()).find("larger than"), std::string::npos);

  std::string deep =
      R"({"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type":"insecure"}]}], "node": {"metadata": )";
  deep.append(100000, '[');
  EXPECT_FALSE(parse_bootstrap(deep).ok());  // depth-bounded: an error, not a stack overflow
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/ferry_xds_bootstrap_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(XdsBootstrap, LoadsFromTheEnvironmentFileFirst) {
  {
    ScopedEnv file("GRPC_XDS_BOOTSTRAP", nullptr);
    ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", nullptr);
    auto none = load_bootstrap();
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  }
  {
    ScopedEnv file("GRPC_XDS_BOOTSTRAP", nullptr);
    ScopedEnv config(
        "GRPC_XDS_BOOTSTRAP_CONFIG",
        R"({"xds_servers":[{"server_uri":"from-config:1","channel_creds":[{"type":"insecure"}]}]})");
    auto loaded = load_bootstrap();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->xds_servers[0].server_uri, "from-config:1");
  }
  const std::string path = write_temp(
      R"({"xds_servers":[{"server_uri":"from-file:1","channel_creds":[{"type":"insecure"}]}]})");
  {
    ScopedEnv file("GRPC_XDS_BOOTSTRAP", path.c_str());
    ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", "not even JSON");
    auto loaded = load_bootstrap();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->xds_servers[0].server_uri, "from-file:1");  // the file wins, as in gRPC
  }
  std::remove(path.c_str());
  {
    ScopedEnv file("GRPC_XDS_BOOTSTRAP", path.c_str());  // now missing
    auto missing = load_bootstrap();
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
    EXPECT_NE(std::string(missing.status().message()).find(path), std::string::npos);
  }
  const std::string malformed = write_temp(R"({"xds_servers": [}")");
  {
    ScopedEnv file("GRPC_XDS_BOOTSTRAP", malformed.c_str());
    auto bad = load_bootstrap();
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(bad.status().message()).find(malformed), std::string::npos);
  }
  std::remove(malformed.c_str());
}

}  // namespace
}  // namespace ferry::xds_bootstrap_test

// libFuzzer target: the xDS bootstrap parser (ferry/xds.h, src/xds/bootstrap.cc) fed arbitrary
// text. A refusal is INVALID_ARGUMENT starting "xds bootstrap:"; an accepted bootstrap has at
// least one server, each with a non-empty server_uri, and its node metadata and creds config
// (kept as JSON text) are objects that the JSON reader reads back; the same text parses the
// same way twice.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client/json.h"
#include "ferry/xds.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto bootstrap = ferry::xds::parse_bootstrap(text);
  auto again = ferry::xds::parse_bootstrap(text);
  FUZZ_CHECK(bootstrap.ok() == again.ok());
  if (!bootstrap.ok()) {
    FUZZ_CHECK(bootstrap.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(bootstrap.status().message().substr(0, 14) == "xds bootstrap:");
    FUZZ_CHECK(bootstrap.status() == again.status());
    return 0;
  }
  FUZZ_CHECK(!bootstrap->xds_servers.empty());
  FUZZ_CHECK(bootstrap->xds_servers.size() == again->xds_servers.size());
  for (const auto& server : bootstrap->xds_servers) {
    FUZZ_CHECK(!server.server_uri.empty());
    auto config = ferry::detail::parse_json(server.creds_config_json);
    FUZZ_CHECK(config.ok() && config->kind == ferry::detail::JsonValue::Kind::kObject);
  }
  auto metadata = ferry::detail::parse_json(bootstrap->node.metadata_json);
  FUZZ_CHECK(metadata.ok() && metadata->kind == ferry::detail::JsonValue::Kind::kObject);
  FUZZ_CHECK(bootstrap->node.metadata_json == again->node.metadata_json);
  return 0;
}

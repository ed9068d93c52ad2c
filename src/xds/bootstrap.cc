// The xDS bootstrap (ferry/xds.h): gRFC A27's JSON, read with the client layer's strict JSON
// reader (src/client/json.h). Every check names the field it failed on; nothing here can crash
// on any input (the reader is depth-bounded, and every member's kind is checked before use).
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/json.h"
#include "ferry/xds.h"

namespace ferry::xds {
namespace {

using detail::JsonValue;
using Kind = JsonValue::Kind;

absl::Status error(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError("xds bootstrap: " + std::string(where) + ": " +
                                    std::string(what));
}

absl::Status expect(const JsonValue& value, Kind kind, std::string_view where) {
  if (value.kind == kind) return absl::OkStatus();
  return error(where, std::string("must be ") + detail::json_kind_name(kind) + ", not " +
                          detail::json_kind_name(value.kind));
}

// An optional string member of object `value` into *out.
absl::Status optional_string(const JsonValue& value, std::string_view key, std::string_view where,
                             std::string* out) {
  const JsonValue* member = value.find(key);
  if (member == nullptr) return absl::OkStatus();
  const std::string path = std::string(where) + "." + std::string(key);
  if (auto status = expect(*member, Kind::kString, path); !status.ok()) return status;
  *out = member->string;
  return absl::OkStatus();
}

void write_string(std::string_view text, std::string& out) {
  out += '"';
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// The value as JSON text again (for the node's metadata and a creds config, kept as text).
void write_json(const JsonValue& value, std::string& out) {
  switch (value.kind) {
    case Kind::kNull:
      out += "null";
      return;
    case Kind::kBool:
      out += value.boolean ? "true" : "false";
      return;
    case Kind::kNumber: {
      char digits[32];
      auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value.number);
      out.append(digits, ec == std::errc() ? end : digits);
      return;
    }
    case Kind::kString:
      write_string(value.string, out);
      return;
    case Kind::kArray:
      out += '[';
      for (std::size_t i = 0; i < value.array.size(); ++i) {
        if (i != 0) out += ',';
        write_json(value.array[i], out);
      }
      out += ']';
      return;
    case Kind::kObject:
      out += '{';
      for (std::size_t i = 0; i < value.object.size(); ++i) {
        if (i != 0) out += ',';
        write_string(value.object[i].first, out);
        out += ':';
        write_json(value.object[i].second, out);
      }
      out += '}';
      return;
  }
}

absl::Status parse_server(const JsonValue& value, const std::string& where, XdsServer* server) {
  if (auto status = expect(value, Kind::kObject, where); !status.ok()) return status;
  const JsonValue* uri = value.find("server_uri");
  if (uri == nullptr) return error(where + ".server_uri", "missing");
  if (auto status = expect(*uri, Kind::kString, where + ".server_uri"); !status.ok()) return status;
  if (uri->string.empty()) return error(where + ".server_uri", "empty");
  server->server_uri = uri->string;

  // gRPC requires channel_creds and takes the first entry whose type it supports.
  const JsonValue* creds = value.find("channel_creds");
  const std::string creds_where = where + ".channel_creds";
  if (creds == nullptr) return error(creds_where, "missing");
  if (auto status = expect(*creds, Kind::kArray, creds_where); !status.ok()) return status;
  bool chosen = false;
  std::string seen;
  for (std::size_t i = 0; i < creds->array.size(); ++i) {
    const JsonValue& entry = creds->array[i];
    const std::string entry_where = creds_where + "[" + std::to_string(i) + "]";
    if (auto status = expect(entry, Kind::kObject, entry_where); !status.ok()) return status;
    const JsonValue* type = entry.find("type");
    if (type == nullptr) return error(entry_where + ".type", "missing");
    if (auto status = expect(*type, Kind::kString, entry_where + ".type"); !status.ok()) {
      return status;
    }
    const JsonValue* config = entry.find("config");
    if (config != nullptr) {
      if (auto status = expect(*config, Kind::kObject, entry_where + ".config"); !status.ok()) {
        return status;
      }
    }
    if (chosen) continue;  // later entries are checked for shape only
    if (type->string == "insecure" || type->string == "tls") {
      server->creds = type->string == "tls" ? ChannelCredsType::kTls : ChannelCredsType::kInsecure;
      server->creds_config_json.clear();
      if (config != nullptr) {
        write_json(*config, server->creds_config_json);
      } else {
        server->creds_config_json = "{}";
      }
      chosen = true;
    } else {
      if (!seen.empty()) seen += ", ";
      seen += type->string;
    }
  }
  if (!chosen) {
    return error(creds_where, "no supported type (insecure, tls) among [" + seen + "]");
  }

  if (const JsonValue* features = value.find("server_features"); features != nullptr) {
    const std::string features_where = where + ".server_features";
    if (auto status = expect(*features, Kind::kArray, features_where); !status.ok()) return status;
    for (std::size_t i = 0; i < features->array.size(); ++i) {
      const std::string feature_where = features_where + "[" + std::to_string(i) + "]";
      if (auto status = expect(features->array[i], Kind::kString, feature_where); !status.ok()) {
        return status;
      }
      server->server_features.push_back(features->array[i].string);
    }
  }
  return absl::OkStatus();
}

absl::Status parse_node(const JsonValue& value, Node* node) {
  if (auto status = expect(value, Kind::kObject, "node"); !status.ok()) return status;
  for (auto [key, out] : {std::pair<const char*, std::string*>{"id", &node->id},
                          std::pair<const char*, std::string*>{"cluster", &node->cluster}}) {
    if (auto status = optional_string(value, key, "node", out); !status.ok()) return status;
  }
  if (const JsonValue* locality = value.find("locality"); locality != nullptr) {
    if (auto status = expect(*locality, Kind::kObject, "node.locality"); !status.ok()) {
      return status;
    }
    for (auto [key, out] :
         {std::pair<const char*, std::string*>{"region", &node->locality.region},
          std::pair<const char*, std::string*>{"zone", &node->locality.zone},
          std::pair<const char*, std::string*>{"sub_zone", &node->locality.sub_zone}}) {
      if (auto status = optional_string(*locality, key, "node.locality", out); !status.ok()) {
        return status;
      }
    }
  }
  if (const JsonValue* metadata = value.find("metadata"); metadata != nullptr) {
    if (auto status = expect(*metadata, Kind::kObject, "node.metadata"); !status.ok()) {
      return status;
    }
    node->metadata_json.clear();
    write_json(*metadata, node->metadata_json);
  }
  return absl::OkStatus();
}

}  // namespace

bool XdsServer::ignore_resource_deletion() const {
  for (const std::string& feature : server_features) {
    if (feature == "ignore_resource_deletion") return true;
  }
  return false;
}

absl::StatusOr<Bootstrap> parse_bootstrap(std::string_view json) {
  if (json.size() > kMaxBootstrapBytes) {
    return error("document", "larger than " + std::to_string(kMaxBootstrapBytes) + " bytes");
  }
  auto document = detail::parse_json(json);
  if (!document.ok()) {
    return absl::InvalidArgumentError("xds bootstrap: not JSON: " +
                                      std::string(document.status().message()));
  }
  if (auto status = expect(*document, Kind::kObject, "document"); !status.ok()) return status;

  Bootstrap bootstrap;
  const JsonValue* servers = document->find("xds_servers");
  if (servers == nullptr) return error("xds_servers", "missing");
  if (auto status = expect(*servers, Kind::kArray, "xds_servers"); !status.ok()) return status;
  if (servers->array.empty()) return error("xds_servers", "empty: at least one server is needed");
  for (std::size_t i = 0; i < servers->array.size(); ++i) {
    XdsServer server;
    if (auto status =
            parse_server(servers->array[i], "xds_servers[" + std::to_string(i) + "]", &server);
        !status.ok()) {
      return status;
    }
    bootstrap.xds_servers.push_back(std::move(server));
  }
  if (const JsonValue* node = document->find("node"); node != nullptr) {
    if (auto status = parse_node(*node, &bootstrap.node); !status.ok()) return status;
  }
  if (const JsonValue* providers = document->find("certificate_providers"); providers != nullptr) {
    if (auto status = expect(*providers, Kind::kObject, "certificate_providers"); !status.ok()) {
      return status;
    }
    bootstrap.has_certificate_providers = true;
  }
  if (const JsonValue* authorities = document->find("authorities"); authorities != nullptr) {
    if (auto status = expect(*authorities, Kind::kObject, "authorities"); !status.ok()) {
      return status;
    }
    bootstrap.has_authorities = true;
  }
  return bootstrap;
}

absl::StatusOr<Bootstrap> load_bootstrap() {
  if (const char* path = std::getenv("GRPC_XDS_BOOTSTRAP"); path != nullptr && *path != '\0') {
    std::FILE* file = std::fopen(path, "rb");
    if (file == nullptr) {
      return absl::NotFoundError(std::string("xds bootstrap: GRPC_XDS_BOOTSTRAP=") + path + ": " +
                                 std::strerror(errno));
    }
    std::string text;
    char chunk[8192];
    std::size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) {
      text.append(chunk, got);
      if (text.size() > kMaxBootstrapBytes) break;  // bounded: parse_bootstrap refuses it
    }
    const bool failed = std::ferror(file) != 0;
    std::fclose(file);
    if (failed) {
      return absl::NotFoundError(std::string("xds bootstrap: GRPC_XDS_BOOTSTRAP=") + path +
                                 ": read error");
    }
    auto bootstrap = parse_bootstrap(text);
    if (!bootstrap.ok()) {
      return absl::InvalidArgumentError(std::string(bootstrap.status().message()) + " (in " + path +
                                        ")");
    }
    return bootstrap;
  }
  if (const char* config = std::getenv("GRPC_XDS_BOOTSTRAP_CONFIG");
      config != nullptr && *config != '\0') {
    return parse_bootstrap(config);
  }
  return absl::FailedPreconditionError(
      "xds bootstrap: neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set");
}

}  // namespace ferry::xds

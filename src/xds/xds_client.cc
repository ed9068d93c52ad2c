// Implementation of src/xds/xds_client.h. Everything but the public entry points runs on the
// client's thread (io_), so the cache and the subscriptions need no lock; the watches' map is
// locked because unwatch, from a channel's thread, must stop its callbacks before it returns.
#include "xds/xds_client.h"

#include <algorithm>
#include <future>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "common/strings.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ferry/client_context.h"
#include "google/protobuf/util/json_util.h"

namespace ferry::xds::detail {

using envoy::service::discovery::v3::DiscoveryRequest;
using envoy::service::discovery::v3::DiscoveryResponse;

class ResponseView {
 public:
  explicit ResponseView(const DiscoveryResponse& r) : response(r) {}
  const DiscoveryResponse& response;
};

namespace {

constexpr std::string_view kAdsMethod =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

struct AdsCall {
  ClientContext context;
  ClientStream stream;
};

std::string key_of(const Bootstrap& b, const XdsClientOptions& o) {
  const XdsServer& s = b.xds_servers.front();
  return absl::StrCat(s.server_uri, "\n", static_cast<int>(s.creds), "\n", s.creds_config_json,
                      "\n", b.node.id, "\n", b.node.cluster, "\n", b.node.locality.region, "\n",
                      b.node.locality.zone, "\n", b.node.locality.sub_zone, "\n",
                      b.node.metadata_json, "\n", o.resource_does_not_exist_timeout.count(), "\n",
                      o.backoff.initial.count(), "\n", o.backoff.max.count(), "\n",
                      o.backoff.multiplier, "\n", o.backoff.jitter);
}

std::mutex shared_mutex;
std::map<std::string, std::weak_ptr<XdsClient>>& shared_clients() {
  static auto* clients = new std::map<std::string, std::weak_ptr<XdsClient>>;
  return *clients;
}

// The channel to the control plane: its target, in cleartext or TLS as the bootstrap says (the
// tls entry's config: gRFC A65's ca_certificate_file, certificate_file, private_key_file).
ChannelOptions control_plane_options(const XdsServer& server) {
  ChannelOptions options;
  options.max_receive_message_size = kMaxResponseBytes;
  if (server.creds == ChannelCredsType::kTls) {
    ChannelTlsConfig tls;
    google::protobuf::Struct config;
    if (google::protobuf::util::JsonStringToMessage(server.creds_config_json, &config).ok()) {
      auto file = [&config](const char* key) -> std::string {
        auto it = config.fields().find(key);
        return it == config.fields().end() ? std::string() : it->second.string_value();
      };
      if (!file("ca_certificate_file").empty())
        tls.root_certificates = Pem::file(file("ca_certificate_file"));
      if (!file("certificate_file").empty())
        tls.certificate_chain = Pem::file(file("certificate_file"));
      if (!file("private_key_file").empty()) tls.private_key = Pem::file(file("private_key_file"));
    }
    // A credential that cannot be made leaves the channel without one: its calls then fail the
    // TLS handshake rather than speak cleartext, so an unusable one is a TLS config that trusts
    // nothing.
    absl::StatusOr<std::shared_ptr<ChannelCredentials>> creds =
        ChannelCredentials::create(std::move(tls));
    if (!creds.ok()) creds = ChannelCredentials::create({.root_certificates = Pem::content("-")});
    if (creds.ok()) options.credentials = *creds;
  }
  return options;
}

}  // namespace

envoy::config::core::v3::Node node_of(const Node& node) {
  envoy::config::core::v3::Node out;
  out.set_id(node.id);
  out.set_cluster(node.cluster);
  out.mutable_locality()->set_region(node.locality.region);
  out.mutable_locality()->set_zone(node.locality.zone);
  out.mutable_locality()->set_sub_zone(node.locality.sub_zone);
  (void)google::protobuf::util::JsonStringToMessage(node.metadata_json, out.mutable_metadata());
  out.set_user_agent_name("ferry");
  out.add_client_features("xds.config.resource-in-sotw");
  return out;
}

namespace {

// A resource as the control plane sent it, for CSDS: the Any itself, or the one inside an
// envoy.service.discovery.v3.Resource wrapper (what decode_resource read).
std::string resource_as_sent(const google::protobuf::Any& any) {
  envoy::service::discovery::v3::Resource wrapper;
  if (any.type_url() == "type.googleapis.com/envoy.service.discovery.v3.Resource" &&
      any.UnpackTo(&wrapper) && wrapper.has_resource()) {
    return wrapper.resource().SerializeAsString();
  }
  return any.SerializeAsString();
}

}  // namespace

std::vector<std::shared_ptr<XdsClient>> XdsClient::all_shared() {
  std::vector<std::shared_ptr<XdsClient>> out;
  std::lock_guard lock(shared_mutex);
  for (const auto& [key, weak] : shared_clients()) {
    if (auto client = weak.lock()) out.push_back(std::move(client));
  }
  return out;
}

std::shared_ptr<XdsClient> XdsClient::shared(const Bootstrap& bootstrap,
                                             const XdsClientOptions& options) {
  const std::string key = key_of(bootstrap, options);
  std::lock_guard lock(shared_mutex);
  auto& clients = shared_clients();
  if (auto existing = clients[key].lock()) return existing;
  auto client = std::make_shared<XdsClient>(bootstrap, options);
  client->start();
  clients[key] = client;
  // Drop the entries of clients that are gone, so that the map stays as small as the live set.
  std::erase_if(clients, [](const auto& entry) { return entry.second.expired(); });
  return client;
}

XdsClient::XdsClient(Bootstrap bootstrap, XdsClientOptions options)
    : bootstrap_(std::move(bootstrap)), options_(options), backoff_timer_(io_) {
  const XdsServer& server = bootstrap_.xds_servers.front();
  channel_ = std::make_unique<Channel>(server.server_uri, control_plane_options(server));
}

void XdsClient::start() {
  work_.emplace(io_.get_executor());
  asio::co_spawn(io_, run(), asio::detached);
  thread_ = std::thread([this] { io_.run(); });
}

XdsClient::~XdsClient() {
  // The last reference may go on the client's own thread (a watch callback's): it then cannot
  // join itself, and its loop ends after this returns, with nothing of ours left to touch.
  asio::post(io_, [this] {
    stopping_ = true;
    work_.reset();
    if (stream_ != nullptr) stream_->cancel();
    backoff_timer_.cancel();
    for (TypeState& t : types_) {
      for (auto& [name, r] : t.resources) {
        if (r.timer != nullptr) r.timer->cancel();
      }
    }
  });
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
}

// The client's coroutines and handlers hold no reference to it: its users do, and its destructor
// stops them all and joins the thread before a member goes (so `this` outlives every one).
asio::awaitable<void> XdsClient::run() {
  ferry::detail::Backoff backoff(options_.backoff);
  while (!stopping_) {
    auto call = std::make_shared<AdsCall>();
    call->context.set_wait_for_ready(true);  // the stream waits for the control plane
    call->stream = co_await channel_->open(kAdsMethod, call->context);
    if (stopping_) break;
    std::shared_ptr<ClientStream> stream(call, &call->stream);
    stream_ = stream;
    sent_node_ = false;
    // A new stream: every type with subscriptions asks again, with the version it has (A57),
    // and the timers of what is still missing start over.
    for (TypeState& t : types_) {
      t.nonce.clear();
      t.nack_error.clear();
      t.dirty = !t.resources.empty();
    }
    flush();
    bool responded = false;
    DiscoveryResponse response;
    while (co_await stream->read(response)) {
      if (!responded) backoff.reset();
      responded = true;
      handle_response(ResponseView(response));
      response.Clear();
      if (stopping_) break;
    }
    absl::Status status = co_await stream->finish();
    stream_.reset();
    for (TypeState& t : types_) {
      for (auto& [name, r] : t.resources) {
        if (r.timer != nullptr) r.timer->cancel();
        r.timer.reset();
      }
    }
    if (stopping_) break;
    stream_error_ = absl::UnavailableError(
        absl::StrCat("xDS: the ADS stream to ", bootstrap_.xds_servers.front().server_uri,
                     " ended: ", status.ok() ? "the server closed it" : status.ToString()));
    update();  // A57: watches with nothing cached learn why
    if (stopping_) break;
    // After a stream that got responses the back-off starts over, but is still waited: a
    // control plane that answers once and hangs up each time must not make this loop spin.
    if (responded) backoff.reset();
    backoff_timer_.expires_after(backoff.next());
    asio::error_code ec;
    co_await backoff_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void XdsClient::flush() {
  if (writing_ || stream_ == nullptr) return;
  if (std::none_of(types_.begin(), types_.end(), [](const TypeState& t) { return t.dirty; })) {
    return;
  }
  writing_ = true;
  asio::co_spawn(io_, write_requests(stream_), asio::detached);
}

asio::awaitable<void> XdsClient::write_requests(std::shared_ptr<ClientStream> stream) {
  while (stream_ == stream && !stopping_) {
    auto due =
        std::find_if(types_.begin(), types_.end(), [](const TypeState& t) { return t.dirty; });
    if (due == types_.end()) break;
    const auto type = static_cast<ResourceType>(due - types_.begin());
    TypeState& t = *due;
    t.dirty = false;
    DiscoveryRequest request;
    if (!sent_node_) {
      *request.mutable_node() = node_of(bootstrap_.node);
      sent_node_ = true;
    }
    request.set_type_url(std::string(type_url(type)));
    request.set_version_info(t.version);
    request.set_response_nonce(t.nonce);
    for (auto& [name, r] : t.resources) request.add_resource_names(name);
    if (!t.nack_error.empty()) {
      request.mutable_error_detail()->set_code(
          static_cast<int>(absl::StatusCode::kInvalidArgument));
      request.mutable_error_detail()->set_message(std::exchange(t.nack_error, {}));
    }
    // The timers of the resources this request asks for and the cache lacks start now.
    for (auto& [name, r] : t.resources) {
      if (!r.value.has_value() && !r.does_not_exist && r.timer == nullptr)
        start_timer(type, name, r);
    }
    absl::Status written = co_await stream->write(request);
    if (!written.ok()) break;  // the stream is over: the reader sees it too
  }
  writing_ = false;
  if (stream_ != nullptr && stream_ != stream) flush();  // a new stream came meanwhile
}

void XdsClient::start_timer(ResourceType type, const std::string& name, CachedResource& resource) {
  resource.timer = std::make_unique<asio::steady_timer>(io_);
  resource.timer->expires_after(options_.resource_does_not_exist_timeout);
  resource.timer->async_wait(
      [this, type, name, timer = resource.timer.get()](const asio::error_code& ec) {
        if (ec || stopping_) return;
        auto& resources = types_[static_cast<int>(type)].resources;
        auto it = resources.find(name);
        if (it == resources.end() || it->second.timer.get() != timer) return;
        it->second.timer.reset();
        if (it->second.value.has_value()) return;
        it->second.does_not_exist = true;
        update();
      });
}

void XdsClient::handle_response(const ResponseView& view) {
  const DiscoveryResponse& response = view.response;
  const std::optional<ResourceType> type = type_of_url(response.type_url());
  // A type never asked for: ignored, not NACKed (a NACK would be a request for that type,
  // which a control plane may take as a wildcard subscription).
  if (!type.has_value()) return;
  TypeState& t = types_[static_cast<int>(*type)];
  t.nonce = response.nonce();
  t.dirty = true;  // an ACK or a NACK
  std::vector<std::string> errors;
  if (response.resources_size() > kMaxResourcesPerResponse) {
    errors.push_back(absl::StrCat(response.resources_size(), " resources in one response, over ",
                                  kMaxResourcesPerResponse));
  } else {
    std::unordered_set<std::string_view> seen;
    for (int i = 0; i < response.resources_size(); ++i) {
      DecodedResource decoded = decode_resource(*type, response.resources(i));
      if (decoded.name.empty()) {
        errors.push_back(
            absl::StrCat("resources[", i,
                         "]: ", decoded.value.ok() ? "no name" : decoded.value.status().message()));
        continue;
      }
      auto it = t.resources.find(decoded.name);
      const std::string_view name =
          it != t.resources.end() ? std::string_view(it->first) : std::string_view();
      if (!name.empty() && !seen.insert(name).second) {
        errors.push_back(absl::StrCat("resource '", decoded.name, "' twice in one response"));
        continue;
      }
      if (!decoded.value.ok()) {
        errors.push_back(absl::StrCat("resource '", decoded.name.substr(0, 200),
                                      "': ", decoded.value.status().message()));
        if (it != t.resources.end()) {
          it->second.error = std::string(decoded.value.status().message());
          it->second.nacked_version = response.version_info();
          it->second.nacked_at = std::chrono::system_clock::now();
        }
        continue;  // A46: the cached version stays in use
      }
      if (it == t.resources.end()) continue;  // not subscribed (any more): not kept
      CachedResource& r = it->second;
      r.value = *std::move(decoded.value);
      r.version = response.version_info();
      r.raw = resource_as_sent(response.resources(i));
      r.updated = std::chrono::system_clock::now();
      r.error.clear();
      r.does_not_exist = false;
      if (r.timer != nullptr) {
        r.timer->cancel();
        r.timer.reset();
      }
    }
    // State of the world: a subscribed listener or cluster missing from the response is gone
    // (unless the bootstrap says ignore_resource_deletion, gRFC A53). RDS and EDS responses
    // carry only what changed, so nothing is deleted by absence there.
    const bool full_state = *type == ResourceType::kListener || *type == ResourceType::kCluster;
    if (full_state && !bootstrap_.xds_servers.front().ignore_resource_deletion()) {
      for (auto& [name, r] : t.resources) {
        if (seen.count(name) != 0) continue;
        if (r.value.has_value() || !r.version.empty()) {
          r.value.reset();
          r.version.clear();
          r.raw.clear();
          r.does_not_exist = true;
        }
      }
    }
  }
  if (errors.empty()) {
    t.version = response.version_info();
  } else {
    std::string message = absl::StrJoin(errors, "; ");
    if (message.size() > kMaxNackMessageBytes) message.resize(kMaxNackMessageBytes);
    t.nack_error = std::move(message);
  }
  update();
}

std::optional<WatchResult> XdsClient::follow(
    const std::string& listener, std::array<std::vector<std::string>, kResourceTypes>& want) {
  auto missing = [this](const CachedResource& r, std::string_view what,
                        const std::string& name) -> std::optional<WatchResult> {
    if (r.does_not_exist) {
      return absl::UnavailableError(
          absl::StrCat("xDS ", ::ferry::detail::to_absl(what), " '", name, "' does not exist"));
    }
    if (!r.error.empty()) {
      return absl::UnavailableError(absl::StrCat("xDS ", ::ferry::detail::to_absl(what), " '", name,
                                                 "' was NACKed: ", r.error));
    }
    if (!stream_error_.ok()) return stream_error_;
    return std::nullopt;  // still waiting for it
  };
  auto lookup = [this, &want](ResourceType type, const std::string& name) -> CachedResource& {
    want[static_cast<int>(type)].push_back(name);
    return types_[static_cast<int>(type)].resources[name];
  };
  CachedResource& l = lookup(ResourceType::kListener, listener);
  if (!l.value.has_value()) return missing(l, "listener", listener);
  const auto& lr = std::get<ListenerResource>(*l.value);
  const RouteConfig* routes = nullptr;
  if (lr.inline_routes.has_value()) {
    routes = &*lr.inline_routes;
  } else {
    CachedResource& r = lookup(ResourceType::kRouteConfig, lr.rds_name);
    if (!r.value.has_value()) return missing(r, "route configuration", lr.rds_name);
    routes = &std::get<RouteConfig>(*r.value);
  }
  const VirtualHost* host = find_virtual_host(*routes, listener);
  if (host == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("xDS: no virtual host for '", listener, "' in its route configuration"));
  }
  // gRFC A28: every cluster a route names is followed (its calls fail while it has no
  // endpoints); the configuration waits for each to be known, found absent or NACKed.
  XdsConfig config;
  config.virtual_host = *host;
  config.max_stream_duration = lr.max_stream_duration;
  std::set<std::string_view> clusters;
  for (const Route& route : host->routes) {
    if (!route.cluster.empty()) clusters.insert(route.cluster);
    for (const auto& [name, weight] : route.weighted_clusters) clusters.insert(name);
  }
  bool waiting = false;
  for (std::string_view name_view : clusters) {
    const std::string name(name_view);
    CachedResource& c = lookup(ResourceType::kCluster, name);
    std::optional<WatchResult> absent;  // why the cluster has no endpoints, when known
    std::optional<EndpointsResource> endpoints;
    if (!c.value.has_value()) {
      absent = missing(c, "cluster", name);
    } else {
      const std::string& eds_name = std::get<ClusterResource>(*c.value).eds_service_name;
      config.cluster_policies.emplace_back(name, std::get<ClusterResource>(*c.value).policy);
      CachedResource& e = lookup(ResourceType::kEndpoints, eds_name);
      if (!e.value.has_value()) {
        absent = missing(e, "endpoints", eds_name);
      } else {
        endpoints = std::get<EndpointsResource>(*e.value);
      }
    }
    if (endpoints.has_value()) {
      if (addresses_to_use(*endpoints).empty()) {
        config.clusters.emplace_back(
            name, absl::UnavailableError(
                      absl::StrCat("xDS: cluster '", name, "' has no healthy endpoint")));
      } else {
        config.clusters.emplace_back(name, *std::move(endpoints));
      }
    } else if (absent.has_value()) {
      config.clusters.emplace_back(name, absent->status());
    } else {
      waiting = true;  // still awaited (lookup subscribed to it all the same)
    }
  }
  if (waiting) return std::nullopt;
  return config;
}

void XdsClient::update() {
  std::array<std::vector<std::string>, kResourceTypes> want;
  {
    std::lock_guard lock(watches_mutex_);
    for (auto& [id, watch] : watches_) {
      std::optional<WatchResult> result = follow(watch.listener, want);
      if (!result.has_value()) continue;
      const bool same =
          watch.last.has_value() && watch.last->ok() == result->ok() &&
          (result->ok() ? **watch.last == **result : watch.last->status() == result->status());
      if (same) continue;
      watch.last = result;
      watch.on_result(*result);
    }
  }
  // Subscriptions follow what the watches need: new names are asked for, dropped ones forgotten.
  for (ResourceType type : kAllResourceTypes) {
    TypeState& t = types_[static_cast<int>(type)];
    std::set<std::string, std::less<>> names(want[static_cast<int>(type)].begin(),
                                             want[static_cast<int>(type)].end());
    bool changed = false;
    for (auto it = t.resources.begin(); it != t.resources.end();) {
      if (names.count(it->first) == 0) {
        if (it->second.timer != nullptr) it->second.timer->cancel();
        it = t.resources.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    // follow() made the entries of new names already; they are new when never requested.
    for (const std::string& name : names) {
      const CachedResource& r = t.resources[name];
      if (!r.value.has_value() && !r.does_not_exist && r.error.empty() && r.timer == nullptr &&
          stream_ != nullptr) {
        changed = true;
      }
    }
    if (changed) t.dirty = true;
  }
  flush();
}

std::uint64_t XdsClient::watch(std::string listener,
                               std::function<void(const WatchResult&)> on_result) {
  std::uint64_t id;
  {
    std::lock_guard lock(watches_mutex_);
    if (watches_.size() >= kMaxWatches) {
      on_result(absl::ResourceExhaustedError("xDS: too many watched listeners"));
      return 0;
    }
    id = next_watch_++;
    watches_.emplace(id, Watch{std::move(listener), std::move(on_result), std::nullopt});
  }
  asio::post(io_, [this] { update(); });
  return id;
}

void XdsClient::unwatch(std::uint64_t id) {
  {
    std::lock_guard lock(watches_mutex_);
    watches_.erase(id);
  }
  asio::post(io_, [this] { update(); });
}

std::vector<ResourceStatus> XdsClient::status() {
  std::promise<std::vector<ResourceStatus>> promise;
  auto future = promise.get_future();
  asio::post(io_, [this, &promise] {
    std::vector<ResourceStatus> out;
    for (ResourceType type : kAllResourceTypes) {
      for (const auto& [name, r] : types_[static_cast<int>(type)].resources) {
        ResourceStatus s;
        s.type_url = std::string(type_url(type));
        s.name = name;
        s.version = r.version;
        s.error = r.error;
        s.resource = r.raw;
        s.last_updated = r.updated;
        s.nacked_version = r.nacked_version;
        s.nacked_at = r.nacked_at;
        s.state = r.does_not_exist      ? ResourceStatus::State::kDoesNotExist
                  : !r.error.empty()    ? ResourceStatus::State::kNacked
                  : r.value.has_value() ? ResourceStatus::State::kAcked
                                        : ResourceStatus::State::kRequested;
        out.push_back(std::move(s));
      }
    }
    promise.set_value(std::move(out));
  });
  return future.get();
}

}  // namespace ferry::xds::detail

namespace ferry::xds {

std::vector<ResourceStatus> client_status(const Bootstrap& bootstrap,
                                          const XdsClientOptions& options) {
  std::shared_ptr<detail::XdsClient> client;
  {
    std::lock_guard lock(detail::shared_mutex);
    auto& clients = detail::shared_clients();
    auto it = clients.find(detail::key_of(bootstrap, options));
    if (it != clients.end()) client = it->second.lock();
  }
  if (client == nullptr) return {};
  return client->status();
}

std::vector<ClientStatus> all_client_status() {
  std::vector<ClientStatus> out;
  // Each client's status() runs on its own thread; none is asked while the registry is locked.
  for (const auto& client : detail::XdsClient::all_shared()) {
    out.push_back({client->bootstrap().node, client->bootstrap().xds_servers.front().server_uri,
                   client->status()});
  }
  return out;
}

}  // namespace ferry::xds

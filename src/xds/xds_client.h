// ferry's ADS client (ferry::xds, private): one aggregated discovery stream (state of the world)
// over a ferry Channel to the bootstrap's first xds_server, on a thread of its own. Channels with
// xds:/// targets watch listeners through it; it follows each listener to its routes (RDS or
// inline), every cluster the routes name (CDS) and those clusters' endpoints (EDS), subscribing and
// unsubscribing as the chain changes (gRFC A27), ACKs each response with its version and nonce,
// NACKs one with an invalid resource (the error in error_detail) while keeping that resource's
// last good version, and starts the resource-does-not-exist timer when it asks for a resource.
// When the stream fails it reconnects with back-off and asks again with the versions it has,
// keeping its cache meanwhile (gRFC A57).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "client/backoff.h"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/xds.h"
#include "xds/resources.h"

namespace envoy::config::core::v3 {
class Node;
}

namespace ferry::xds::detail {

// The bootstrap's node as sent to the control plane (and reported by CSDS).
envoy::config::core::v3::Node node_of(const Node& node);

// What one control plane may make a client hold; each limit answers a hostile or broken one.
// A response larger than this fails the stream (RESOURCE_EXHAUSTED) before it is buffered: the
// "huge response" attack. The stream is retried with back-off.
inline constexpr std::size_t kMaxResponseBytes = 8 << 20;
// Resources in one response: beyond it the response is NACKed unread (memory and CPU per
// response are bounded even under the byte limit by tiny resources).
inline constexpr int kMaxResourcesPerResponse = 10000;
// A NACK's error_detail message: the errors joined, cut here (one per resource otherwise grows
// with the response).
inline constexpr std::size_t kMaxNackMessageBytes = 4096;
// Watched listeners per client: each costs a chain of subscriptions.
inline constexpr std::size_t kMaxWatches = 10000;

// What a watch of a listener yields: the routes of its virtual host and, for every cluster they
// name, its endpoints by priority and locality (gRFC A27) or why it has none (gRFC A28: each call
// picks its route and cluster). Or UNAVAILABLE saying why there is no configuration at all (the
// listener does not exist, a resource was NACKed before any good version arrived, the control plane
// cannot be reached and nothing is cached).
struct XdsConfig {
  VirtualHost virtual_host;
  // gRFC A31: the listener's default max_stream_duration, for routes that set none.
  std::optional<std::chrono::milliseconds> max_stream_duration;
  // By name, each once.
  std::vector<std::pair<std::string, absl::StatusOr<EndpointsResource>>> clusters;
  // Of the clusters known (CDS): gRFC A32's and A50's settings, by name.
  std::vector<std::pair<std::string, ::ferry::detail::ClusterPolicy>> cluster_policies;
  friend bool operator==(const XdsConfig&, const XdsConfig&) = default;
};
using WatchResult = absl::StatusOr<XdsConfig>;

class XdsClient : public std::enable_shared_from_this<XdsClient> {
 public:
  // The shared client of this bootstrap and these options in this process (made on first use,
  // gone with its last user; gRFC A27's one client per bootstrap).
  static std::shared_ptr<XdsClient> shared(const Bootstrap& bootstrap,
                                           const XdsClientOptions& options);

  XdsClient(Bootstrap bootstrap, XdsClientOptions options);
  ~XdsClient();  // closes the stream and joins the thread
  XdsClient(const XdsClient&) = delete;
  XdsClient& operator=(const XdsClient&) = delete;

  // Watches listener; on_result runs on the client's thread with each new result (only when it
  // differs from the last). Returns the watch's id for unwatch. From any thread.
  std::uint64_t watch(std::string listener, std::function<void(const WatchResult&)> on_result);
  // Ends a watch: once this returns, its on_result is not called again. From any thread but the
  // client's own (on_result may unwatch another watch, not itself).
  void unwatch(std::uint64_t id);

  // The cache, for status pages and tests (ferry/xds.h's client_status). From any thread.
  std::vector<ResourceStatus> status();
  const Bootstrap& bootstrap() const { return bootstrap_; }
  // Every shared client alive in the process (ferry/xds.h's all_client_status). Any thread.
  static std::vector<std::shared_ptr<XdsClient>> all_shared();

 private:
  struct CachedResource {
    std::optional<Resource> value;  // the last good version
    std::string version;            // its response's version_info
    std::string error;              // the last NACK's reason for this resource, if any
    bool does_not_exist = false;    // the timer fired, or LDS/CDS left it out
    std::string raw;  // the last good version as sent (a serialized Any), for CSDS (gRFC A40)
    std::chrono::system_clock::time_point updated{};  // when it came
    std::string nacked_version;                       // the last NACKed response's version_info
    std::chrono::system_clock::time_point nacked_at{};
    std::unique_ptr<asio::steady_timer> timer;  // resource-does-not-exist (gRFC A27)
  };
  struct TypeState {
    std::map<std::string, CachedResource, std::less<>> resources;  // the subscribed ones
    std::string version;     // the last accepted response's version_info
    std::string nonce;       // the last response's nonce
    std::string nack_error;  // set: the next request NACKs with it
    bool dirty = false;      // a request is due
  };
  struct Watch {
    std::string listener;
    std::function<void(const WatchResult&)> on_result;
    std::optional<WatchResult> last;
  };

  void start();
  asio::awaitable<void> run();
  asio::awaitable<void> write_requests(std::shared_ptr<ClientStream> stream);
  void handle_response(const class ResponseView& response);
  // Follows every watch down its chain: subscribes to what is needed, drops what is not, hands
  // each watch its result, and sends the requests that became due.
  void update();
  // The chain of listener, as far as the cache goes; adds its names to want.
  std::optional<WatchResult> follow(const std::string& listener,
                                    std::array<std::vector<std::string>, kResourceTypes>& want);
  void flush();
  void start_timer(ResourceType type, const std::string& name, CachedResource& resource);

  Bootstrap bootstrap_;
  XdsClientOptions options_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::unique_ptr<Channel> channel_;
  std::shared_ptr<ClientStream> stream_;  // the ADS call, while one is open
  bool sent_node_ = false;                // on this stream
  bool writing_ = false;
  bool stopping_ = false;
  absl::Status stream_error_;  // why the last stream ended (A57: reported when nothing is cached)
  std::array<TypeState, kResourceTypes> types_;
  std::mutex watches_mutex_;  // guards watches_' membership against unwatch from other threads
  std::map<std::uint64_t, Watch> watches_;
  std::uint64_t next_watch_ = 1;
  asio::steady_timer backoff_timer_;
  std::thread thread_;
};

}  // namespace ferry::xds::detail

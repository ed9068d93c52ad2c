// ferry/health.h: gRPC's health checking service, grpc.health.v1.Health (services layer, public,
// library ferry::services). Register it like any service; the server then answers Check and
// Watch from the statuses set here. A server that registers none pays nothing for it.
//
//   ferry::HealthService health;                  // "" (the whole server) starts SERVING
//   server.add_service(health);
//   health.set_status("helloworld.Greeter", ferry::ServingStatus::kServing);
//   ...
//   server.shutdown();   // every status turns NOT_SERVING first; Watch streams see it, then end
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "ferry/service.h"

namespace ferry {

// grpc.health.v1.HealthCheckResponse.ServingStatus, with the same numbers.
enum class ServingStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,  // only in Watch responses, for a service with no status
};

// Limits on what one client can make the health service hold (each Watch stream keeps its service
// name until it ends).
struct HealthServiceOptions {
  // Longest service name Check and Watch accept (a fully-qualified protobuf service name is far
  // shorter); a longer one is answered INVALID_ARGUMENT and not kept.
  std::size_t max_service_name_size = 1024;
  // Watch streams open at once on one connection; another is answered RESOURCE_EXHAUSTED. A
  // client watches a few services (grpc-go's health checking opens one stream per subchannel),
  // so 100 leaves room to spare and bounds a connection's watchers to ~100 × (name + 200 bytes).
  std::size_t max_watchers_per_connection = 100;
};

// grpc.health.v1.Health. Check answers the status of the named service ("" for the whole
// server), NOT_FOUND when none was set (as grpc-go does). Watch sends the current status
// (SERVICE_UNKNOWN when none is set) and then each change, until the client cancels or the
// server shuts down; quick successive changes may reach a watcher as their last value only.
//
// Thread-safe: statuses may be set from any thread; each Watch stream stays on its call's I/O
// thread and is woken there (one posted operation per watcher of the changed service, found
// through an index by name: a change costs nothing for the watchers of other services, and Check
// takes a lock of its own that no watcher bookkeeping holds); an idle watcher
// costs no timer run and no wake-up, and ends as soon as its call is cancelled
// (ServerContext::on_cancel).
// Must outlive the servers it is registered with. Meant for one server: its shutdown turns every
// status to NOT_SERVING for good.
class HealthService final : public Service {
 public:
  explicit HealthService(HealthServiceOptions options = {});
  ~HealthService() override;
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // Sets the status of `service` ("" = the whole server), and tells its watchers. Ignored after
  // shutdown(). Any thread; takes a mutex.
  void set_status(std::string_view service, ServingStatus status);
  // Forgets `service`: Check answers NOT_FOUND again, watchers see SERVICE_UNKNOWN.
  void clear_status(std::string_view service);
  // The status Check would report: kServiceUnknown when none is set.
  ServingStatus status(std::string_view service) const;

  // Turns every status to NOT_SERVING and ignores later changes; Watch streams send NOT_SERVING
  // and then end with UNAVAILABLE. Waits (up to 1 s) for them to have sent it. The server calls
  // this as its shutdown begins, before the GOAWAY; call it yourself to drain earlier. Not from
  // one of the server's I/O threads.
  void shutdown();

  // Watch streams currently open (for tests and monitoring).
  std::size_t watch_count() const;

  void on_server_shutdown() const override;

  struct State;  // src/services/health_service.cc

 private:
  // Behind a pointer: on_server_shutdown (const, as the server holds services) changes it.
  std::unique_ptr<State> state_;
};

}  // namespace ferry

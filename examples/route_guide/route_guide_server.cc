// route_guide_server: serves routeguide.RouteGuide (route_guide.proto) on ferry until SIGINT or
// SIGTERM, one handler per call kind: unary GetFeature, server-streaming ListFeatures,
// client-streaming RecordRoute and bidirectional RouteChat, over the built-in features.
//   route_guide_server [--host=127.0.0.1] [--port=50051] [--threads=N]
// Prints "route_guide_server: listening on HOST:PORT" once it accepts calls (--port=0 picks a
// free port, which that line reports).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ferry/server.h"
#include "route_guide.ferry.h"
#include "route_guide_db.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "address to listen on");
ABSL_FLAG(int, port, 50051, "port to listen on; 0 picks a free one");
ABSL_FLAG(unsigned, threads, 0, "I/O threads; 0: one per hardware thread");

namespace {

using routeguide::Feature;
using routeguide::Point;
using routeguide::Rectangle;
using routeguide::RouteNote;
using routeguide::RouteSummary;

// Great-circle distance in meters (the haversine formula, as grpc's example computes it).
double distance_meters(const Point& from, const Point& to) {
  constexpr double kCoordFactor = 1e7;
  constexpr double kRadius = 6371000;  // the Earth's, in meters
  constexpr double kPi = 3.14159265358979323846;
  auto radians = [](double e7) { return e7 / kCoordFactor * kPi / 180; };
  const double lat1 = radians(from.latitude());
  const double lat2 = radians(to.latitude());
  const double dlat = lat2 - lat1;
  const double dlon = radians(to.longitude()) - radians(from.longitude());
  const double a = std::sin(dlat / 2) * std::sin(dlat / 2) +
                   std::cos(lat1) * std::cos(lat2) * std::sin(dlon / 2) * std::sin(dlon / 2);
  return kRadius * 2 * std::atan2(std::sqrt(a), std::sqrt(1 - a));
}

bool inside(const Rectangle& rect, const Point& point) {
  const int left = std::min(rect.lo().longitude(), rect.hi().longitude());
  const int right = std::max(rect.lo().longitude(), rect.hi().longitude());
  const int bottom = std::min(rect.lo().latitude(), rect.hi().latitude());
  const int top = std::max(rect.lo().latitude(), rect.hi().latitude());
  return point.longitude() >= left && point.longitude() <= right && point.latitude() >= bottom &&
         point.latitude() <= top;
}

bool same_point(const Point& a, const Point& b) {
  return a.latitude() == b.latitude() && a.longitude() == b.longitude();
}

class RouteGuideImpl final : public routeguide::RouteGuide::Service {
 public:
  explicit RouteGuideImpl(const std::vector<Feature>& features) : features_(features) {}

  asio::awaitable<absl::Status> GetFeature(ferry::ServerContext&, const Point& point,
                                           Feature& feature) override {
    feature.set_name(name_at(point));
    *feature.mutable_location() = point;
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> ListFeatures(ferry::ServerContext&, const Rectangle& rect,
                                             ferry::ServerWriter<Feature>& writer) override {
    for (const Feature& feature : features_) {
      if (!inside(rect, feature.location())) continue;
      // Suspends while the client's flow-control window is full; fails once the call is over.
      absl::Status written = co_await writer.write(feature);
      if (!written.ok()) co_return written;
    }
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> RecordRoute(ferry::ServerContext& context,
                                            ferry::ServerReader<Point>& reader,
                                            RouteSummary& summary) override {
    const auto start = std::chrono::steady_clock::now();
    Point point;
    Point previous;
    double distance = 0;
    // read() is false at the end of the client's stream, or when the call is over.
    while (co_await reader.read(point)) {
      summary.set_point_count(summary.point_count() + 1);
      if (!name_at(point).empty()) summary.set_feature_count(summary.feature_count() + 1);
      if (summary.point_count() > 1) distance += distance_meters(previous, point);
      previous = point;
    }
    if (context.is_cancelled()) co_return absl::CancelledError("the route was abandoned");
    summary.set_distance(static_cast<int>(distance));
    summary.set_elapsed_time(static_cast<int>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
            .count()));
    co_return absl::OkStatus();
  }

  asio::awaitable<absl::Status> RouteChat(
      ferry::ServerContext&, ferry::ServerReaderWriter<RouteNote, RouteNote>& stream) override {
    RouteNote note;
    while (co_await stream.read(note)) {
      // Copied under the lock, written after it: a write may suspend, and the notes are shared
      // with the calls of every I/O thread.
      std::vector<RouteNote> earlier = notes_at(note);
      for (const RouteNote& previous : earlier) {
        absl::Status written = co_await stream.write(previous);
        if (!written.ok()) co_return written;
      }
    }
    co_return absl::OkStatus();
  }

 private:
  std::string name_at(const Point& point) const {
    for (const Feature& feature : features_) {
      if (same_point(feature.location(), point)) return feature.name();
    }
    return "";
  }

  // The notes left at note's point so far; then records note.
  std::vector<RouteNote> notes_at(const RouteNote& note) {
    const std::pair<int, int> key(note.location().latitude(), note.location().longitude());
    std::lock_guard lock(mutex_);
    std::vector<RouteNote>& here = notes_[key];
    std::vector<RouteNote> earlier = here;
    here.push_back(note);
    return earlier;
  }

  const std::vector<Feature>& features_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::vector<RouteNote>> notes_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a watching script sees each line at once

  // SIGINT/SIGTERM are blocked here, so in every thread the server starts, and taken by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  RouteGuideImpl route_guide(routeguide::builtin_features());
  ferry::ServerOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  ferry::Server server(options);
  server.add_service(route_guide);
  const std::string host = absl::GetFlag(FLAGS_host);
  absl::StatusOr<int> port = server.start(host, absl::GetFlag(FLAGS_port));
  if (!port.ok()) {
    std::fprintf(stderr, "route_guide_server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::printf("route_guide_server: listening on %s:%d\n", host.c_str(), *port);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.shutdown(std::chrono::seconds(5));  // GOAWAY, let calls finish, then cancel the rest
  std::printf("route_guide_server: stopped\n");
  return 0;
}

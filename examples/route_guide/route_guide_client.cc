// route_guide_client: calls routeguide.RouteGuide (route_guide.proto) once per call kind through
// ferry's generated awaitable stub, and prints what comes back:
//   GetFeature   (unary)             a known point, then one where nothing is
//   ListFeatures (server streaming)  the features inside a rectangle
//   RecordRoute  (client streaming)  a route through every built-in feature and one empty point
//   RouteChat    (bidi streaming)    four notes, reading the earlier ones at the same points
//                                    while it writes
//   route_guide_client [--target=127.0.0.1:50051]
// Exits 0 when every call succeeded, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "asio/co_spawn.hpp"
#include "asio/experimental/awaitable_operators.hpp"
#include "asio/use_future.hpp"
#include "ferry/channel.h"
#include "route_guide.ferry.h"
#include "route_guide_db.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "the server, as a gRPC target");

namespace {

using namespace asio::experimental::awaitable_operators;
using routeguide::Feature;
using routeguide::Point;
using routeguide::Rectangle;
using routeguide::RouteGuide;
using routeguide::RouteNote;
using routeguide::RouteSummary;

constexpr auto kCallTimeout = std::chrono::seconds(10);

Point make_point(int latitude, int longitude) {
  Point point;
  point.set_latitude(latitude);
  point.set_longitude(longitude);
  return point;
}

RouteNote make_note(const char* message, int latitude, int longitude) {
  RouteNote note;
  note.set_message(message);
  *note.mutable_location() = make_point(latitude, longitude);
  return note;
}

asio::awaitable<absl::Status> get_feature(RouteGuide::Stub& stub, const Point& point) {
  ferry::ClientContext context;
  context.set_timeout(kCallTimeout);
  Feature feature;
  absl::Status status = co_await stub.GetFeature(context, point, feature);
  if (!status.ok()) co_return status;
  if (feature.name().empty()) {
    std::printf("GetFeature: no feature at %s\n", format_point(point).c_str());
  } else {
    std::printf("GetFeature: \"%s\" at %s\n", feature.name().c_str(),
                format_point(feature.location()).c_str());
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> list_features(RouteGuide::Stub& stub) {
  ferry::ClientContext context;
  context.set_timeout(kCallTimeout);
  Rectangle rect;
  *rect.mutable_lo() = make_point(410000000, -750000000);
  *rect.mutable_hi() = make_point(420000000, -740000000);
  ferry::ClientReader<Feature> reader = co_await stub.ListFeatures(context, rect);
  Feature feature;
  int count = 0;
  while (co_await reader.read(feature)) {
    std::printf("ListFeatures: \"%s\" at %s\n", feature.name().c_str(),
                format_point(feature.location()).c_str());
    ++count;
  }
  // Whether the stream ended because the server finished or because the call failed.
  absl::Status status = co_await reader.finish();
  if (status.ok()) std::printf("ListFeatures: %d features\n", count);
  co_return status;
}

asio::awaitable<absl::Status> record_route(RouteGuide::Stub& stub) {
  ferry::ClientContext context;
  context.set_timeout(kCallTimeout);
  ferry::ClientWriter<Point> writer = co_await stub.RecordRoute(context);
  int sent = 0;
  for (const Feature& feature : routeguide::builtin_features()) {
    // A failed write means the call is over; finish() below reports why.
    if (!(co_await writer.write(feature.location())).ok()) break;
    ++sent;
  }
  const Point nowhere = make_point(410000000, -740000000);
  if ((co_await writer.write(nowhere)).ok()) ++sent;
  std::printf("RecordRoute: sent %d points\n", sent);
  RouteSummary summary;
  absl::Status status = co_await writer.finish(summary);  // half-closes, then the one reply
  if (status.ok()) {
    std::printf("RecordRoute: %d points, %d features, %d meters, %d seconds\n",
                summary.point_count(), summary.feature_count(), summary.distance(),
                summary.elapsed_time());
  }
  co_return status;
}

// RouteChat's two directions run at once: the server answers a note with every earlier note at
// its point, which may be none or several, so the client cannot read in step with its writes.
asio::awaitable<absl::Status> write_notes(ferry::ClientReaderWriter<RouteNote, RouteNote>& chat) {
  const RouteNote notes[] = {
      make_note("First message", 0, 0), make_note("Second message", 0, 10000000),
      make_note("Third message", 10000000, 0), make_note("Fourth message", 0, 0)};
  for (const RouteNote& note : notes) {
    absl::Status written = co_await chat.write(note);
    if (!written.ok()) co_return written;
    std::printf("RouteChat: sent \"%s\" at %s\n", note.message().c_str(),
                format_point(note.location()).c_str());
  }
  co_await chat.writes_done();
  co_return absl::OkStatus();
}

asio::awaitable<int> read_notes(ferry::ClientReaderWriter<RouteNote, RouteNote>& chat) {
  RouteNote note;
  int received = 0;
  while (co_await chat.read(note)) {
    std::printf("RouteChat: got \"%s\" at %s\n", note.message().c_str(),
                format_point(note.location()).c_str());
    ++received;
  }
  co_return received;
}

asio::awaitable<absl::Status> route_chat(RouteGuide::Stub& stub) {
  ferry::ClientContext context;
  context.set_timeout(kCallTimeout);
  ferry::ClientReaderWriter<RouteNote, RouteNote> chat = co_await stub.RouteChat(context);
  std::tuple<absl::Status, int> both = co_await (write_notes(chat) && read_notes(chat));
  absl::Status status = co_await chat.finish();
  if (status.ok() && !std::get<0>(both).ok()) status = std::get<0>(both);
  if (status.ok()) std::printf("RouteChat: %d notes received\n", std::get<1>(both));
  co_return status;
}

// status, its message prefixed with the call's name.
absl::Status in_call(const char* call, const absl::Status& status) {
  return absl::Status(status.code(), std::string(call) + ": " + std::string(status.message()));
}

// The four calls in turn; the first failure ends the run.
asio::awaitable<absl::Status> run(RouteGuide::Stub& stub) {
  absl::Status status = co_await get_feature(stub, make_point(409146138, -746188906));
  if (status.ok()) status = co_await get_feature(stub, make_point(0, 0));
  if (!status.ok()) co_return in_call("GetFeature", status);
  status = co_await list_features(stub);
  if (!status.ok()) co_return in_call("ListFeatures", status);
  status = co_await record_route(stub);
  if (!status.ok()) co_return in_call("RecordRoute", status);
  status = co_await route_chat(stub);
  if (!status.ok()) co_return in_call("RouteChat", status);
  co_return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // The channel runs its own I/O thread; the calls run there as one coroutine (no hop per
  // operation), and this thread waits for its status.
  ferry::ChannelOptions options;  // the defaults: pick_first, no retries, no TLS
  ferry::Channel channel(absl::GetFlag(FLAGS_target), options);
  RouteGuide::Stub stub(channel);
  std::future<absl::Status> done = asio::co_spawn(channel.executor(), run(stub), asio::use_future);
  const absl::Status status = done.get();
  if (!status.ok()) {
    std::fprintf(stderr, "route_guide_client: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("route_guide_client: 4 calls OK\n");
  return 0;
}

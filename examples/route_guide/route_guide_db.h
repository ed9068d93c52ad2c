// route_guide_db.h: the route_guide example's features, built in rather than read from grpc's
// route_guide_db.json, so that the example runs without a data file. The server serves them;
// the client walks a route through them.
#pragma once

#include <string>
#include <vector>

#include "route_guide.pb.h"

namespace routeguide {

// Ten named places in New Jersey and New York, from grpc's example database.
const std::vector<Feature>& builtin_features();

// "40.9146, -74.6189": a point in degrees.
std::string format_point(const Point& point);

}  // namespace routeguide

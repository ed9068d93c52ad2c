// route_guide_db.cc: the built-in features (route_guide_db.h).
#include "route_guide_db.h"

#include <cstdio>
#include <string>

namespace routeguide {
namespace {

Feature make_feature(int latitude, int longitude, const char* name) {
  Feature feature;
  feature.set_name(name);
  feature.mutable_location()->set_latitude(latitude);
  feature.mutable_location()->set_longitude(longitude);
  return feature;
}

}  // namespace

const std::vector<Feature>& builtin_features() {
  static const std::vector<Feature> features = {
      make_feature(407838351, -746143763, "Patriots Path, Mendham, NJ 07945, USA"),
      make_feature(408122808, -743999179, "101 New Jersey 10, Whippany, NJ 07981, USA"),
      make_feature(413628156, -749015468, "U.S. 6, Shohola, PA 18458, USA"),
      make_feature(419999544, -740371136, "5 Conners Road, Kingston, NY 12401, USA"),
      make_feature(414008389, -743951297,
                   "Mid Hudson Psychiatric Center, New Hampton, NY 10958, USA"),
      make_feature(419611318, -746524769, "287 Flugertown Road, Livingston Manor, NY 12758, USA"),
      make_feature(409146138, -746188906,
                   "Berkshire Valley Management Area Trail, Jefferson, NJ, USA"),
      make_feature(406109563, -742186778, "4001 Tremley Point Road, Linden, NJ 07036, USA"),
      make_feature(412950425, -741077389, "Bailey Turn Road, Harriman, NY 10926, USA"),
      make_feature(416802456, -742370183, "352 South Mountain Road, Wallkill, NY 12589, USA"),
  };
  return features;
}

std::string format_point(const Point& point) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4f, %.4f", point.latitude() / 1e7, point.longitude() / 1e7);
  return text;
}

}  // namespace routeguide

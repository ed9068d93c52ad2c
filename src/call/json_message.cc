// Implementation of src/call/json_message.h.
#include "call/json_message.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"

namespace ferry::detail {
namespace {

absl::Status no_descriptor(const google::protobuf::MessageLite& msg) {
  return absl::InternalError(absl::StrCat("the JSON codec needs a message with a descriptor; ",
                                          msg.GetTypeName(), " is LITE_RUNTIME"));
}

}  // namespace

absl::Status parse_json_message(const SliceChain& json, google::protobuf::MessageLite& msg) {
  auto* full = dynamic_cast<google::protobuf::Message*>(&msg);
  if (full == nullptr) return no_descriptor(msg);
  full->Clear();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields =
      true;  // protojson's rule for a newer peer's fields, as connect-go
  const std::string text = json.to_string();
  if (auto s = google::protobuf::util::JsonStringToMessage(text, full, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("failed to parse a ", msg.GetTypeName(),
                                            " from JSON: ", std::string(s.message())));
  }
  return absl::OkStatus();
}

absl::Status print_json_message(const google::protobuf::MessageLite& msg, std::string& out) {
  const auto* full = dynamic_cast<const google::protobuf::Message*>(&msg);
  if (full == nullptr) return no_descriptor(msg);
  out.clear();
  if (auto s = google::protobuf::util::MessageToJsonString(*full, &out); !s.ok()) {
    return absl::InternalError(absl::StrCat("failed to write a ", msg.GetTypeName(),
                                            " as JSON: ", std::string(s.message())));
  }
  return absl::OkStatus();
}

}  // namespace ferry::detail

// Implementation of src/server/method_table.h.
#include "server/method_table.h"

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace ferry::detail {

void MethodTable::add(const Service& service) {
  if (services_.insert(service.full_name()).second) service_names_.push_back(service.full_name());
  const google::protobuf::ServiceDescriptor* descriptor = service.descriptor();
  for (const Method& method : service.methods()) {
    method_storage_.push_back(method);
    if (descriptor != nullptr) {
      const google::protobuf::MethodDescriptor* m = descriptor->FindMethodByName(method.name);
      method_storage_.back().no_side_effects =
          m != nullptr &&
          m->options().idempotency_level() == google::protobuf::MethodOptions::NO_SIDE_EFFECTS;
    }
    methods_[absl::StrCat("/", service.full_name(), "/", method.name)] = &method_storage_.back();
  }
}

const Method* MethodTable::find(std::string_view path, std::string_view* stable_path) const {
  auto it = methods_.find(to_absl(path));
  if (it == methods_.end()) return nullptr;
  *stable_path = std::string_view(it->first);
  return it->second;
}

std::string MethodTable::unknown_method_message(std::string_view path) const {
  // "/pkg.Service/Method": say which part is unknown.
  const std::size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == 0 || slash == std::string_view::npos) {
    return absl::StrCat("malformed method name '", to_absl(path), "'");
  }
  const std::string_view service = path.substr(1, slash - 1);
  const std::string_view method = path.substr(slash + 1);
  if (!services_.contains(to_absl(service))) {
    return absl::StrCat("unknown service ", to_absl(service));
  }
  return absl::StrCat("unknown method ", to_absl(method), " for service ", to_absl(service));
}

}  // namespace ferry::detail

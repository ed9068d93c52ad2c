// The server's routing table (server layer, private): every registered method by its :path,
// and the services by name for error messages. Built before the server starts, then read by
// every I/O thread without locks (it no longer changes).
#pragma once

#include <deque>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ferry/service.h"

namespace ferry::detail {

class MethodTable {
 public:
  // Registers the service's methods under "/<full_name>/<method>"; before the server starts.
  void add(const Service& service);

  // The method registered for path, and the table's own copy of the path (which outlives every
  // call); null when there is none.
  const Method* find(std::string_view path, std::string_view* stable_path) const;

  // The UNIMPLEMENTED message for a path that find() does not know: says whether the service or
  // only the method is unknown, as other gRPC servers do.
  std::string unknown_method_message(std::string_view path) const;

  // Every registered service's full name, in registration order.
  const std::deque<std::string>& service_names() const { return service_names_; }

 private:
  std::deque<Method> method_storage_;                        // stable addresses for the map below
  absl::flat_hash_map<std::string, const Method*> methods_;  // "/pkg.Service/Method"
  absl::flat_hash_set<std::string> services_;
  std::deque<std::string> service_names_;
};

}  // namespace ferry::detail

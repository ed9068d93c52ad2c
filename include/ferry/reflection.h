// ferry/reflection.h: gRPC server reflection, grpc.reflection.v1.ServerReflection and its
// predecessor grpc.reflection.v1alpha (services layer, public, library ferry::services), so that
// tools such as grpcurl and grpc_cli call a server without its .proto files.
//
//   ferry::ReflectionService reflection;   // like any service, it outlives the server
//   ferry::Server server;
//   server.add_service(greeter);
//   reflection.add_to(server);              // adds both versions
//   server.start(...);
#pragma once

#include <memory>

namespace ferry {

class Server;

// Answers list_services with every service of the server (generated ones and those built by
// name), and file_by_filename, file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type from the descriptors protoc compiled into the program (protobuf's
// generated pool) and those of the registered services. A file goes out with its transitive
// dependencies, less those already sent on the same stream (as grpc-go does). What is unknown
// gets an error_response with NOT_FOUND; a request with no question ends the stream with
// INVALID_ARGUMENT. A service built by name (no descriptor) is listed but not described, unless
// its .proto is compiled in anyway.
//
// Streams run on the server's I/O threads and share nothing but the server's (fixed) list of
// services.
class ReflectionService {
 public:
  ReflectionService();
  ~ReflectionService();
  ReflectionService(const ReflectionService&) = delete;
  ReflectionService& operator=(const ReflectionService&) = delete;

  // Adds both reflection services to server, whose services it then describes; before
  // server.start(), and to one server only. Like any service, this object must outlive the
  // server.
  void add_to(Server& server);

  struct Impl;  // src/services/reflection_service.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry

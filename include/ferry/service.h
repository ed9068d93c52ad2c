// ferry/service.h: a gRPC service as a table of methods (server layer, public). Handlers are
// coroutines returning the call's status; the typed add_* templates adapt them to one
// type-erased signature, so a method costs one small lambda, not a class hierarchy. Generated
// service bases (protoc-gen-ferry) register their methods through this same table.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/detail/recycled_message.h"
#include "ferry/rpc_kind.h"
#include "ferry/server_context.h"
#include "ferry/server_stream.h"
#include "google/protobuf/arena.h"

namespace google::protobuf {
class ServiceDescriptor;
}  // namespace google::protobuf

namespace ferry {

// A type-erased handler: runs the whole call and returns its status, with which ferry then ends
// the call (after the response queue_response encoded, if any).
using MethodHandler = std::function<asio::awaitable<absl::Status>(ServerContext&)>;

template <class Request, class Response>
using UnaryHandler =
    std::function<asio::awaitable<absl::Status>(ServerContext&, const Request&, Response&)>;
template <class Request, class Response>
using ClientStreamingHandler =
    std::function<asio::awaitable<absl::Status>(ServerContext&, ServerReader<Request>&, Response&)>;
template <class Request, class Response>
using ServerStreamingHandler = std::function<asio::awaitable<absl::Status>(
    ServerContext&, const Request&, ServerWriter<Response>&)>;
template <class Request, class Response>
using BidiStreamingHandler = std::function<asio::awaitable<absl::Status>(
    ServerContext&, ServerReaderWriter<Request, Response>&)>;

struct Method {
  std::string name;  // "Method"
  RpcKind kind;
  MethodHandler handler;
  // The .proto says `option idempotency_level = NO_SIDE_EFFECTS`: the Connect protocol may call
  // it with GET. Read from the service's descriptor when the server adds the service.
  bool no_side_effects = false;
};

// Not thread-safe while being built; the Server reads it after add_service, from all threads.
class Service {
 public:
  // full_name: "package.Service" as in the .proto.
  explicit Service(std::string full_name) : full_name_(std::move(full_name)) {}
  virtual ~Service() = default;

  const std::string& full_name() const { return full_name_; }
  const std::vector<Method>& methods() const { return methods_; }

  // Where the service's protobuf descriptor comes from, for server reflection: a function, so
  // that nothing is looked up (or built) until a reflection client asks. Generated service bases
  // set one (unless their .proto is LITE_RUNTIME); a service built by name has none and is
  // listed by reflection but not described.
  using DescriptorSource = const google::protobuf::ServiceDescriptor* (*)();
  void set_descriptor_source(DescriptorSource source) { descriptor_source_ = source; }
  // The descriptor, or null when there is none. Any thread.
  const google::protobuf::ServiceDescriptor* descriptor() const {
    return descriptor_source_ != nullptr ? descriptor_source_() : nullptr;
  }

  // Called by every Server the service is registered with as its shutdown begins (before the
  // GOAWAY), on the thread calling Server::shutdown. Default: nothing. The health service
  // reports NOT_SERVING here.
  virtual void on_server_shutdown() const {}

  void add_method(std::string name, RpcKind kind, MethodHandler handler) {
    methods_.push_back(Method{std::move(name), kind, std::move(handler)});
  }

  template <class Request, class Response>
  void add_unary(std::string name, UnaryHandler<Request, Response> handler) {
    add_method(std::move(name), RpcKind::kUnary,
               [h = std::move(handler)](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 detail::RecycledMessage<Request> request(ctx.arena());
                 detail::RecycledMessage<Response> response(ctx.arena());
                 if (!ctx.take_request(*request)) co_return missing_request();
                 absl::Status status = co_await h(ctx, *request, *response);
                 // Encoded now, before the message goes back to its cache; it leaves with the
                 // status when ferry finishes the call.
                 if (status.ok()) status = ctx.queue_response(*response);
                 co_return status;
               });
  }

  template <class Request, class Response>
  void add_client_streaming(std::string name, ClientStreamingHandler<Request, Response> handler) {
    add_method(std::move(name), RpcKind::kClientStreaming,
               [h = std::move(handler)](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 detail::RecycledMessage<Response> response(ctx.arena());
                 ServerReader<Request> reader(ctx);
                 absl::Status status = co_await h(ctx, reader, *response);
                 // Encoded now, before the message goes back to its cache; it leaves with the
                 // status when ferry finishes the call.
                 if (status.ok()) status = ctx.queue_response(*response);
                 co_return status;
               });
  }

  template <class Request, class Response>
  void add_server_streaming(std::string name, ServerStreamingHandler<Request, Response> handler) {
    add_method(std::move(name), RpcKind::kServerStreaming,
               [h = std::move(handler)](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 detail::RecycledMessage<Request> request(ctx.arena());
                 if (!ctx.take_request(*request)) co_return missing_request();
                 ServerWriter<Response> writer(ctx);
                 co_return co_await h(ctx, *request, writer);
               });
  }

  template <class Request, class Response>
  void add_bidi_streaming(std::string name, BidiStreamingHandler<Request, Response> handler) {
    add_method(std::move(name), RpcKind::kBidiStreaming,
               [h = std::move(handler)](ServerContext& ctx) -> asio::awaitable<absl::Status> {
                 ServerReaderWriter<Request, Response> stream(ctx);
                 co_return co_await h(ctx, stream);
               });
  }

 private:
  // The status of a unary or server-streaming call whose request never arrived: a request
  // cardinality violation, UNIMPLEMENTED in gRPC's status code table. When the call itself is
  // over (cancelled, bad message) ferry has already sent the real status.
  static absl::Status missing_request() {
    return absl::UnimplementedError(
        "the client closed its stream without sending a request message");
  }

  std::string full_name_;
  std::vector<Method> methods_;
  DescriptorSource descriptor_source_ = nullptr;
};

}  // namespace ferry

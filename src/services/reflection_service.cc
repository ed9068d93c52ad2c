// Implementation of ferry/reflection.h: one stream's questions answered in turn from protobuf's
// descriptor pools, v1alpha requests and responses converted to v1 (their wire formats are equal).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ferry/reflection.h"
#include "ferry/server.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.pb.h"
#include "grpc/reflection/v1alpha/reflection.pb.h"

namespace ferry {
namespace {

namespace pb = google::protobuf;
namespace v1 = ::grpc::reflection::v1;
namespace v1alpha = ::grpc::reflection::v1alpha;

// The answers of one reflection stream: it remembers which files it has sent.
class Session {
 public:
  explicit Session(const Server& server) : server_(server) {
    pools_.push_back(pb::DescriptorPool::generated_pool());
    for (const Service* service : server.services()) {
      const pb::ServiceDescriptor* d = service->descriptor();
      if (d != nullptr &&
          std::find(pools_.begin(), pools_.end(), d->file()->pool()) == pools_.end()) {
        pools_.push_back(d->file()->pool());
      }
    }
  }

  // Fills response for request; an error status ends the stream.
  absl::Status answer(const v1::ServerReflectionRequest& request,
                      v1::ServerReflectionResponse& response) {
    response.Clear();
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    switch (request.message_request_case()) {
      case v1::ServerReflectionRequest::kListServices:
        for (const Service* service : server_.services()) {
          response.mutable_list_services_response()->add_service()->set_name(service->full_name());
        }
        break;
      case v1::ServerReflectionRequest::kFileByFilename:
        send_file(find([&](const pb::DescriptorPool* p) {
                    return p->FindFileByName(request.file_by_filename());
                  }),
                  absl::StrCat("file not found: ", request.file_by_filename()), response);
        break;
      case v1::ServerReflectionRequest::kFileContainingSymbol:
        send_file(find([&](const pb::DescriptorPool* p) {
                    return p->FindFileContainingSymbol(request.file_containing_symbol());
                  }),
                  absl::StrCat("symbol not found: ", request.file_containing_symbol()), response);
        break;
      case v1::ServerReflectionRequest::kFileContainingExtension: {
        const v1::ExtensionRequest& ext = request.file_containing_extension();
        const pb::FieldDescriptor* field = find([&](const pb::DescriptorPool* p) {
          const pb::Descriptor* type = p->FindMessageTypeByName(ext.containing_type());
          return type == nullptr ? nullptr : p->FindExtensionByNumber(type, ext.extension_number());
        });
        send_file(field == nullptr ? nullptr : field->file(),
                  absl::StrCat("extension not found: ", ext.containing_type(), " ",
                               ext.extension_number()),
                  response);
        break;
      }
      case v1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const std::string& name = request.all_extension_numbers_of_type();
        for (const pb::DescriptorPool* pool : pools_) {
          const pb::Descriptor* type = pool->FindMessageTypeByName(name);
          if (type == nullptr) continue;
          std::vector<const pb::FieldDescriptor*> extensions;
          pool->FindAllExtensions(type, &extensions);
          std::vector<int> numbers;
          for (const pb::FieldDescriptor* f : extensions) numbers.push_back(f->number());
          std::sort(numbers.begin(), numbers.end());
          auto* out = response.mutable_all_extension_numbers_response();
          out->set_base_type_name(type->full_name());
          for (int n : numbers) out->add_extension_number(n);
          return absl::OkStatus();
        }
        not_found(absl::StrCat("type not found: ", name), response);
        break;
      }
      default:
        return absl::InvalidArgumentError("invalid reflection request: it asks nothing");
    }
    return absl::OkStatus();
  }

 private:
  // The first pool's answer to lookup.
  template <class Lookup>
  auto find(Lookup lookup) const -> decltype(lookup(pb::DescriptorPool::generated_pool())) {
    for (const pb::DescriptorPool* pool : pools_) {
      if (auto* found = lookup(pool)) return found;
    }
    return nullptr;
  }

  static void not_found(std::string message, v1::ServerReflectionResponse& response) {
    auto* error = response.mutable_error_response();
    error->set_error_code(static_cast<int>(absl::StatusCode::kNotFound));
    error->set_error_message(std::move(message));
  }

  // file, then those of its transitive dependencies not sent yet on this stream (file itself
  // goes out again when asked again). Breadth first, as grpc-go orders them.
  void send_file(const pb::FileDescriptor* file, std::string missing,
                 v1::ServerReflectionResponse& response) {
    if (file == nullptr) {
      not_found(std::move(missing), response);
      return;
    }
    auto* out = response.mutable_file_descriptor_response();
    std::vector<const pb::FileDescriptor*> queue{file};
    sent_.insert(file->name());
    for (std::size_t i = 0; i < queue.size(); ++i) {
      pb::FileDescriptorProto proto;
      queue[i]->CopyTo(&proto);
      proto.SerializeToString(out->add_file_descriptor_proto());
      for (int d = 0; d < queue[i]->dependency_count(); ++d) {
        const pb::FileDescriptor* dep = queue[i]->dependency(d);
        if (sent_.insert(dep->name()).second) queue.push_back(dep);
      }
    }
  }

  const Server& server_;
  std::vector<const pb::DescriptorPool*> pools_;
  absl::flat_hash_set<std::string> sent_;
};

// v1 messages pass through; v1alpha ones are converted (same fields, same numbers).
template <class To, class From>
const To& as(const From& from, To& scratch) {
  if constexpr (std::is_same_v<To, From>) {
    return from;
  } else {
    scratch.ParseFromString(from.SerializeAsString());
    return scratch;
  }
}

template <class Request, class Response>
asio::awaitable<absl::Status> serve(const Server& server,
                                    ServerReaderWriter<Request, Response>& stream) {
  Session session(server);
  Request request;
  Response response;
  v1::ServerReflectionRequest v1_request;
  v1::ServerReflectionResponse v1_answer;
  while (co_await stream.read(request)) {
    if (absl::Status s = session.answer(as(request, v1_request), v1_answer); !s.ok()) co_return s;
    if (absl::Status s = co_await stream.write(as(v1_answer, response)); !s.ok()) co_return s;
  }
  co_return absl::OkStatus();
}

}  // namespace

struct ReflectionService::Impl {
  Impl() {
    v1_service.add_bidi_streaming<v1::ServerReflectionRequest, v1::ServerReflectionResponse>(
        "ServerReflectionInfo",
        [this](
            ServerContext&,
            ServerReaderWriter<v1::ServerReflectionRequest, v1::ServerReflectionResponse>& stream) {
          return serve(*server, stream);
        });
    v1_service.set_descriptor_source([]() -> const pb::ServiceDescriptor* {
      return v1::ServerReflectionRequest::descriptor()->file()->FindServiceByName(
          "ServerReflection");
    });
    v1alpha_service
        .add_bidi_streaming<v1alpha::ServerReflectionRequest, v1alpha::ServerReflectionResponse>(
            "ServerReflectionInfo",
            [this](ServerContext&, ServerReaderWriter<v1alpha::ServerReflectionRequest,
                                                      v1alpha::ServerReflectionResponse>& stream) {
              return serve(*server, stream);
            });
    v1alpha_service.set_descriptor_source([]() -> const pb::ServiceDescriptor* {
      return v1alpha::ServerReflectionRequest::descriptor()->file()->FindServiceByName(
          "ServerReflection");
    });
  }

  const Server* server = nullptr;  // set by add_to, before the server starts
  Service v1_service{"grpc.reflection.v1.ServerReflection"};
  Service v1alpha_service{"grpc.reflection.v1alpha.ServerReflection"};
};

ReflectionService::ReflectionService() : impl_(std::make_unique<Impl>()) {}

ReflectionService::~ReflectionService() = default;

void ReflectionService::add_to(Server& server) {
  impl_->server = &server;
  server.add_service(impl_->v1_service);
  server.add_service(impl_->v1alpha_service);
}

}  // namespace ferry

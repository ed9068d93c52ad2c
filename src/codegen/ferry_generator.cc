// Implementation of codegen/ferry_generator.h. The output is meant to be read: one declaration
// per line group, the .proto's comments carried over, and the rpc signature above each method.
#include "codegen/ferry_generator.h"

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/compiler/cpp/names.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/io/printer.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace ferry::codegen {
namespace {

namespace pb = google::protobuf;
using Vars = std::map<std::string, std::string>;

std::string strip_proto(const std::string& name) {
  const std::string suffix = ".proto";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

// "a.b.c" -> "a::b::c", as protoc's C++ generator maps packages to namespaces.
std::string package_namespace(const std::string& package) {
  std::string out;
  for (char c : package) {
    if (c == '.') {
      out += "::";
    } else {
      out += c;
    }
  }
  return out;
}

// Whether protoc's messages for file use the full runtime, whose generated pool holds the file's
// descriptors (LITE_RUNTIME files have none: their services get no descriptor for reflection).
bool has_descriptors(const pb::FileDescriptor* file) {
  return file->options().optimize_for() != pb::FileOptions::LITE_RUNTIME;
}

enum class Kind { kUnary, kClientStreaming, kServerStreaming, kBidiStreaming };

Kind kind_of(const pb::MethodDescriptor* m) {
  if (m->client_streaming()) {
    return m->server_streaming() ? Kind::kBidiStreaming : Kind::kClientStreaming;
  }
  return m->server_streaming() ? Kind::kServerStreaming : Kind::kUnary;
}

Vars method_vars(const pb::ServiceDescriptor* service, const pb::MethodDescriptor* m) {
  Vars v;
  v["Service"] = service->name();
  v["service_full_name"] = service->full_name();
  v["Method"] = m->name();
  v["Request"] = pb::compiler::cpp::QualifiedClassName(m->input_type());
  v["Response"] = pb::compiler::cpp::QualifiedClassName(m->output_type());
  v["RequestProto"] = m->input_type()->full_name();
  v["ResponseProto"] = m->output_type()->full_name();
  v["in_stream"] = m->client_streaming() ? "stream " : "";
  v["out_stream"] = m->server_streaming() ? "stream " : "";
  return v;
}

// The .proto's leading comment of d, as // lines (empty when there is none).
template <class Descriptor>
std::string leading_comment(const Descriptor* d, const std::string& indent) {
  pb::SourceLocation location;
  if (!d->GetSourceLocation(&location) || location.leading_comments.empty()) return "";
  std::string out;
  std::string line;
  const std::string& text = location.leading_comments;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      if (i == text.size() && line.empty()) break;
      out += indent + "//" + line + "\n";
      line.clear();
    } else {
      line += text[i];
    }
  }
  return out;
}

// A blank line, then the method's .proto comment and its rpc line, as the comment of a member.
void print_method_comment(pb::io::Printer& p, const pb::MethodDescriptor* m, const Vars& v) {
  p.Print("\n");
  p.PrintRaw(leading_comment(m, "    "));
  p.Print(v,
          "    // rpc $Method$($in_stream$$RequestProto$) returns ($out_stream$$ResponseProto$)\n");
}

void open_namespace(pb::io::Printer& p, const pb::FileDescriptor* file) {
  if (!file->package().empty()) {
    p.Print("namespace $ns$ {\n\n", "ns", package_namespace(file->package()));
  }
}

void close_namespace(pb::io::Printer& p, const pb::FileDescriptor* file) {
  if (!file->package().empty()) {
    p.Print("}  // namespace $ns$\n", "ns", package_namespace(file->package()));
  }
}

// ---- header ------------------------------------------------------------------------------------

void print_server_declaration(pb::io::Printer& p, const pb::ServiceDescriptor* service) {
  p.Print(
      "  // Server side: derive, override the methods you serve (the others answer\n"
      "  // UNIMPLEMENTED), and pass the object to ferry::Server::add_service; it must outlive "
      "the\n"
      "  // server. Each method runs on the call's connection thread.\n"
      "  class Service : public ::ferry::Service {\n"
      "   public:\n"
      "    Service();\n"
      "    Service(const Service&) = delete;\n"
      "    Service& operator=(const Service&) = delete;\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    print_method_comment(p, m, v);
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "    virtual ::asio::awaitable<::absl::Status> $Method$(\n"
                "        ::ferry::ServerContext& context, const $Request$& request,\n"
                "        $Response$& response);\n");
        break;
      case Kind::kClientStreaming:
        p.Print(
            v,
            "    virtual ::asio::awaitable<::absl::Status> $Method$(\n"
            "        ::ferry::ServerContext& context, ::ferry::ServerReader<$Request$>& reader,\n"
            "        $Response$& response);\n");
        break;
      case Kind::kServerStreaming:
        p.Print(v,
                "    virtual ::asio::awaitable<::absl::Status> $Method$(\n"
                "        ::ferry::ServerContext& context, const $Request$& request,\n"
                "        ::ferry::ServerWriter<$Response$>& writer);\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "    virtual ::asio::awaitable<::absl::Status> $Method$(\n"
                "        ::ferry::ServerContext& context,\n"
                "        ::ferry::ServerReaderWriter<$Request$, $Response$>& stream);\n");
        break;
    }
  }
  p.Print("  };\n");
}

void print_stub_declaration(pb::io::Printer& p, const pb::ServiceDescriptor* service,
                            bool blocking) {
  if (blocking) {
    p.Print(
        "  // Client side, blocking: for threads other than the channel's own (use a Channel that\n"
        "  // runs its own I/O thread). The channel must outlive the stub and its streams.\n"
        "  class BlockingStub {\n"
        "   public:\n"
        "    explicit BlockingStub(::ferry::Channel& channel) : channel_(&channel) {}\n");
  } else {
    p.Print(
        "  // Client side, awaitable. The channel must outlive the stub and its streams.\n"
        "  class Stub {\n"
        "   public:\n"
        "    explicit Stub(::ferry::Channel& channel) : channel_(&channel) {}\n");
  }
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    print_method_comment(p, m, v);
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v, blocking ? "    ::absl::Status $Method$(\n"
                            : "    ::asio::awaitable<::absl::Status> $Method$(\n");
        p.Print(v,
                "        ::ferry::ClientContext& context, const $Request$& request,\n"
                "        $Response$& response);\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v, blocking
                       ? "    ::ferry::BlockingClientWriter<$Request$> $Method$(\n"
                       : "    ::asio::awaitable<::ferry::ClientWriter<$Request$>> $Method$(\n");
        p.Print("        ::ferry::ClientContext& context);\n");
        break;
      case Kind::kServerStreaming:
        p.Print(v, blocking
                       ? "    ::ferry::BlockingClientReader<$Response$> $Method$(\n"
                       : "    ::asio::awaitable<::ferry::ClientReader<$Response$>> $Method$(\n");
        p.Print(v, "        ::ferry::ClientContext& context, const $Request$& request);\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v, blocking ? "    ::ferry::BlockingClientReaderWriter<$Request$, $Response$>\n"
                            : "    ::asio::awaitable<::ferry::ClientReaderWriter<$Request$, "
                              "$Response$>>\n");
        p.Print(v, "    $Method$(::ferry::ClientContext& context);\n");
        break;
    }
  }
  p.Print(
      "\n"
      "   private:\n"
      "    ::ferry::Channel* channel_;\n"
      "  };\n");
}

void print_header(pb::io::Printer& p, const pb::FileDescriptor* file) {
  const std::string stem = strip_proto(file->name());
  p.Print(
      "// Generated by protoc-gen-ferry from $file$. Do not edit.\n"
      "// ferry service bases and client stubs for the services of $file$.\n"
      "#pragma once\n"
      "\n"
      "#include <string_view>\n"
      "\n"
      "#include \"$stem$.pb.h\"\n",
      "file", file->name(), "stem", stem);
  if (file->service_count() == 0) {
    p.Print("\n// $file$ declares no services.\n", "file", file->name());
    return;
  }
  p.Print(
      "#include \"absl/status/status.h\"\n"
      "#include \"asio/awaitable.hpp\"\n"
      "#include \"ferry/blocking_stream.h\"\n"
      "#include \"ferry/channel.h\"\n"
      "#include \"ferry/client_context.h\"\n"
      "#include \"ferry/client_stream.h\"\n"
      "#include \"ferry/server_context.h\"\n"
      "#include \"ferry/server_stream.h\"\n"
      "#include \"ferry/service.h\"\n"
      "\n");
  open_namespace(p, file);
  for (int s = 0; s < file->service_count(); ++s) {
    const pb::ServiceDescriptor* service = file->service(s);
    p.PrintRaw(leading_comment(service, ""));
    p.Print(
        "// service $full_name$\n"
        "class $Service$ final {\n"
        " public:\n"
        "  static constexpr std::string_view kServiceName = \"$full_name$\";\n",
        "Service", service->name(), "full_name", service->full_name());
    p.Print("  // The :path of each method.\n");
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* m = service->method(i);
      p.Print("  static constexpr std::string_view k$Method$Path = \"/$service$/$Method$\";\n",
              "Method", m->name(), "service", service->full_name());
    }
    p.Print("\n");
    print_server_declaration(p, service);
    p.Print("\n");
    print_stub_declaration(p, service, /*blocking=*/false);
    p.Print("\n");
    print_stub_declaration(p, service, /*blocking=*/true);
    p.Print("};\n\n");
  }
  close_namespace(p, file);
}

// ---- source ------------------------------------------------------------------------------------

// The name protoc gives a file's descriptor table in its .pb.h/.pb.cc: "descriptor_table_" and
// the file name with every character but letters and digits written as _ and two hex digits.
std::string descriptor_table_name(const pb::FileDescriptor* file) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "descriptor_table_";
  for (unsigned char c : file->name()) {
    if (std::isalnum(c)) {
      name.push_back(static_cast<char>(c));
    } else {
      name.push_back('_');
      name.push_back(kHex[c >> 4]);
      name.push_back(kHex[c & 0xf]);
    }
  }
  return name;
}

void print_server_definitions(pb::io::Printer& p, const pb::ServiceDescriptor* service) {
  p.Print("$Service$::Service::Service() : ::ferry::Service(std::string(kServiceName)) {\n",
          "Service", service->name());
  if (has_descriptors(service->file())) {
    // For server reflection; looked up only when asked (the pool builds descriptors lazily).
    // Naming the file's descriptor table makes the linker keep its .pb.cc, and with it the
    // file's registration in the generated pool, even when the program uses none of its
    // messages (a static library's object is otherwise left out).
    p.Print(
        "  set_descriptor_source([]() -> const ::google::protobuf::ServiceDescriptor* {\n"
        "    ::google::protobuf::internal::AssignDescriptors(&::$table$);\n"
        "    return ::google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(\n"
        "        std::string(kServiceName));\n"
        "  });\n",
        "table", descriptor_table_name(service->file()));
  }
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "  add_unary<$Request$, $Response$>(\n"
                "      \"$Method$\", [this](::ferry::ServerContext& context, const $Request$& "
                "request,\n"
                "                         $Response$& response) {\n"
                "        return $Method$(context, request, response);\n"
                "      });\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v,
                "  add_client_streaming<$Request$, $Response$>(\n"
                "      \"$Method$\", [this](::ferry::ServerContext& context,\n"
                "                         ::ferry::ServerReader<$Request$>& reader,\n"
                "                         $Response$& response) {\n"
                "        return $Method$(context, reader, response);\n"
                "      });\n");
        break;
      case Kind::kServerStreaming:
        p.Print(v,
                "  add_server_streaming<$Request$, $Response$>(\n"
                "      \"$Method$\", [this](::ferry::ServerContext& context, const $Request$& "
                "request,\n"
                "                         ::ferry::ServerWriter<$Response$>& writer) {\n"
                "        return $Method$(context, request, writer);\n"
                "      });\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "  add_bidi_streaming<$Request$, $Response$>(\n"
                "      \"$Method$\",\n"
                "      [this](::ferry::ServerContext& context,\n"
                "             ::ferry::ServerReaderWriter<$Request$, $Response$>& stream) {\n"
                "        return $Method$(context, stream);\n"
                "      });\n");
        break;
    }
  }
  p.Print("}\n");

  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    p.Print("\n");
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "::asio::awaitable<::absl::Status> $Service$::Service::$Method$(\n"
                "    ::ferry::ServerContext&, const $Request$&, $Response$&) {\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v,
                "::asio::awaitable<::absl::Status> $Service$::Service::$Method$(\n"
                "    ::ferry::ServerContext&, ::ferry::ServerReader<$Request$>&, $Response$&) {\n");
        break;
      case Kind::kServerStreaming:
        p.Print(
            v,
            "::asio::awaitable<::absl::Status> $Service$::Service::$Method$(\n"
            "    ::ferry::ServerContext&, const $Request$&, ::ferry::ServerWriter<$Response$>&) "
            "{\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "::asio::awaitable<::absl::Status> $Service$::Service::$Method$(\n"
                "    ::ferry::ServerContext&, ::ferry::ServerReaderWriter<$Request$, $Response$>&) "
                "{\n");
        break;
    }
    p.Print(v,
            "  co_return ::absl::UnimplementedError(\"$service_full_name$/$Method$ is not "
            "implemented\");\n"
            "}\n");
  }
}

void print_stub_definitions(pb::io::Printer& p, const pb::ServiceDescriptor* service) {
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    p.Print("\n");
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "::asio::awaitable<::absl::Status> $Service$::Stub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request, $Response$& "
                "response) {\n"
                "  return channel_->call(k$Method$Path, context, request, response);\n"
                "}\n"
                "\n"
                "::absl::Status $Service$::BlockingStub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request, $Response$& "
                "response) {\n"
                "  return channel_->call_blocking(k$Method$Path, context, request, response);\n"
                "}\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v,
                "::asio::awaitable<::ferry::ClientWriter<$Request$>> $Service$::Stub::$Method$(\n"
                "    ::ferry::ClientContext& context) {\n"
                "  co_return ::ferry::ClientWriter<$Request$>(co_await channel_->open(\n"
                "      k$Method$Path, ::ferry::RpcKind::kClientStreaming, context));\n"
                "}\n"
                "\n"
                "::ferry::BlockingClientWriter<$Request$> $Service$::BlockingStub::$Method$(\n"
                "    ::ferry::ClientContext& context) {\n"
                "  return ::ferry::BlockingClientWriter<$Request$>(channel_->open_blocking(\n"
                "      k$Method$Path, ::ferry::RpcKind::kClientStreaming, context));\n"
                "}\n");
        break;
      case Kind::kServerStreaming:
        p.Print(v,
                "::asio::awaitable<::ferry::ClientReader<$Response$>> $Service$::Stub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request) {\n"
                "  co_return ::ferry::ClientReader<$Response$>(\n"
                "      co_await channel_->open(k$Method$Path, context, request));\n"
                "}\n"
                "\n"
                "::ferry::BlockingClientReader<$Response$> $Service$::BlockingStub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request) {\n"
                "  return ::ferry::BlockingClientReader<$Response$>(\n"
                "      channel_->open_blocking(k$Method$Path, context, request));\n"
                "}\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "::asio::awaitable<::ferry::ClientReaderWriter<$Request$, $Response$>>\n"
                "$Service$::Stub::$Method$(::ferry::ClientContext& context) {\n"
                "  co_return ::ferry::ClientReaderWriter<$Request$, $Response$>(co_await "
                "channel_->open(\n"
                "      k$Method$Path, ::ferry::RpcKind::kBidiStreaming, context));\n"
                "}\n"
                "\n"
                "::ferry::BlockingClientReaderWriter<$Request$, $Response$>\n"
                "$Service$::BlockingStub::$Method$(::ferry::ClientContext& context) {\n"
                "  return ::ferry::BlockingClientReaderWriter<$Request$, $Response$>(\n"
                "      channel_->open_blocking(k$Method$Path, ::ferry::RpcKind::kBidiStreaming,\n"
                "                              context));\n"
                "}\n");
        break;
    }
  }
}

void print_source(pb::io::Printer& p, const pb::FileDescriptor* file) {
  const std::string stem = strip_proto(file->name());
  p.Print(
      "// Generated by protoc-gen-ferry from $file$. Do not edit.\n"
      "#include \"$stem$.ferry.h\"\n",
      "file", file->name(), "stem", stem);
  if (file->service_count() == 0) return;
  p.Print("\n#include <string>\n\n");
  if (has_descriptors(file)) {
    p.Print("#include \"google/protobuf/descriptor.h\"\n\n");
  }
  open_namespace(p, file);
  for (int s = 0; s < file->service_count(); ++s) {
    const pb::ServiceDescriptor* service = file->service(s);
    p.Print("// ---- $full_name$ ----\n\n", "full_name", service->full_name());
    print_server_definitions(p, service);
    print_stub_definitions(p, service);
    p.Print("\n");
  }
  close_namespace(p, file);
}

}  // namespace

bool FerryGenerator::Generate(const pb::FileDescriptor* file, const std::string& parameter,
                              pb::compiler::GeneratorContext* context, std::string* error) const {
  if (!parameter.empty()) {
    *error = "protoc-gen-ferry takes no options (got \"" + parameter + "\")";
    return false;
  }
  const std::string stem = strip_proto(file->name());
  {
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(stem + ".ferry.h"));
    pb::io::Printer printer(out.get(), '$');
    print_header(printer, file);
  }
  {
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(stem + ".ferry.cc"));
    pb::io::Printer printer(out.get(), '$');
    print_source(printer, file);
  }
  return true;
}

}  // namespace ferry::codegen

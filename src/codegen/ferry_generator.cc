// Implementation of codegen/ferry_generator.h. The output is meant to be read: one declaration
// per line group, the .proto's comments carried over, and the rpc signature above each method.
#include "codegen/ferry_generator.h"

#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "google/protobuf/compiler/code_generator.h"
#include "google/protobuf/compiler/cpp/names.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/io/printer.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace ferry::codegen {
namespace {

namespace pb = google::protobuf;
using Vars = std::map<std::string, std::string>;

// ---- names -------------------------------------------------------------------------------------
//
// A method or service keeps its .proto name on the wire (the :path, the registered name, the
// UNIMPLEMENTED message); its C++ name is that name, with a trailing '_' when the name cannot be a
// C++ identifier in the generated code's translation unit (protoc writes a field named `delete`
// as `delete_()` the same way). protoc's own ResolveKeyword is declared only in
// compiler/cpp/helpers.h, which libprotoc-dev cannot compile (it includes compiler/scc.h, not
// installed), and its list (protobuf 3.21) lacks C++20's keywords, so the lists are here.

// C++20's keywords and alternative tokens ([lex.key], [lex.digraph]), and NULL, as protoc has it.
const std::set<std::string_view>& keywords() {
  static const std::set<std::string_view> names = {
      "NULL",         "alignas",   "alignof",       "and",
      "and_eq",       "asm",       "auto",          "bitand",
      "bitor",        "bool",      "break",         "case",
      "catch",        "char",      "char8_t",       "char16_t",
      "char32_t",     "class",     "compl",         "concept",
      "const",        "consteval", "constexpr",     "constinit",
      "const_cast",   "continue",  "co_await",      "co_return",
      "co_yield",     "decltype",  "default",       "delete",
      "do",           "double",    "dynamic_cast",  "else",
      "enum",         "explicit",  "export",        "extern",
      "false",        "float",     "for",           "friend",
      "goto",         "if",        "inline",        "int",
      "long",         "mutable",   "namespace",     "new",
      "noexcept",     "not",       "not_eq",        "nullptr",
      "operator",     "or",        "or_eq",         "private",
      "protected",    "public",    "register",      "reinterpret_cast",
      "requires",     "return",    "short",         "signed",
      "sizeof",       "static",    "static_assert", "static_cast",
      "struct",       "switch",    "template",      "this",
      "thread_local", "throw",     "true",          "try",
      "typedef",      "typeid",    "typename",      "union",
      "unsigned",     "using",     "virtual",       "void",
      "volatile",     "wchar_t",   "while",         "xor",
      "xor_eq"};
  return names;
}

// Macros a name would be replaced by: those of the C standard library that are names a method
// could have; every macro starting with a lower-case letter that a translation unit including a
// generated header and the C library's headers defines on glibc (the codegen_macro_names test
// checks that list against the compiler); the macros GCC predefines in its GNU modes
// (-std=gnu++20: linux, unix, i386); and major, minor and makedev, which older glibc's
// <sys/types.h> defines (and protoc undefines for its own plugin.proto).
const std::set<std::string_view>& macros() {
  static const std::set<std::string_view> names = {
      // C standard library, upper case.
      "BUFSIZ", "CHAR_BIT", "CHAR_MAX", "CHAR_MIN", "CLOCKS_PER_SEC", "EDOM", "EILSEQ", "EOF",
      "ERANGE", "EXIT_FAILURE", "EXIT_SUCCESS", "FILENAME_MAX", "FOPEN_MAX", "FP_ILOGB0",
      "FP_ILOGBNAN", "FP_INFINITE", "FP_NAN", "FP_NORMAL", "FP_SUBNORMAL", "FP_ZERO", "HUGE_VAL",
      "HUGE_VALF", "HUGE_VALL", "INFINITY", "INT_MAX", "INT_MIN", "LC_ALL", "LC_COLLATE",
      "LC_CTYPE", "LC_MONETARY", "LC_NUMERIC", "LC_TIME", "LLONG_MAX", "LLONG_MIN", "LONG_MAX",
      "LONG_MIN", "L_tmpnam", "MATH_ERREXCEPT", "MATH_ERRNO", "MB_CUR_MAX", "MB_LEN_MAX", "NAN",
      "PTRDIFF_MAX", "PTRDIFF_MIN", "RAND_MAX", "SCHAR_MAX", "SCHAR_MIN", "SEEK_CUR", "SEEK_END",
      "SEEK_SET", "SHRT_MAX", "SHRT_MIN", "SIGABRT", "SIGFPE", "SIGILL", "SIGINT", "SIGSEGV",
      "SIGTERM", "SIG_DFL", "SIG_ERR", "SIG_IGN", "SIZE_MAX", "TIME_UTC", "TMP_MAX", "UCHAR_MAX",
      "UINT_MAX", "ULLONG_MAX", "ULONG_MAX", "USHRT_MAX", "WCHAR_MAX", "WCHAR_MIN", "WEOF",
      // Lower case, from the C library and glibc's headers.
      "alloca", "assert", "assert_perror", "be16toh", "be32toh", "be64toh", "bswap_16", "bswap_32",
      "bswap_64", "errno", "h_addr", "h_errno", "htobe16", "htobe32", "htobe64", "htole16",
      "htole32", "htole64", "ifa_broadaddr", "ifa_dstaddr", "ifc_buf", "ifc_req", "ifr_addr",
      "ifr_bandwidth", "ifr_broadaddr", "ifr_data", "ifr_dstaddr", "ifr_flags", "ifr_hwaddr",
      "ifr_ifindex", "ifr_map", "ifr_metric", "ifr_mtu", "ifr_name", "ifr_netmask", "ifr_newname",
      "ifr_qlen", "ifr_slave", "issubnormal", "le16toh", "le32toh", "le64toh", "major", "makedev",
      "math_errhandling", "minor", "offsetof", "pthread_cleanup_pop",
      "pthread_cleanup_pop_restore_np", "pthread_cleanup_push", "pthread_cleanup_push_defer_np",
      "s6_addr", "s6_addr16", "s6_addr32", "sa_handler", "sa_sigaction", "sched_priority", "setjmp",
      "si_addr", "si_addr_lsb", "si_arch", "si_band", "si_call_addr", "si_fd", "si_int", "si_lower",
      "si_overrun", "si_pid", "si_pkey", "si_ptr", "si_status", "si_stime", "si_syscall",
      "si_timerid", "si_uid", "si_upper", "si_utime", "si_value", "sigev_notify_attributes",
      "sigev_notify_function", "sigmask", "sigsetjmp", "st_atime", "st_ctime", "st_mtime", "stderr",
      "stdin", "stdout", "strdupa", "strndupa", "timeradd", "timerclear", "timercmp", "timerisset",
      "timersub", "va_arg", "va_copy", "va_end", "va_start",
      // Predefined by GCC and clang in the GNU modes.
      "i386", "linux", "unix"};
  return names;
}

// The C++ name of a method or service called `name` in the .proto.
std::string cpp_name(const std::string& name) {
  if (keywords().count(name) != 0 || macros().count(name) != 0) return name + "_";
  return name;
}

// The C++ class of a service called `name` in the .proto: its C++ name, and std_ for std, a
// class of which would hide namespace std from all the code in the package's namespace (protoc's
// messages of the package's other files write std::string).
std::string class_name(const std::string& name) { return name == "std" ? "std_" : cpp_name(name); }

// "a.b.c" -> "a::b::c", as protoc's C++ generator (3.21) maps packages to namespaces.
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
// descriptors (LITE_RUNTIME files, and every file under the `lite` parameter, as under protoc's
// --cpp_out=lite:, have none: their services get no descriptor for reflection).
bool has_descriptors(const pb::FileDescriptor* file, bool lite) {
  return !lite && file->options().optimize_for() != pb::FileOptions::LITE_RUNTIME;
}

enum class Kind { kUnary, kClientStreaming, kServerStreaming, kBidiStreaming };

Kind kind_of(const pb::MethodDescriptor* m) {
  if (m->client_streaming()) {
    return m->server_streaming() ? Kind::kBidiStreaming : Kind::kClientStreaming;
  }
  return m->server_streaming() ? Kind::kServerStreaming : Kind::kUnary;
}

// $Service$ and $Method$ are the C++ names; $service_full_name$ and $method_name$ the .proto's,
// which go on the wire.
Vars method_vars(const pb::ServiceDescriptor* service, const pb::MethodDescriptor* m) {
  Vars v;
  v["Service"] = class_name(service->name());
  v["service_full_name"] = service->full_name();
  v["Method"] = cpp_name(m->name());
  v["method_name"] = m->name();
  v["Request"] = pb::compiler::cpp::QualifiedClassName(m->input_type());
  v["Response"] = pb::compiler::cpp::QualifiedClassName(m->output_type());
  v["RequestProto"] = m->input_type()->full_name();
  v["ResponseProto"] = m->output_type()->full_name();
  v["in_stream"] = m->client_streaming() ? "stream " : "";
  v["out_stream"] = m->server_streaming() ? "stream " : "";
  return v;
}

// ---- refusals ----------------------------------------------------------------------------------
//
// Names the generated code cannot give a method or a service without redeclaring or hiding
// something it needs. Each is refused with the reason rather than left to a C++ error far away.

// Why a method of C++ name `name` in service `service` (C++ name) cannot be generated, or "".
std::string method_name_conflict(const std::string& name, const std::string& service) {
  if (name == "Service" || name == "Stub" || name == "BlockingStub") {
    return "it would be the constructor of the generated class " + service + "::" + name +
           " (and hide that class's name in the others)";
  }
  if (name == "channel_") {
    return "it is the name of the channel member of the generated " + service + "::Stub and " +
           service + "::BlockingStub";
  }
  // ferry::Service's members that the generated Service inherits: its constructor calls the
  // add_* and set_descriptor_source, and users and the server call the others.
  static const std::set<std::string_view> base_members = {"DescriptorSource",
                                                          "add_bidi_streaming",
                                                          "add_client_streaming",
                                                          "add_method",
                                                          "add_server_streaming",
                                                          "add_unary",
                                                          "descriptor",
                                                          "full_name",
                                                          "methods",
                                                          "on_server_shutdown",
                                                          "set_descriptor_source"};
  if (base_members.count(name) != 0) {
    return "it is the name of ferry::Service::" + name + ", which the generated " + service +
           "::Service inherits; a method of that name would hide it";
  }
  return "";
}

// The C++ names protoc gives the message and enum types of file and of the files it imports
// that share its package: they share the C++ namespace with the file's services.
void collect_type_names(const pb::Descriptor* d, std::map<std::string, std::string>& names) {
  names.emplace(pb::compiler::cpp::ClassName(d), d->full_name());
  for (int i = 0; i < d->nested_type_count(); ++i) collect_type_names(d->nested_type(i), names);
  for (int i = 0; i < d->enum_type_count(); ++i) {
    names.emplace(pb::compiler::cpp::ClassName(d->enum_type(i)), d->enum_type(i)->full_name());
  }
}

void collect_package_types(const pb::FileDescriptor* file, const std::string& package,
                           std::set<const pb::FileDescriptor*>& seen,
                           std::map<std::string, std::string>& names) {
  if (!seen.insert(file).second) return;
  if (file->package() == package) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      collect_type_names(file->message_type(i), names);
    }
    for (int i = 0; i < file->enum_type_count(); ++i) {
      names.emplace(pb::compiler::cpp::ClassName(file->enum_type(i)),
                    file->enum_type(i)->full_name());
    }
  }
  for (int i = 0; i < file->dependency_count(); ++i) {
    collect_package_types(file->dependency(i), package, seen, names);
  }
}

// The first name in file that cannot be generated, as an error naming it and why, or "".
std::string check_names(const pb::FileDescriptor* file) {
  std::map<std::string, std::string> types;  // C++ name -> the .proto type's full name
  std::set<const pb::FileDescriptor*> seen;
  collect_package_types(file, file->package(), seen, types);
  std::map<std::string, std::string> services;  // C++ name -> the service's full name
  for (int s = 0; s < file->service_count(); ++s) {
    const pb::ServiceDescriptor* service = file->service(s);
    const std::string name = class_name(service->name());
    const std::string where = "service " + service->full_name() + ": ";
    if (name == "Service" || name == "Stub" || name == "BlockingStub") {
      return where + "its class would hold a class of the same name (" + name + "::" + name +
             "), which C++ forbids";
    }
    if (name == "kServiceName") {
      return where + "its class would hold a constant of the same name (" + name +
             "::kServiceName), which C++ forbids";
    }
    if (auto [it, added] = services.emplace(name, service->full_name()); !added) {
      return where + "its C++ class " + name + " is also that of service " + it->second;
    }
    if (auto it = types.find(name); it != types.end()) {
      return where + "its C++ class " + name + " is also protoc's C++ name of " + it->second +
             ", in the same namespace";
    }
    std::map<std::string, std::string> methods;  // C++ name -> the method's .proto name
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* m = service->method(i);
      const std::string method = cpp_name(m->name());
      const std::string at = "rpc " + m->full_name() + ": ";
      if (std::string why = method_name_conflict(method, name); !why.empty()) {
        return at + why + "; rename the rpc";
      }
      if (name == "k" + m->name() + "Path") {
        return where + "its class would hold a constant of the same name (" + name + "::" + name +
               ", the :path of rpc " + m->name() + "), which C++ forbids";
      }
      if (auto [it, added] = methods.emplace(method, m->name()); !added) {
        return at + "its C++ name " + method + " is also that of rpc " + it->second +
               " (a trailing _ escapes a C++ keyword or macro)";
      }
    }
  }
  return "";
}

// The .proto's leading comment of d, as // lines (empty when there is none). A line ends at
// "\n", "\r\n" or a lone "\r", as it does for the C++ compiler (a lone "\r" left inside a //
// line would end the comment there and make the rest code). Trailing white space goes, and a
// line that would end in a backslash (or its trigraph ??/) gets a '.' after it: the backslash
// would join the next line to the comment (-Wcomment, -Wtrigraphs).
template <class Descriptor>
std::string leading_comment(const Descriptor* d, const std::string& indent) {
  pb::SourceLocation location;
  if (!d->GetSourceLocation(&location) || location.leading_comments.empty()) return "";
  const std::string& text = location.leading_comments;
  std::vector<std::string> lines(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' || text[i] == '\n') {
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lines.emplace_back();
    } else {
      lines.back() += text[i];
    }
  }
  if (lines.back().empty()) lines.pop_back();
  std::string out;
  for (std::string& line : lines) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.pop_back();
    }
    const bool backslash = !line.empty() && (line.back() == '\\' ||
                                             (line.size() >= 3 && line.compare(line.size() - 3, 3,
                                                                               "?"
                                                                               "?/") == 0));
    if (backslash) line += '.';
    out += indent + "//" + line + "\n";
  }
  return out;
}

// A blank line, then the method's .proto comment and its rpc line, as the comment of a member.
void print_method_comment(pb::io::Printer& p, const pb::MethodDescriptor* m, const Vars& v) {
  p.Print("\n");
  p.PrintRaw(leading_comment(m, "    "));
  p.Print(v,
          "    // rpc $method_name$($in_stream$$RequestProto$) returns "
          "($out_stream$$ResponseProto$)\n");
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
//
// Names in the generated code are qualified from the global namespace (::std::, ::ferry::,
// <Service>::kServiceName), and member calls go through this->, so that no package, service,
// method or parameter name can hide them.

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
  const std::string stem = pb::compiler::StripProto(file->name());
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
        "  static constexpr ::std::string_view kServiceName = \"$full_name$\";\n",
        "Service", class_name(service->name()), "full_name", service->full_name());
    p.Print("  // The :path of each method.\n");
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* m = service->method(i);
      p.Print(
          "  static constexpr ::std::string_view k$method_name$Path = "
          "\"/$service$/$method_name$\";\n",
          "method_name", m->name(), "service", service->full_name());
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
// the file name with every character but letters and digits written as _ and two hex digits
// (protoc's DescriptorTableName is declared only in compiler/cpp/helpers.h; see "names").
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

void print_server_definitions(pb::io::Printer& p, const pb::ServiceDescriptor* service, bool lite) {
  p.Print(
      "$Service$::Service::Service()\n"
      "    : ::ferry::Service(::std::string($Service$::kServiceName)) {\n",
      "Service", class_name(service->name()));
  if (has_descriptors(service->file(), lite)) {
    // For server reflection; looked up only when asked (the pool builds descriptors lazily).
    // Naming the file's descriptor table makes the linker keep its .pb.cc, and with it the
    // file's registration in the generated pool, even when the program uses none of its
    // messages (a static library's object is otherwise left out).
    p.Print(
        "  this->set_descriptor_source([]() -> const ::google::protobuf::ServiceDescriptor* {\n"
        "    ::google::protobuf::internal::AssignDescriptors(&::$table$);\n"
        "    return ::google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(\n"
        "        ::std::string($Service$::kServiceName));\n"
        "  });\n",
        "table", descriptor_table_name(service->file()), "Service", class_name(service->name()));
  }
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "  this->add_unary<$Request$, $Response$>(\n"
                "      \"$method_name$\", [this](::ferry::ServerContext& context,\n"
                "                               const $Request$& request, $Response$& response) {\n"
                "        return this->$Method$(context, request, response);\n"
                "      });\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v,
                "  this->add_client_streaming<$Request$, $Response$>(\n"
                "      \"$method_name$\", [this](::ferry::ServerContext& context,\n"
                "                               ::ferry::ServerReader<$Request$>& reader,\n"
                "                               $Response$& response) {\n"
                "        return this->$Method$(context, reader, response);\n"
                "      });\n");
        break;
      case Kind::kServerStreaming:
        p.Print(v,
                "  this->add_server_streaming<$Request$, $Response$>(\n"
                "      \"$method_name$\", [this](::ferry::ServerContext& context,\n"
                "                               const $Request$& request,\n"
                "                               ::ferry::ServerWriter<$Response$>& writer) {\n"
                "        return this->$Method$(context, request, writer);\n"
                "      });\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "  this->add_bidi_streaming<$Request$, $Response$>(\n"
                "      \"$method_name$\",\n"
                "      [this](::ferry::ServerContext& context,\n"
                "             ::ferry::ServerReaderWriter<$Request$, $Response$>& stream) {\n"
                "        return this->$Method$(context, stream);\n"
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
            "  co_return ::absl::UnimplementedError(\"$service_full_name$/$method_name$ is not "
            "implemented\");\n"
            "}\n");
  }
}

void print_stub_definitions(pb::io::Printer& p, const pb::ServiceDescriptor* service) {
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* m = service->method(i);
    Vars v = method_vars(service, m);
    // A method the .proto declares safe to run twice (idempotency_level IDEMPOTENT or
    // NO_SIDE_EFFECTS) marks its calls so (ClientContext::set_idempotent): over HTTP/1.1 they may
    // then be sent again after a kept connection broke under them.
    const auto level = m->options().idempotency_level();
    v["mark_idempotent"] =
        level == pb::MethodOptions::IDEMPOTENT || level == pb::MethodOptions::NO_SIDE_EFFECTS
            ? "  context.set_idempotent(true);  // idempotency_level\n"
            : "";
    p.Print("\n");
    switch (kind_of(m)) {
      case Kind::kUnary:
        p.Print(v,
                "::asio::awaitable<::absl::Status> $Service$::Stub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request, $Response$& "
                "response) {\n"
                "$mark_idempotent$"
                "  return this->channel_->call($Service$::k$method_name$Path, context, request,\n"
                "                              response);\n"
                "}\n"
                "\n"
                "::absl::Status $Service$::BlockingStub::$Method$(\n"
                "    ::ferry::ClientContext& context, const $Request$& request, $Response$& "
                "response) {\n"
                "$mark_idempotent$"
                "  return this->channel_->call_blocking($Service$::k$method_name$Path, context,\n"
                "                                       request, response);\n"
                "}\n");
        break;
      case Kind::kClientStreaming:
        p.Print(v,
                "::asio::awaitable<::ferry::ClientWriter<$Request$>> $Service$::Stub::$Method$(\n"
                "    ::ferry::ClientContext& context) {\n"
                "$mark_idempotent$"
                "  co_return ::ferry::ClientWriter<$Request$>(co_await this->channel_->open(\n"
                "      $Service$::k$method_name$Path, ::ferry::RpcKind::kClientStreaming, "
                "context));\n"
                "}\n"
                "\n"
                "::ferry::BlockingClientWriter<$Request$> $Service$::BlockingStub::$Method$(\n"
                "    ::ferry::ClientContext& context) {\n"
                "$mark_idempotent$"
                "  return ::ferry::BlockingClientWriter<$Request$>(this->channel_->open_blocking(\n"
                "      $Service$::k$method_name$Path, ::ferry::RpcKind::kClientStreaming, "
                "context));\n"
                "}\n");
        break;
      case Kind::kServerStreaming:
        p.Print(
            v,
            "::asio::awaitable<::ferry::ClientReader<$Response$>> $Service$::Stub::$Method$(\n"
            "    ::ferry::ClientContext& context, const $Request$& request) {\n"
            "$mark_idempotent$"
            "  co_return ::ferry::ClientReader<$Response$>(co_await this->channel_->open(\n"
            "      $Service$::k$method_name$Path, context, request));\n"
            "}\n"
            "\n"
            "::ferry::BlockingClientReader<$Response$> $Service$::BlockingStub::$Method$(\n"
            "    ::ferry::ClientContext& context, const $Request$& request) {\n"
            "$mark_idempotent$"
            "  return ::ferry::BlockingClientReader<$Response$>(this->channel_->open_blocking(\n"
            "      $Service$::k$method_name$Path, context, request));\n"
            "}\n");
        break;
      case Kind::kBidiStreaming:
        p.Print(v,
                "::asio::awaitable<::ferry::ClientReaderWriter<$Request$, $Response$>>\n"
                "$Service$::Stub::$Method$(::ferry::ClientContext& context) {\n"
                "$mark_idempotent$"
                "  co_return ::ferry::ClientReaderWriter<$Request$, $Response$>(\n"
                "      co_await this->channel_->open($Service$::k$method_name$Path,\n"
                "                                    ::ferry::RpcKind::kBidiStreaming, context));\n"
                "}\n"
                "\n"
                "::ferry::BlockingClientReaderWriter<$Request$, $Response$>\n"
                "$Service$::BlockingStub::$Method$(::ferry::ClientContext& context) {\n"
                "$mark_idempotent$"
                "  return ::ferry::BlockingClientReaderWriter<$Request$, $Response$>(\n"
                "      this->channel_->open_blocking($Service$::k$method_name$Path,\n"
                "                                    ::ferry::RpcKind::kBidiStreaming, context));\n"
                "}\n");
        break;
    }
  }
}

void print_source(pb::io::Printer& p, const pb::FileDescriptor* file, bool lite) {
  const std::string stem = pb::compiler::StripProto(file->name());
  p.Print(
      "// Generated by protoc-gen-ferry from $file$. Do not edit.\n"
      "#include \"$stem$.ferry.h\"\n",
      "file", file->name(), "stem", stem);
  if (file->service_count() == 0) return;
  p.Print("\n#include <string>\n\n");
  if (has_descriptors(file, lite)) {
    p.Print("#include \"google/protobuf/descriptor.h\"\n\n");
  }
  open_namespace(p, file);
  for (int s = 0; s < file->service_count(); ++s) {
    const pb::ServiceDescriptor* service = file->service(s);
    p.Print("// ---- $full_name$ ----\n\n", "full_name", service->full_name());
    print_server_definitions(p, service, lite);
    print_stub_definitions(p, service);
    p.Print("\n");
  }
  close_namespace(p, file);
}

}  // namespace

bool FerryGenerator::Generate(const pb::FileDescriptor* file, const std::string& parameter,
                              pb::compiler::GeneratorContext* context, std::string* error) const {
  // Parameters, as protoc passes them: --ferry_out=lite:DIR, comma-separated.
  std::vector<std::pair<std::string, std::string>> options;
  pb::compiler::ParseGeneratorParameter(parameter, &options);
  bool lite = false;
  for (const auto& [key, value] : options) {
    if (key == "lite" && value.empty()) {
      lite = true;
    } else {
      *error = "protoc-gen-ferry: unknown parameter \"" + key + (value.empty() ? "" : "=") + value +
               "\"; the only one is \"lite\" (--ferry_out=lite:DIR, as protoc's "
               "--cpp_out=lite:DIR)";
      return false;
    }
  }
  if (file->service_count() > 0 && file->options().cc_generic_services()) {
    // protoc's C++ generator then writes abstract service classes named as the services, in the
    // same namespace as ferry's.
    *error =
        "option cc_generic_services = true makes protoc's C++ generator write a class "
        "for each service, named as ferry's; protoc-gen-ferry does not work with generic "
        "services: set cc_generic_services = false";
    return false;
  }
  // protoc puts the file's name before the error.
  if (std::string why = check_names(file); !why.empty()) {
    *error = why;
    return false;
  }
  const std::string stem = pb::compiler::StripProto(file->name());
  {
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(stem + ".ferry.h"));
    pb::io::Printer printer(out.get(), '$');
    print_header(printer, file);
  }
  {
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(stem + ".ferry.cc"));
    pb::io::Printer printer(out.get(), '$');
    print_source(printer, file, lite);
  }
  return true;
}

}  // namespace ferry::codegen

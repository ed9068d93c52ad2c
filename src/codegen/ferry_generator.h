// The code generator behind protoc-gen-ferry (codegen, not part of the library): for each .proto it
// writes <stem>.ferry.h and <stem>.ferry.cc beside protoc's <stem>.pb.h, holding per service
//   <Service>::Service       a base class with one virtual coroutine per RPC (UNIMPLEMENTED by
//                            default) that registers its methods with ferry::Service;
//   <Service>::Stub          awaitable client methods over a ferry::Channel;
//   <Service>::BlockingStub  the same calls, blocking.
// Everything type-dependent forwards to the library's type-erased calls; the generated .cc holds
// the method bodies, so including a .ferry.h instantiates nothing. Its one parameter is `lite`
// (as protoc's --cpp_out=lite:); names C++ cannot take get a trailing _, and names that would
// clash with the generated code are refused with the reason (docs/cmake.md, "protoc-gen-ferry").
#pragma once

#include <string>

#include "google/protobuf/compiler/code_generator.h"

namespace ferry::codegen {

class FerryGenerator : public google::protobuf::compiler::CodeGenerator {
 public:
  bool Generate(const google::protobuf::FileDescriptor* file, const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;

  std::uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }
};

}  // namespace ferry::codegen

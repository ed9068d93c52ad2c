// protoc-gen-ferry: protoc plugin that writes ferry service bases and client stubs.
//   protoc --plugin=protoc-gen-ferry=path/to/protoc-gen-ferry --ferry_out=OUT --cpp_out=OUT x.proto
// (--ferry_out=lite:OUT beside --cpp_out=lite:OUT for protobuf's lite runtime).
#include "codegen/ferry_generator.h"
#include "google/protobuf/compiler/plugin.h"

int main(int argc, char* argv[]) {
  ferry::codegen::FerryGenerator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}

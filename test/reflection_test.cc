// Tests of ferry/reflection.h through a ferry client, v1 and v1alpha: the list of services, files
// by symbol, name and extension with their transitive dependencies (each sent once per stream),
// extension numbers, and the answers to what is unknown.
#include "ferry/reflection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/channel.h"
#include "ferry/server.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "grpc/reflection/v1/reflection.ferry.h"
#include "grpc/reflection/v1alpha/reflection.ferry.h"
#include "services/reflection_test.ferry.h"

namespace ferry::reflection_test {
namespace {

using namespace std::chrono_literals;
namespace pb = google::protobuf;
namespace v1 = grpc::reflection::v1;
namespace v1alpha = grpc::reflection::v1alpha;

class ReflectionTest : public ::testing::Test {
 protected:
  ReflectionTest() {
    reflection_.add_to(server_);
    server_.add_service(lookup_);
    server_.add_service(by_name_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    channel_ = std::make_unique<Channel>("127.0.0.1:" + std::to_string(port.value_or(0)));
    context_.set_timeout(10s);
    stub_ = std::make_unique<v1::ServerReflection::BlockingStub>(*channel_);
    stream_.emplace(stub_->ServerReflectionInfo(context_));
  }
  ~ReflectionTest() override {
    stream_.reset();
    stub_.reset();
    channel_.reset();
    server_.shutdown(100ms);
  }

  // One question and its answer on the test's stream.
  v1::ServerReflectionResponse ask(const v1::ServerReflectionRequest& request) {
    v1::ServerReflectionResponse response;
    EXPECT_TRUE(stream_->write(request).ok());
    EXPECT_TRUE(stream_->read(response));
    EXPECT_EQ(response.original_request().SerializeAsString(), request.SerializeAsString());
    return response;
  }

  // The names of the files in a file_descriptor_response, in order; each must parse.
  static std::vector<std::string> file_names(const v1::ServerReflectionResponse& response) {
    std::vector<std::string> names;
    for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
      pb::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.push_back(file.name());
    }
    return names;
  }

  reflection_test::Lookup::Service lookup_;  // generated: it has a descriptor
  Service by_name_{"pkg.ByName"};            // no descriptor
  ReflectionService reflection_;
  Server server_{ServerOptions{.num_threads = 1}};
  std::unique_ptr<Channel> channel_;
  ClientContext context_;
  std::unique_ptr<v1::ServerReflection::BlockingStub> stub_;
  std::optional<
      BlockingClientReaderWriter<v1::ServerReflectionRequest, v1::ServerReflectionResponse>>
      stream_;
};

TEST_F(ReflectionTest, ListsEveryRegisteredService) {
  v1::ServerReflectionRequest request;
  request.set_host("localhost");
  request.set_list_services("");
  v1::ServerReflectionResponse response = ask(request);
  EXPECT_EQ(response.valid_host(), "localhost");
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  // In the order they were added (the fixture added reflection first).
  EXPECT_EQ(names, (std::vector<std::string>{"grpc.reflection.v1.ServerReflection",
                                             "grpc.reflection.v1alpha.ServerReflection",
                                             "ferry.reflection_test.Lookup", "pkg.ByName"}));
}

TEST_F(ReflectionTest, AFileGoesOutWithItsDependenciesOncePerStream) {
  v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("ferry.reflection_test.Lookup");
  v1::ServerReflectionResponse response = ask(request);
  EXPECT_EQ(file_names(response), (std::vector<std::string>{"services/reflection_test.proto",
                                                            "google/protobuf/empty.proto",
                                                            "services/reflection_base.proto"}));
  // The files are complete: a pool built from them alone finds the service and its types.
  pb::SimpleDescriptorDatabase database;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    pb::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    ASSERT_TRUE(database.Add(file));
  }
  pb::DescriptorPool pool(&database);
  const pb::ServiceDescriptor* lookup = pool.FindServiceByName("ferry.reflection_test.Lookup");
  ASSERT_NE(lookup, nullptr);
  EXPECT_EQ(lookup->method(0)->input_type()->full_name(), "ferry.reflection_test.Extendable");

  // Asked again on the same stream (by a method's name): the file, without its dependencies.
  request.set_file_containing_symbol("ferry.reflection_test.Lookup.Get");
  EXPECT_EQ(file_names(ask(request)), (std::vector<std::string>{"services/reflection_test.proto"}));
  request.set_file_by_filename("services/reflection_base.proto");
  EXPECT_EQ(file_names(ask(request)), (std::vector<std::string>{"services/reflection_base.proto"}));
}

TEST_F(ReflectionTest, FindsFilesByNameAndExtension) {
  v1::ServerReflectionRequest request;
  request.set_file_by_filename("services/reflection_base.proto");
  EXPECT_EQ(file_names(ask(request)), (std::vector<std::string>{"services/reflection_base.proto"}));

  request.mutable_file_containing_extension()->set_containing_type(
      "ferry.reflection_test.Extendable");
  request.mutable_file_containing_extension()->set_extension_number(150);
  EXPECT_EQ(file_names(ask(request)), (std::vector<std::string>{"services/reflection_test.proto",
                                                                "google/protobuf/empty.proto"}));

  request.set_all_extension_numbers_of_type("ferry.reflection_test.Extendable");
  v1::ServerReflectionResponse response = ask(request);
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(),
            "ferry.reflection_test.Extendable");
  EXPECT_EQ(std::vector<int>(response.all_extension_numbers_response().extension_number().begin(),
                             response.all_extension_numbers_response().extension_number().end()),
            (std::vector<int>{123, 150}));
}

TEST_F(ReflectionTest, AnswersNotFoundForWhatItDoesNotKnow) {
  std::vector<v1::ServerReflectionRequest> requests(5);
  requests[0].set_file_by_filename("no/such.proto");
  requests[1].set_file_containing_symbol("pkg.ByName");  // listed, but has no descriptor
  requests[2].mutable_file_containing_extension()->set_containing_type(
      "ferry.reflection_test.Extendable");
  requests[2].mutable_file_containing_extension()->set_extension_number(199);
  requests[3].mutable_file_containing_extension()->set_containing_type("no.Such");
  requests[4].set_all_extension_numbers_of_type("no.Such");
  for (const auto& request : requests) {
    v1::ServerReflectionResponse response = ask(request);
    ASSERT_TRUE(response.has_error_response()) << request.ShortDebugString();
    EXPECT_EQ(response.error_response().error_code(),
              static_cast<int>(absl::StatusCode::kNotFound));
    EXPECT_FALSE(response.error_response().error_message().empty());
  }
  // The stream still answers.
  v1::ServerReflectionRequest list;
  list.set_list_services("");
  EXPECT_EQ(ask(list).list_services_response().service_size(), 4);
}

TEST_F(ReflectionTest, ARequestAskingNothingEndsTheStream) {
  EXPECT_TRUE(stream_->write(v1::ServerReflectionRequest()).ok());
  v1::ServerReflectionResponse response;
  EXPECT_FALSE(stream_->read(response));
  EXPECT_EQ(stream_->finish().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReflectionTest, V1AlphaAnswersTheSame) {
  v1alpha::ServerReflection::BlockingStub stub(*channel_);
  ClientContext context;
  context.set_timeout(10s);
  auto stream = stub.ServerReflectionInfo(context);
  v1alpha::ServerReflectionRequest request;
  request.set_file_containing_symbol("ferry.reflection_test.Extendable");
  ASSERT_TRUE(stream.write(request).ok());
  v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream.read(response));
  EXPECT_EQ(response.original_request().file_containing_symbol(),
            "ferry.reflection_test.Extendable");
  ASSERT_EQ(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  pb::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "services/reflection_base.proto");
  stream.writes_done();
  EXPECT_FALSE(stream.read(response));
  EXPECT_TRUE(stream.finish().ok());
}

}  // namespace
}  // namespace ferry::reflection_test

// protoc-gen-ferry's corpus of names that need care (test/codegen/corpus), used as users use it:
// escaped C++ names serve and call under the .proto's names, methods named as the generated
// handlers' parameters work, the lite parameter leaves no descriptor, a .protodevel file's
// outputs are named as protoc names them, and carried-over comments stay comments.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "corpus/comments.ferry.h"
#include "corpus/devel.ferry.h"
#include "corpus/lite_param.ferry.h"
#include "corpus/names.ferry.h"
#include "ferry/server.h"
#include "google/protobuf/descriptor.h"

namespace ferry::codegen_corpus_test {
namespace {

using namespace std::chrono_literals;
namespace corpus = ::ferry::codegen_corpus;
using corpus::Text;
using Empty = google::protobuf::Empty;

class KeywordsImpl final : public corpus::Keywords::Service {
 public:
  asio::awaitable<absl::Status> delete_(ServerContext&, const Text& request,
                                        Text& response) override {
    response.set_text("delete:" + request.text());
    co_return absl::OkStatus();
  }
  asio::awaitable<absl::Status> linux_(ServerContext&, const Text& request,
                                       Text& response) override {
    response.set_text("linux:" + request.text());
    co_return absl::OkStatus();
  }
  asio::awaitable<absl::Status> EOF_(ServerContext&,
                                     ServerReaderWriter<Text, Text>& stream) override {
    Text text;
    while (co_await stream.read(text)) {
      text.set_text("EOF:" + text.text());
      if (absl::Status s = co_await stream.write(text); !s.ok()) co_return s;
    }
    co_return absl::OkStatus();
  }
};

class HiddenImpl final : public corpus::Hidden::Service {
 public:
  asio::awaitable<absl::Status> request(ServerContext&, const Text& request,
                                        Text& response) override {
    response.set_text("request:" + request.text());
    co_return absl::OkStatus();
  }
  asio::awaitable<absl::Status> context(ServerContext&, const Text& request,
                                        ServerWriter<Text>& writer) override {
    Text text;
    text.set_text("context:" + request.text());
    co_return co_await writer.write(text);
  }
  asio::awaitable<absl::Status> Hidden(ServerContext&, const Text& request,
                                       Text& response) override {
    response.set_text("Hidden:" + request.text());
    co_return absl::OkStatus();
  }
};

class LiteImpl final : public corpus::LiteParam::Service {
 public:
  asio::awaitable<absl::Status> Double(ServerContext&, const corpus::Number& request,
                                       corpus::Number& response) override {
    response.set_value(request.value() * 2);
    co_return absl::OkStatus();
  }
};

std::vector<std::string> method_names(const ferry::Service& service) {
  std::vector<std::string> names;
  for (const Method& m : service.methods()) names.push_back(m.name);
  return names;
}

TEST(CodegenCorpus, WireNamesAreTheProtosWhateverTheCppNames) {
  corpus::Keywords::Service keywords;
  EXPECT_EQ(keywords.full_name(), "ferry.codegen_corpus.Keywords");
  EXPECT_EQ(method_names(keywords),
            (std::vector<std::string>{"delete", "new", "class", "NULL", "EOF", "errno", "assert",
                                      "linux", "unix", "co_await", "requires", "and", "int", "this",
                                      "major", "st_atime", "offsetof"}));
  EXPECT_EQ(corpus::Keywords::kdeletePath, "/ferry.codegen_corpus.Keywords/delete");
  EXPECT_EQ(corpus::Keywords::kNULLPath, "/ferry.codegen_corpus.Keywords/NULL");
  EXPECT_EQ(corpus::Keywords::klinuxPath, "/ferry.codegen_corpus.Keywords/linux");
  EXPECT_EQ(corpus::class_::kServiceName, "ferry.codegen_corpus.class");
  EXPECT_EQ(corpus::linux_::kServiceName, "ferry.codegen_corpus.linux");
  EXPECT_EQ(corpus::linux_::kerrnoPath, "/ferry.codegen_corpus.linux/errno");
  EXPECT_EQ(corpus::std_::kServiceName, "ferry.codegen_corpus.std");

  corpus::Hidden::Service hidden;
  EXPECT_EQ(method_names(hidden),
            (std::vector<std::string>{"request", "response", "context", "reader", "writer",
                                      "stream", "Hidden", "kServiceName", "kHiddenPath", "ferry",
                                      "asio", "absl", "google"}));
  EXPECT_EQ(corpus::Hidden::kServiceName, "ferry.codegen_corpus.Hidden");
  EXPECT_EQ(corpus::Hidden::kkServiceNamePath, "/ferry.codegen_corpus.Hidden/kServiceName");
}

// A server with the corpus's services and a blocking channel to it.
struct Served {
  KeywordsImpl keywords;
  HiddenImpl hidden;
  LiteImpl lite;
  Server server{[] {
    ServerOptions o;
    o.num_threads = 1;
    return o;
  }()};
  std::optional<Channel> channel;

  Served() {
    server.add_service(keywords);
    server.add_service(hidden);
    server.add_service(lite);
    channel.emplace("127.0.0.1:" + std::to_string(server.start("127.0.0.1", 0).value()));
  }
  ~Served() {
    channel.reset();
    server.shutdown(1s);
  }
};

TEST(CodegenCorpus, EscapedMethodsServeAndCallUnderTheProtosNames) {
  Served served;
  corpus::Keywords::BlockingStub stub(*served.channel);
  Text request, reply;
  request.set_text("x");
  {
    ClientContext ctx;
    ASSERT_TRUE(stub.delete_(ctx, request, reply).ok());
    EXPECT_EQ(reply.text(), "delete:x");
  }
  {
    ClientContext ctx;
    ASSERT_TRUE(stub.linux_(ctx, request, reply).ok());
    EXPECT_EQ(reply.text(), "linux:x");
  }
  {
    ClientContext ctx;
    BlockingClientReaderWriter<Text, Text> stream = stub.EOF_(ctx);
    ASSERT_TRUE(stream.write(request).ok());
    ASSERT_TRUE(stream.read(reply));
    EXPECT_EQ(reply.text(), "EOF:x");
    stream.writes_done();
    EXPECT_FALSE(stream.read(reply));
    EXPECT_TRUE(stream.finish().ok());
  }
  {
    // Not overridden: the default answers with the .proto's name.
    ClientContext ctx;
    Empty empty, empty_reply;
    absl::Status s = stub.new_(ctx, empty, empty_reply);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(s.message(), "ferry.codegen_corpus.Keywords/new is not implemented");
  }
}

TEST(CodegenCorpus, MethodsNamedAsTheHandlersParametersAreCalled) {
  Served served;
  corpus::Hidden::BlockingStub stub(*served.channel);
  Text request, reply;
  request.set_text("y");
  {
    ClientContext ctx;
    ASSERT_TRUE(stub.request(ctx, request, reply).ok());
    EXPECT_EQ(reply.text(), "request:y");
  }
  {
    ClientContext ctx;
    BlockingClientReader<Text> reader = stub.context(ctx, request);
    ASSERT_TRUE(reader.read(reply));
    EXPECT_EQ(reply.text(), "context:y");
    EXPECT_FALSE(reader.read(reply));
    EXPECT_TRUE(reader.finish().ok());
  }
  {
    ClientContext ctx;
    ASSERT_TRUE(stub.Hidden(ctx, request, reply).ok());
    EXPECT_EQ(reply.text(), "Hidden:y");
  }
}

TEST(CodegenCorpus, LiteParameterLeavesNoDescriptorButServes) {
  // lite_param.proto is a full-runtime file generated with ferry_generate's LITE.
  corpus::LiteParam::Service lite;
  EXPECT_EQ(lite.descriptor(), nullptr);
  corpus::Keywords::Service full;
  ASSERT_NE(full.descriptor(), nullptr);
  EXPECT_EQ(full.descriptor()->full_name(), "ferry.codegen_corpus.Keywords");
  EXPECT_EQ(full.descriptor()->method(0)->name(), "delete");

  Served served;
  corpus::LiteParam::BlockingStub stub(*served.channel);
  corpus::Number request, reply;
  request.set_value(21);
  ClientContext ctx;
  ASSERT_TRUE(stub.Double(ctx, request, reply).ok());
  EXPECT_EQ(reply.value(), 42);
}

TEST(CodegenCorpus, ProtodevelOutputsAreNamedAsProtocNamesThem) {
  // Compiling at all is the check (#include "corpus/devel.ferry.h", which includes
  // "devel.pb.h"); the service is there.
  EXPECT_EQ(corpus::devel::Devel::kServiceName, "ferry.codegen_corpus.devel.Devel");
}

TEST(CodegenCorpus, CarriedOverCommentsStayComments) {
  // Compiling with -Wall -Werror is most of the check; the text shows what became of each line.
  std::ifstream in(CODEGEN_CORPUS_GENERATED_DIR "/corpus/comments.ferry.h", std::ios::binary);
  ASSERT_TRUE(in) << CODEGEN_CORPUS_GENERATED_DIR;
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  EXPECT_EQ(header.find('\r'), std::string::npos);
  for (const char* line :
       {"// Ends in a backslash: C:\\.\n", "// Ends in a backslash and spaces: \\.\n",
        "// Ends in the trigraph of a backslash: ?"
        "?/.\n",
        "// A lone carriage return, after which the compiler would see code:\n"
        "//#error injected\n",
        "// A CRLF line end.\n", "// Ends in two backslashes: \\\\.\n",
        "    // Method comment ending in a backslash \\.\n"}) {
    EXPECT_NE(header.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace ferry::codegen_corpus_test

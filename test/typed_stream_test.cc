// Tests for ferry/typed_stream.h, the one template behind the nine typed views: which operations
// each view has (checked at compile time: a server's view cannot cancel or finish, a reader
// cannot write, a client-streaming writer's finish takes the response), and that each operation
// reaches the stream it wraps with its arguments, whatever they are (a recording stream here;
// the views over real calls run in the streaming, codegen and blocking tests).
#include "ferry/typed_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/blocking_stream.h"
#include "ferry/client_stream.h"
#include "ferry/server_stream.h"
#include "ferry/testing/echo.pb.h"

namespace ferry::typed_stream_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;

template <class View>
concept CanWrite = requires(View& v, const EchoRequest& m) {
  v.write(m);
};
template <class View>
concept CanWriteResponse = requires(View& v, const EchoResponse& m) {
  v.write(m);
};
template <class View>
concept CanRead = requires(View& v, EchoResponse& m) {
  v.read(m);
};
template <class View>
concept CanReadRequest = requires(View& v, EchoRequest& m) {
  v.read(m);
};
template <class View>
concept CanCancel = requires(View& v) {
  v.cancel();
};
template <class View>
concept CanFinish = requires(View& v) {
  v.finish();
};
template <class View>
concept CanFinishWithResponse = requires(View& v, EchoResponse& r) {
  v.finish(r);
};
template <class View>
concept CanWritesDone = requires(View& v) {
  v.writes_done();
};

// Client views: what the call kind allows, with the method's types only.
static_assert(CanRead<ClientReader<EchoResponse>> && !CanWrite<ClientReader<EchoResponse>>);
static_assert(CanFinish<ClientReader<EchoResponse>> && CanCancel<ClientReader<EchoResponse>>);
static_assert(!CanReadRequest<ClientReader<EchoResponse>>);
static_assert(CanWrite<ClientWriter<EchoRequest>> && !CanRead<ClientWriter<EchoRequest>>);
static_assert(CanWritesDone<ClientWriter<EchoRequest>>);
static_assert(CanFinishWithResponse<ClientWriter<EchoRequest>>);
static_assert(!CanFinish<ClientWriter<EchoRequest>>);  // its one response must be taken
static_assert(!CanWriteResponse<ClientWriter<EchoRequest>>);
static_assert(CanWrite<ClientReaderWriter<EchoRequest, EchoResponse>>);
static_assert(CanRead<ClientReaderWriter<EchoRequest, EchoResponse>>);
static_assert(CanFinish<ClientReaderWriter<EchoRequest, EchoResponse>>);
// The blocking views have the same shape.
static_assert(CanRead<BlockingClientReader<EchoResponse>>);
static_assert(!CanWrite<BlockingClientReader<EchoResponse>>);
static_assert(CanFinishWithResponse<BlockingClientWriter<EchoRequest>>);
static_assert(!CanFinish<BlockingClientWriter<EchoRequest>>);
static_assert(CanWrite<BlockingClientReaderWriter<EchoRequest, EchoResponse>>);
static_assert(CanRead<BlockingClientReaderWriter<EchoRequest, EchoResponse>>);
// Server views: read requests, write responses; the handler's return ends the call, so no
// finish, cancel or writes_done.
static_assert(CanReadRequest<ServerReader<EchoRequest>>);
static_assert(!CanWriteResponse<ServerReader<EchoRequest>>);
static_assert(CanWriteResponse<ServerWriter<EchoResponse>>);
static_assert(!CanRead<ServerWriter<EchoResponse>> && !CanReadRequest<ServerWriter<EchoResponse>>);
static_assert(CanReadRequest<ServerReaderWriter<EchoRequest, EchoResponse>>);
static_assert(CanWriteResponse<ServerReaderWriter<EchoRequest, EchoResponse>>);
static_assert(!CanWrite<ServerReaderWriter<EchoRequest, EchoResponse>>);
static_assert(!CanCancel<ServerReaderWriter<EchoRequest, EchoResponse>>);
static_assert(!CanFinish<ServerReaderWriter<EchoRequest, EchoResponse>>);
static_assert(!CanWritesDone<ServerWriter<EchoResponse>>);

// A stream that records what reaches it.
struct RecordingStream {
  std::vector<std::string>* log;
  int write(const google::protobuf::MessageLite& m, WriteOptions options, char token = 'a') {
    log->push_back("write " + m.GetTypeName() + " " + std::to_string(options.no_compression) +
                   token);
    return 1;
  }
  int writes_done(char token = 'a') {
    log->push_back(std::string("writes_done ") + token);
    return 2;
  }
  bool read(google::protobuf::MessageLite& m, char token = 'a') {
    log->push_back("read " + m.GetTypeName() + " " + token);
    return true;
  }
  int finish(char token = 'a') {
    log->push_back(std::string("finish ") + token);
    return 3;
  }
  int finish_with_response(google::protobuf::MessageLite& m, char token = 'a') {
    log->push_back("finish_with_response " + m.GetTypeName() + " " + token);
    return 4;
  }
  void expect_single_response() { log->push_back("expect_single_response"); }
  void cancel() { log->push_back("cancel"); }
  bool last_message_compressed() const { return true; }
};

TEST(TypedStream, ForwardsEachOperationWithItsArguments) {
  std::vector<std::string> log;
  TypedStream<RecordingStream, EchoRequest, EchoResponse> bidi(RecordingStream{&log});
  EchoRequest request;
  EchoResponse response;
  EXPECT_EQ(bidi.write(request), 1);
  EXPECT_EQ(bidi.write(request, {.no_compression = true}, 'z'), 1);
  EXPECT_TRUE(bidi.read(response, 'y'));
  EXPECT_TRUE(bidi.last_message_compressed());
  EXPECT_EQ(bidi.writes_done(), 2);
  EXPECT_EQ(bidi.finish('x'), 3);
  bidi.cancel();
  EXPECT_EQ(log, (std::vector<std::string>{
                     "write ferry.testing.EchoRequest 0a", "write ferry.testing.EchoRequest 1z",
                     "read ferry.testing.EchoResponse y", "writes_done a", "finish x", "cancel"}));
}

TEST(TypedStream, AClientStreamingWriterExpectsOneResponseAndFinishesWithIt) {
  std::vector<std::string> log;
  TypedStream<RecordingStream, EchoRequest, void> writer(RecordingStream{&log});
  ASSERT_EQ(log, std::vector<std::string>{"expect_single_response"});  // told at construction
  EchoResponse response;
  EXPECT_EQ(writer.finish(response, 'w'), 4);
  EXPECT_EQ(log.back(), "finish_with_response ferry.testing.EchoResponse w");
}

TEST(TypedStream, AServerViewHoldsItsContextByReference) {
  static_assert(
      std::is_same_v<ServerWriter<EchoResponse>, TypedStream<ServerContext&, EchoResponse, void>>);
  std::vector<std::string> log;
  RecordingStream stream{&log};
  TypedStream<RecordingStream&, EchoResponse, EchoRequest> view(stream);
  std::vector<std::string> other;
  stream.log = &other;  // the view sees the change: it holds the stream, not a copy
  EchoResponse response;
  view.write(response);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(other, std::vector<std::string>{"write ferry.testing.EchoResponse 0a"});
}

}  // namespace
}  // namespace ferry::typed_stream_test

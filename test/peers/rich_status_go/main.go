// grpc-go's side of ferry's rich error details test (test/rich_status_test.cc), built by
// scripts/install_peers.sh against a pinned google.golang.org/grpc into PREFIX/bin/rich_status_peer_go.
//
//	rich_status_peer_go call PORT
//	    Calls /ferry.testing.Errors/Fail on a ferry server (an empty request) and prints what the
//	    error carried as grpc-go's status package reads it: `CODE n`, `MESSAGE m`, `DETAILS <hex of
//	    the google.rpc.Status it parsed from grpc-status-details-bin, re-serialized>`.
//	rich_status_peer_go serve
//	    Serves /ferry.testing.Errors/Fail, answering every call with INVALID_ARGUMENT, a message and
//	    one detail (status.FromProto), prints `PORT n`, and exits after one call (or 30 s).
package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

const method = "/ferry.testing.Errors/Fail"

func call(port string) int {
	conn, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println("DIAL", err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
	if err == nil {
		fmt.Println("UNEXPECTED OK")
		return 1
	}
	st := status.Convert(err)
	fmt.Printf("CODE %d\n", int(st.Code()))
	fmt.Printf("MESSAGE %s\n", st.Message())
	if len(st.Proto().GetDetails()) == 0 {
		fmt.Println("DETAILS none")
		return 0
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(st.Proto())
	if err != nil {
		fmt.Println("MARSHAL", err)
		return 1
	}
	fmt.Printf("DETAILS %s\n", hex.EncodeToString(raw))
	return 0
}

func serve() int {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("LISTEN", err)
		return 1
	}
	done := make(chan struct{}, 1)
	fail := func(srv any, stream grpc.ServerStream) error {
		name, _ := grpc.MethodFromServerStream(stream)
		if name != method {
			return status.Error(codes.Unimplemented, name)
		}
		var req emptypb.Empty
		_ = stream.RecvMsg(&req)
		defer func() { done <- struct{}{} }()
		return status.FromProto(&spb.Status{
			Code:    int32(codes.InvalidArgument),
			Message: "from go",
			Details: []*anypb.Any{{
				TypeUrl: "type.googleapis.com/ferry.testing.EchoResponse",
				Value:   []byte("\x0a\x08go says!"), // EchoResponse{payload: "go says!"}
			}},
		}).Err()
	}
	server := grpc.NewServer(grpc.UnknownServiceHandler(fail))
	go server.Serve(lis)
	fmt.Printf("PORT %d\n", lis.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	select {
	case <-done:
		time.Sleep(200 * time.Millisecond) // let the status go out
	case <-time.After(30 * time.Second):
	}
	server.Stop()
	return 0
}

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "call":
		os.Exit(call(os.Args[2]))
	case len(os.Args) == 2 && os.Args[1] == "serve":
		os.Exit(serve())
	}
	fmt.Fprintln(os.Stderr, "usage: rich_status_peer_go call PORT | serve")
	os.Exit(2)
}

// xds_client_go: grpc-go's xDS client (google.golang.org/grpc/xds, grpc.NewClient("xds:///...")),
// driven through the same scenarios as ferry's xds:/// channel in test/xds_interop_test.cc: the
// same bootstrap (GRPC_XDS_BOOTSTRAP_CONFIG in its environment), the same control plane
// (xds_control_plane_go), the same ferry Echo servers as endpoints. The target is its argument.
// Commands on stdin, one answer line each on stdout:
//
//	call N [METHOD [KEY=VALUE...]]  N unary calls of METHOD (default /ferry.testing.Echo/Echo;
//	                 Collect, a client-streaming method, takes one request as a unary call) with
//	                 the metadata given ("{i}" in a value: the call's number, from 0), each
//	                 wait-for-ready with a 10 s deadline -> "ok" | "error CODE MESSAGE" (the
//	                 first failure)
//	fail_fast N [METHOD [KEY=VALUE...]]  the same without wait-for-ready (a call fails at once
//	                 when its cluster is in TRANSIENT_FAILURE), all N made whatever fails -> "ok" |
//	                 "failed K CODE MESSAGE" (K of them failed; the first failure's status)
//	tally N          N unary Echo calls as above, all made whatever fails -> "OK FAILED"
//	hold N           opens N Collect streams (wait-for-ready) and sends one request on each,
//	                 keeping them open (calls in flight, gRFC A32) -> "ok" | "error CODE MESSAGE"
//	release          half-closes the oldest held stream and waits for its response -> "ok" |
//	                 "error CODE MESSAGE"
//
// Requests and responses are sent as google.protobuf.Empty: an empty EchoRequest, and the
// EchoResponse's fields kept as unknown ones. Runs until stdin closes.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and its balancers
	"google.golang.org/protobuf/types/known/emptypb"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatalf("usage: %s xds:///listener", os.Args[0])
	}
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("NewClient: %v", err)
	}
	defer conn.Close()
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	type held struct {
		stream grpc.ClientStream
		cancel context.CancelFunc
	}
	var holding []held
	describe := func(err error) string {
		s := status.Convert(err)
		return fmt.Sprintf("error %s %s", s.Code(), strings.ReplaceAll(s.Message(), "\n", " "))
	}
	collect := &grpc.StreamDesc{StreamName: "Collect", ClientStreams: true}
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "tally":
			n, _ := strconv.Atoi(arg)
			ok, failed := 0, 0
			for i := 0; i < n; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := conn.Invoke(ctx, "/ferry.testing.Echo/Echo", &emptypb.Empty{}, &emptypb.Empty{},
					grpc.WaitForReady(true))
				cancel()
				if err != nil {
					failed++
				} else {
					ok++
				}
			}
			fmt.Fprintf(out, "%d %d\n", ok, failed)
			out.Flush()
			continue
		case "hold":
			n, _ := strconv.Atoi(arg)
			answer := "ok"
			for i := 0; i < n; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				stream, err := conn.NewStream(ctx, collect, "/ferry.testing.Echo/Collect", grpc.WaitForReady(true))
				if err == nil {
					err = stream.SendMsg(&emptypb.Empty{})
				}
				if err != nil {
					cancel()
					answer = describe(err)
					break
				}
				holding = append(holding, held{stream, cancel})
			}
			fmt.Fprintln(out, answer)
			out.Flush()
			continue
		case "release":
			answer := "error no held stream"
			if len(holding) > 0 {
				h := holding[0]
				holding = holding[1:]
				answer = "ok"
				if err := h.stream.CloseSend(); err != nil {
					answer = describe(err)
				} else if err := h.stream.RecvMsg(&emptypb.Empty{}); err != nil {
					answer = describe(err)
				}
				h.cancel()
			}
			fmt.Fprintln(out, answer)
			out.Flush()
			continue
		}
		if cmd != "call" && cmd != "fail_fast" {
			fmt.Fprintf(out, "error unknown command %q\n", cmd)
			out.Flush()
			continue
		}
		fields := strings.Fields(arg)
		method := "/ferry.testing.Echo/Echo"
		if len(fields) > 1 {
			method = fields[1]
		}
		var md []string
		for _, kv := range fields[min(len(fields), 2):] {
			k, v, _ := strings.Cut(kv, "=")
			md = append(md, k, v)
		}
		withNumber := func(i int) []string {
			out := make([]string, len(md))
			for j, s := range md {
				out[j] = strings.ReplaceAll(s, "{i}", strconv.Itoa(i))
			}
			return out
		}
		n := 0
		if len(fields) > 0 {
			n, _ = strconv.Atoi(fields[0])
		}
		answer := "ok"
		waitForReady := cmd == "call"
		failed := 0
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), withNumber(i)...), 10*time.Second)
			err := conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{},
				grpc.WaitForReady(waitForReady))
			cancel()
			if err != nil {
				s := status.Convert(err)
				message := strings.ReplaceAll(s.Message(), "\n", " ")
				if waitForReady {
					answer = fmt.Sprintf("error %s %s", s.Code(), message)
					break
				}
				if failed == 0 {
					answer = fmt.Sprintf("%s %s", s.Code(), message)
				}
				failed++
			}
		}
		if failed > 0 {
			answer = fmt.Sprintf("failed %d %s", failed, answer)
		}
		fmt.Fprintln(out, answer)
		out.Flush()
	}
}

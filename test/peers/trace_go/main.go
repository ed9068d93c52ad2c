// grpc-go's side of ferry's cross-implementation trace test (test/trace_interop_test.cc), built
// by scripts/install_peers.sh into PREFIX/bin/trace_peer_go: grpc-go with its OpenTelemetry
// plugin (google.golang.org/grpc/stats/opentelemetry, gRFC A72's spans) and the OpenTelemetry Go
// SDK, exporting every span to a Collector over OTLP/gRPC, the propagator chosen by -propagation
// ("w3c": W3C traceparent, "bin": grpc-trace-bin).
//
//	trace_peer_go -otlp=127.0.0.1:P -propagation=w3c|bin serve -backend=127.0.0.1:B
//	    Serves grpc.testing.TestService/UnaryCall: each call makes the same UnaryCall to the
//	    backend (a ferry server) with the call's context, so that call is a child of this one, and
//	    answers with the backend's response. Prints `PORT n`; on SIGTERM (or after 60 s), flushes
//	    the spans and exits.
//	trace_peer_go -otlp=127.0.0.1:P -propagation=w3c|bin call -target=127.0.0.1:T
//	    Makes one UnaryCall to target, prints `TRACE <trace id hex>` (its Sent span's trace) and
//	    the status, flushes the spans and exits 0 on OK.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	experimental "google.golang.org/grpc/experimental/opentelemetry"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/stats/opentelemetry"
)

var (
	otlpEndpoint = flag.String("otlp", "", "the Collector's OTLP/gRPC host:port")
	propagator   = flag.String("propagation", "w3c", "w3c (traceparent) or bin (grpc-trace-bin)")
)

func tracing(service string) (*sdktrace.TracerProvider, opentelemetry.Options, error) {
	exporter, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(*otlpEndpoint),
		otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, opentelemetry.Options{}, err
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(50*time.Millisecond)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	var textMap propagation.TextMapPropagator = propagation.TraceContext{}
	if *propagator == "bin" {
		textMap = opentelemetry.GRPCTraceBinPropagator{}
	}
	return provider, opentelemetry.Options{TraceOptions: experimental.TraceOptions{
		TracerProvider: provider, TextMapPropagator: textMap}}, nil
}

type relay struct {
	testgrpc.UnimplementedTestServiceServer
	backend testgrpc.TestServiceClient
}

func (r *relay) UnaryCall(ctx context.Context, in *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return r.backend.UnaryCall(ctx, in)
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	backend := fs.String("backend", "", "the ferry server each call calls")
	fs.Parse(args)
	provider, options, err := tracing("trace_peer_go_server")
	if err != nil {
		fmt.Println("OTLP", err)
		return 1
	}
	conn, err := grpc.NewClient(*backend, grpc.WithTransportCredentials(insecure.NewCredentials()),
		opentelemetry.DialOption(options))
	if err != nil {
		fmt.Println("DIAL", err)
		return 1
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("LISTEN", err)
		return 1
	}
	server := grpc.NewServer(opentelemetry.ServerOption(options))
	testgrpc.RegisterTestServiceServer(server, &relay{backend: testgrpc.NewTestServiceClient(conn)})
	// SIGTERM is caught before PORT is printed: a test may send it as soon as its call through
	// this relay is done, and the signal's default action would end the process without the
	// flush (wait status 15, and the spans lost).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go server.Serve(listener)
	fmt.Printf("PORT %d\n", listener.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()

	select {
	case <-stop:
	case <-time.After(60 * time.Second):
	}
	server.GracefulStop()
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), flushLimit)
	defer cancel()
	if err := provider.Shutdown(ctx); err != nil {
		fmt.Println("FLUSH", err)
		return 1
	}
	return 0
}

// flushLimit bounds the export of the spans left at exit: the Go peers are built without
// optimizations for the tests, and a loaded machine made 5 s too short once.
const flushLimit = 20 * time.Second

func call(args []string) int {
	fs := flag.NewFlagSet("call", flag.ExitOnError)
	target := fs.String("target", "", "the server to call")
	fs.Parse(args)
	provider, options, err := tracing("trace_peer_go_client")
	if err != nil {
		fmt.Println("OTLP", err)
		return 1
	}
	// The call's Sent span is a child of this root, so that its trace id can be printed.
	ctx, root := provider.Tracer("trace_peer_go").Start(context.Background(), "root")
	fmt.Printf("TRACE %s\n", trace.SpanContextFromContext(ctx).TraceID())
	conn, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		opentelemetry.DialOption(options))
	if err != nil {
		fmt.Println("DIAL", err)
		return 1
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(callCtx, &testgrpc.SimpleRequest{ResponseSize: 3})
	cancel()
	conn.Close()
	root.End()
	flushCtx, flushCancel := context.WithTimeout(context.Background(), flushLimit)
	defer flushCancel()
	if ferr := provider.Shutdown(flushCtx); ferr != nil {
		fmt.Println("FLUSH", ferr)
		return 1
	}
	if err != nil {
		fmt.Println("STATUS", err)
		return 1
	}
	fmt.Println("STATUS OK")
	return 0
}

func main() {
	flag.Parse()
	switch flag.Arg(0) {
	case "serve":
		os.Exit(serve(flag.Args()[1:]))
	case "call":
		os.Exit(call(flag.Args()[1:]))
	}
	fmt.Fprintln(os.Stderr, "usage: trace_peer_go -otlp=HOST:PORT [-propagation=w3c|bin] serve -backend=HOST:PORT | call -target=HOST:PORT")
	os.Exit(2)
}

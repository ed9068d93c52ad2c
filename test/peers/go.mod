// The Go peers the interop, conformance and fault tests run, built from this one module
// (scripts/install_peers.sh), so each dependency they share (grpc-go, protobuf-go, x/net, the
// envoy and genproto packages) is compiled once, at one version, instead of once per tool at the
// version each tool's own go.mod asks for. Their versions are the ones install_peers.sh names
// (it checks each built binary against them); the rest follow by minimal version selection and
// go.sum pins every module's hash. ghz is not here: v0.93.0 needs grpc-go's long-removed
// WithBalancerName, so it keeps its own go.mod's versions (go install ghz@v0.93.0).
//
// Regenerate after changing a version (GOFLAGS=-modcacherw, GOTOOLCHAIN=local):
//   rm go.mod go.sum; printf 'module ferry.peers\n\ngo 1.24\n' >go.mod
//   go get github.com/fatih/color@V github.com/spf13/cobra@V golang.org/x/net@V   # h2spec's
//   go get -tool google.golang.org/grpc/interop/server@V google.golang.org/grpc/interop/client@V \
//     github.com/fullstorydev/grpcurl/cmd/grpcurl@V github.com/grpc-ecosystem/grpc-health-probe@V \
//     github.com/Shopify/toxiproxy/v2/cmd/server@V connectrpc.com/conformance/cmd/connectconformance@V \
//     github.com/summerwind/h2spec/cmd/h2spec@V
//   go get go.opentelemetry.io/otel@V go.opentelemetry.io/otel/sdk@V \
//     go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc@V   # trace_go's
//   go get github.com/envoyproxy/go-control-plane/pkg/server/v3@V \
//     github.com/envoyproxy/go-control-plane/pkg/cache/v3@V    # xds_control_plane_go's
// (h2spec has no go.mod: the first go get pins the dependencies it would otherwise take newest.)
// rich_status_go/, authz_go/, trace_go/ and xds_control_plane_go/ are ferry's own peers, packages
// of this module.

module ferry.peers

go 1.26.0

require (
	buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go v1.36.6-20250425153114-8976f5be98c1.1 // indirect
	buf.build/go/protovalidate v0.11.0 // indirect
	buf.build/go/protoyaml v0.7.0 // indirect
	cel.dev/expr v0.25.3 // indirect
	cloud.google.com/go/compute/metadata v0.9.0 // indirect
	connectrpc.com/conformance v1.0.7 // indirect
	connectrpc.com/connect/v2 v2.0.2 // indirect
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/Shopify/toxiproxy/v2 v2.5.0 // indirect
	github.com/andybalholm/brotli v1.2.6 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.1.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect
	github.com/desertbit/timer v0.0.0-20180107155436-c41aec40b27f // indirect
	github.com/envoyproxy/go-control-plane v0.14.0 // indirect
	github.com/envoyproxy/go-control-plane/envoy v1.39.1-0.20260819172001-e6e3fd93e4be // indirect
	github.com/envoyproxy/go-control-plane/ratelimit v0.1.0 // indirect
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/fullstorydev/grpcurl v1.9.4 // indirect
	github.com/go-jose/go-jose/v4 v4.1.6 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/golang/snappy v1.0.0 // indirect
	github.com/google/cel-go v0.29.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/grpc-ecosystem/grpc-health-probe v0.4.61 // indirect
	github.com/improbable-eng/grpc-web v0.15.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jhump/protoreflect v1.18.1 // indirect
	github.com/jhump/protoreflect/v2 v2.0.0-beta.1 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.1 // indirect
	github.com/petermattis/goid v0.0.0-20260113132338-7c7de50cc741 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/prometheus/client_golang v1.13.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.37.0 // indirect
	github.com/prometheus/procfs v0.8.0 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.64.1 // indirect
	github.com/rs/cors v1.11.1 // indirect
	github.com/rs/xid v1.4.0 // indirect
	github.com/rs/zerolog v1.28.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/spiffe/go-spiffe/v2 v2.9.0 // indirect
	github.com/summerwind/h2spec v2.2.1+incompatible // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.46.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.45.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/sdk v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	go.opentelemetry.io/proto/otlp v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/exp v0.0.0-20240823005443-9b4947da3948 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260825221802-da73d73af1c5 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
	nhooyr.io/websocket v1.8.6 // indirect
)

tool (
	connectrpc.com/conformance/cmd/connectconformance
	github.com/Shopify/toxiproxy/v2/cmd/server
	github.com/fullstorydev/grpcurl/cmd/grpcurl
	github.com/grpc-ecosystem/grpc-health-probe
	github.com/summerwind/h2spec/cmd/h2spec
	google.golang.org/grpc/interop/client
	google.golang.org/grpc/interop/server
)

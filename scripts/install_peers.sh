#!/usr/bin/env bash
# Installs the real gRPC peers ferry's interop tests talk to, into PREFIX (default build/peers):
#   PREFIX/venv           Python venv with grpcio + grpcio-tools (pip)
#   PREFIX/bin/server     grpc-go interop server  } go install
#   PREFIX/bin/client     grpc-go interop client  }
#   PREFIX/bin/grpcurl, PREFIX/bin/ghz             go install
# Go's caches live under PREFIX/go, so nothing lands in the repo or in $HOME. Idempotent: a step is
# skipped when its peer is already present at the pinned version. Prints one line per peer and exits
# non-zero if any install fails (build logs go to PREFIX/logs/). Needs no stdin; safe to run as root.
#
# Usage: scripts/install_peers.sh [PREFIX]     (PYTHON=... picks the interpreter for the venv)
set -uo pipefail

GRPCIO_VERSION=1.85.1
GRPC_GO_VERSION=v1.85.0
GRPCURL_VERSION=v1.9.4
GHZ_VERSION=v0.93.0

prefix=${1:-build/peers}
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
export GOFLAGS="-modcacherw -buildvcs=false"
export GOTOOLCHAIN=local
export GOENV=off          # ignore a user go.env that could point elsewhere
export GOWORK=off
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

failed=0

# step NAME LOGFILE CHECK_CMD INSTALL_CMD: skip when CHECK_CMD succeeds, else run INSTALL_CMD with
# output to LOGFILE and re-check.
step() {
  local name=$1 log=$2 check=$3 install=$4 start elapsed
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

# --- (a) Python venv with grpcio / grpcio-tools
python=${PYTHON:-python3}
venv_check="'$prefix/venv/bin/python' -c \"
import importlib.metadata as m, grpc, grpc_tools.protoc
assert m.version('grpcio') == '$GRPCIO_VERSION' and m.version('grpcio-tools') == '$GRPCIO_VERSION'
\""
venv_install="
  if ! '$prefix/venv/bin/python' -c 'import sys' 2>/dev/null; then
    rm -rf '$prefix/venv' && '$python' -m venv '$prefix/venv' || exit 1
  fi
  '$prefix/venv/bin/python' -m pip install -q grpcio==$GRPCIO_VERSION grpcio-tools==$GRPCIO_VERSION"
step "grpcio $GRPCIO_VERSION + grpcio-tools (venv)" "$prefix/logs/venv.log" "$venv_check" "$venv_install"

# Go steps run from PREFIX so no go.mod of the caller is ever consulted.
cd "$prefix" || exit 1
if ! command -v go >/dev/null 2>&1; then
  echo "go: not found on PATH; cannot install the Go peers" >&2
  exit 1
fi

# --- (b) grpc-go interop server and client
step "grpc-go interop server+client $GRPC_GO_VERSION" "$prefix/logs/grpc-go.log" \
  "go_has server google.golang.org/grpc $GRPC_GO_VERSION && go_has client google.golang.org/grpc $GRPC_GO_VERSION" \
  "go install google.golang.org/grpc/interop/server@$GRPC_GO_VERSION google.golang.org/grpc/interop/client@$GRPC_GO_VERSION"

# --- (c) grpcurl and ghz
step "grpcurl $GRPCURL_VERSION" "$prefix/logs/grpcurl.log" \
  "go_has grpcurl github.com/fullstorydev/grpcurl $GRPCURL_VERSION" \
  "go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
step "ghz $GHZ_VERSION" "$prefix/logs/ghz.log" \
  "go_has ghz github.com/bojand/ghz $GHZ_VERSION" \
  "go install github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"

exit $failed

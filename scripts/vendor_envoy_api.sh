#!/usr/bin/env bash
# Vendors into third_party/envoy-api/ the Envoy API .proto files that ferry's xDS client is
# generated from (ferry::xds_proto, CMakeLists.txt): the files listed in third_party/envoy-api/FILES,
# taken from the io.envoyproxy.controlplane:api jar (which carries Envoy's API together with the
# cncf/xds (xds/, udpa/) and protoc-gen-validate (validate/) protos it imports), fetched with Maven
# the way scripts/install_peers.sh fetches grpc-java. google/rpc/status.proto is not vendored:
# ferry::rich_status owns google.rpc.Status (proto/google/rpc/status.proto, the same message).
#
# One rewrite, and only one: each file but the annotations' (see below) gets `option optimize_for = CODE_SIZE;` after its package
# line (protoc has no flag to override a file's optimize_for; CODE_SIZE makes the generated C++
# use the reflection-based parse/serialize instead of a specialised one per message, cutting the
# library's compile several times). The wire format is unchanged. No field is dropped.
#
# Usage: scripts/vendor_envoy_api.sh [VERSION]    (default: the version in the README)
#   ENVOY_API_JAR=path   use that jar (e.g. one already in a local Maven repository) instead of
#                        fetching it; its sha256 is printed either way, to check against the README
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-1.0.49}
dest=third_party/envoy-api
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

jar=${ENVOY_API_JAR:-}
if [ -z "$jar" ]; then
  mvn -B -q -Dmaven.repo.local="$work/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="io.envoyproxy.controlplane:api:$version" -DoutputDirectory="$work/jar"
  jar="$work/jar/api-$version.jar"
fi
echo "sha256 of the jar: $(sha256sum "$jar" | cut -d' ' -f1)"
mkdir -p "$work/src"
(cd "$work/src" && unzip -q "$jar" '*.proto')

while read -r file; do
  [ -n "$file" ] || continue
  mkdir -p "$dest/$(dirname "$file")"
  # The annotation files define custom options (extensions of google.protobuf.*Options): their
  # messages are parsed while the generated pool builds a descriptor, under the pool's lock, and
  # a CODE_SIZE message parses through reflection, which takes that lock again (a deadlock on
  # the first FindMessageTypeByName of an annotated message). They stay SPEED, unchanged. So does
  # google/api (googleapis' HTTP annotations, which csds.proto imports): custom options too.
  case "$file" in
    udpa/annotations/* | xds/annotations/* | envoy/annotations/* | validate/* | google/api/*)
      cp "$work/src/$file" "$dest/$file"
      continue
      ;;
  esac
  # The first `package` line is followed by the option; a file that already names an
  # optimize_for would be an error (none of these does).
  if grep -q 'optimize_for' "$work/src/$file"; then
    echo "vendor_envoy_api.sh: $file names optimize_for already" >&2
    exit 1
  fi
  awk 'BEGIN { done = 0 }
       { print }
       !done && /^package [A-Za-z0-9_.]+;/ {
         print ""
         print "option optimize_for = CODE_SIZE;  // ferry: scripts/vendor_envoy_api.sh"
         done = 1 }
       END { if (!done) exit 3 }' "$work/src/$file" >"$dest/$file"
done <"$dest/FILES"
echo "vendored $(grep -c . "$dest/FILES") files into $dest"

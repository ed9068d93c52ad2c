#!/usr/bin/env bash
# Runs the README's two commands (`bash scripts/main.sh`, `bash scripts/test.sh`) in a root that
# holds what a new machine of this project's kind (`polyglot`, Debian 12) holds and nothing more,
# to prove that the scripts install everything else they need by name. Not part of the test
# command (a full run takes about an hour on 2 cores): run it before changing what the scripts
# install, and put its result in the closing note. Needs root (debootstrap, mount, chroot).
#
# The root is made of:
#   - a minimal Debian 12 (debootstrap --variant=minbase bookworm) from the mirror the host's
#     own Debian apt sources name, with those sources (/etc/apt/sources.list.d; third-party
#     repositories, signed by keys other than Debian's archive keyring, left out) and
#     the apt settings a new machine's image carries (docker-*, 99artifact-registry);
#   - the Debian packages the env lists for this kind of machine (installed-go.txt, whose first
#     line names the kinds it is for), installed by name with --no-install-recommends; a name apt
#     cannot find (Google's cloud SDK) or from a third-party repository (nodesource's nodejs) is
#     skipped with a line saying so;
#   - the toolchains a new machine has preinstalled outside Debian's packages, bind-mounted from
#     the host read-only: Go (/usr/local/go), pyenv's Python (/root/.pyenv), rustup's Rust
#     (/root/.cargo, /root/.rustup), the Temurin JDK (/usr/lib/jvm/temurin-*), nodesource's
#     node and npm (/usr/bin/node, /usr/lib/node_modules), and root's .profile/.bashrc, which
#     put them on PATH in a login shell (the commands run in one);
#   - the machine's trust in its TLS egress proxy (the CAs in /usr/local/share/ca-certificates,
#     /etc/pip.conf and the CA variables of its environment): without it no registry answers.
# That base is built once and cached (FRESH_ROOT_CACHE/base); every run starts from a fresh copy
# of it (FRESH_ROOT_CACHE/run), so nothing a previous run installed survives. A clean clone of
# the repository at REV goes to /root/ferry in the copy, and each command runs there under
# `nice -n 10` in a chroot with /proc, /dev, /dev/pts, /sys (read-only) and a tmpfs /tmp mounted
# and the host's resolv.conf (the package registries). Everything is unmounted on exit.
#
# Usage: scripts/fresh_check.sh [--only main|test] [--rev REV] [--rebuild-base]
#   --only main|test   run only that command (default: main.sh, then test.sh)
#   --rev REV          revision of this repository to clone (default: HEAD)
#   --rebuild-base     build the cached base again even if it is there
#   FRESH_ROOT_CACHE   where the base and the run copy live (default /var/tmp/ferry-fresh-root)
#   FRESH_PACKAGES     the env's package list (default /work/.library/env/packages/installed-go.txt)
#   FERRY_FUZZ_SECONDS passed to test.sh (seconds per fuzz target; default there 20)
# Logs: FRESH_ROOT_CACHE/logs/<UTC time>/{base,main,test}.log; a summary line per command. The
# run copy (its build trees, FRESH_ROOT_CACHE/run/root/ferry) stays until the next run starts.
# Exits non-zero when a command failed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${FRESH_ROOT_CACHE:-/var/tmp/ferry-fresh-root}
package_list=${FRESH_PACKAGES:-/work/.library/env/packages/installed-go.txt}
suite=bookworm
# Debian's archive keyring: an apt source signed by another key is a third party's.
debian_keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# Toolchains a new machine has outside Debian's packages (the env's machine doc), shown read-only.
toolchains=(/usr/local/go /root/.pyenv /root/.cargo /root/.rustup /usr/lib/jvm/temurin-*)
# Bump when what goes into the base changes, so a cached base is rebuilt.
base_version=3

only="" rev=HEAD rebuild=0
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    --rebuild-base) rebuild=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$only" in
  "") commands=(main test) ;;
  main|test) commands=("$only") ;;
  *) echo "fresh_check: --only takes main or test" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "fresh_check: needs root (debootstrap, mount, chroot)" >&2; exit 2; }
[ -f "$package_list" ] || { echo "fresh_check: no package list at $package_list" >&2; exit 2; }
sha=$(git -C "$repo" rev-parse --verify "$rev^{commit}")

stamp=$(date -u +%Y%m%dT%H%M%SZ)
logs="$cache/logs/$stamp"
mkdir -p "$logs"
base="$cache/base"
run="$cache/run"

# --- mounts, undone in reverse order on exit (also on failure or ^C)
mounts=()
mount_at() {  # mount_at TARGET MOUNT-ARGS...: mount, and remember it for the cleanup
  local target=$1; shift
  mount "$@" "$target"
  mounts+=("$target")
}
bind_ro() {  # bind_ro SOURCE TARGET
  mkdir -p "$2"
  mount_at "$2" --bind "$1"
  mount -o remount,bind,ro "$2"
}
mount_system() {  # mount_system ROOT: what a chroot needs to run builds and package installs
  local root=$1
  mount_at "$root/proc" -t proc proc
  mount_at "$root/dev" --bind /dev
  mount_at "$root/dev/pts" --bind /dev/pts
  bind_ro /sys "$root/sys"
  mount_at "$root/tmp" -t tmpfs -o mode=1777 tmpfs
  cp /etc/resolv.conf /etc/hosts "$root/etc/"
}
kill_chroot_processes() {  # processes this script left running inside ROOT (a server, say)
  local root=$1 p
  for p in /proc/[0-9]*; do
    if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then
      kill -9 "${p#/proc/}" 2>/dev/null || true
    fi
  done
}
cleanup() {
  local i root
  for root in "$base.new" "$run"; do [ -d "$root" ] && kill_chroot_processes "$root"; done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null ||
      echo "fresh_check: could not unmount ${mounts[i]}" >&2
  done
  mounts=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the base root: minimal Debian 12 + the env's Debian packages (built once, then cached)
want_stamp="version=$base_version list=$(sha256sum <"$package_list" | cut -c1-16)"
# The host's apt source files that are Debian's own: signed by Debian's archive keyring, or by
# no key of their own (apt's trusted keys); a source signed by any other keyring is a third
# party's (nodesource, Google's cloud SDK) and stays out of the root.
debian_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
           /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    if grep -qiE '(signed-by)' "$f" && ! grep -q "$debian_keyring" "$f"; then
      echo "fresh_check: apt source left out (not Debian's): $f" >&2
    else
      echo "$f"
    fi
  done
}
# The first mirror URI of those sources that serves $suite itself (not -updates or -security),
# from deb822 (URIs:/Suites:) or one-line (deb [opts] URI suite ...) entries.
debian_mirror() {
  local f
  for f in $(debian_sources 2>/dev/null); do
    awk -v suite="$suite" '
      /^[[:space:]]*#/ { next }
      /^URIs:/   { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite && uri != "") { print uri; exit } }
      /^deb[[:space:]]/ {
        n = 2; if ($2 ~ /^\[/) { while (n <= NF && $n !~ /\]$/) n++; n++ }
        if ($(n + 1) == suite) { print $n; exit }
      }' "$f"
  done | head -n 1
}

build_base() {
  local root="$base.new" f names=() skipped=() name version available nodejs_version=""
  rm -rf "$root"
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends debootstrap; }
  local mirror
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || { echo "fresh_check: no Debian apt source for $suite on this host" >&2; exit 1; }
  echo "fresh_check: debootstrap $suite into $root from the host's mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror"

  # The host's apt sources for Debian, not third-party ones; the apt settings of the image.
  rm -f "$root/etc/apt/sources.list"
  for f in $(debian_sources); do cp "$f" "$root$f"; done
  for f in /etc/apt/apt.conf.d/docker-* /etc/apt/apt.conf.d/99artifact-registry \
           /etc/dpkg/dpkg.cfg.d/docker-*; do
    if [ -f "$f" ]; then cp "$f" "$root$f"; fi
  done

  # The env's list: `apt<TAB>name<TAB>version` lines, installed by name.
  while IFS=$'\t' read -r kind name version; do
    [ "$kind" = apt ] || continue
    if [[ "$version" == *nodesource* ]]; then
      skipped+=("$name (from nodesource's repository, which this root does not use)")
      if [ "$name" = nodejs ]; then nodejs_version=$version; fi
    else
      names+=("$name")
    fi
  done <"$package_list"

  mount_system "$root"
  # No service starts during the installs (postgresql, say).
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  local in_root=(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
                 DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8)
  "${in_root[@]}" apt-get update -qq
  available=$("${in_root[@]}" apt-cache pkgnames | sort -u)
  local install=()
  for name in "${names[@]}"; do
    if grep -qxF "${name%%:*}" <<<"$available"; then
      install+=("$name")
    else
      skipped+=("$name (apt cannot find it)")
    fi
  done
  for name in "${skipped[@]}"; do echo "fresh_check: skipped $name"; done
  echo "fresh_check: installing ${#install[@]} packages of $(basename "$package_list")"
  "${in_root[@]}" apt-get install -y -q --no-install-recommends "${install[@]}"
  "${in_root[@]}" apt-get clean
  # On a new machine nodesource's nodejs is an installed package; here its files come from the
  # host (bind-mounted read-only, below), so the package is registered without files, at the
  # machine's version and Multi-Arch (allowed: what `nodejs:any` needs): a Debian package that
  # depends on nodejs (node-llhttp, through node-ms) then finds it installed, as on the machine,
  # instead of unpacking Debian's nodejs over the mount.
  if [ -n "$nodejs_version" ]; then
    mkdir -p "$root/tmp/nodejs-registration/DEBIAN"
    printf '%s\n' "Package: nodejs" "Version: $nodejs_version" \
      "Architecture: $(dpkg --print-architecture)" "Multi-Arch: allowed" \
      "Maintainer: fresh_check" \
      "Provides: nodejs-dev, nodejs-doc, nodejs-legacy, npm" \
      "Description: nodesource's nodejs, its files bind-mounted from the host" \
      >"$root/tmp/nodejs-registration/DEBIAN/control"
    "${in_root[@]}" dpkg-deb --build /tmp/nodejs-registration /tmp/nodejs-registration.deb
    "${in_root[@]}" dpkg -i /tmp/nodejs-registration.deb
    rm -rf "$root/tmp/nodejs-registration" "$root/tmp/nodejs-registration.deb"
  fi
  rm -f "$root/usr/sbin/policy-rc.d"

  # What the root has beyond the list (the minimal Debian's own packages not listed).
  "${in_root[@]}" dpkg-query -W -f='${Package}\n' | sort -u >"$logs/base-packages.txt"
  awk -F'\t' '$1 == "apt" { sub(/:.*/, "", $2); print $2 }' "$package_list" | sort -u \
    >"$logs/listed-packages.txt"
  echo "fresh_check: installed but not in the list: $(comm -23 "$logs/base-packages.txt" \
    "$logs/listed-packages.txt" | tr '\n' ' ')"
  echo "fresh_check: in the list but not installed: $(comm -13 "$logs/base-packages.txt" \
    "$logs/listed-packages.txt" | tr '\n' ' ')"

  cleanup
  echo "$want_stamp" >"$root/.fresh-base"
  rm -rf "$base" && mv "$root" "$base"
}

if [ "$rebuild" -eq 1 ] || [ "$(cat "$base/.fresh-base" 2>/dev/null)" != "$want_stamp" ]; then
  start=$(date +%s)
  echo "fresh_check: building the base root (log $logs/base.log)"
  # In a subshell of its own, so that set -e holds inside (it would not in an `if`).
  set +e
  (trap cleanup EXIT; set -e; build_base) >"$logs/base.log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "fresh_check: building the base root FAILED; tail of $logs/base.log:" >&2
    tail -n 30 "$logs/base.log" >&2
    exit 1
  fi
  grep '^fresh_check: ' "$logs/base.log" | grep -v 'base root' || true
  echo "fresh_check: base root built in $(( $(date +%s) - start ))s"
else
  echo "fresh_check: using the cached base root $base"
fi

# --- a fresh copy of the base, the toolchains, a clean clone, then the commands
echo "fresh_check: copying the base to $run"
rm -rf "$run"
cp -a "$base" "$run"
rm -f "$run/.fresh-base"
mount_system "$run"
for t in "${toolchains[@]}"; do
  if [ -e "$t" ]; then bind_ro "$t" "$run$t"; fi
done
# nodesource's nodejs, skipped as a package above (a third-party repository), is on a new machine
# all the same (npm installs test/browser's peers): node and npm's modules from the host,
# read-only, and npm's and npx's links as the package makes them.
if [ -x /usr/bin/node ] && [ -d /usr/lib/node_modules/npm ]; then
  touch "$run/usr/bin/node"
  mount_at "$run/usr/bin/node" --bind /usr/bin/node
  mount -o remount,bind,ro "$run/usr/bin/node"
  bind_ro /usr/lib/node_modules "$run/usr/lib/node_modules"
  ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$run/usr/bin/npm"
  ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$run/usr/bin/npx"
fi
for f in /root/.profile /root/.bashrc; do
  if [ -f "$f" ]; then cp "$f" "$run$f"; fi
done
# The machine's own trust settings: its registries are reached through a TLS proxy whose CA a new
# machine trusts (/usr/local/share/ca-certificates, the egress one made at boot, so taken afresh
# for each run), and pip is told to use the system's bundle (/etc/pip.conf, and the environment
# variables in ca_env below, which a new machine's environment has).
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$run/usr/local/share/ca-certificates/"
  chroot "$run" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin update-ca-certificates \
    >"$logs/ca.log" 2>&1 || { cat "$logs/ca.log"; exit 1; }
fi
if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$run/etc/pip.conf"; fi
ca_env=()
for v in SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO \
         NODE_EXTRA_CA_CERTS GRPC_DEFAULT_SSL_ROOTS_FILE_PATH; do
  if [ -n "${!v:-}" ]; then ca_env+=("$v=${!v}"); fi
done
git clone -q --no-checkout "$repo" "$run/root/ferry"
git -C "$run/root/ferry" checkout -q --detach "$sha"
echo "fresh_check: cloned $(git -C "$repo" log -1 --format='%h %s' "$sha" | cut -c1-90)"

status=0
for c in "${commands[@]}"; do
  log="$logs/$c.log"
  env=(HOME=/root LANG=C.UTF-8 TERM=dumb "${ca_env[@]}"
       PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  if [ -n "${FERRY_FUZZ_SECONDS:-}" ]; then env+=("FERRY_FUZZ_SECONDS=$FERRY_FUZZ_SECONDS"); fi
  echo "fresh_check: bash scripts/$c.sh started $(date -u +%H:%M:%S) UTC (log $log)"
  start=$(date +%s)
  rc=0
  # A login shell, as a new machine's: /etc/profile, then root's .profile and .bashrc (PATH).
  nice -n 10 chroot "$run" /usr/bin/env -i "${env[@]}" /bin/bash -l -c \
    "cd /root/ferry && bash scripts/$c.sh" </dev/null >"$log" 2>&1 || rc=$?
  elapsed=$(( $(date +%s) - start ))
  printf 'fresh_check: bash scripts/%s.sh exited %d after %dm%02ds (log %s)\n' \
    "$c" "$rc" $((elapsed / 60)) $((elapsed % 60)) "$log"
  [ "$rc" -eq 0 ] || status=1
done
exit $status

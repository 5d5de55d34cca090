#!/bin/sh
# build/traefik.sh: build Traefik at a pinned version from its Go module and
# print the path of the stripped static binary. The binary is cached under
# $DRILL_CACHE_DIR/traefik/<version>/traefik (default ~/.cache/drill), so only
# the first call per version compiles (about 8.5 min on a 2-core guest, see
# reports/BENCHMARKS.md); later calls print the path at once.
#
# Traefik's go.mod carries replace lines to forks, so `go install
# module@version` refuses it: the script copies the module's own tree out of
# the module cache into a writable directory and runs `go build ./cmd/traefik`
# there, niced so that it does not starve timed drills. A lock file
# serializes concurrent builds of one version.
#
# Usage: build/traefik.sh [version]   (default: TRAEFIK_VERSION or v3.6.12)
set -eu
version=${1:-${TRAEFIK_VERSION:-v3.6.12}}
go=${GO:-go}
cache=${DRILL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drill}/traefik/$version
bin=$cache/traefik
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
start=$(date +%s)
# go mod download needs no module of its own; run it outside any to be sure.
dir=$(cd / && "$go" mod download -json "github.com/traefik/traefik/v3@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
	echo "traefik.sh: go mod download github.com/traefik/traefik/v3@$version gave no module dir" >&2
	exit 1
fi
src=$cache/src
rm -rf "$src"
cp -R "$dir" "$src"
chmod -R u+w "$src"
echo "traefik.sh: building traefik $version in $src (first build per version; minutes)" >&2
(cd "$src" && CGO_ENABLED=0 nice -n 19 "$go" build -trimpath \
	-ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$version" \
	-o "$bin.tmp" ./cmd/traefik)
mv "$bin.tmp" "$bin"
rm -rf "$src"
echo "traefik.sh: built $bin in $(($(date +%s) - start)) s" >&2
echo "$bin"

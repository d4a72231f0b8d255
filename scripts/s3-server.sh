#!/usr/bin/env bash
# Runs a real S3 server in the foreground on 127.0.0.1:PORT with its data under DIR: SeaweedFS
# (Apache-2.0) with its S3 gateway, for tests, benchmarks and trying embstore's s3:// paths.
#
# Usage: scripts/s3-server.sh DIR PORT
#        scripts/s3-server.sh --build    builds the server if needed, prints its path, exits
#        scripts/s3-server.sh --where    prints the server's path; exit status 3 when not built
#   PORT         the S3 port; PORT+1..PORT+3 (master, volume, filer) and each of those plus 10000
#                (their gRPC ports) must be free too, so PORT must be at most 55531.
#   S3_ACCESS_KEY, S3_SECRET_KEY
#                when both are set, the gateway requires requests signed with them (AWS SigV4);
#                otherwise it accepts anonymous requests and checks no signature.
#
# The first run builds the `weed` binary from the Go module proxy into build/tools/ (about four
# minutes on two cores) and later runs reuse it. A Go toolchain new enough for SeaweedFS is used
# from PATH when there is one, otherwise fetched from the module proxy into build/tools/ (a fresh
# Debian 12 has Go 1.19 at most). Needs curl and unzip.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SEAWEEDFS_MODULE=github.com/seaweedfs/seaweedfs
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
GO_VERSION=1.26.6     # what SeaweedFS's go.mod at that version asks for
TOOLS="$ROOT/build/tools"
WEED="$TOOLS/seaweedfs-$SEAWEEDFS_VERSION/weed"

log() { echo "s3-server: $*" >&2; }
die() { log "$*"; exit 1; }

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  usage
  exit 0
fi
BUILD_ONLY=0
if [[ ${1:-} == --where && $# -eq 1 ]]; then
  WEED_WHERE=1
elif [[ ${1:-} == --build && $# -eq 1 ]]; then
  BUILD_ONLY=1
elif [[ $# -ne 2 ]]; then
  usage >&2
  exit 2
fi
dir="${1:-}"
port="${2:-0}"
if ((!BUILD_ONLY)) && [[ -z ${WEED_WHERE:-} ]] && ! { [[ $port =~ ^[0-9]+$ ]] && ((port >= 1024 && port <= 55531)); }; then
  die "PORT must be a number from 1024 to 55531 (got '$port'): PORT+3 and PORT+10003 are used too"
fi

# go_ok GO: whether GO runs and is at least GO_VERSION.
go_ok() {
  local have
  have="$("$1" env GOVERSION 2>/dev/null)" || return 1
  have="${have#go}"
  [[ "$(printf '%s\n%s\n' "$GO_VERSION" "$have" | sort -V | head -1)" == "$GO_VERSION" ]]
}

find_go() {
  if command -v go >/dev/null && go_ok go; then
    command -v go
    return
  fi
  local zip_dir="$TOOLS/go-$GO_VERSION"
  local go="$zip_dir/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64/bin/go"
  if [[ ! -x $go ]]; then
    [[ $(uname -m) == x86_64 ]] || die "no Go >= $GO_VERSION on PATH, and only linux-amd64 toolchains are fetched"
    command -v unzip >/dev/null || die "unzip is needed to unpack the Go toolchain (apt-get install unzip)"
    local proxy="${GOPROXY:-https://proxy.golang.org}"
    proxy="${proxy%%,*}"
    local url="$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip"
    log "no Go >= $GO_VERSION on PATH: fetching $url"
    mkdir -p "$TOOLS"
    local tmp
    tmp="$(mktemp -d "$TOOLS/go-download.XXXXXX")"
    curl -fsSL --retry 3 -o "$tmp/go.zip" "$url" || { rm -rf "$tmp"; die "could not download $url"; }
    unzip -q "$tmp/go.zip" -d "$tmp/unpacked" || { rm -rf "$tmp"; die "could not unpack $url"; }
    rm -rf "$zip_dir"
    mv "$tmp/unpacked" "$zip_dir"   # whole or not at all
    rm -rf "$tmp"
  fi
  echo "$go"
}

build_weed() {
  local go
  go="$(find_go)"
  log "building SeaweedFS $SEAWEEDFS_VERSION with $("$go" version) (a few minutes, once)"
  # `go install module@version` refuses SeaweedFS (its go.mod has replace directives), so the
  # module is downloaded and built inside its own directory.
  local src
  src="$(GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" mod download -json "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n $src && -d $src ]] || die "go mod download of $SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION gave no directory"
  mkdir -p "$(dirname "$WEED")"
  (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" build -trimpath -ldflags="-s -w" -o "$WEED.tmp" ./weed) ||
    die "building weed failed"
  mv "$WEED.tmp" "$WEED"
}

if [[ -n ${WEED_WHERE:-} ]]; then
  [[ -x $WEED ]] || { log "not built yet: $WEED (scripts/s3-server.sh --build)"; exit 3; }
  echo "$WEED"
  exit 0
fi
[[ -x $WEED ]] || build_weed
if ((BUILD_ONLY)); then
  echo "$WEED"
  exit 0
fi

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
args=(server -dir="$dir" -ip=127.0.0.1 -ip.bind=127.0.0.1
  -master.port=$((port + 1)) -volume.port=$((port + 2)) -filer.port=$((port + 3))
  -s3 -s3.port="$port" -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false
  -volume.max=0 -master.volumeSizeLimitMB=1024)
if [[ -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]]; then
  config="$dir/s3-identities.json"
  umask 077
  printf '{"identities":[{"name":"embstore","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
    "$S3_ACCESS_KEY" "$S3_SECRET_KEY" >"$config"
  args+=(-s3.config="$config")
  log "requests must be signed with S3_ACCESS_KEY"
else
  log "no S3_ACCESS_KEY/S3_SECRET_KEY: anonymous requests allowed, signatures not checked"
fi
log "S3 on http://127.0.0.1:$port, data in $dir (ready when GET /status answers 200)"
exec "$WEED" "${args[@]}"

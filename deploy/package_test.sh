#!/usr/bin/env bash
# The Debian package, end to end: build it with CPack from the build tree, check its control data
# and contents, unpack it into a scratch root, run the packaged server with the packaged
# configuration (store and listen address overridden to scratch ones), check its health and
# tables with the packaged binary, and stop it with SIGTERM.
#
# usage: package_test.sh BUILD_DIR [CPACK]
set -euo pipefail
build=$1
cpack=${2:-cpack}
tmp=$(mktemp -d /tmp/embstore-package-test-XXXXXX)
server=""
cleanup() {
  if [[ -n $server ]] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
step() { echo "package_test: $*"; }

step "building the package"
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack failed"; }
debs=("$tmp"/pkg/embstore_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one embstore_*.deb, found: ${debs[*]}"
deb=${debs[0]}
step "built $(basename "$deb")"

info=$(dpkg-deb --info "$deb")
grep -q '^ Package: embstore$' <<<"$info" || fail "package name is not embstore: $info"
grep -Eq '^ Version: [0-9]+\.[0-9]+\.[0-9]+$' <<<"$info" || fail "no version: $info"
grep -q '^ Maintainer: ' <<<"$info" || fail "no maintainer: $info"
# dpkg-shlibdeps found the shared libraries the binary needs: libcurl always, gRPC and protobuf
# only where the binary does not link their static archives (EMBSTORE_STATIC_GRPC).
grep -Eq '^ Depends: .*libcurl4' <<<"$info" || fail "Depends lacks libcurl4 (s3:// tables): $info"
if grep -q '^EMBSTORE_STATIC_GRPC:BOOL=ON$' "$build/CMakeCache.txt"; then
  if grep -Eq '^ Depends: .*(libgrpc|libprotobuf)' <<<"$info"; then
    fail "Depends names gRPC or protobuf, which the binary holds: $info"
  fi
else
  grep -Eq '^ Depends: .*libgrpc\+\+1\.51' <<<"$info" || fail "Depends lacks libgrpc++: $info"
  grep -Eq '^ Depends: .*libprotobuf' <<<"$info" || fail "Depends lacks libprotobuf: $info"
fi
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles) == "/etc/embstore/embstore.json" ]] ||
  fail "conffiles does not list /etc/embstore/embstore.json"

contents=$(dpkg-deb --contents "$deb")
for want in ./usr/bin/embstore ./lib/systemd/system/embstore.service \
            ./etc/embstore/embstore.json ./var/lib/embstore/tables/ \
            ./usr/share/doc/embstore/DEPLOY.md; do
  grep -q " $want\$" <<<"$contents" || fail "package lacks $want"
done
# Nothing of the Python package or of the build tree.
if grep -Eq '_native|\.a$|/include/' <<<"$contents"; then fail "unexpected files: $contents"; fi

step "unpacking into $tmp/root"
dpkg-deb -x "$deb" "$tmp/root"
bin="$tmp/root/usr/bin/embstore"
[[ -x $bin ]] || fail "$bin is not executable"
"$bin" --version >/dev/null
"$bin" health --help >/dev/null

# A table for the server to serve, converted by the packaged binary.
mkdir -p "$tmp/tables"
for r in 0 1 2 3 4 5 6 7 8 9; do echo "$r.5 -$r.25 $r $r"; done >"$tmp/m.txt"
"$bin" convert "$tmp/m.txt" "$tmp/tables/sample.emb" >/dev/null 2>&1 || fail "convert failed"

step "starting the packaged server with the packaged configuration"
sock="$tmp/embstore.sock"
"$bin" serve --config "$tmp/root/etc/embstore/embstore.json" --store "$tmp/tables" \
  --listen "unix:$sock" --metrics-listen 127.0.0.1:0 2>"$tmp/serve.log" &
server=$!
"$bin" health --from "unix:$sock" --wait 30 || { cat "$tmp/serve.log"; fail "never SERVING"; }
"$bin" health --from "unix:$sock" --service embstore.v1.EmbStore ||
  fail "embstore.v1.EmbStore is not SERVING"
# The packaged configuration was accepted (a bad one stops the server with exit code 2).
grep -q '"msg":"listening"' "$tmp/serve.log" || fail "no listening line: $(cat "$tmp/serve.log")"
ls_out=$("$bin" ls --from "unix:$sock" --json)
grep -q '"name": "sample"' <<<"$ls_out" || fail "sample table not listed: $ls_out"
"$bin" pull --from "unix:$sock" --table sample --out "$tmp/sample.npy" --no-local >/dev/null ||
  fail "pull from the packaged server failed"

step "stopping it with SIGTERM"
kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=""
[[ $rc -eq 0 ]] || { cat "$tmp/serve.log"; fail "server exited $rc after SIGTERM"; }
grep -q '"msg":"stopped"' "$tmp/serve.log" || fail "no stopped line: $(cat "$tmp/serve.log")"
if "$bin" health --from "unix:$sock" --quiet; then fail "health still passes after shutdown"; fi

step "the packaged unit passes systemd-analyze verify (ExecStart pointed at the scratch root)"
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$tmp/unit"
  sed "s#/usr/bin/embstore#$bin#g" "$tmp/root/lib/systemd/system/embstore.service" \
    >"$tmp/unit/embstore.service"
  out=$(systemd-analyze verify "$tmp/unit/embstore.service" 2>&1) || fail "verify: $out"
  [[ -z $out ]] || fail "systemd-analyze verify complained: $out"
else
  step "systemd-analyze not installed: unit not verified"
fi
step "OK"
